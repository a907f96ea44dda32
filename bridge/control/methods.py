"""The control API: its methods, their parameters, their results, and the handler the daemon implements.

The daemon implements `ControlHandler`; the server validates every request's params here, at the
edge, and calls the handler with clean Python values, so the handler never sees a malformed
request. Wire method names are dotted (``pair.open``) like the Desiide protocol's; handler methods
are the same names with underscores (``pair_open``).

| wire method     | params                                  | handler call                  |
|-----------------|-----------------------------------------|-------------------------------|
| ``status``      | ``{}``                                  | ``status()``                  |
| ``pair.open``   | ``{duration?: number}`` (default 600)   | ``pair_open(duration)``       |
| ``pair.wait``   | ``{timeout: number}``                   | ``pair_wait(timeout)``        |
| ``pair.npub``   | ``{npub: string, label?: string}``      | ``pair_npub(pubkey, label)``  |
| ``phones.list`` | ``{}``                                  | ``phones_list()``             |
| ``phones.unpair``| ``{npub: string}``                     | ``phones_unpair(pubkey)``     |
| ``sessions.list``| ``{}``                                 | ``sessions_list()``           |
| ``sessions.close``| ``{session_id: string}`` or ``{all: true}`` | ``sessions_close(session_id, close_all)`` |
| ``tasks.*``     | see :mod:`bridge.control.task_methods` (since 1.2: the Desiide orchestrator) | ``tasks_<verb>(…)`` |

Requests are strict (unknown params are refused); results are tolerant: clients ignore fields
they do not know and the operations issue may add fields. The ``npub`` params accept an
``npub1…`` or 64 hex characters; the handler always receives the 64-lowercase-hex `PubKeyHex`.
Timestamps in results are ISO 8601 UTC strings (`iso_timestamp`), as the reference bridge's
``pairedAt``: readable in ``--json`` output and unambiguous about units.

``sessions.close`` ends sessions as a phone's ``close-session`` does (tombstone, heartbeat, the
session's host told to stop its agent and remove its files) and answers with the ids it closed;
the close itself is queued for the engine, so a caller that needs the hosts gone waits for them
(``codedeck-bridge sessions close`` does). An unknown id is refused with a message naming it.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Final, NotRequired, Protocol, TypedDict

from bridge.control.rpc import INVALID_PARAMS, REQUEST_FAILED, RpcError
from bridge.control.task_methods import (
    QueuedResult,
    TaskStartResult,
    TasksWatchResult,
    validate_tasks_answer,
    validate_tasks_input,
    validate_tasks_report,
    validate_tasks_start,
    validate_tasks_stop,
    validate_tasks_watch,
)
from bridge.nostr.keys import NostrKeyError, PubKeyHex, parse_pubkey
from bridge.records import record

__all__ = [
    "CONTROL_PROTOCOL_VERSION",
    "DEFAULT_PAIR_WINDOW",
    "MAX_LABEL_LENGTH",
    "MAX_SESSION_ID_LENGTH",
    "MAX_WAIT",
    "METHODS",
    "ControlHandler",
    "HandlerError",
    "HostStatus",
    "HostsSummary",
    "MethodSpec",
    "PairNpubResult",
    "PairOpenResult",
    "PairWaitResult",
    "PhoneInfo",
    "RelayInfo",
    "SessionInfo",
    "SessionsCloseResult",
    "StatusResult",
    "UnpairResult",
    "iso_timestamp",
    "parse_timestamp",
]

CONTROL_PROTOCOL_VERSION: Final = "1.3.0"
"""The control protocol's version. A different major on either side is refused (ProtocolMismatch);
minors only add optional params, result fields and methods."""

DEFAULT_PAIR_WINDOW: Final = 600.0
"""The pairing window's default length in seconds (REFERENCE-BEHAVIOUR §1.8: 10 minutes)."""

MAX_WAIT: Final = 3600.0
"""The longest pairing window or wait, in seconds. A window is an open door for any key that
knows the token; an hour is already generous for scanning a QR code."""

