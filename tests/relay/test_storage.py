"""The embedded relay's SQLite store: complete answers, NIP-01 storage classes, NIP-09, NIP-40."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import orjson
import pytest

from bridge.nostr.event import VerifiedEvent, expiration_tag, sign_event
from bridge.nostr.filters import Filter
from bridge.nostr.keys import Keypair
from bridge.relay.storage import EventStore, Put

BRIDGE = Keypair.from_secret("11" * 32)
PHONE = Keypair.from_secret("22" * 32)
OTHER_PHONE = Keypair.from_secret("33" * 32)
NOW = 1_800_000_000


def signed(
    author: Keypair, kind: int, content: str = "x", tags: list[list[str]] | None = None, *, at: int
) -> VerifiedEvent:
    return sign_event(author, kind, content, tags or [], created_at=at)


def put(store: EventStore, event: VerifiedEvent) -> Put:
    return store.put(event, event.to_json())


def ids(jsons: list[str]) -> list[str]:
    return [orjson.loads(one)["id"] for one in jsons]


@pytest.fixture
def store() -> EventStore:
    return EventStore(None)


def test_the_phone_filter_gets_every_stored_reply_newest_first(store: EventStore) -> None:
    """A phone back online asks authors+#p+kinds with no limit: all 700, none missing."""
    replies = [
        signed(BRIDGE, 4516, f"r{i}", [["p", PHONE.public_hex]], at=NOW - 700 + i)
        for i in range(700)
    ]
    noise = [
        signed(BRIDGE, 4516, f"n{i}", [["p", OTHER_PHONE.public_hex]], at=NOW - i)
        for i in range(300)
    ]
    for event in [*replies, *noise]:
        assert put(store, event) is Put.STORED
    phone_filter = Filter(
        authors=(BRIDGE.public_hex,), kinds=(4516,), tags={"p": (PHONE.public_hex,)}
    )
    got = ids(store.query([phone_filter], NOW, cap=20_000))
    assert got == [event.id for event in reversed(replies)]


def test_limit_keeps_the_newest_and_breaks_ties_by_lowest_id(store: EventStore) -> None:
    same_second = [signed(BRIDGE, 1, f"t{i}", at=NOW) for i in range(5)]
    older = signed(BRIDGE, 1, "old", at=NOW - 10)
    for event in [older, *same_second]:
        put(store, event)
    got = ids(store.query([Filter(kinds=(1,), limit=3)], NOW, cap=100))
    assert got == sorted(event.id for event in same_second)[:3]
    assert ids(store.query([Filter(kinds=(1,), limit=0)], NOW, cap=100)) == []
    assert len(store.query([Filter(kinds=(1,))], NOW, cap=4)) == 4  # the relay's own cap


def test_every_filter_field_narrows(store: EventStore) -> None:
    a = signed(BRIDGE, 4516, "a", [["p", PHONE.public_hex], ["t", "x"]], at=NOW - 5)
    b = signed(PHONE, 4515, "b", [["p", BRIDGE.public_hex]], at=NOW)
    for event in (a, b):
        put(store, event)
    cases = [
        (Filter(ids=(a.id,)), [a.id]),
        (Filter(authors=(PHONE.public_hex,)), [b.id]),
        (Filter(kinds=(4516, 4515)), [b.id, a.id]),
        (Filter(since=NOW - 1), [b.id]),
        (Filter(until=NOW - 1), [a.id]),
        (Filter(tags={"t": ("x",)}), [a.id]),
        (Filter(tags={"p": (PHONE.public_hex,), "t": ("y",)}), []),
        (Filter(ids=()), []),
    ]
    for one, expected in cases:
        assert ids(store.query([one], NOW, cap=100)) == expected, one
    # Two filters of one REQ are OR-ed and an event matched by both comes once.
    both = store.query([Filter(kinds=(4516,)), Filter(ids=(a.id, b.id))], NOW, cap=100)
    assert sorted(ids(both)) == sorted([a.id, b.id])


def test_duplicates_are_reported_not_stored_twice(store: EventStore) -> None:
    event = signed(BRIDGE, 4516, at=NOW)
    assert put(store, event) is Put.STORED
    assert put(store, event) is Put.DUPLICATE
    assert store.has(event.id)
    assert store.count() == 1


