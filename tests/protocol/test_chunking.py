"""Oversize fragmentation: ``split`` and the ``Assembler`` (PROTOCOL.md §10)."""

from __future__ import annotations

import json
import random

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.protocol import (
    CHUNK_ENVELOPE_BUDGET,
    MAX_BUFFERED_BYTES,
    MAX_OPEN_GROUPS,
    NIP44_SAFE_PLAINTEXT_BYTES,
    Assembler,
    OutputEntry,
    SyncChunkEntry,
    SyncChunkMessage,
    decode_bridge_to_phone,
    encode,
    split,
)

CID = "0123456789abcdef0123456789abcdef"


def fixed_rng(size: int) -> bytes:
    return bytes(range(size))


def envelopes(fragments: list[str]) -> list[dict[str, object]]:
    return [json.loads(fragment) for fragment in fragments]


def parts_of(fragments: list[str]) -> str:
    return "".join(str(envelope["part"]) for envelope in envelopes(fragments))


def assemble(fragments: list[str], sender: str = "") -> str | None:
    assembler = Assembler()
    result = None
    for fragment in fragments:
        result = assembler.feed(fragment, 0.0, sender) or result
    return result


# --- split --------------------------------------------------------------------------------------


def test_text_within_the_threshold_is_sent_unchanged() -> None:
    for text in (
        "",
        "{}",
        "x" * NIP44_SAFE_PLAINTEXT_BYTES,
        "é" * (NIP44_SAFE_PLAINTEXT_BYTES // 2),
    ):
        assert split(text) == [text]  # no cid or rng needed


def test_one_byte_over_the_threshold_is_fragmented() -> None:
    text = "x" * (NIP44_SAFE_PLAINTEXT_BYTES + 1)
    fragments = split(text, cid=CID)
    assert len(fragments) == 2
    assert parts_of(fragments) == text


def test_fragment_envelopes_are_compact_ordered_and_within_budget() -> None:
    text = '{"k":"' + 'a"b\\c\n\x01é😀' * 9000 + '"}'
    fragments = split(text, cid=CID)
    count = len(fragments)
    assert count >= 3
    for index, fragment in enumerate(fragments):
        assert len(fragment.encode("utf-8")) <= CHUNK_ENVELOPE_BUDGET
        envelope = orjson.loads(fragment)
        assert list(envelope) == ["type", "cid", "i", "n", "part"]
        assert envelope["type"] == "chunk"
        assert envelope["cid"] == CID
        assert (envelope["i"], envelope["n"]) == (index, count)
        assert fragment == json.dumps(envelope, ensure_ascii=False, separators=(",", ":"))
    assert parts_of(fragments) == text


def test_slices_are_as_long_as_the_budget_allows() -> None:
    rng = random.Random(7)
    text = "".join(rng.choice('ab"\\\n\x02é😀') for _ in range(120_000))
    fragments = split(text, cid=CID)
    envelope_list = envelopes(fragments)
    for index, fragment in enumerate(fragments[:-1]):
        # One more character of the next part would not have fit.
        next_char = str(envelope_list[index + 1]["part"])[0]
        grown = dict(envelope_list[index], part=str(envelope_list[index]["part"]) + next_char)
        grown_size = len(json.dumps(grown, ensure_ascii=False, separators=(",", ":")).encode())
        assert len(fragment.encode()) <= CHUNK_ENVELOPE_BUDGET < grown_size


def test_many_fragments_count_the_digits_of_n() -> None:
    text = "x" * (CHUNK_ENVELOPE_BUDGET * 12)
    fragments = split(text, cid=CID)
    assert len(fragments) >= 10
    assert all(len(f.encode()) <= CHUNK_ENVELOPE_BUDGET for f in fragments)
    assert parts_of(fragments) == text


def test_cid_comes_from_the_rng() -> None:
    fragments = split("x" * 50_000, rng=fixed_rng)
    assert {envelope["cid"] for envelope in envelopes(fragments)} == {bytes(range(16)).hex()}


def test_split_errors() -> None:
    big = "x" * 50_000
    with pytest.raises(ValueError, match="needs a cid or an rng"):
        split(big)
    with pytest.raises(ValueError, match="cid must not be empty"):
        split(big, cid="")
    with pytest.raises(ValueError, match="cid too long"):
        split(big, cid="c" * CHUNK_ENVELOPE_BUDGET)
    with pytest.raises(ValueError, match="lone surrogate"):
        split("\ud800" + big, cid=CID)


def test_orjson_escapes_every_code_point_like_json_stringify() -> None:
    # split() sizes slices with orjson; the envelope must be what JSON.stringify would write.
    for code in list(range(0x800)) + list(range(0x800, 0x110000, 97)):
        if 0xD800 <= code <= 0xDFFF:
            continue
        char = chr(code)
        assert orjson.dumps(char) == json.dumps(char, ensure_ascii=False).encode()


def test_a_large_sync_chunk_survives_split_and_reassembly() -> None:
    entries = [
        SyncChunkEntry(
            seq=seq, entry=OutputEntry(entryType="text", content="é😀\n" * 400, timestamp="t")
        )
        for seq in range(1, 51)
    ]
    message = SyncChunkMessage(sessionId="s", syncId="y", range=(1, 50), entries=entries)
    text = encode(message)
    fragments = split(text, cid=CID)
    assert len(fragments) > 1
    joined = assemble(list(reversed(fragments)))
    assert joined == text
    assert decode_bridge_to_phone(joined) == message


@settings(max_examples=40, deadline=None)
@given(
    unit=st.text(min_size=1, max_size=40),
    target=st.integers(min_value=NIP44_SAFE_PLAINTEXT_BYTES + 1, max_value=160_000),
    tail=st.text(max_size=20),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_split_then_reassemble_in_any_order_with_duplicates_is_exact(
    unit: str, target: int, tail: str, seed: int
) -> None:
    # Any text (st.text covers the whole of Unicode but lone surrogates) past the threshold.
    text = unit * (target // len(unit.encode()) + 1) + tail
    fragments = split(text, cid=CID)
    assert len(fragments) >= 2
    assert all(len(fragment.encode()) <= CHUNK_ENVELOPE_BUDGET for fragment in fragments)
    rng = random.Random(seed)
    shuffled = fragments + rng.sample(fragments, k=min(len(fragments), 3))
    rng.shuffle(shuffled)
    assembler = Assembler()
    completed = [r for r in (assembler.feed(f, 0.0) for f in shuffled) if r is not None]
    assert completed[0] == text
    assert completed[0].encode() == text.encode()
    # A duplicate arriving after completion opens a new group, which can only complete whole.
    assert all(result == text for result in completed)


# --- Assembler ----------------------------------------------------------------------------------


def make_fragments(text: str = "z" * 100_000, cid: str = CID) -> list[str]:
    return split(text, cid=cid)


def test_non_chunk_text_passes_through() -> None:
    assembler = Assembler()
    for text in ('{"type":"output"}', "", "garbage", '{ "type":"chunk"}'):
        assert assembler.feed(text, 0.0) == text
    assert assembler.open_groups == 0


@pytest.mark.parametrize(
    "envelope",
    [
        '{"type":"chunk"',
        '{"type":"chunk","cid":"c","i":2,"n":2,"part":"x"}',
        '{"type":"chunk","cid":"c","i":-1,"n":2,"part":"x"}',
        '{"type":"chunk","cid":"c","i":0,"n":1,"part":"x"}',
        '{"type":"chunk","cid":"","i":0,"n":2,"part":"x"}',
        '{"type":"chunk","cid":"c","i":true,"n":2,"part":"x"}',
        '{"type":"chunk","cid":"c","i":0,"n":"2","part":"x"}',
        '{"type":"chunk","cid":"c","i":0,"n":2,"part":5}',
        '{"type":"chunk","cid":7,"i":0,"n":2,"part":"x"}',
        '{"type":"chunk","cid":"c","i":0.5,"n":2,"part":"x"}',
        '{"type":"chunk","cid":"c","i":0,"n":2}',
        '{"type":"chunky","cid":"c","i":0,"n":2,"part":"x"}',
    ],
)
def test_malformed_envelopes_pass_through_to_fail_decode(envelope: str) -> None:
    assembler = Assembler()
    assert assembler.feed(envelope, 0.0) == envelope
    assert assembler.open_groups == 0


def test_integral_float_indices_are_accepted() -> None:
    assembler = Assembler()
    assert assembler.feed('{"type":"chunk","cid":"c","i":1.0,"n":2.0,"part":"b"}', 0.0) is None
    assert assembler.feed('{"type":"chunk","cid":"c","i":0,"n":2,"part":"a"}', 0.0) == "ab"


def test_partial_groups_never_surface_and_counters_track_them() -> None:
    fragments = make_fragments()
    assembler = Assembler()
    for fragment in fragments[:-1]:
        assert assembler.feed(fragment, 1.0) is None
    assert assembler.open_groups == 1
    assert assembler.buffered_bytes == sum(
        len(str(e["part"]).encode()) for e in envelopes(fragments[:-1])
    )
    assert assembler.feed(fragments[0], 1.0) is None  # duplicate
    assert assembler.duplicate_parts == 1
    assert assembler.feed(fragments[-1], 1.0) == "z" * 100_000
    assert assembler.open_groups == 0
    assert assembler.buffered_bytes == 0


def test_a_changed_n_restarts_the_group() -> None:
    assembler = Assembler()
    assert assembler.feed('{"type":"chunk","cid":"c","i":0,"n":3,"part":"a"}', 0.0) is None
    assert assembler.feed('{"type":"chunk","cid":"c","i":1,"n":2,"part":"B"}', 0.0) is None
    assert assembler.restarted_groups == 1
    assert assembler.feed('{"type":"chunk","cid":"c","i":0,"n":2,"part":"A"}', 0.0) == "AB"


def test_tokens_come_back_with_the_completed_group_only() -> None:
    assembler = Assembler()
    first = '{"type":"chunk","cid":"c","i":0,"n":2,"part":"A"}'
    assert assembler.feed_tracked(first, 0.0, token="e0") == (None, ())
    assert assembler.feed_tracked(first, 0.0, token="e0-again") == (None, ())  # duplicate part
    second = '{"type":"chunk","cid":"c","i":1,"n":2,"part":"B"}'
    assert assembler.feed_tracked(second, 0.0, token="e1") == ("AB", ("e0", "e1"))
    assert assembler.feed_tracked('{"type":"ping"}', 0.0, token="e2") == (
        '{"type":"ping"}',
        ("e2",),
    )
    assert assembler.feed_tracked('{"type":"ping"}', 0.0) == ('{"type":"ping"}', ())


def test_tokens_of_groups_that_cannot_complete_are_given_up() -> None:
    assembler = Assembler(ttl=10, max_groups=2)
    chunk = '{{"type":"chunk","cid":"{cid}","i":{i},"n":{n},"part":"p"}}'
    assembler.feed_tracked(chunk.format(cid="old", i=0, n=2), 0.0, token="old-0")
    assembler.feed_tracked(chunk.format(cid="re", i=0, n=3), 0.0, token="re-0")
    assembler.feed_tracked(chunk.format(cid="re", i=1, n=4), 0.0, token="re-1")  # n changed
    assert assembler.take_given_up() == ["re-0"]
    assembler.feed_tracked(chunk.format(cid="new", i=0, n=2), 1.0, token="new-0")  # evicts "old"
    assert assembler.take_given_up() == ["old-0"]
    assert assembler.take_given_up() == []
    assembler.sweep(20.0)  # both left expire
    assert sorted(map(str, assembler.take_given_up())) == ["new-0", "re-1"]


def test_the_group_sent_first_is_evicted_whatever_the_arrival_order() -> None:
    assembler = Assembler(max_groups=2)
    chunk = '{{"type":"chunk","cid":"{cid}","i":0,"n":2,"part":"p"}}'
    assembler.feed_tracked(chunk.format(cid="new"), 0.0, token="new", sent_at=100)  # live
    assembler.feed_tracked(chunk.format(cid="old1"), 0.1, token="old1", sent_at=10)  # replayed
    assembler.feed_tracked(chunk.format(cid="old2"), 0.2, token="old2", sent_at=11)
    assert assembler.take_given_up() == ["old1"]
    done = '{"type":"chunk","cid":"new","i":1,"n":2,"part":"q"}'
    assert assembler.feed_tracked(done, 0.3, token="new-1", sent_at=101) == ("pq", ("new", "new-1"))


def test_groups_expire_sixty_seconds_after_their_first_fragment() -> None:
    fragments = make_fragments()
    assembler = Assembler()
    assert assembler.feed(fragments[0], 100.0) is None
    assert assembler.next_deadline() == 160.0
    assert assembler.sweep(159.999) == 0
    assert assembler.feed(fragments[1], 159.999) is None
    assert assembler.sweep(160.0) == 1
    assert assembler.expired_groups == 1
    assert assembler.open_groups == 0
    assert assembler.buffered_bytes == 0
    assert assembler.next_deadline() is None
    # The rest arrives too late: it starts a new group that lacks the first parts.
    assert assembler.feed(fragments[2], 161.0) is None


def test_feed_sweeps_expired_groups_itself() -> None:
    assembler = Assembler()
    assembler.feed('{"type":"chunk","cid":"old","i":0,"n":2,"part":"a"}', 0.0)
    assert assembler.feed("plain", 60.0) == "plain"
    assert assembler.open_groups == 0


def test_oldest_group_is_evicted_past_the_group_cap() -> None:
    assembler = Assembler(max_groups=3)
    for number in range(4):
        assembler.feed(f'{{"type":"chunk","cid":"g{number}","i":0,"n":2,"part":"x"}}', 0.0)
    assert assembler.open_groups == 3
    assert assembler.evicted_groups == 1
    # g0 was evicted: its second part alone cannot complete it.
    assert assembler.feed('{"type":"chunk","cid":"g0","i":1,"n":2,"part":"y"}', 0.0) is None
    assert assembler.feed('{"type":"chunk","cid":"g3","i":1,"n":2,"part":"y"}', 0.0) == "xy"


def test_oldest_group_is_evicted_past_the_byte_cap() -> None:
    assembler = Assembler(max_bytes=10)
    assembler.feed('{"type":"chunk","cid":"a","i":0,"n":2,"part":"123456"}', 0.0)
    assembler.feed('{"type":"chunk","cid":"b","i":0,"n":2,"part":"ééé"}', 0.0)  # 6 bytes
    assert assembler.open_groups == 1
    assert assembler.buffered_bytes == 6
    assert assembler.evicted_groups == 1
    # A single group over the cap is dropped too: it could never be held whole.
    assembler.feed('{"type":"chunk","cid":"c","i":0,"n":2,"part":"' + "x" * 11 + '"}', 0.0)
    assert assembler.open_groups == 0
    assert assembler.buffered_bytes == 0


def test_default_caps() -> None:
    assert (MAX_OPEN_GROUPS, MAX_BUFFERED_BYTES) == (64, 8 * 1024 * 1024)
    assembler = Assembler()
    for number in range(MAX_OPEN_GROUPS + 10):
        assembler.feed(f'{{"type":"chunk","cid":"g{number}","i":0,"n":2,"part":"x"}}', 0.0)
    assert assembler.open_groups == MAX_OPEN_GROUPS


def test_senders_do_not_share_groups() -> None:
    fragments = make_fragments()
    assembler = Assembler()
    for fragment in fragments[:-1]:
        assembler.feed(fragment, 0.0, sender="alice")
    assert assembler.feed(fragments[-1], 0.0, sender="mallory") is None
    assert assembler.open_groups == 2
    assert assembler.feed(fragments[-1], 0.0, sender="alice") == "z" * 100_000


def test_assembler_arguments_are_checked() -> None:
    for kwargs in ({"ttl": 0}, {"max_groups": 0}, {"max_bytes": 0}):
        with pytest.raises(ValueError, match="positive"):
            Assembler(**kwargs)