MAX_LABEL_LENGTH: Final = 64
MAX_SESSION_ID_LENGTH: Final = 256


class HandlerError(Exception):
    """Raise from a handler method to answer the client with this message.

    Use it for expected refusals ("the daemon is shutting down", "no pairing window is open");
    the message reaches the user verbatim, so it must say what to do and hold no secret. Any
    other exception is a bug: it is logged with its traceback and answered "internal error".

    Attributes:
        code: the JSON-RPC error code (default `REQUEST_FAILED`, -32000).
    """

    def __init__(self, message: str, *, code: int = REQUEST_FAILED) -> None:
        super().__init__(message)
        self.code = code


# --- results ------------------------------------------------------------------------------------


class RelayInfo(TypedDict):
    url: str
    state: str
    """E.g. ``connecting``, ``connected``, ``backoff``, ``closed`` (free text, shown as is)."""
    lastEventAt: str | None
    lastError: str | None


class PhoneInfo(TypedDict):
    npub: str
    label: str
    pairedAt: str | None


class HostStatus(TypedDict):
    """The session host of one session, as ``host.json`` and ``/proc`` tell it."""

    alive: bool
    pid: int | None
    """The host's pid while it is alive, else None."""


class SessionInfo(TypedDict):
    sessionId: str
    state: str
    title: NotRequired[str | None]
    cwd: NotRequired[str | None]
    host: NotRequired[HostStatus]
    """Since control protocol 1.1."""


class HostsSummary(TypedDict):
    running: int
    """Session hosts alive under the home, those of sessions the daemon no longer has included."""


class StatusResult(TypedDict):
    pid: int
    startedAt: str
    version: str
    npub: str
    machine: str
    home: str
    relays: list[RelayInfo]
    embeddedRelay: str | None
    """The embedded relay's URL when the daemon serves one, else None."""
    phones: list[PhoneInfo]
    sessions: list[SessionInfo]
    lastCommandAt: str | None
    """When the last phone command was processed, None before the first."""
    hosts: NotRequired[HostsSummary]
    """Since control protocol 1.1."""
    sandbox: NotRequired[str]
    """Whether sessions are sandboxed, and if not why and how to fix it."""


class PairOpenResult(TypedDict):
    url: str
    """The ``codedeck://pair?…`` URL (holds the token)."""
    npub: str
    token: str
    relays: list[str]
    machine: str
    expiresAt: str
    webUrl: NotRequired[str | None]
    """Since control protocol 1.3: the CodeDeck Web pairing link
    (``http(s)://HOST:PORT/#pair=…``, holds the token) when the daemon serves its embedded
    relay, and with it the page; else None."""


class PairWaitResult(TypedDict):
    paired: bool
    label: NotRequired[str]
    """With ``paired``: the phone's label."""
    npub: NotRequired[str]
    """With ``paired``: the phone's npub."""
    reason: NotRequired[str]
    """Without ``paired``: ``expired``, ``closed`` (replaced or closed by the host), ``timeout``
    (the wait ended first; the window is still open) or ``no-window``."""


class PairNpubResult(TypedDict):
    npub: str
    label: str
    alreadyPaired: bool


class UnpairResult(TypedDict):
    unpaired: bool
    """False when the key was not paired (nothing changed)."""
    npub: str
    label: NotRequired[str]


class SessionsCloseResult(TypedDict):
    closed: list[str]
    """The ids of the sessions whose close was queued (every session for ``all``)."""


