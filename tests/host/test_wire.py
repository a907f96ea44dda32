"""The host socket's messages and events: every one survives its JSON form; bad lines are refused."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.host.driver import DriverStatus, PermissionAnswer
from bridge.host.events import (
    AGENT_STATES,
    OPTIONS,
    Answered,
    Entry,
    EventDecodeError,
    Exited,
    Failed,
    InputTaken,
    InterruptedInput,
    ModelChoice,
    OptionSet,
    PermissionAsked,
    Ready,
    Restarted,
    StateChanged,
    decode_event,
    encode_event,
)
from bridge.host.launch import (
    LaunchError,
    LaunchSpec,
    RestartOrder,
    decode_launch,
    encode_launch,
)
from bridge.host.wire import (
    Ack,
    Answer,
    AnswerDone,
    AskReceived,
    Close,
    Closed,
    EventRecord,
    Hello,
    Interrupt,
    LineBuffer,
    LineTooLong,
    PermissionPending,
    Problem,
    Received,
    SendInput,
    SetOption,
    Settings,
    ToolCheck,
    Verdict,
    Welcome,
    WireError,
    decode,
    encode,
)

text = st.text(max_size=20)
seq = st.integers(min_value=0, max_value=2**53)
json_value = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
json_object = st.dictionaries(st.text(max_size=5), json_value, max_size=4)
uids = st.lists(text, max_size=4).map(tuple)

events = st.one_of(
    st.builds(
        Ready,
        st.none() | text,
        st.none() | text,
        st.none() | text,
        st.lists(st.builds(ModelChoice, text, st.none() | text), max_size=3).map(tuple),
    ),
    st.builds(Failed, text),
    st.builds(Entry, json_object),
    st.builds(StateChanged, st.sampled_from(sorted(AGENT_STATES))),
    st.builds(OptionSet, st.sampled_from(sorted(OPTIONS)), text, st.none() | text),
    st.builds(PermissionAsked, text, text, json_object, st.none() | text, st.none() | text),
    st.builds(Answered, uids),
    st.builds(InputTaken, text),
    st.builds(Exited, text, st.booleans(), uids),
    st.builds(
        Restarted,
        text,
        st.integers(0, 9),
        st.integers(0, 9),
        st.lists(st.builds(InterruptedInput, text, text, text), max_size=2).map(tuple),
        st.floats(0, 2e9),
    ),
)
answers = st.builds(
    Answer,
    text,
    st.builds(PermissionAnswer, st.booleans(), text, st.booleans(), st.none() | json_object),
)
statuses = st.builds(
    DriverStatus,
    st.sampled_from(sorted(AGENT_STATES)),
    st.none() | text,
    st.none() | text,
    st.none() | text,
    st.none() | text,
    st.booleans(),
    uids,
)
messages = st.one_of(
    st.builds(Hello, seq, st.booleans(), st.lists(answers, max_size=2).map(tuple), seq),
    st.builds(SendInput, text, text),
    st.builds(AskReceived, seq, uids),
    st.just(Interrupt()),
    st.builds(SetOption, text, text),
    answers,
    st.builds(Verdict, text, st.sampled_from(["deny", "ask", "none"]), text),
    st.builds(Ack, seq),
    st.builds(Settings, st.booleans()),
    st.builds(Close, text),
    st.builds(Welcome, text, text, seq, seq, seq, st.none() | seq, statuses, st.none() | text, seq),
    st.builds(EventRecord, seq, events),
    st.builds(
        PermissionPending,
        st.builds(PermissionAsked, text, text, json_object, st.none() | text, st.none() | text),
    ),
    st.builds(ToolCheck, text, text, json_object),
    st.builds(Received, seq, uids),
    st.builds(AnswerDone, text, st.booleans()),
    st.just(Closed()),
    st.builds(Problem, text),
)


@given(events)
def test_every_event_survives_its_json_form(event: Any) -> None:
    assert decode_event(encode_event(event)) == event


@given(messages)
def test_every_message_survives_its_line(message: Any) -> None:
    line = encode(message)
    assert line.endswith(b"\n") and line.count(b"\n") == 1  # one message, one line
    assert decode(line) == message


BAD_LINES = [
    (b"not json", "not JSON"),
    (b"[1, 2]", "must be a JSON object"),
    (b'{"op": "dance"}', "unknown op"),
    (b'{"op": "ack", "through": -1}', "through must be a non-negative integer"),
    (b'{"op": "ack", "through": true}', "through must be a non-negative integer"),
    (b'{"op": "verdict", "request_id": "r", "decision": "allow"}', "unknown verdict"),
    (b'{"op": "event", "seq": 1, "event": {"t": "nope"}}', "unknown event kind"),
    (b'{"op": "event", "seq": 1, "event": {"t": "state", "state": "dancing"}}', "unknown agent"),
    (b'{"op": "permission_pending", "event": {"t": "failed", "reason": "x"}}', "permission"),
    (b'{"op": "hello", "v": 1, "after": 0, "answers": [3]}', "an answer must be an object"),
    (b'{"op": "input", "uid": 3, "text": "x"}', "uid must be a string"),
]


@pytest.mark.parametrize(("line", "why"), BAD_LINES, ids=[w for _, w in BAD_LINES])
def test_a_bad_line_is_refused_with_a_reason(line: bytes, why: str) -> None:
    with pytest.raises(WireError, match=why):
        decode(line)


def test_an_event_of_the_wrong_shape_is_refused() -> None:
    with pytest.raises(EventDecodeError, match="uids must be a list of strings"):
        decode_event({"t": "answered", "uids": [1]})
    with pytest.raises(EventDecodeError, match="must be a JSON object"):
        decode_event([])


def test_lines_are_split_across_reads_and_capped() -> None:
    buffer = LineBuffer(limit=10)
    assert buffer.feed(b"ab") == []
    assert buffer.feed(b"c\nde\n\nf") == [b"abc", b"de", b""]
    assert buffer.pending == 1
    with pytest.raises(LineTooLong):
        buffer.feed(b"x" * 11)
    with pytest.raises(LineTooLong):
        LineBuffer(limit=3).feed(b"abcd\n")


def test_the_launch_spec_carries_the_environment_and_refuses_bad_specs() -> None:
    from bridge.host.driver import DriverSpec

    spec = LaunchSpec(
        "claude",
        __import__("pathlib").Path("/home/u/.codedeck"),
        DriverSpec(
            "s-1", "/w", env={"ANTHROPIC_AUTH_TOKEN": "tok-secret-1"}, options={"check_tools": True}
        ),
        orphan_timeout=600.0,
        unclaimed_timeout=30.0,
        seq_floor=7,
        restart=RestartOrder("gone", 1, 2, (InterruptedInput("u", "in-1", "hi"),), ("u",)),
    )
    assert decode_launch(encode_launch(spec)) == spec
    assert "tok-secret-1" not in repr(spec.driver)  # the env never shows in a repr (logs)
    with pytest.raises(LaunchError, match="unknown agent"):
        decode_launch(b'{"agent": "x", "driver": {}}')
    base = b'"agent": "scripted", "home": "/h", "driver": {"session_id": "s", "cwd": "/", "permission_mode": "plan"}'
    for bad in (b'"unclaimed_timeout": 0', b'"unclaimed_timeout": true', b'"orphan_timeout": "1"'):
        with pytest.raises(LaunchError, match=r"_timeout must be a positive number"):
            decode_launch(b"{" + base + b", " + bad + b"}")
    with pytest.raises(LaunchError, match=r"driver\.env must map strings to strings"):
        decode_launch(
            b'{"agent": "scripted", "home": "/h", "driver": {"session_id": "s", "cwd": "/",'
            b' "permission_mode": "plan", "env": {"A": 1}}}'
        )
