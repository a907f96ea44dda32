"""The state one Claude Code session shares between the runner's jobs, named once.

A session has four jobs, each in its own module: the runner's methods (:mod:`.runner`, called
from the daemon's tasks), the session task that connects, serves and restarts the CLI
(:mod:`.lifecycle`), the reader and writer of the CLI's stream (:mod:`.stream`), and the SDK's
permission callbacks (:mod:`.tool_hooks`). They all read and write the same facts (the phase,
the permission mode, the SDK session ids, the pending calls, the ``running`` / ``idle`` state),
so those facts live in one :class:`RunnerState` rather than as attributes of whichever job set
them first. Every job runs on the daemon's event loop, so the state needs no lock.

The rules kept here, once for every job:

- nothing is emitted once the runner is closed (:meth:`RunnerState.emit`);
- ``AgentStateChanged`` goes out only when the state really changes
  (:meth:`RunnerState.set_state`);
- which inputs Claude Code recorded is read from the transcripts of *every* SDK session id the
  session has had (:meth:`RunnerState.recorded`): a conversation that could not be resumed
  leaves its id behind, and its transcript still holds inputs the engine handed over.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from bridge.engine.inputs import AgentEntry, AgentStateChanged
from bridge.protocol import OutputEntry
from bridge.protocol.enums import OutputEntryType

from ..base import AgentEvent, Emit, Phase, SessionSpec, check_live
from .adapter import Adapter
from .channel import ControlChannel
from .environment import claude_config_dir
from .handoff import InputHandoff
from .permissions import PermissionBroker, ToolOrder
from .transcript import received_uuids, transcript_paths

__all__ = ["AGENT_NAME", "CLOSE_DENY_MESSAGE", "RunnerState", "iso_timestamp", "short_reason"]

AGENT_NAME: Final = "the Claude Code session"
"""How :class:`~bridge.agents.base.RunnerError` messages name the session."""
CLOSE_DENY_MESSAGE: Final = "The session was closed"
"""Why a tool call was denied when the runner closed (or was closing as the call came in)."""
_MAX_REASON: Final = 300


def iso_timestamp(unix: float) -> str:
    """`unix` seconds as ISO-8601 UTC with milliseconds and ``Z`` (JavaScript's ``toISOString``)."""
    return datetime.fromtimestamp(unix, tz=UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def short_reason(exc: BaseException) -> str:
    """The first line of `exc` (or its type), short enough for an ``AgentFailed`` reason."""
    lines = str(exc).strip().splitlines()
    return (lines[0] if lines else type(exc).__name__)[:_MAX_REASON]


class RunnerState:
    """Everything the jobs of one session share (see the module docstring).

    Args:
        session_id: the bridge's session id.
        emit: where agent events go.
        clock: unix seconds, for entry timestamps.
        base_env: the environment sessions start from; None = ``os.environ`` read when needed.
        config_dir: a forced ``CLAUDE_CONFIG_DIR`` (where transcripts are looked up first).
        diff_allowed: whether the diff gate is open (asked at each Edit/Write/MultiEdit call).
    """

    def __init__(
        self,
        session_id: str,
        emit: Emit,
        *,
        clock: Callable[[], float],
        base_env: Mapping[str, str] | None,
        config_dir: Path | None,
        diff_allowed: Callable[[], bool],
    ) -> None:
        self.session_id = session_id
        self.clock = clock
        self.base_env = dict(base_env) if base_env is not None else None
        self._emit_callback = emit
        # The pieces each job drives (see their modules).
        self.adapter = Adapter(diff_allowed=diff_allowed)
        self.broker = PermissionBroker()
        self.inputs = InputHandoff()
        self.controls = ControlChannel()
        self.tool_order = ToolOrder()
        # Where the session is.
        self.phase = Phase.NEW
        self.stop = asyncio.Event()  # set by close: the session task winds down
        self.state = "idle"  # as last reported with AgentStateChanged
        self.turn_completed = False  # a result arrived since the last connect
        # The conversation and the process.
        self.spec: SessionSpec | None = None
        self.sdk_session_id: str | None = None
        self.previous_ids: list[str] = []  # SDK session ids that could not be resumed
        self.lookup_dir: Path | None = config_dir  # the config dir the CLI last ran with
        self.server_info: dict[str, Any] | None = None
        self.pid: int | None = None
        # The options in force (and the mode change we asked for, whose report is not news).
        self.mode = "plan"
        self.expected_mode: str | None = None
        self.model: str | None = None
        self.applied_model: str | None = None  # the CLI's own choice when `model` is None
        self.effort: str | None = None

    @property
    def sid(self) -> str:
        """The session id as logs show it."""
        return self.session_id[:8]

    def require_live(self) -> None:
        """Raises :class:`~bridge.agents.base.RunnerError` unless the session is running."""
        check_live(AGENT_NAME, self.phase)

    def emit(self, event: AgentEvent) -> None:
        """Hand `event` on, unless the runner is closed."""
        if self.phase is not Phase.CLOSED:
            self._emit_callback(event)

    def set_state(self, state: str) -> None:
        """Report ``running`` / ``idle`` / ``waiting_*`` when it changes."""
        if state != self.state:
            self.state = state
            self.emit(AgentStateChanged(self.session_id, state))

    def entry(self, entry_type: OutputEntryType, content: str, metadata: dict[str, Any]) -> None:
        """Emit one transcript entry of the runner's own (a ``system`` line about a restart)."""
        timestamp = iso_timestamp(self.clock())
        entry = OutputEntry(
            entryType=entry_type, content=content, timestamp=timestamp, metadata=metadata
        )
        self.emit(AgentEntry(self.session_id, entry))

    def recorded(self) -> set[str]:
        """The input uuids in the transcripts of every SDK session id of this session (blocking)."""
        ids = [*self.previous_ids]
        if self.sdk_session_id:
            ids.append(self.sdk_session_id)
        stored = self.spec.sdk_session_id if self.spec is not None else None
        if stored and stored not in ids:
            ids.insert(0, stored)
        config_dir = self.lookup_dir or claude_config_dir(self.base_env or os.environ)
        return received_uuids(transcript_paths(config_dir, ids))