class ControlHandler(Protocol):
    """What the daemon implements for the control socket.

    Every method is a coroutine; params arrive validated. Results must be JSON-able (the server
    answers "internal error" and logs otherwise). Methods other than `pair_wait` run to completion
    even when the client disconnects (their reply is dropped); `pair_wait` is cancelled then, so
    it must be cancel-safe (it only waits).
    """

    async def status(self) -> StatusResult: ...

    async def pair_open(self, duration: float) -> PairOpenResult:
        """Open (or replace) the pairing window for ``duration`` seconds."""
        ...

    async def pair_wait(self, timeout: float) -> PairWaitResult:
        """Wait until a phone pairs through the window, the window ends, or ``timeout`` passes."""
        ...

    async def pair_npub(self, pubkey: PubKeyHex, label: str) -> PairNpubResult:
        """Pair a phone by key; ``label`` may be empty (the daemon applies its default)."""
        ...

    async def phones_list(self) -> list[PhoneInfo]: ...

    async def phones_unpair(self, pubkey: PubKeyHex) -> UnpairResult: ...

    async def sessions_list(self) -> list[SessionInfo]: ...

    async def sessions_close(self, session_id: str | None, close_all: bool) -> SessionsCloseResult:
        """End one session (``session_id``) or every one (``close_all``); the ids closed.

        Raises:
            HandlerError: ``session_id`` names no session of the daemon.
        """
        ...

    # The Desiide orchestrator's methods (bridge.control.task_methods has their contract).

    async def tasks_start(
        self,
        session_id: str,
        cwd: str,
        instruction: str,
        allowed_tools: tuple[str, ...],
        max_tool_calls: int,
        title: str | None,
        model: str | None,
        strict: bool,
        judge: bool,
    ) -> TaskStartResult: ...

    async def tasks_watch(
        self, cursors: Mapping[str, tuple[int, frozenset[str], str | None]], timeout: float
    ) -> TasksWatchResult: ...

    async def tasks_answer(
        self, session_id: str, card_id: str, allow: bool, scope: str | None, reason: str | None
    ) -> QueuedResult: ...

    async def tasks_report(
        self, session_id: str, card_id: str, report: tuple[dict[str, str], ...]
    ) -> QueuedResult: ...

    async def tasks_input(self, session_id: str, text: str) -> QueuedResult: ...

    async def tasks_stop(self, session_id: str) -> QueuedResult: ...


# --- timestamps ---------------------------------------------------------------------------------


