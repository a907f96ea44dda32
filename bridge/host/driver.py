"""The seam between a session host and the agent it runs: a :class:`Driver` per agent kind.

A session host (:mod:`bridge.host`) is one process per agent session. It owns the journal, the
socket the daemon connects to and every callback that waits for the daemon; the *driver* owns
the agent itself (the Claude Code CLI over its stream-json protocol, the scripted test agent,
later an ACP agent) and knows nothing of sockets, journals or daemons. The host gives the driver
:class:`HostServices`; the driver reports through them and the host calls the driver's methods
when the daemon asks.

Rules every driver keeps:

- **One agent lifetime.** :meth:`Driver.run` starts the agent, emits
  :class:`~bridge.host.events.Ready` or :class:`~bridge.host.events.Failed`, and serves it until
  it exits (the reason is returned: the host journals :class:`~bridge.host.events.Exited`) or
  :meth:`Driver.close` was called (``None`` is returned). A driver never restarts its agent: the
  daemon starts a new host, with ``resume``, which is the one path for every kind of death.
- **Nothing is refused on the daemon's behalf.** A permission prompt or a pre-tool check waits
  in :meth:`HostServices.ask_permission` / :meth:`HostServices.check_tool` for as long as it
  takes — the daemon may be restarting. Only the agent itself may withdraw one (an interrupt),
  by cancelling the wait.
- **Events are durable before they are seen.** :meth:`HostServices.emit` returns once the event
  is in the journal; a driver emits in the order things happened and never from two places at
  once (it runs on the host's one event loop).
- **What the agent took is answerable.** :meth:`Driver.received` says which input uids reached
  the agent: those it took in this host's lifetime, and those its own durable record holds
  (Claude Code's session transcript, the scripted agent's log) from earlier hosts.
- **Lean.** A driver module imports the standard library, ``orjson`` and :mod:`bridge.host` at
  most: no pydantic, no SDK, nothing of the daemon (a test checks).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import field
from typing import Any, Final, Protocol

from bridge.host.events import HostEvent, PermissionAsked
from bridge.records import record
from bridge.sandbox.policy import SandboxPolicy

__all__ = [
    "VERDICTS",
    "Driver",
    "DriverError",
    "DriverFactory",
    "DriverSpec",
    "DriverStatus",
    "HostServices",
    "PermissionAnswer",
    "ToolVerdict",
]

VERDICTS: Final = frozenset({"deny", "ask", "none"})
"""A pre-tool check's decisions: block the call, make the agent ask, or no opinion."""


class DriverError(Exception):
    """The driver cannot do what was asked (not live, bad argument); the text is user-readable."""


@record
class DriverSpec:
    """Everything a driver needs to start (or resume) its agent.

    Attributes:
        session_id: the bridge's session id.
        cwd: the working directory (it exists; the daemon checked).
        permission_mode / model / effort_level: the options the agent starts with.
        sdk_session_id: the agent's conversation id to resume (with ``resume``), or to use for
            a new conversation (None: the driver picks one).
        resume: continue the conversation `sdk_session_id` instead of starting one.
        env: the complete environment of the agent process (provider tokens included; they
            never leave it).
        options: agent-specific settings (Claude Code: ``cli_path``, ``check_tools``; the
            scripted agent: ``log_dir``), JSON values only.
        sandbox: run the agent (and every command the host runs for it) under this
            bubblewrap policy; None runs it unconfined.
    """

    session_id: str
    cwd: str
    permission_mode: str = "plan"
    model: str | None = None
    effort_level: str | None = None
    sdk_session_id: str | None = None
    resume: bool = False
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    options: Mapping[str, Any] = field(default_factory=dict)
    sandbox: SandboxPolicy | None = None


@record
class DriverStatus:
    """Where the agent is now (the host's ``welcome`` tells a daemon that adopts it)."""

    state: str = "idle"
    mode: str | None = None
    model: str | None = None
    effort: str | None = None
    sdk_session_id: str | None = None
    turn_completed: bool = False
    """A turn finished since the agent started."""
    taken: tuple[str, ...] = ()
    """Input uids taken and not answered yet, oldest first."""


@record
class PermissionAnswer:
    """The phone's (or the gate's) answer to a :class:`~bridge.host.events.PermissionAsked`.

    Attributes:
        allow: run the call.
        message: why not (shown to the agent) when denied.
        always: allow this kind of call from now on (the driver adds the agent's own rule).
        updated_input: the call's input as answered (``AskUserQuestion`` answers), or None.
    """

    allow: bool
    message: str = ""
    always: bool = False
    updated_input: Mapping[str, Any] | None = None


@record
class ToolVerdict:
    """The daemon's pre-tool check of one call: ``decision`` is one of :data:`VERDICTS`."""

    decision: str
    reason: str = ""


class HostServices(Protocol):
    """What the host gives its driver (see the module docstring)."""

    def emit(self, event: HostEvent) -> None:
        """Journal `event` durably, then pass it to the daemon if one is connected.

        Raises:
            JournalError: the journal cannot be written; the host stops (fail loud).
        """
        ...

    async def ask_permission(self, request: PermissionAsked) -> PermissionAnswer:
        """Emit `request` and wait, without limit, for the daemon's answer.

        Cancel-safe: cancelling the wait withdraws the request (the agent cancelled it).
        """
        ...

    async def check_tool(
        self, request_id: str, tool_name: str, tool_input: Mapping[str, Any]
    ) -> ToolVerdict:
        """The daemon's pre-tool verdict on one call; waits without limit (not journaled: the
        daemon's gate answers the same way when it asks again). Cancel-safe."""
        ...

    def diff_allowed(self) -> bool:
        """Whether every phone can show diffs (``Edit``/``Write`` entries may carry one)."""
        ...

    def now(self) -> float:
        """Unix time in seconds, for entry timestamps."""
        ...


class Driver(Protocol):
    """One agent, for the lifetime of one host (see the module docstring)."""

    async def run(self) -> str | None:
        """Start the agent and serve it; why it exited, or None after :meth:`close`.

        Emits ``Ready`` or ``Failed`` first. After ``Failed`` it returns the failure's reason.
        """
        ...

    def send_input(self, uid: str, text: str) -> None:
        """Hand one user input to the agent (queued; the agent takes inputs in order).

        Raises:
            DriverError: the agent is not running (not started yet, failed, exited, closing).
        """
        ...

    async def received(self, uids: Collection[str]) -> set[str]:
        """The subset of `uids` the agent took (this host) or recorded (its durable record).

        Raises:
            DriverError: the agent's record exists but cannot be read.
        """
        ...

    async def interrupt(self) -> None:
        """Stop the current turn (a no-op when idle)."""
        ...

    async def set_option(self, option: str, value: str) -> None:
        """Change ``mode`` / ``effort`` / ``model``; emits ``OptionSet`` with the result."""
        ...

    async def close(self, *, interrupt: bool = True) -> None:
        """Stop the agent for good (idempotent); :meth:`run` returns None soon after.

        Args:
            interrupt: end a running turn the way a user's interrupt does first (the session is
                being closed). False when the stop is not the user's (the host was told to stop,
                or cannot go on): the agent is stopped without a word, so that a call it was
                waiting on stays "interrupted, outcome unknown" and no refusal is recorded that
                nobody gave.
        """
        ...

    def status(self) -> DriverStatus:
        """The agent's state now."""
        ...


class DriverFactory(Protocol):
    """``(spec, services) → driver``: how the host builds the driver of its agent kind."""

    def __call__(self, spec: DriverSpec, services: HostServices) -> Driver: ...
