"""The one interface every agent runner implements (Claude Code, the scripted test agent).

A runner owns one agent session: a process (or a script) that takes user inputs and produces
transcript entries. It reports what happens through an ``emit`` callback with the agent events
of :mod:`bridge.engine.inputs` (``AgentReady``, ``AgentEntry``, ``AgentStateChanged``,
``AgentFailed``, ``AgentEnded``); the runtime feeds them to the engine in order.

Exactly-once hand-off. Every input carries a ``uid`` (the inbox row's id). The runtime marks the
row as sent *before* calling :meth:`Runner.send_input`; after a crash, rows marked sent are
checked with :meth:`Runner.received`, which must answer from the agent's own durable record
(the Claude Code session transcript, the scripted agent's log) whether that uid reached the
agent. Rows it has not received are sent again; rows it has are not. That is how an accepted
input runs exactly once across ``kill -9``.

Phases. Every runner is in one :class:`Phase` at a time: ``NEW`` until ``start``, then live
(``STARTING`` / ``READY`` / ``RESTARTING``) until it ``FAILED`` to start, ``ENDED`` or is
``CLOSED`` (final). The two checks every runner makes against its phase live here, so that both
runners refuse in the same words: :func:`check_start` (``start`` runs once, and only for its own
session) and :func:`check_live` (the methods that need a running agent).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection
from dataclasses import field
from pathlib import Path
from typing import Any, Protocol

from bridge.agent_reports import (
    AgentEnded,
    AgentEntry,
    AgentFailed,
    AgentOptionSet,
    AgentReady,
    AgentReport,
    AgentStateChanged,
    PermissionRequested,
)
from bridge.records import record

__all__ = [
    "LIVE_PHASES",
    "AgentEvent",
    "Emit",
    "Phase",
    "Runner",
    "RunnerError",
    "RunnerFactory",
    "SessionSpec",
    "check_live",
    "check_start",
]

AgentEvent = (
    AgentReady
    | AgentEntry
    | AgentStateChanged
    | AgentFailed
    | AgentEnded
    | AgentOptionSet
    | PermissionRequested
)
Emit = Callable[[AgentReport], None]
"""Where a runner's reports go: agent events, and the journal records of a session host
(``JournalRecord``, ``PermissionStillPending``)."""


class RunnerError(Exception):
    """The runner cannot do what was asked (dead, not started); the message is user-readable."""


class Phase(enum.Enum):
    """Where a runner is in its life (see the module docstring)."""

    NEW = "new"
    STARTING = "starting"
    READY = "ready"
    RESTARTING = "restarting"
    FAILED = "failed"
    ENDED = "ended"
    CLOSED = "closed"


LIVE_PHASES: frozenset[Phase] = frozenset({Phase.STARTING, Phase.READY, Phase.RESTARTING})
"""The phases in which a runner takes inputs and option changes."""

_NOT_LIVE = {
    Phase.NEW: "has not been started",
    Phase.FAILED: "failed to start",
    Phase.ENDED: "has ended",
    Phase.CLOSED: "is closed",
}


@record
class SessionSpec:
    """Everything a runner needs to start or resume a session."""

    session_id: str
    cwd: Path
    permission_mode: str = "plan"
    model: str | None = None
    effort_level: str | None = None
    provider_id: str | None = None
    sdk_session_id: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    agent_seq: int = 0
    """The last record of the session host's journal the engine committed (replay after it)."""


class Runner(Protocol):
    """One agent session. Methods are called from the daemon's event loop, one at a time."""

    async def start(self, spec: SessionSpec, *, resume: bool) -> None:
        """Start (or resume) the agent; emit ``AgentReady`` or ``AgentFailed``."""
        ...

    async def send_input(self, uid: str, text: str) -> None:
        """Hand one user input to the agent. Raises :class:`RunnerError` when it is gone."""
        ...

    async def received(self, uids: Collection[str]) -> set[str]:
        """Which of `uids` the agent durably received (crash reconciliation)."""
        ...

    async def interrupt(self) -> None:
        """Stop the current turn (no-op when idle)."""
        ...

    async def set_option(self, option: str, value: str) -> str | None:
        """Ask for a ``mode`` / ``effort`` / ``model`` change.

        The runner reports the outcome itself, as an ``AgentOptionSet`` (its return value is
        not used: a session host reports the change in its journal, possibly after a restart).
        """
        ...

    async def answer_permission(
        self,
        request_id: str,
        allow: bool,
        *,
        message: str = "",
        always: bool = False,
        updated_input: dict[str, Any] | None = None,
    ) -> None:
        """Resolve a pending ``PermissionRequested`` (unknown ids are ignored)."""
        ...

    async def close(self) -> None:
        """Stop the agent and release its resources (idempotent)."""
        ...

    async def detach(self) -> None:
        """The daemon stops but keeps its sessions: let go of the agent, leave it running.

        A runner whose agent cannot outlive the daemon closes it instead.
        """
        ...


RunnerFactory = Callable[[str, Emit], Runner]
"""(session id, emit) → a new, not yet started runner."""


def check_start(agent: str, phase: Phase, session_id: str, spec: SessionSpec) -> None:
    """The guard at the top of :meth:`Runner.start`: a runner starts once, for its own session.

    Args:
        agent: what the runner is called in messages (``"the scripted agent"``).
        phase: the runner's phase now.
        session_id: the session the runner was made for.
        spec: what ``start`` was given.

    Raises:
        RunnerError: ``<agent> is closed``, ``<agent> was already started``, or the session spec
            is for another session.
    """
    if phase is not Phase.NEW:
        raise RunnerError(
            f"{agent} is closed" if phase is Phase.CLOSED else f"{agent} was already started"
        )
    if spec.session_id != session_id:
        raise RunnerError("the session spec is for another session")


def check_live(agent: str, phase: Phase) -> None:
    """The guard of the methods that need a running agent (``send_input``, ``set_option``).

    Raises:
        RunnerError: `phase` is not in :data:`LIVE_PHASES`; the message says which it is
            (``<agent> has not been started`` / ``failed to start`` / ``has ended`` /
            ``is closed``).
    """
    if phase not in LIVE_PHASES:
        raise RunnerError(f"{agent} {_NOT_LIVE[phase]}")
