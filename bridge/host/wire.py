"""The socket protocol between the daemon and a session host: JSON lines, one message each.

The host serves one unix socket (``<home>/hosts/<key>/sock``, 0600 in 0700 directories); the
daemon is its only client. Every message is one JSON object on one line, ``"op"`` naming it.
:func:`encode` and :func:`decode` are the only way in and out; :class:`LineBuffer` splits the
byte stream into lines with a size cap, so a peer cannot make the other buffer without limit.

A connection, in order::

    daemon → host   hello {after, diff_allowed, answers}
    host → daemon   welcome {...}                       (or problem {message} and EOF)
    host → daemon   event {seq, event} …                every journal record with seq > after,
                                                        then live records as they are journaled
    host → daemon   permission_pending {…} …            permission asks still parked, once the
                                                        replay reached the journal's end
    host → daemon   synced {through}                    the replay reached the journal's end and
                                                        every parked ask was re-presented
    host → daemon   tool_check {…}                      a pre-tool check waiting (again after a
                                                        reconnect, until answered)
    daemon → host   input | received | interrupt | option | answer | verdict | ack | settings |
                    close, in any order
    host → daemon   received {req, uids} | answer_done {request_id, applied} | closed

Why answers ride on ``hello``: an answer the daemon made durable but could not deliver (it died)
must reach the host *before* the host re-presents the parked request, or the phone would be asked
twice. Acks (``ack {through}``) come only after the daemon committed the records: the host may
then trim its journal up to there.

Version: ``hello`` and ``welcome`` carry :data:`WIRE_VERSION`; a host refuses another version
with ``problem`` (an upgraded daemon meets hosts started by the old one: it then tells the user
to restart those sessions).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any, Final, assert_never

import orjson

from bridge.host.driver import VERDICTS, DriverStatus, PermissionAnswer
from bridge.host.events import (
    EventDecodeError,
    HostEvent,
    PermissionAsked,
    decode_event,
    encode_event,
)
from bridge.records import record

__all__ = [
    "MAX_LINE_BYTES",
    "WIRE_VERSION",
    "Ack",
    "Answer",
    "AnswerDone",
    "AskReceived",
    "Close",
    "Closed",
    "DaemonMessage",
    "EventRecord",
    "Hello",
    "HostMessage",
    "Interrupt",
    "LineBuffer",
    "LineTooLong",
    "PermissionPending",
    "Problem",
    "Received",
    "SendInput",
    "SetOption",
    "Settings",
    "Synced",
    "ToolCheck",
    "Verdict",
    "Welcome",
    "WireError",
    "decode",
    "encode",
]

WIRE_VERSION: Final = 1
MAX_LINE_BYTES: Final = 32 * 1024 * 1024
"""The longest line either side accepts (a journal record is at most 16 MiB, plus framing)."""


class WireError(ValueError):
    """A line is not a valid message; the text says why."""


class LineTooLong(WireError):
    """A line grew past :data:`MAX_LINE_BYTES` without ending."""


# --- daemon → host -------------------------------------------------------------------------------


@record
class Answer:
    """The answer to a parked permission ask (durable in the daemon until ``answer_done``)."""

    request_id: str
    answer: PermissionAnswer


@record
class Hello:
    """The daemon connects: replay after `after`; apply `answers` before anything else."""

    after: int
    diff_allowed: bool = False
    answers: tuple[Answer, ...] = ()
    version: int = WIRE_VERSION


@record
class SendInput:
    uid: str
    text: str = field(repr=False)


@record
class AskReceived:
    """Which of `uids` did the agent take or record? (answered by :class:`Received`)."""

    req: int
    uids: tuple[str, ...]


@record
class Interrupt:
    pass


@record
class SetOption:
    option: str
    value: str


@record
class Verdict:
    """The daemon's pre-tool check of a call the host asked about."""

    request_id: str
    decision: str
    reason: str = ""


@record
class Ack:
    """The daemon committed every record up to `through`."""

    through: int


@record
class Settings:
    diff_allowed: bool


@record
class Close:
    """End the session: stop the agent, remove the host's files, exit."""

    reason: str = ""


DaemonMessage = (
    Hello
    | SendInput
    | AskReceived
    | Interrupt
    | SetOption
    | Answer
    | Verdict
    | Ack
    | Settings
    | Close
)

# --- host → daemon -------------------------------------------------------------------------------


@record
class Welcome:
    """The host's state as a daemon finds it.

    Attributes:
        ready_seq: the seq of the newest ``ready`` record (None before the agent was ready).
        ended: why the agent is gone (the host is finishing), else None.
    """

    session_id: str
    agent: str
    pid: int
    first_seq: int
    next_seq: int
    ready_seq: int | None
    status: DriverStatus
    ended: str | None = None
    version: int = WIRE_VERSION


@record
class EventRecord:
    seq: int
    event: HostEvent


@record
class PermissionPending:
    """A permission ask still parked (re-presented to a daemon that adopts the host)."""

    request: PermissionAsked


@record
class Synced:
    """The daemon has every record up to `through` and every parked ask (once per connection).

    A daemon that adopts hosts at start holds the phones' commands until each host said this:
    a phone's answer to a card must not arrive before the card is back in the engine.
    """

    through: int