def test_addressable_keeps_one_per_author_kind_and_d(store: EventStore) -> None:
    first = signed(BRIDGE, 30515, "v1", [["d", "laptop"]], at=NOW - 10)
    second = signed(BRIDGE, 30515, "v2", [["d", "laptop"]], at=NOW)
    other_machine = signed(BRIDGE, 30515, "w", [["d", "desktop"]], at=NOW - 20)
    assert put(store, first) is Put.STORED
    assert put(store, other_machine) is Put.STORED
    assert put(store, second) is Put.STORED
    assert put(store, first) is Put.HAVE_NEWER  # an older version arriving late
    got = ids(store.query([Filter(kinds=(30515,))], NOW, cap=10))
    assert got == [second.id, other_machine.id]


def test_addressable_tie_keeps_the_lowest_id(store: EventStore) -> None:
    one, two = (signed(BRIDGE, 30515, text, [["d", "m"]], at=NOW) for text in ("a", "b"))
    low, high = sorted((one, two), key=lambda event: event.id)
    put(store, high)
    assert put(store, low) is Put.STORED
    assert put(store, high) is Put.HAVE_NEWER  # replaced, and the newer one stays
    fresh = signed(BRIDGE, 30515, "c", [["d", "m"]], at=NOW)
    expected = Put.STORED if fresh.id < low.id else Put.HAVE_NEWER
    assert put(store, fresh) is expected


def test_replaceable_keeps_the_newest_per_author_and_kind(store: EventStore) -> None:
    old = signed(BRIDGE, 0, "old", at=NOW - 1)
    new = signed(BRIDGE, 0, "new", at=NOW)
    theirs = signed(PHONE, 0, "p", at=NOW - 5)
    for event in (old, new, theirs):
        put(store, event)
    assert sorted(ids(store.query([Filter(kinds=(0,))], NOW, cap=10))) == sorted(
        [new.id, theirs.id]
    )


def test_nip09_deletes_own_events_only_and_keeps_them_deleted(store: EventStore) -> None:
    mine = signed(BRIDGE, 4516, "mine", at=NOW - 10)
    theirs = signed(PHONE, 4515, "theirs", at=NOW - 10)
    heartbeat = signed(BRIDGE, 30515, "hb", [["d", "laptop"]], at=NOW - 10)
    for event in (mine, theirs, heartbeat):
        put(store, event)
    deletion = signed(
        BRIDGE,
        5,
        "",
        [["e", mine.id], ["e", theirs.id], ["a", f"30515:{BRIDGE.public_hex}:laptop"]],
        at=NOW,
    )
    assert put(store, deletion) is Put.STORED
    left = set(ids(store.query([Filter()], NOW, cap=10)))
    assert left == {theirs.id, deletion.id}
    assert put(store, mine) is Put.DELETED  # a re-send of a deleted event stays deleted
    older_heartbeat = signed(BRIDGE, 30515, "hb0", [["d", "laptop"]], at=NOW - 20)
    assert put(store, older_heartbeat) is Put.DELETED
    newer_heartbeat = signed(BRIDGE, 30515, "hb2", [["d", "laptop"]], at=NOW + 1)
    assert put(store, newer_heartbeat) is Put.STORED


def test_nip40_expired_events_are_not_served_and_are_purged(store: EventStore) -> None:
    short = signed(BRIDGE, 4516, "s", [list(expiration_tag(NOW + 60))], at=NOW)
    lasting = signed(BRIDGE, 4516, "l", [list(expiration_tag(NOW + 3600))], at=NOW)
    forever = signed(BRIDGE, 4516, "f", at=NOW)
    for event in (short, lasting, forever):
        put(store, event)
    assert len(store.query([Filter()], NOW + 59, cap=10)) == 3
    assert sorted(ids(store.query([Filter()], NOW + 60, cap=10))) == sorted(
        [lasting.id, forever.id]
    )
    assert store.purge_expired(NOW + 60) == 1
    assert store.count() == 2


def test_ephemeral_events_are_refused(store: EventStore) -> None:
    with pytest.raises(ValueError, match="ephemeral"):
        put(store, signed(BRIDGE, 24515, at=NOW))


