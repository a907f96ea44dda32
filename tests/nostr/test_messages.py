"""Relay ⇄ client frames: table-driven parse cases, serialization, round trips."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.nostr.event import parse_event, sign_event
from bridge.nostr.filters import Filter
from bridge.nostr.keys import Keypair
from bridge.nostr.messages import (
    MAX_MESSAGE_SIZE,
    AuthChallenge,
    AuthResponse,
    ClientMessageError,
    ClosedMessage,
    CloseMessage,
    CountMessage,
    EoseMessage,
    EventMessage,
    NoticeMessage,
    OkMessage,
    PublishMessage,
    RelayMessageError,
    ReqMessage,
    message_prefix,
    parse_client_message,
    parse_relay_message,
    serialize_client_message,
    serialize_relay_message,
)

KEYS = Keypair.from_secret(bytes([7]) * 32)
EVENT = sign_event(KEYS, 1, "hello", (("p", "ab" * 32),), created_at=1_700_000_000, aux=bytes(32))
EVENT_JSON = EVENT.to_dict()
PLAIN = parse_event(EVENT_JSON)  # what parsing yields: shape-checked, not (yet) verified
ID = EVENT.id


def dumps(frame: Any) -> str:
    return json.dumps(frame)


# (id, frame text, expected message)
VALID_CASES: list[tuple[str, str | bytes, object]] = [
    ("event", dumps(["EVENT", "s1", EVENT_JSON]), EventMessage("s1", PLAIN)),
    ("event-bytes", dumps(["EVENT", "s1", EVENT_JSON]).encode(), EventMessage("s1", PLAIN)),
    ("ok-true", dumps(["OK", ID, True, ""]), OkMessage(ID, True, "")),
    (
        "ok-false",
        dumps(["OK", ID, False, "blocked: nope"]),
        OkMessage(ID, False, "blocked: nope"),
    ),
    ("eose", dumps(["EOSE", "s1"]), EoseMessage("s1")),
    ("closed", dumps(["CLOSED", "s1", "error: gone"]), ClosedMessage("s1", "error: gone")),
    ("closed-empty", dumps(["CLOSED", "s1", ""]), ClosedMessage("s1", "")),
    ("notice", dumps(["NOTICE", "hi"]), NoticeMessage("hi")),
    ("auth", dumps(["AUTH", "chal"]), AuthChallenge("chal")),
    ("count", dumps(["COUNT", "s1", {"count": 3}]), CountMessage("s1", 3, None)),
    (
        "count-approx",
        dumps(["COUNT", "s1", {"count": 0, "approximate": True}]),
        CountMessage("s1", 0, True),
    ),
    ("unicode", dumps(["NOTICE", "héllo \U0001f600"]), NoticeMessage("héllo \U0001f600")),
]


@pytest.mark.parametrize(
    ("frame", "expected"), [c[1:] for c in VALID_CASES], ids=[c[0] for c in VALID_CASES]
)
def test_parse_relay_message_valid(frame: str | bytes, expected: object) -> None:
    assert parse_relay_message(frame) == expected


# (id, frame text, error text fragment)
INVALID_CASES: list[tuple[str, str, str]] = [
    ("not-json", "not json", "not valid JSON"),
    ("truncated", '["EOSE", "s1"', "not valid JSON"),
    ("lone-surrogate", '["NOTICE", "\\ud800"]', "not valid JSON"),
    ("object", dumps({"EVENT": 1}), "not a non-empty JSON array"),
    ("empty-array", "[]", "not a non-empty JSON array"),
    ("number", "42", "not a non-empty JSON array"),
    ("type-not-string", dumps([1, "s"]), "type is not a string"),
    ("unknown-type", dumps(["HELLO", "s"]), "unknown frame type 'HELLO'"),
    ("lowercase-type", dumps(["eose", "s"]), "unknown frame type 'eose'"),
    ("event-arity", dumps(["EVENT", EVENT_JSON]), "EVENT frame has 2 elements, expected 3"),
    ("event-sub-type", dumps(["EVENT", 1, EVENT_JSON]), "EVENT subscription id is not a string"),
    ("event-sub-empty", dumps(["EVENT", "", EVENT_JSON]), "EVENT subscription id is empty"),
    (
        "event-not-object",
        dumps(["EVENT", "s", "x"]),
        "malformed event: event must be a JSON object",
    ),
    (
        "event-missing-sig",
        dumps(["EVENT", "s", {k: v for k, v in EVENT_JSON.items() if k != "sig"}]),
        "malformed event: event has no 'sig' field",
    ),
    (
        "event-upper-hex-id",
        dumps(["EVENT", "s", {**EVENT_JSON, "id": ID.upper()}]),
        "malformed event",
    ),
    (
        "event-kind-string",
        dumps(["EVENT", "s", {**EVENT_JSON, "kind": "1"}]),
        "malformed event",
    ),
    ("ok-arity-3", dumps(["OK", ID, True]), "OK frame has 3 elements, expected 4"),
    ("ok-arity-5", dumps(["OK", ID, True, "", 1]), "OK frame has 5 elements, expected 4"),
    ("ok-bad-id", dumps(["OK", "abc", True, ""]), "OK event id is not 64 lowercase hex"),
    ("ok-status-int", dumps(["OK", ID, 1, ""]), "OK status is not a boolean"),
    ("ok-status-string", dumps(["OK", ID, "true", ""]), "OK status is not a boolean"),
    ("ok-message-null", dumps(["OK", ID, True, None]), "OK message is not a string"),
    ("eose-arity", dumps(["EOSE"]), "EOSE frame has 1 elements, expected 2"),
    ("closed-arity", dumps(["CLOSED", "s"]), "CLOSED frame has 2 elements, expected 3"),
    ("notice-type", dumps(["NOTICE", {}]), "NOTICE message is not a string"),
    ("auth-empty", dumps(["AUTH", ""]), "AUTH challenge is empty"),
    ("auth-type", dumps(["AUTH", 5]), "AUTH challenge is not a string"),
    ("count-payload", dumps(["COUNT", "s", 3]), "COUNT payload is not an object"),
    ("count-negative", dumps(["COUNT", "s", {"count": -1}]), "COUNT count is not a non-negative"),
    ("count-bool", dumps(["COUNT", "s", {"count": True}]), "COUNT count is not a non-negative"),
    (
        "count-approx-type",
        dumps(["COUNT", "s", {"count": 1, "approximate": "yes"}]),
        "COUNT approximate is not a boolean",
    ),
]


@pytest.mark.parametrize(
    ("frame", "fragment"), [c[1:] for c in INVALID_CASES], ids=[c[0] for c in INVALID_CASES]
)
def test_parse_relay_message_invalid(frame: str, fragment: str) -> None:
    with pytest.raises(RelayMessageError) as info:
        parse_relay_message(frame)
    assert fragment in str(info.value)
    assert isinstance(info.value, ValueError)


def test_error_text_never_echoes_payload() -> None:
    secret_like = "s3cr3t-content-" * 4
    with pytest.raises(RelayMessageError) as info:
        parse_relay_message(dumps(["EVENT", "s", {**EVENT_JSON, "content": 5, "x": secret_like}]))
    assert secret_like not in str(info.value)
    with pytest.raises(RelayMessageError) as info:
        parse_relay_message("{" + secret_like)
    assert secret_like not in str(info.value)


def test_oversize_frame_is_refused_before_decoding() -> None:
    frame = dumps(["NOTICE", "x" * MAX_MESSAGE_SIZE])
    with pytest.raises(RelayMessageError, match=r"exceeds the 524288-byte limit"):
        parse_relay_message(frame)
    small = dumps(["NOTICE", "x" * 10])  # 24 bytes
    assert parse_relay_message(small, max_size=24) == NoticeMessage("x" * 10)
    with pytest.raises(RelayMessageError, match="24 bytes exceeds the 23-byte limit"):
        parse_relay_message(small, max_size=23)


def test_oversize_counts_utf8_bytes_not_chars() -> None:
    frame = dumps(["NOTICE", "é" * 10])  # ascii-escaped by json.dumps: 82 bytes
    raw = '["NOTICE","' + "é" * 30 + '"]'  # 13 + 60 bytes
    assert parse_relay_message(frame, max_size=100) == NoticeMessage("é" * 10)
    with pytest.raises(RelayMessageError, match="73 bytes exceeds the 72-byte limit"):
        parse_relay_message(raw, max_size=72)
    assert parse_relay_message(raw, max_size=73) == NoticeMessage("é" * 30)


PREFIX_CASES = [
    ("blocked: no", "blocked"),
    ("auth-required: you must auth", "auth-required"),
    ("rate-limited: slow down", "rate-limited"),
    ("duplicate: already have this event", "duplicate"),
    ("", None),
    ("no prefix here", None),
    ("Blocked: capital", None),
    ("blocked:no-space", None),
]


@pytest.mark.parametrize(
    ("message", "prefix"), PREFIX_CASES, ids=[c[0] or "empty" for c in PREFIX_CASES]
)
def test_message_prefix(message: str, prefix: str | None) -> None:
    assert message_prefix(message) == prefix
    assert OkMessage(ID, False, message).prefix == prefix
    assert ClosedMessage("s", message).prefix == prefix


# --- client → relay --------------------------------------------------------------------------

FILTER = Filter(kinds=(1, 4515), since=10, tags={"p": ("ab" * 32,)}, limit=5)

CLIENT_CASES: list[tuple[str, object, list[Any]]] = [
    ("event", PublishMessage(PLAIN), ["EVENT", EVENT_JSON]),
    (
        "req",
        ReqMessage("sub", (FILTER, Filter(ids=(ID,)))),
        [
            "REQ",
            "sub",
            {"kinds": [1, 4515], "#p": ["ab" * 32], "since": 10, "limit": 5},
            {"ids": [ID]},
        ],
    ),
    ("close", CloseMessage("sub"), ["CLOSE", "sub"]),
    ("auth", AuthResponse(PLAIN), ["AUTH", EVENT_JSON]),
]


@pytest.mark.parametrize(
    ("message", "frame"), [c[1:] for c in CLIENT_CASES], ids=[c[0] for c in CLIENT_CASES]
)
def test_serialize_client_message(message: Any, frame: list[Any]) -> None:
    text = serialize_client_message(message)
    assert json.loads(text) == frame
    assert " " not in text.replace("hello", "")  # compact
    assert parse_client_message(text) == message


BAD_CLIENT_MESSAGES = [
    ("empty-sub", ReqMessage("", (FILTER,)), "subscription id must be a non-empty string"),
    ("long-sub", CloseMessage("x" * 65), "at most 64 chars"),
    ("no-filter", ReqMessage("s", ()), "REQ needs at least one filter"),
]


@pytest.mark.parametrize(
    ("message", "fragment"),
    [c[1:] for c in BAD_CLIENT_MESSAGES],
    ids=[c[0] for c in BAD_CLIENT_MESSAGES],
)
def test_serialize_client_message_refuses(message: Any, fragment: str) -> None:
    with pytest.raises(ClientMessageError, match=fragment):
        serialize_client_message(message)


BAD_CLIENT_FRAMES = [
    ("req-no-filter", dumps(["REQ", "s"]), "needs a subscription id and at least one filter"),
    (
        "req-bad-filter",
        dumps(["REQ", "s", {"kinds": ["1"]}]),
        "bad filter: kinds must be an array of int",
    ),
    ("req-unknown-field", dumps(["REQ", "s", {"search": "x"}]), "unknown filter field 'search'"),
    ("close-arity", dumps(["CLOSE", "s", "x"]), "CLOSE frame has 3 elements"),
    ("event-arity", dumps(["EVENT", "s", EVENT_JSON]), "EVENT frame has 3 elements"),
    ("unknown", dumps(["OK", ID, True, ""]), "unknown frame type 'OK'"),
    ("not-json", "nope", "not valid JSON"),
]


@pytest.mark.parametrize(
    ("frame", "fragment"), [c[1:] for c in BAD_CLIENT_FRAMES], ids=[c[0] for c in BAD_CLIENT_FRAMES]
)
def test_parse_client_message_invalid(frame: str, fragment: str) -> None:
    with pytest.raises(ClientMessageError, match=fragment):
        parse_client_message(frame)


# --- round trips --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frame", "expected"), [c[1:] for c in VALID_CASES], ids=[c[0] for c in VALID_CASES]
)
def test_relay_message_round_trip(frame: str | bytes, expected: Any) -> None:
    assert parse_relay_message(serialize_relay_message(expected)) == expected


RELAY_TYPES = (
    EventMessage,
    OkMessage,
    EoseMessage,
    ClosedMessage,
    NoticeMessage,
    AuthChallenge,
    CountMessage,
)
text = st.text(max_size=50)
sub_ids = st.text(min_size=1, max_size=64)
relay_messages = st.one_of(
    st.builds(OkMessage, st.just(ID), st.booleans(), text),
    st.builds(EoseMessage, sub_ids),
    st.builds(ClosedMessage, sub_ids, text),
    st.builds(NoticeMessage, text),
    st.builds(AuthChallenge, st.text(min_size=1, max_size=50)),
    st.builds(CountMessage, sub_ids, st.integers(0, 2**63), st.none() | st.booleans()),
    st.builds(EventMessage, sub_ids, st.just(PLAIN)),
)


@given(relay_messages)
def test_relay_message_round_trip_property(message: Any) -> None:
    assert parse_relay_message(serialize_relay_message(message)) == message


@given(st.text(max_size=200) | st.binary(max_size=200))
def test_any_input_parses_or_raises_relay_message_error(data: str | bytes) -> None:
    try:
        message = parse_relay_message(data)
    except RelayMessageError as exc:
        assert str(exc)
        return
    assert isinstance(message, RELAY_TYPES)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(
    st.sampled_from(["EVENT", "OK", "EOSE", "CLOSED", "NOTICE", "AUTH", "COUNT", "X"]),
    st.lists(json_values, max_size=4),
)
def test_any_array_parses_or_raises_relay_message_error(kind: str, rest: list[Any]) -> None:
    try:
        message = parse_relay_message(json.dumps([kind, *rest]))
    except RelayMessageError as exc:
        assert str(exc)
        return
    assert isinstance(message, RELAY_TYPES)
    assert parse_relay_message(serialize_relay_message(message)) == message
