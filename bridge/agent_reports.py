"""What an agent's runner reports about its session, as the engine and the agent drivers both name it.

The drivers (:mod:`bridge.agents`) and the session hosts' journal say these; the engine takes them
as inputs (:mod:`bridge.engine.inputs` puts them in its ``Input`` union). They live below both so
that neither side imports the other: a driver knows what it may report, never the engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bridge.protocol import OutputEntry
from bridge.records import record

__all__ = [
    "AgentAnswered",
    "AgentEnded",
    "AgentEntry",
    "AgentFailed",
    "AgentOptionSet",
    "AgentReady",
    "AgentRecordEvent",
    "AgentReport",
    "AgentRestarted",
    "AgentStateChanged",
    "AgentTookInput",
    "JournalRecord",
    "PermissionRequested",
    "PermissionStillPending",
]


@record
class AgentReady:
    """The runner of a session is up (first start or resume)."""

    session_id: str
    sdk_session_id: str | None = None
    model: str | None = None
    cwd: str | None = None
    sandboxed: bool | None = None
    """Whether the agent runs under the sandbox; None when this report does not say."""


@record
class AgentEntry:
    """The agent produced one transcript line."""

    session_id: str
    entry: OutputEntry


@record
class AgentStateChanged:
    """The session moved between idle / running / waiting_permission / waiting_question."""

    session_id: str
    state: str


@record
class AgentFailed:
    """The runner could not start; before ready this fails the pending create-session."""

    session_id: str
    reason: str


@record
class AgentEnded:
    """The runner is gone for good (after its restarts ran out, or closed on request)."""

    session_id: str
    reason: str


@record
class PermissionRequested:
    """The agent wants to use a tool and asks first (Claude Code's ``can_use_tool``).

    The runner keeps the call waiting until the runtime answers it with
    ``Runner.answer_permission(request_id, …)`` (an ``AnswerPermission`` effect of the engine).
    `request_id` is the tool call's ``tool_use_id`` (the card's id on the wire).
    """

    session_id: str
    request_id: str
    tool_name: str
    tool_input: Mapping[str, Any]
    description: str | None = None
    agent_id: str | None = None


@record
class PermissionStillPending:
    """A permission ask still parked in the session host that a restarted daemon adopted.

    Its card was created (and committed) when the ask first arrived; the engine only rebuilds the
    card in memory so the phone's answer is taken again. Not journaled: the host re-presents it
    to every daemon that connects until it is answered.
    """

    request: PermissionRequested


@record
class AgentTookInput:
    """The agent took this input (its inbox uid) into its conversation: never send it again."""

    session_id: str
    uid: str


@record
class AgentRestarted:
    """The session's agent was resumed in a new session host after its last one ended.

    `entry` is the ``session_restart`` line for the phone; `interrupted` are the inbox uids of
    inputs the agent had taken whose turn never finished — said in the entry, and done with:
    their rows leave the inbox in the same commit as the line, so that neither can be lost
    without the other.
    """

    session_id: str
    entry: OutputEntry
    interrupted: tuple[str, ...] = ()


@record
class AgentAnswered:
    """The agent finished the turns of these inputs (their inbox uids): the rows are done."""

    session_id: str
    uids: tuple[str, ...]


@record
class AgentOptionSet:
    """The runner answered a mode / effort / model change: `value` now in force, or None."""

    session_id: str
    option: str
    requested: str
    value: str | None


AgentRecordEvent = (
    AgentReady
    | AgentEntry
    | AgentStateChanged
    | AgentFailed
    | AgentOptionSet
    | PermissionRequested
    | AgentTookInput
    | AgentAnswered
    | AgentRestarted
)
"""What one record of a session host's journal can say to the engine."""


@record
class JournalRecord:
    """One record of a session host's journal, by its seq (never renumbered).

    The engine applies a record once: it drops seqs up to the session's ``agent_seq`` and commits
    the new one with the record's own effects. `event` is None for a record the engine only
    counts (the agent exited: the runtime restarts it).
    """

    session_id: str
    seq: int
    event: AgentRecordEvent | None


AgentReport = AgentRecordEvent | AgentEnded | PermissionStillPending | JournalRecord
"""Everything a runner hands the runtime: its events and, for a session host, its journal records."""
