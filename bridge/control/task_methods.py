"""The control API's ``tasks.*`` methods: how the Desiide orchestrator drives the daemon.

``codedeck-bridge desiide`` (the editor's orchestrator, ``DESIIDE.md``) runs each task as a
session of the daemon for the same home, so phones see it too. It talks to the daemon over the
control socket with these methods; their params are validated here, at the edge, like every
control method's (:mod:`bridge.control.methods`).

| wire method    | params                                                             | result |
|----------------|--------------------------------------------------------------------|--------|
| ``tasks.start``  | ``{session_id, cwd, instruction, allowed_tools, max_tool_calls, title?, model?, strict?, judge?}`` | ``{session_id}`` |
| ``tasks.watch``  | ``{sessions: {<id>: {after_seq, cards, state}}, timeout}``      | ``{sessions: {<id>: TaskView}}`` |
| ``tasks.answer`` | ``{session_id, card_id, allow, scope?, reason?}``               | ``{queued}`` |
| ``tasks.report`` | ``{session_id, card_id, report: [{path, status, reason?}]}``   | ``{queued}`` |
| ``tasks.input``  | ``{session_id, text}``                                          | ``{queued}`` |
| ``tasks.stop``   | ``{session_id}``                                                | ``{queued}`` |

``tasks.watch`` is a long poll: it answers as soon as any watched session has lines after
``after_seq``, a set of pending cards other than ``cards``, or a state other than ``state`` — or
when ``timeout`` (at most 60 s) passes, with what there is. A session that does not exist is
reported with ``exists: false``. Lines come from the store (durable, in seq order, at most
:data:`WATCH_BATCH` per session per answer), so a watcher that reconnects loses nothing: it asks
again from the last seq it saw.

``queued`` is whether the daemon took the request to its engine: an answer for a card that is no
longer pending (a phone answered first) is not queued. A card may still be answered by a phone in
the instant between the check and the engine: the engine then drops the editor's answer, and the
next watch shows the card gone.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any, Final, NotRequired, TypedDict

from bridge.control.rpc import INVALID_PARAMS, RpcError

__all__ = [
    "MAX_INSTRUCTION_LENGTH",
    "MAX_WATCH_TIMEOUT",
    "REPORT_STATUSES",
    "WATCH_BATCH",
    "CardView",
    "QueuedResult",
    "TaskStartResult",
    "TaskView",
    "TasksWatchResult",
    "validate_tasks_answer",
    "validate_tasks_input",
    "validate_tasks_report",
    "validate_tasks_start",
    "validate_tasks_stop",
    "validate_tasks_watch",
]

MAX_INSTRUCTION_LENGTH: Final = 100_000
MAX_WATCH_TIMEOUT: Final = 60.0
WATCH_BATCH: Final = 500
"""The most lines of one session in one ``tasks.watch`` answer (the next call gets the rest)."""
MAX_WATCHED: Final = 64
REPORT_STATUSES: Final = frozenset({"applied", "rejected", "stale"})
_MAX_ID: Final = 256
_MAX_TEXT: Final = 4096


class CardView(TypedDict):
    """A pending card of a task's session, as the orchestrator sees it."""

    id: str
    kind: str
    """``permission``, ``review`` (an edit proposal), ``question`` or ``plan``."""
    tool: str
    input: dict[str, Any]
    reasons: list[str]


class TaskView(TypedDict):
    exists: bool
    state: str | None
    """The session's state (``idle``, ``running``, ``waiting_permission``, …), ``ended`` once its
    agent failed or ended for good."""
    alive: bool
    """False once the agent ended for good (a session still starting is alive)."""
    entries: list[dict[str, Any]]
    """``{seq, entry}`` items, ``entry`` the v10 ``OutputEntry`` JSON object."""
    cards: list[CardView]


class TasksWatchResult(TypedDict):
    sessions: dict[str, TaskView]


class TaskStartResult(TypedDict):
    session_id: str


class QueuedResult(TypedDict):
    queued: bool
    reason: NotRequired[str]


def _invalid(message: str) -> RpcError:
    return RpcError(INVALID_PARAMS, message)


def _only(params: Mapping[str, Any], *allowed: str) -> None:
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise _invalid(f"unknown param {unknown[0]!r} (allowed: {', '.join(allowed)})")


def _text(params: Mapping[str, Any], key: str, limit: int, *, required: bool = True) -> str | None:
    if key not in params:
        if required:
            raise _invalid(f"{key} is required")
        return None
    value = params[key]
    if not isinstance(value, str) or (required and not value):
        raise _invalid(f"{key} must be a non-empty string")
    if len(value) > limit:
        raise _invalid(f"{key} is longer than {limit} characters")
    if "\x00" in value:
        raise _invalid(f"{key} must not contain NUL")
    return value


def _id(params: Mapping[str, Any], key: str) -> str:
    value = _text(params, key, _MAX_ID)
    assert value is not None
    if any(ord(ch) < 0x21 or ord(ch) == 0x7F for ch in value):
        raise _invalid(f"{key} must not contain spaces or control characters")
    return value


