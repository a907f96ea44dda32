"""One relay client, sans-I/O: every bad frame gets the most specific NIP-01 answer."""

from __future__ import annotations

import orjson
import pytest

from bridge.nostr.event import sign_event
from bridge.nostr.keys import Keypair
from bridge.relay import (
    ClientSession,
    Publish,
    RelayLimits,
    Reply,
    StorageClass,
    Subscribe,
    Unsubscribe,
    address_of,
    storage_class,
)

AUTHOR = Keypair.from_secret("44" * 32)
NOW = 1_800_000_000


def frame(*parts: object) -> str:
    return orjson.dumps(list(parts)).decode()


def reply_of(request: object) -> list[object]:
    assert isinstance(request, Reply), request
    decoded = orjson.loads(request.frame)
    assert isinstance(decoded, list)
    return decoded


def test_event_req_close_round() -> None:
    session = ClientSession(RelayLimits())
    event = sign_event(AUTHOR, 4516, "hi", [["p", "ab" * 32]], created_at=NOW)
    published = session.receive(frame("EVENT", event.to_dict()))
    assert isinstance(published, Publish)
    assert published.event.id == event.id
    assert orjson.loads(published.event_json) == event.to_dict()

    subscribed = session.receive(frame("REQ", "s1", {"#p": ["ab" * 32]}, {"kinds": [1]}))
    assert isinstance(subscribed, Subscribe)
    assert session.matching(event) == ["s1"]
    assert isinstance(session.receive(frame("REQ", "s2", {"kinds": [4516]})), Subscribe)
    assert session.matching(event) == ["s1", "s2"]
    assert session.receive(frame("CLOSE", "s1")) == Unsubscribe("s1")
    assert session.matching(event) == ["s2"]


@pytest.mark.parametrize(
    ("data", "expected_head"),
    [
        ("not json", "NOTICE"),
        ('{"an": "object"}', "NOTICE"),
        (frame("COUNT", "c", {}), "NOTICE"),
        (frame("EVENT", {"id": "ab" * 32, "kind": "x"}), "OK"),
        (frame("REQ", "sub", {"search": "x"}), "CLOSED"),
        (frame("REQ", "sub"), "CLOSED"),
        (frame("EVENT"), "NOTICE"),
    ],
)
def test_bad_frames_get_the_most_specific_answer(data: str, expected_head: str) -> None:
    answer = reply_of(ClientSession(RelayLimits()).receive(data))
    assert answer[0] == expected_head
    assert str(answer[-1]).startswith("invalid: ")
    if expected_head == "OK":
        assert answer[1:3] == ["ab" * 32, False]


def test_limits_are_enforced_with_prefixed_reasons() -> None:
    limits = RelayLimits(max_subscriptions=2, max_filters=2, max_event_length=300, max_event_tags=3)
    session = ClientSession(limits)
    assert isinstance(session.receive(frame("REQ", "a", {})), Subscribe)
    assert isinstance(session.receive(frame("REQ", "b", {})), Subscribe)
    assert isinstance(session.receive(frame("REQ", "a", {"kinds": [1]})), Subscribe)  # replaces
    assert reply_of(session.receive(frame("REQ", "c", {}))) == [
        "CLOSED",
        "c",
        "restricted: too many subscriptions",
    ]
    assert reply_of(session.receive(frame("REQ", "a", {}, {}, {})))[2] == (
        "invalid: too many filters"
    )
    big = sign_event(AUTHOR, 1, "x" * 400, created_at=NOW)
    assert reply_of(session.receive(frame("EVENT", big.to_dict())))[1:] == [
        big.id,
        False,
        "invalid: event too large",
    ]
    tagged = sign_event(AUTHOR, 1, "", [["t", str(i)] for i in range(4)], created_at=NOW)
    assert reply_of(session.receive(frame("EVENT", tagged.to_dict())))[3] == (
        "invalid: too many tags"
    )
    auth = sign_event(AUTHOR, 22242, "", created_at=NOW)
    assert reply_of(session.receive(frame("AUTH", auth.to_dict())))[2] is False


def test_storage_classes_follow_nip01() -> None:
    assert storage_class(4516) is StorageClass.REGULAR
    assert storage_class(1) is StorageClass.REGULAR
    assert storage_class(0) is StorageClass.REPLACEABLE
    assert storage_class(10002) is StorageClass.REPLACEABLE
    assert storage_class(24515) is StorageClass.EPHEMERAL
    assert storage_class(30515) is StorageClass.ADDRESSABLE
    heartbeat = sign_event(AUTHOR, 30515, "", [["d", "laptop"], ["d", "2nd"]], created_at=NOW)
    assert address_of(heartbeat) == "laptop"
    assert address_of(sign_event(AUTHOR, 30515, "", created_at=NOW)) == ""
    assert address_of(sign_event(AUTHOR, 4516, "", created_at=NOW)) is None