def iso_timestamp(unix: float) -> str:
    """``2025-01-31T12:00:00Z`` for a unix time (the form results use)."""
    moment = datetime.fromtimestamp(unix, UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def parse_timestamp(value: object) -> float | None:
    """A result timestamp (ISO 8601 string, or a unix number) as unix seconds; None if unusable."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


# --- params -------------------------------------------------------------------------------------

Validator = Callable[[Mapping[str, Any]], dict[str, Any]]


def _invalid(message: str) -> RpcError:
    return RpcError(INVALID_PARAMS, f"invalid params: {message}")


def _only(params: Mapping[str, Any], *allowed: str) -> None:
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        names = ", ".join(unknown)
        raise _invalid(
            f"unknown param(s) {names[:100]}"
            + (f"; allowed: {', '.join(allowed)}" if allowed else "")
        )


def _seconds(params: Mapping[str, Any], key: str, default: float | None, low: float) -> float:
    if key not in params:
        if default is None:
            raise _invalid(f"{key} is required (seconds)")
        return default
    value = params[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _invalid(f"{key} must be a number of seconds")
    seconds = float(value)
    if not math.isfinite(seconds) or not low <= seconds <= MAX_WAIT:
        raise _invalid(f"{key} must be between {low:g} and {MAX_WAIT:g} seconds")
    return seconds


def _pubkey(params: Mapping[str, Any], key: str) -> PubKeyHex:
    if key not in params:
        raise _invalid(f"{key} is required (an npub1… or 64 hex characters)")
    value = params[key]
    if not isinstance(value, str):
        raise _invalid(f"{key} must be a string (an npub1… or 64 hex characters)")
    try:
        return parse_pubkey(value)
    except NostrKeyError as exc:
        raise _invalid(f"{key} is not a valid public key: {exc}") from None


def _label(params: Mapping[str, Any], key: str) -> str:
    value = params.get(key, "")
    if not isinstance(value, str):
        raise _invalid(f"{key} must be a string")
    label = value.strip()
    if len(label) > MAX_LABEL_LENGTH:
        raise _invalid(f"{key} is longer than {MAX_LABEL_LENGTH} characters")
    if any(ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 for ch in label):
        raise _invalid(f"{key} must not contain control characters")
    return label


def _no_params(params: Mapping[str, Any]) -> dict[str, Any]:
    _only(params)
    return {}


def _pair_open(params: Mapping[str, Any]) -> dict[str, Any]:
    _only(params, "duration")
    return {"duration": _seconds(params, "duration", DEFAULT_PAIR_WINDOW, low=1.0)}


def _pair_wait(params: Mapping[str, Any]) -> dict[str, Any]:
    _only(params, "timeout")
    return {"timeout": _seconds(params, "timeout", None, low=0.0)}


def _pair_npub(params: Mapping[str, Any]) -> dict[str, Any]:
    _only(params, "npub", "label")
    return {"pubkey": _pubkey(params, "npub"), "label": _label(params, "label")}


def _phones_unpair(params: Mapping[str, Any]) -> dict[str, Any]:
    _only(params, "npub")
    return {"pubkey": _pubkey(params, "npub")}


def _sessions_close(params: Mapping[str, Any]) -> dict[str, Any]:
    _only(params, "session_id", "all")
    if ("session_id" in params) == ("all" in params):
        raise _invalid("give either session_id (one session) or all: true (every session)")
    if "all" in params:
        if params["all"] is not True:
            raise _invalid("all must be true (give session_id to close one session)")
        return {"session_id": None, "close_all": True}
    value = params["session_id"]
    if not isinstance(value, str) or not value:
        raise _invalid("session_id must be a non-empty string")
    if len(value) > MAX_SESSION_ID_LENGTH:
        raise _invalid(f"session_id is longer than {MAX_SESSION_ID_LENGTH} characters")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        raise _invalid("session_id must not contain control characters")
    return {"session_id": value, "close_all": False}


@record
class MethodSpec:
    """One control method.

    Attributes:
        name: the wire name.
        attribute: the `ControlHandler` method it calls.
        validate: params → the handler's keyword arguments; raises `RpcError` (invalid params).
        cancel_on_disconnect: cancel the handler call when the client goes away (only for
            methods that merely wait; others finish so that no change is cut in half).
    """

    name: str
    attribute: str
    validate: Validator
    cancel_on_disconnect: bool = False

    def bind(self, handler: ControlHandler) -> Callable[..., Awaitable[Any]]:
        """The handler's coroutine function for this method."""
        method: Callable[..., Awaitable[Any]] = getattr(handler, self.attribute)
        return method


METHODS: Final[Mapping[str, MethodSpec]] = {
    spec.name: spec
    for spec in (
        MethodSpec("status", "status", _no_params),
        MethodSpec("pair.open", "pair_open", _pair_open),
        MethodSpec("pair.wait", "pair_wait", _pair_wait, cancel_on_disconnect=True),
        MethodSpec("pair.npub", "pair_npub", _pair_npub),
        MethodSpec("phones.list", "phones_list", _no_params),
        MethodSpec("phones.unpair", "phones_unpair", _phones_unpair),
        MethodSpec("sessions.list", "sessions_list", _no_params),
        MethodSpec("sessions.close", "sessions_close", _sessions_close),
        MethodSpec("tasks.start", "tasks_start", validate_tasks_start),
        MethodSpec("tasks.watch", "tasks_watch", validate_tasks_watch, cancel_on_disconnect=True),
        MethodSpec("tasks.answer", "tasks_answer", validate_tasks_answer),
        MethodSpec("tasks.report", "tasks_report", validate_tasks_report),
        MethodSpec("tasks.input", "tasks_input", validate_tasks_input),
        MethodSpec("tasks.stop", "tasks_stop", validate_tasks_stop),
    )
}
"""Every method after ``initialize``, by wire name."""