def _count(value: object, key: str, low: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise _invalid(f"{key} must be an integer ≥ {low}")
    return value


def validate_tasks_start(params: Mapping[str, Any]) -> dict[str, Any]:
    _only(
        params,
        "session_id",
        "cwd",
        "instruction",
        "allowed_tools",
        "max_tool_calls",
        "title",
        "model",
        "strict",
        "judge",
    )
    cwd = _text(params, "cwd", 4096)
    assert cwd is not None
    if not os.path.isabs(cwd):
        raise _invalid("cwd must be an absolute path (the editor's workspace root)")
    tools = params.get("allowed_tools")
    if not isinstance(tools, list) or not all(isinstance(t, str) and t for t in tools):
        raise _invalid("allowed_tools must be a list of tool names")
    return {
        "session_id": _id(params, "session_id"),
        "cwd": os.path.normpath(cwd),
        "instruction": _text(params, "instruction", MAX_INSTRUCTION_LENGTH),
        "allowed_tools": tuple(dict.fromkeys(tools)),
        "max_tool_calls": _count(params.get("max_tool_calls"), "max_tool_calls", 1),
        "title": _text(params, "title", 200, required=False),
        "model": _text(params, "model", 200, required=False),
        "strict": _flag(params, "strict"),
        "judge": _flag(params, "judge"),
    }


def _flag(params: Mapping[str, Any], key: str) -> bool:
    value = params.get(key, False)
    if not isinstance(value, bool):
        raise _invalid(f"{key} must be true or false")
    return value


def validate_tasks_watch(params: Mapping[str, Any]) -> dict[str, Any]:
    _only(params, "sessions", "timeout")
    sessions = params.get("sessions")
    if not isinstance(sessions, dict) or not sessions:
        raise _invalid("sessions must be an object of session id → {after_seq, cards, state}")
    if len(sessions) > MAX_WATCHED:
        raise _invalid(f"at most {MAX_WATCHED} sessions can be watched at once")
    cursors: dict[str, tuple[int, frozenset[str], str | None]] = {}
    for session_id, cursor in sessions.items():
        _id({"session_id": session_id}, "session_id")
        if not isinstance(cursor, dict):
            raise _invalid("each watched session needs {after_seq, cards, state}")
        _only(cursor, "after_seq", "cards", "state")
        after = _count(cursor.get("after_seq", 0), "after_seq")
        cards = cursor.get("cards", [])
        if not isinstance(cards, list) or not all(isinstance(c, str) for c in cards):
            raise _invalid("cards must be a list of card ids")
        state = cursor.get("state")
        if state is not None and not isinstance(state, str):
            raise _invalid("state must be a string or null")
        cursors[session_id] = (after, frozenset(cards), state)
    timeout = params.get("timeout", 0)
    if (
        not isinstance(timeout, int | float)
        or isinstance(timeout, bool)
        or not math.isfinite(timeout)
        or not 0 <= timeout <= MAX_WATCH_TIMEOUT
    ):
        raise _invalid(f"timeout must be a number of seconds from 0 to {MAX_WATCH_TIMEOUT:g}")
    return {"cursors": cursors, "timeout": float(timeout)}


def validate_tasks_answer(params: Mapping[str, Any]) -> dict[str, Any]:
    _only(params, "session_id", "card_id", "allow", "scope", "reason")
    allow = params.get("allow")
    if not isinstance(allow, bool):
        raise _invalid("allow must be true or false")
    scope = params.get("scope")
    if scope not in (None, "once", "task"):
        raise _invalid('scope must be "once" or "task"')
    return {
        "session_id": _id(params, "session_id"),
        "card_id": _id(params, "card_id"),
        "allow": allow,
        "scope": scope,
        "reason": _text(params, "reason", _MAX_TEXT, required=False),
    }


def validate_tasks_report(params: Mapping[str, Any]) -> dict[str, Any]:
    _only(params, "session_id", "card_id", "report")
    report = params.get("report")
    if not isinstance(report, list) or not report:
        raise _invalid("report must be a non-empty list of {path, status, reason?}")
    items: list[dict[str, str]] = []
    for item in report:
        if not isinstance(item, dict):
            raise _invalid("each report item must be {path, status, reason?}")
        _only(item, "path", "status", "reason")
        path = _text(item, "path", 4096)
        status = item.get("status")
        if status not in REPORT_STATUSES:
            raise _invalid(f"status must be one of {', '.join(sorted(REPORT_STATUSES))}")
        entry = {"path": str(path), "status": str(status)}
        reason = _text(item, "reason", _MAX_TEXT, required=False)
        if reason:
            entry["reason"] = reason
        items.append(entry)
    return {
        "session_id": _id(params, "session_id"),
        "card_id": _id(params, "card_id"),
        "report": tuple(items),
    }


def validate_tasks_input(params: Mapping[str, Any]) -> dict[str, Any]:
    _only(params, "session_id", "text")
    return {
        "session_id": _id(params, "session_id"),
        "text": _text(params, "text", MAX_INSTRUCTION_LENGTH),
    }


def validate_tasks_stop(params: Mapping[str, Any]) -> dict[str, Any]:
    _only(params, "session_id")
    return {"session_id": _id(params, "session_id")}