@record
class ToolCheck:
    request_id: str
    tool_name: str
    tool_input: Mapping[str, Any]


@record
class Received:
    req: int
    uids: tuple[str, ...]


@record
class AnswerDone:
    """`applied`: the ask was parked and is now answered; False: unknown or already answered."""

    request_id: str
    applied: bool


@record
class Closed:
    pass


@record
class Problem:
    """The host refuses the connection or a message; the text says why (no secrets)."""

    message: str


HostMessage = (
    Welcome
    | EventRecord
    | PermissionPending
    | Synced
    | ToolCheck
    | Received
    | AnswerDone
    | Closed
    | Problem
)

# --- encoding ------------------------------------------------------------------------------------


def encode(message: DaemonMessage | HostMessage) -> bytes:
    """One message as one line (with its ``\\n``)."""
    return orjson.dumps(_to_json(message)) + b"\n"


def _answer_json(answer: Answer) -> dict[str, Any]:
    return {
        "request_id": answer.request_id,
        "allow": answer.answer.allow,
        "message": answer.answer.message,
        "always": answer.answer.always,
        "updated_input": (
            dict(answer.answer.updated_input) if answer.answer.updated_input is not None else None
        ),
    }


def _status_json(status: DriverStatus) -> dict[str, Any]:
    return {
        "state": status.state,
        "mode": status.mode,
        "model": status.model,
        "effort": status.effort,
        "sdk_session_id": status.sdk_session_id,
        "turn_completed": status.turn_completed,
        "taken": list(status.taken),
    }


def _to_json(message: DaemonMessage | HostMessage) -> dict[str, Any]:
    match message:
        case Hello():
            return {
                "op": "hello",
                "v": message.version,
                "after": message.after,
                "diff_allowed": message.diff_allowed,
                "answers": [_answer_json(a) for a in message.answers],
            }
        case SendInput():
            return {"op": "input", "uid": message.uid, "text": message.text}
        case AskReceived():
            return {"op": "ask_received", "req": message.req, "uids": list(message.uids)}
        case Interrupt():
            return {"op": "interrupt"}
        case SetOption():
            return {"op": "option", "option": message.option, "value": message.value}
        case Answer():
            return {"op": "answer", **_answer_json(message)}
        case Verdict():
            return {
                "op": "verdict",
                "request_id": message.request_id,
                "decision": message.decision,
                "reason": message.reason,
            }
        case Ack():
            return {"op": "ack", "through": message.through}
        case Settings():
            return {"op": "settings", "diff_allowed": message.diff_allowed}
        case Close():
            return {"op": "close", "reason": message.reason}
        case Welcome():
            return {
                "op": "welcome",
                "v": message.version,
                "session_id": message.session_id,
                "agent": message.agent,
                "pid": message.pid,
                "first_seq": message.first_seq,
                "next_seq": message.next_seq,
                "ready_seq": message.ready_seq,
                "status": _status_json(message.status),
                "ended": message.ended,
            }
        case EventRecord():
            return {"op": "event", "seq": message.seq, "event": encode_event(message.event)}
        case PermissionPending():
            return {"op": "permission_pending", "event": encode_event(message.request)}
        case Synced():
            return {"op": "synced", "through": message.through}
        case ToolCheck():
            return {
                "op": "tool_check",
                "request_id": message.request_id,
                "tool_name": message.tool_name,
                "tool_input": dict(message.tool_input),
            }
        case Received():
            return {"op": "received", "req": message.req, "uids": list(message.uids)}
        case AnswerDone():
            return {
                "op": "answer_done",
                "request_id": message.request_id,
                "applied": message.applied,
            }
        case Closed():
            return {"op": "closed"}
        case Problem():
            return {"op": "problem", "message": message.message}
        case _:
            assert_never(message)


