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
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bridge.engine.inputs import (
    AgentEnded,
    AgentEntry,
    AgentFailed,
    AgentOptionSet,
    AgentReady,
    AgentStateChanged,
    PermissionRequested,
)

__all__ = ["AgentEvent", "Emit", "Runner", "RunnerError", "RunnerFactory", "SessionSpec"]

AgentEvent = (
    AgentReady
    | AgentEntry
    | AgentStateChanged
    | AgentFailed
    | AgentEnded
    | AgentOptionSet
    | PermissionRequested
)
Emit = Callable[[AgentEvent], None]


class RunnerError(Exception):
    """The runner cannot do what was asked (dead, not started); the message is user-readable."""


@dataclass(frozen=True, slots=True)
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
        """Change ``mode`` / ``effort`` / ``model``; return the value now in force, None if refused."""
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


RunnerFactory = Callable[[str, Emit], Runner]
"""(session id, emit) → a new, not yet started runner."""
