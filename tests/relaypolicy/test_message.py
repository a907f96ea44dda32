"""Parsing strfry's requests and serialising our answers."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from relaypolicy.message import (
    MAX_MSG_CHARS,
    Action,
    Decision,
    RequestError,
    SourceType,
    first_tag_value,
    is_hex64,
    parse_request,
    recover_event_id,
    serialize_response,
    tag_values,
)
from tests.relaypolicy.builders import NOW, PHONE, key, make_input, make_request


def test_parse_a_strfry_request() -> None:
    request = make_request(
        kind=4515,
        tags=[["p", PHONE], ["expiration", str(NOW + 60)], ["x"]],
        source_type="IP6",
        source_info="2001:db8::1",
        authed=PHONE,
    )
    msg = parse_request(request)
    assert msg.event_id == request["event"]["id"]
    assert msg.pubkey == PHONE
    assert msg.kind == 4515
    assert msg.tags == (("p", PHONE), ("expiration", str(NOW + 60)), ("x",))
    assert msg.received_at == NOW
    assert msg.source_type is SourceType.IP6
    assert msg.source_info == "2001:db8::1"
    assert msg.authed == PHONE


def test_optional_fields() -> None:
    request = make_request()
    del request["sourceInfo"]
    request["sourceType"] = "Carrier-Pigeon"
    request["receivedAt"] = float(NOW) + 0.75
    msg = parse_request(request)
    assert msg.source_info == ""
    assert msg.source_type is None
    assert msg.received_at == NOW
    assert msg.authed is None


def _broken(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    request = make_request()
    target = request
    for part in path[:-1]:
        target = target[part]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return request


_DELETE = object()

# (id, path, value, reason, id recoverable)
BAD: list[tuple[str, tuple[str, ...], Any, str, bool]] = [
    ("no-event", ("event",), _DELETE, "request has no event object", False),
    ("event-list", ("event",), [], "request has no event object", False),
    ("id-upper", ("event", "id"), "A" * 64, "event.id is not 64 lowercase hex characters", False),
    ("id-short", ("event", "id"), "a" * 63, "event.id is not 64 lowercase hex characters", False),
    ("id-int", ("event", "id"), 5, "event.id is not 64 lowercase hex characters", False),
    ("type-lookback", ("type",), "lookback", "unsupported request type", True),
    ("type-missing", ("type",), _DELETE, "unsupported request type", True),
    ("pubkey", ("event", "pubkey"), "xyz", "event.pubkey is not 64 lowercase hex characters", True),
    ("kind-str", ("event", "kind"), "1", "event.kind is not an integer in 0..65535", True),
    ("kind-bool", ("event", "kind"), True, "event.kind is not an integer in 0..65535", True),
    ("kind-big", ("event", "kind"), 65536, "event.kind is not an integer in 0..65535", True),
    ("kind-neg", ("event", "kind"), -1, "event.kind is not an integer in 0..65535", True),
    (
        "created-neg",
        ("event", "created_at"),
        -1,
        "event.created_at is not a non-negative integer",
        True,
    ),
    ("tags-dict", ("event", "tags"), {}, "event.tags is not a list", True),
    ("tags-str", ("event", "tags"), [["p", 1]], "event.tags must be lists of strings", True),
    ("tags-flat", ("event", "tags"), ["p"], "event.tags must be lists of strings", True),
    ("received-str", ("receivedAt",), "now", "receivedAt is not a non-negative number", True),
    ("received-neg", ("receivedAt",), -5, "receivedAt is not a non-negative number", True),
    (
        "received-inf",
        ("receivedAt",),
        float("inf"),
        "receivedAt is not a non-negative number",
        True,
    ),
    (
        "received-nan",
        ("receivedAt",),
        float("nan"),
        "receivedAt is not a non-negative number",
        True,
    ),
    ("received-missing", ("receivedAt",), _DELETE, "receivedAt is not a non-negative number", True),
    ("source-info-int", ("sourceInfo",), 7, "sourceInfo is not a string", True),
    ("authed-bad", ("authed",), "me", "authed is not 64 lowercase hex characters", True),
]


@pytest.mark.parametrize(
    ("path", "value", "reason", "has_id"), [b[1:] for b in BAD], ids=[b[0] for b in BAD]
)
def test_malformed_requests(path: tuple[str, ...], value: Any, reason: str, has_id: bool) -> None:
    request = _broken(path, value)
    with pytest.raises(RequestError) as caught:
        parse_request(request)
    assert caught.value.reason == reason
    assert str(caught.value) == reason
    expected_id = request["event"]["id"] if has_id else None
    assert caught.value.event_id == expected_id


def test_not_an_object() -> None:
    for value in (None, 1, "x", [], [make_request()]):
        with pytest.raises(RequestError, match="request is not a JSON object"):
            parse_request(value)


def test_recover_event_id() -> None:
    event_id = key(77)
    line = orjson.dumps(make_request(event_id=event_id))
    assert recover_event_id(line[:120]) == event_id
    # A quoted id inside the content is not the event's id.
    decoy = orjson.dumps({"content": '{"id":"' + key(5) + '"}'})
    assert recover_event_id(decoy) is None
    assert recover_event_id(b"") is None
    assert recover_event_id(b'"id": "' + b"A" * 64 + b'"') is None
    assert recover_event_id(b'{"id" :  "' + event_id.encode() + b'"') == event_id


def test_serialize_response() -> None:
    line = serialize_response(key(1), Decision.reject("blocked", "no"))
    assert line == b'{"id":"' + key(1).encode() + b'","action":"reject","msg":"blocked: no"}\n'
    accept = orjson.loads(serialize_response(key(2), Decision(Action.ACCEPT)))
    assert accept == {"id": key(2), "action": "accept", "msg": ""}
    shadow = orjson.loads(serialize_response("", Decision(Action.SHADOW_REJECT, "x")))
    assert shadow["action"] == "shadowReject"


def test_long_messages_are_cut() -> None:
    line = serialize_response(key(1), Decision.reject("invalid", "é" * 10_000))
    assert len(orjson.loads(line)["msg"]) == MAX_MSG_CHARS
    assert len(line) < 8192  # strfry's response record limit


def test_tag_helpers() -> None:
    msg = make_input(tags=[["p", "a"], ["e"], ["p", "b", "relay"], ["d", ""]])
    assert tag_values(msg, "p") == ["a", "b"]
    assert tag_values(msg, "e") == []
    assert first_tag_value(msg, "d") == ""
    assert first_tag_value(msg, "x") is None


def test_is_hex64() -> None:
    assert is_hex64(key(1))
    assert not is_hex64(key(1).upper().replace("0", "A"))
    assert not is_hex64(None)
    assert not is_hex64("a" * 65)


def test_decision_helpers() -> None:
    assert Decision(Action.ACCEPT).accepted
    assert not Decision.reject("rate-limited", "slow").accepted
    assert Decision.reject("rate-limited", "slow").msg == "rate-limited: slow"