def decode(line: bytes) -> DaemonMessage | HostMessage:
    """The message one line holds (with or without its ``\\n``).

    Raises:
        WireError: not JSON, not an object, an unknown ``op`` or a field of the wrong type.
    """
    try:
        raw = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise WireError(f"not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise WireError("a message must be a JSON object")
    try:
        return _from_json(raw)
    except EventDecodeError as exc:
        raise WireError(str(exc)) from None


def _from_json(raw: dict[str, Any]) -> DaemonMessage | HostMessage:
    op = raw.get("op")
    if op == "hello":
        return Hello(
            _int(raw, "after"),
            _bool(raw, "diff_allowed"),
            tuple(_answer(item) for item in _list(raw, "answers")),
            _int(raw, "v"),
        )
    if op == "input":
        return SendInput(_str(raw, "uid"), _str(raw, "text"))
    if op == "ask_received":
        return AskReceived(_int(raw, "req"), _strings(raw, "uids"))
    if op == "interrupt":
        return Interrupt()
    if op == "option":
        return SetOption(_str(raw, "option"), _str(raw, "value"))
    if op == "answer":
        return _answer(raw)
    if op == "verdict":
        decision = _str(raw, "decision")
        if decision not in VERDICTS:
            raise WireError(f"unknown verdict {decision!r}")
        return Verdict(_str(raw, "request_id"), decision, _str(raw, "reason"))
    if op == "ack":
        return Ack(_int(raw, "through"))
    if op == "settings":
        return Settings(_bool(raw, "diff_allowed"))
    if op == "close":
        return Close(_str(raw, "reason"))
    if op == "welcome":
        ready_seq = raw.get("ready_seq")
        if ready_seq is not None and not _is_int(ready_seq):
            raise WireError("ready_seq must be an integer or null")
        ended = raw.get("ended")
        if ended is not None and not isinstance(ended, str):
            raise WireError("ended must be a string or null")
        return Welcome(
            _str(raw, "session_id"),
            _str(raw, "agent"),
            _int(raw, "pid"),
            _int(raw, "first_seq"),
            _int(raw, "next_seq"),
            ready_seq,
            _status(raw.get("status")),
            ended,
            _int(raw, "v"),
        )
    if op == "event":
        return EventRecord(_int(raw, "seq"), decode_event(raw.get("event")))
    if op == "permission_pending":
        request = decode_event(raw.get("event"))
        if not isinstance(request, PermissionAsked):
            raise WireError("permission_pending must carry a permission event")
        return PermissionPending(request)
    if op == "synced":
        return Synced(_int(raw, "through"))
    if op == "tool_check":
        tool_input = raw.get("tool_input", {})
        if not isinstance(tool_input, dict):
            raise WireError("tool_input must be an object")
        return ToolCheck(_str(raw, "request_id"), _str(raw, "tool_name"), tool_input)
    if op == "received":
        return Received(_int(raw, "req"), _strings(raw, "uids"))
    if op == "answer_done":
        return AnswerDone(_str(raw, "request_id"), _bool(raw, "applied"))
    if op == "closed":
        return Closed()
    if op == "problem":
        return Problem(_str(raw, "message"))
    raise WireError(f"unknown op {op!r}")


def _answer(raw: Mapping[str, Any]) -> Answer:
    if not isinstance(raw, Mapping):
        raise WireError("an answer must be an object")
    updated = raw.get("updated_input")
    if updated is not None and not isinstance(updated, dict):
        raise WireError("updated_input must be an object or null")
    answer = PermissionAnswer(
        _bool(raw, "allow"), _str(raw, "message"), _bool(raw, "always"), updated
    )
    return Answer(_str(raw, "request_id"), answer)


def _status(raw: object) -> DriverStatus:
    if not isinstance(raw, dict):
        raise WireError("status must be an object")
    return DriverStatus(
        state=_str(raw, "state"),
        mode=_opt_str(raw, "mode"),
        model=_opt_str(raw, "model"),
        effort=_opt_str(raw, "effort"),
        sdk_session_id=_opt_str(raw, "sdk_session_id"),
        turn_completed=_bool(raw, "turn_completed"),
        taken=_strings(raw, "taken"),
    )


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int(raw: Mapping[str, Any], name: str) -> int:
    value = raw.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise WireError(f"{name} must be a non-negative integer")
    return value


def _bool(raw: Mapping[str, Any], name: str) -> bool:
    value = raw.get(name, False)
    if not isinstance(value, bool):
        raise WireError(f"{name} must be a boolean")
    return value


def _str(raw: Mapping[str, Any], name: str) -> str:
    value = raw.get(name, "")
    if not isinstance(value, str):
        raise WireError(f"{name} must be a string")
    return value


def _opt_str(raw: Mapping[str, Any], name: str) -> str | None:
    value = raw.get(name)
    if value is not None and not isinstance(value, str):
        raise WireError(f"{name} must be a string or null")
    return value


def _list(raw: Mapping[str, Any], name: str) -> list[Any]:
    value = raw.get(name, [])
    if not isinstance(value, list):
        raise WireError(f"{name} must be a list")
    return value


def _strings(raw: Mapping[str, Any], name: str) -> tuple[str, ...]:
    items = _list(raw, name)
    if not all(isinstance(item, str) for item in items):
        raise WireError(f"{name} must be a list of strings")
    return tuple(items)


class LineBuffer:
    """Bytes in, complete lines out (sans-I/O): the framing of both sides.

    Raises :class:`LineTooLong` from :meth:`feed` when a line passes `limit` bytes unfinished;
    the connection is then beyond repair (the caller closes it).
    """

    def __init__(self, limit: int = MAX_LINE_BYTES) -> None:
        self._limit = limit
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        """Add `data`; the lines it completed, without their ``\\n``."""
        self._buffer += data
        lines: list[bytes] = []
        start = 0
        while (end := self._buffer.find(b"\n", start)) != -1:
            if end - start > self._limit:
                raise LineTooLong(f"a line of {end - start} bytes passed the limit")
            lines.append(bytes(self._buffer[start:end]))
            start = end + 1
        del self._buffer[:start]
        if len(self._buffer) > self._limit:
            raise LineTooLong(f"an unfinished line of {len(self._buffer)} bytes passed the limit")
        return lines

    @property
    def pending(self) -> int:
        """Bytes of an unfinished line held."""
        return len(self._buffer)