def test_a_file_store_survives_reopening_and_is_private(tmp_path: Path) -> None:
    path = tmp_path / "relay" / "events.sqlite3"
    first = EventStore(path)
    event = signed(BRIDGE, 4516, "kept", [["p", PHONE.public_hex]], at=NOW)
    put(first, event)
    first.close()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    again = EventStore(path)
    assert ids(again.query([Filter(tags={"p": (PHONE.public_hex,)})], NOW, cap=10)) == [event.id]
    again.close()


# --- the size cap ----------------------------------------------------------------------------


def size(event: VerifiedEvent) -> int:
    return len(event.to_json().encode())


def test_a_full_store_refuses_and_touches_nothing_it_keeps(tmp_path: Path) -> None:
    first = signed(BRIDGE, 4516, "a" * 300, [["p", PHONE.public_hex]], at=NOW)
    second = signed(BRIDGE, 4516, "b" * 300, [["p", PHONE.public_hex]], at=NOW + 1)
    third = signed(BRIDGE, 4516, "c" * 300, [["p", PHONE.public_hex]], at=NOW + 2)
    cap = size(first) + size(second) + size(third) - 1  # room for two, not three
    path = tmp_path / "events.sqlite3"
    store = EventStore(path, max_bytes=cap)
    assert [put(store, e) for e in (first, second, third)] == [Put.STORED, Put.STORED, Put.FULL]
    assert store.stored_bytes == size(first) + size(second)
    assert not store.has(third.id)
    assert put(store, first) is Put.DUPLICATE  # a re-send of a kept event is still known
    store.close()
    reopened = EventStore(path, max_bytes=cap)  # the total is measured again at open
    assert reopened.stored_bytes == size(first) + size(second)
    assert sorted(ids(reopened.query([Filter()], NOW, cap=10))) == sorted([first.id, second.id])
    assert put(reopened, third) is Put.FULL
    reopened.close()


def test_a_replacement_counts_only_what_it_adds() -> None:
    heartbeat = signed(BRIDGE, 30515, "h" * 200, [["d", "laptop"]], at=NOW)
    filler = signed(BRIDGE, 4516, "f" * 300, at=NOW)
    store = EventStore(None, max_bytes=size(heartbeat) + size(filler))
    assert put(store, heartbeat) is Put.STORED
    assert put(store, filler) is Put.STORED
    same_size = signed(BRIDGE, 30515, "H" * 200, [["d", "laptop"]], at=NOW + 1)
    assert put(store, same_size) is Put.STORED  # the full store still takes the new heartbeat
    bigger = signed(BRIDGE, 30515, "H" * 201, [["d", "laptop"]], at=NOW + 2)
    assert put(store, bigger) is Put.FULL
    assert ids(store.query([Filter(kinds=(30515,))], NOW, cap=10)) == [same_size.id]


def test_expiry_and_deletion_give_the_room_back() -> None:
    expiring = signed(BRIDGE, 4516, "e" * 300, [list(expiration_tag(NOW + 60))], at=NOW)
    kept = signed(BRIDGE, 4516, "k" * 300, at=NOW)
    store = EventStore(None, max_bytes=size(expiring) + size(kept))
    assert put(store, expiring) is Put.STORED
    assert put(store, kept) is Put.STORED
    later = signed(BRIDGE, 4516, "l" * 300, at=NOW + 61)
    assert put(store, later) is Put.FULL
    assert store.purge_expired(NOW + 60) == 1
    assert store.stored_bytes == size(kept)
    assert put(store, later) is Put.STORED
    uncapped = EventStore(None)
    put(uncapped, kept)
    deletion = signed(BRIDGE, 5, "", [["e", kept.id]], at=NOW + 62)
    assert put(uncapped, deletion) is Put.STORED
    assert uncapped.stored_bytes == size(deletion)


def test_a_rolled_back_put_is_not_counted() -> None:
    store = EventStore(None, max_bytes=10_000)
    event = signed(BRIDGE, 4516, "r", at=NOW)
    assert store.put(event, event.to_json(), commit=False) is Put.STORED
    store.rollback()
    assert store.stored_bytes == 0
    assert store.count() == 0
