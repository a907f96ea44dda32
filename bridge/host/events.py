"""What a session host's agent reports: the records of its journal, as plain data.

Every event a driver (:mod:`bridge.host.driver`) emits is written to the host's journal
(:mod:`bridge.host.journal`) under the next seq, and only then sent to the daemon. The daemon
turns each into one engine input and commits the seq with that input's effects, so a record is
applied exactly once whatever dies in between (the daemon replays from its committed seq).

The vocabulary mirrors the engine's agent inputs (``bridge.engine.inputs``), minus everything
that would make a host heavy: entries are the wire's ``OutputEntry`` as a JSON object (the daemon
validates them when they arrive, which is where untrusted data is validated), and nothing here
imports pydantic or the engine.

=================  ==============================================================================
``ready``          the agent is up: its conversation id, model, working directory, model list
``failed``         the agent could not start (before ``ready``); the host ends after it
``entry``          one transcript line (``OutputEntry`` as JSON)
``state``          ``idle`` / ``running`` / ``waiting_permission`` / ``waiting_question``
``option``         a mode / effort / model change: asked by the daemon (``value`` → ``result``,
                   None when refused) or made by the agent itself (``value == result``)
``permission``     a tool call waits for the phone (a card); parked until the daemon answers
``taken``          the agent took this input into its conversation (before any work on it)
``answered``       the turns of these inputs are over (the daemon forgets their inbox rows)
``exited``         the agent is gone after ``ready`` (crash, exit); the host ends after it
``restarted``      this host resumes a session whose last host ended: why, which restart, and the
                   inputs the last agent took and never finished (the host's first record)
=================  ==============================================================================

:func:`encode_event` and :func:`decode_event` are the only way in and out of JSON:
``decode_event(encode_event(e)) == e`` and anything else raises :class:`EventDecodeError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any, Final, assert_never

from bridge.records import record

__all__ = [
    "AGENT_STATES",
    "OPTIONS",
    "Answered",
    "Entry",
    "EventDecodeError",
    "Exited",
    "Failed",
    "HostEvent",
    "InputTaken",
    "InterruptedInput",
    "ModelChoice",
    "OptionSet",
    "PermissionAsked",
    "Ready",
    "Restarted",
    "StateChanged",
    "decode_event",
    "encode_event",
]

AGENT_STATES: Final = frozenset({"idle", "running", "waiting_permission", "waiting_question"})
"""The states an agent reports (the heartbeat's session ``state``)."""
OPTIONS: Final = frozenset({"mode", "effort", "model"})
"""The options a session can change while it runs."""


class EventDecodeError(ValueError):
    """A journal record or a socket frame is not a valid host event; the text says why."""


@record
class ModelChoice:
    """A model the agent offers (``models.models[]``): what ``set_option("model")`` accepts."""

    id: str
    label: str | None = None


@record
class Ready:
    """The agent is up (after a start or a resume)."""

    sdk_session_id: str | None
    model: str | None = None
    cwd: str | None = None
    models: tuple[ModelChoice, ...] = ()
    sandboxed: bool = False
    """The agent runs under the sandbox (bubblewrap)."""


@record
class Failed:
    """The agent could not start; the reason is user-readable."""

    reason: str


@record
class Entry:
    """One transcript line, the wire's ``OutputEntry`` as a JSON object."""

    entry: Mapping[str, Any]


@record
class StateChanged:
    """The agent's state now (one of :data:`AGENT_STATES`)."""

    state: str


@record
class OptionSet:
    """An option's value now in force: ``result`` is None when the change was refused."""

    option: str
    value: str
    result: str | None


@record
class PermissionAsked:
    """A tool call the agent may not make without the phone's answer (a card)."""

    request_id: str
    tool_name: str
    tool_input: Mapping[str, Any] = field(default_factory=dict)
    description: str | None = None
    agent_id: str | None = None


@record
class InputTaken:
    """The agent took this input into its conversation (Claude Code: ``command_lifecycle``
    ``started``), before it did any work on it.

    Durable evidence that the input reached the agent, independent of the agent's own record
    (Claude Code writes its session file a moment late): an input taken is never sent to a
    restarted agent again.
    """

    uid: str


@record
class Answered:
    """The agent finished the turns of these inputs (their uids, in order)."""

    uids: tuple[str, ...]


@record
class Exited:
    """The agent is gone after it was ready.

    Attributes:
        reason: how (``exit code 1``, ``killed by signal 9``), user-readable, no output quoted.
        turn_completed: a turn finished since the agent started (the daemon's restart budget
            starts over then).
        interrupted: inputs the agent had taken whose turn never finished, oldest first.
    """

    reason: str
    turn_completed: bool = False
    interrupted: tuple[str, ...] = ()


@record
class InterruptedInput:
    """An input the last agent took whose turn never finished (named in the restart line)."""

    uid: str
    label: str
    """What the phone knows it by (its ``inputId``, else the bridge's uid)."""
    text: str
    """The start of what it said (quoted to the user)."""


@record
class Restarted:
    """The session's last host ended and this one resumes it (journaled before anything else).

    Journaled rather than said by the daemon: whichever daemon follows this host's journal —
    the one that started it, or the next after a crash — tells the phone exactly once.

    Attributes:
        reason: why the last one ended (user-readable).
        count: which restart in a row this is, of `budget`.
        interrupted: the inputs cut short.
        at: when (unix seconds).
    """

    reason: str
    count: int
    budget: int
    interrupted: tuple[InterruptedInput, ...] = ()
    at: float = 0.0


HostEvent = (
    Ready
    | Failed
    | Entry
    | StateChanged
    | OptionSet
    | PermissionAsked
    | InputTaken
    | Answered
    | Exited
    | Restarted
)
"""Every record a journal holds."""


def encode_event(event: HostEvent) -> dict[str, Any]:
    """`event` as a JSON object (``"t"`` names the kind)."""
    match event:
        case Ready():
            return {
                "t": "ready",
                "sdk_session_id": event.sdk_session_id,
                "model": event.model,
                "cwd": event.cwd,
                "models": [{"id": m.id, "label": m.label} for m in event.models],
                "sandboxed": event.sandboxed,
            }
        case Failed():
            return {"t": "failed", "reason": event.reason}
        case Entry():
            return {"t": "entry", "entry": dict(event.entry)}
        case StateChanged():
            return {"t": "state", "state": event.state}
        case OptionSet():
            return {
                "t": "option",
                "option": event.option,
                "value": event.value,
                "result": event.result,
            }
        case PermissionAsked():
            return {
                "t": "permission",
                "request_id": event.request_id,
                "tool_name": event.tool_name,
                "tool_input": dict(event.tool_input),
                "description": event.description,
                "agent_id": event.agent_id,
            }
        case InputTaken():
            return {"t": "taken", "uid": event.uid}
        case Answered():
            return {"t": "answered", "uids": list(event.uids)}
        case Exited():
            return {
                "t": "exited",
                "reason": event.reason,
                "turn_completed": event.turn_completed,
                "interrupted": list(event.interrupted),
            }
        case Restarted():
            return {
                "t": "restarted",
                "reason": event.reason,
                "count": event.count,
                "budget": event.budget,
                "interrupted": [
                    {"uid": i.uid, "label": i.label, "text": i.text} for i in event.interrupted
                ],
                "at": event.at,
            }
        case _:
            assert_never(event)


def decode_event(raw: object) -> HostEvent:
    """The event a JSON object holds.

    Raises:
        EventDecodeError: not an object, an unknown ``"t"``, or a field of the wrong type.
    """
    if not isinstance(raw, Mapping):
        raise EventDecodeError("an event must be a JSON object")
    kind = raw.get("t")
    if kind == "ready":
        return Ready(
            _opt_str(raw, "sdk_session_id"),
            _opt_str(raw, "model"),
            _opt_str(raw, "cwd"),
            tuple(_model(item) for item in _list(raw, "models")),
            raw.get("sandboxed") is True,
        )
    if kind == "failed":
        return Failed(_str(raw, "reason"))
    if kind == "entry":
        return Entry(_object(raw, "entry"))
    if kind == "state":
        state = _str(raw, "state")
        if state not in AGENT_STATES:
            raise EventDecodeError(f"unknown agent state {state!r}")
        return StateChanged(state)
    if kind == "option":
        option = _str(raw, "option")
        if option not in OPTIONS:
            raise EventDecodeError(f"unknown option {option!r}")
        return OptionSet(option, _str(raw, "value"), _opt_str(raw, "result"))
    if kind == "permission":
        return PermissionAsked(
            _str(raw, "request_id"),
            _str(raw, "tool_name"),
            _object(raw, "tool_input"),
            _opt_str(raw, "description"),
            _opt_str(raw, "agent_id"),
        )
    if kind == "taken":
        return InputTaken(_str(raw, "uid"))
    if kind == "answered":
        return Answered(_strings(raw, "uids"))
    if kind == "exited":
        completed = raw.get("turn_completed", False)
        if not isinstance(completed, bool):
            raise EventDecodeError("turn_completed must be a boolean")
        return Exited(_str(raw, "reason"), completed, _strings(raw, "interrupted"))
    if kind == "restarted":
        return Restarted(
            _str(raw, "reason"),
            _count(raw, "count"),
            _count(raw, "budget"),
            tuple(_interrupted(item) for item in _list(raw, "interrupted")),
            _number(raw, "at"),
        )
    raise EventDecodeError(f"unknown event kind {kind!r}")


def _str(raw: Mapping[str, Any], name: str) -> str:
    value = raw.get(name)
    if not isinstance(value, str):
        raise EventDecodeError(f"{name} must be a string")
    return value


def _opt_str(raw: Mapping[str, Any], name: str) -> str | None:
    value = raw.get(name)
    if value is not None and not isinstance(value, str):
        raise EventDecodeError(f"{name} must be a string or null")
    return value


def _object(raw: Mapping[str, Any], name: str) -> dict[str, Any]:
    value = raw.get(name, {})
    if not isinstance(value, dict):
        raise EventDecodeError(f"{name} must be an object")
    return value


def _list(raw: Mapping[str, Any], name: str) -> list[Any]:
    value = raw.get(name, [])
    if not isinstance(value, list):
        raise EventDecodeError(f"{name} must be a list")
    return value


def _strings(raw: Mapping[str, Any], name: str) -> tuple[str, ...]:
    items = _list(raw, name)
    if not all(isinstance(item, str) for item in items):
        raise EventDecodeError(f"{name} must be a list of strings")
    return tuple(items)


def _count(raw: Mapping[str, Any], name: str) -> int:
    value = raw.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise EventDecodeError(f"{name} must be a non-negative integer")
    return value


def _number(raw: Mapping[str, Any], name: str) -> float:
    value = raw.get(name, 0.0)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise EventDecodeError(f"{name} must be a number")
    return float(value)


def _interrupted(item: object) -> InterruptedInput:
    if not isinstance(item, Mapping):
        raise EventDecodeError("an interrupted input must be an object")
    return InterruptedInput(_str(item, "uid"), _str(item, "label"), _str(item, "text"))


def _model(item: object) -> ModelChoice:
    if not isinstance(item, Mapping):
        raise EventDecodeError("a model must be an object")
    return ModelChoice(_str(item, "id"), _opt_str(item, "label"))
