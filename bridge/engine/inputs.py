"""What happened, as the engine hears it: inputs named for facts (h11/wsproto style).

The runtime turns every I/O happening into one of these and feeds it to the engine, one at a
time. Agent events come from runners (:mod:`bridge.agents`); relay events have already been
verified by the pool (id and signature), which is why they carry a ``VerifiedEvent``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any

from bridge.agent_reports import (
    AgentAnswered,
    AgentEnded,
    AgentEntry,
    AgentFailed,
    AgentOptionSet,
    AgentReady,
    AgentRecordEvent,
    AgentRestarted,
    AgentStateChanged,
    AgentTookInput,
    JournalRecord,
    PermissionRequested,
    PermissionStillPending,
)
from bridge.engine.agents import AgentCheck
from bridge.engine.effects import TaskPolicy
from bridge.nostr.event import VerifiedEvent
from bridge.protocol import GsdState, ModelEntry
from bridge.records import record

__all__ = [
    "AgentAnswered",
    "AgentEnded",
    "AgentEntry",
    "AgentFailed",
    "AgentOptionSet",
    "AgentReady",
    "AgentRecordEvent",
    "AgentRestarted",
    "AgentStateChanged",
    "AgentTookInput",
    "AgentsChecked",
    "CommandEventReceived",
    "CredentialsProbed",
    "FolderCreated",
    "FoldersScanned",
    "GsdStateRead",
    "ImageReceived",
    "ImageRefused",
    "ImageSaved",
    "Input",
    "JournalRecord",
    "ModelsListed",
    "PairingWindowRequested",
    "PermissionRequested",
    "PermissionStillPending",
    "PhonePairedManually",
    "PhoneUnpaired",
    "ProviderProbed",
    "RefreshRequested",
    "SessionCloseRequested",
    "SessionCommitted",
    "SyncChunkSent",
    "TaskCardAnswered",
    "TaskEditsReported",
    "TaskInputRequested",
    "TaskStartRequested",
    "TaskStopRequested",
    "ToolBlocked",
]


@record
class CommandEventReceived:
    """A kind-4515 event addressed to the bridge (command or pairing subscription alike)."""

    event: VerifiedEvent


@record
class PairingWindowRequested:
    """The operator asked (through the control socket) to open a pairing window.

    The runtime draws the random `token` (16 bytes, hex), the engine stays deterministic.
    """

    token: str
    duration: float = 600.0


@record
class PhonePairedManually:
    """``codedeck-bridge pair --npub``: the operator vouches for a phone key."""

    pubkey: str
    label: str


@record
class PhoneUnpaired:
    """``codedeck-bridge unpair``: revoke one phone; nothing more is published to it."""

    pubkey: str


@record
class RefreshRequested:
    """Republish the heartbeat now (a timer, a relay reconnect, or a local request)."""


@record
class TaskStartRequested:
    """The editor (``codedeck-bridge desiide``) starts a task: a session with `policy`.

    The orchestrator chose `session_id` (its task id), so a start it sends again after a lost
    answer finds the session and changes nothing.
    """

    session_id: str
    cwd: str
    instruction: str
    policy: TaskPolicy
    title: str | None = None
    model: str | None = None


@record
class TaskCardAnswered:
    """The editor answers a permission card (``task.approve`` / ``task.reject``).

    `scope` is ``"task"`` for an approval the orchestrator will repeat for exact-match calls
    (recorded in the audit log); `reason` is the rejection's reason, which the model reads.
    """

    session_id: str
    card_id: str
    allow: bool
    scope: str | None = None
    reason: str | None = None


@record
class TaskEditsReported:
    """Every file of an edit proposal is reported (``edits.report``): the review's answer."""

    session_id: str
    card_id: str
    report: tuple[Mapping[str, Any], ...]


@record
class TaskInputRequested:
    """The orchestrator sends the task's agent more text (the failing checks of a ``fix``)."""

    session_id: str
    text: str


@record
class TaskStopRequested:
    """The editor cancels a task (or the orchestrator ends a failed one): deny its cards and
    interrupt its agent. The session stays listed with its transcript; phones may close it."""

    session_id: str


@record
class SessionCloseRequested:
    """``codedeck-bridge sessions close``: end a session as a phone's ``close-session`` would."""

    session_id: str


@record
class FoldersScanned:
    """The workspace scan found these project folders (relative to their root, sorted)."""

    folders: tuple[str, ...]


@record
class FolderCreated:
    """The answer to a ``CreateFolder`` effect."""

    request_id: str
    path: str
    error: str | None = None


@record
class ProviderProbed:
    """The answer to ``ProbeProvider``: None when the probe could not run."""

    phone: str
    profile_id: str
    valid: bool | None


@record
class CredentialsProbed:
    """The answer to ``ProbeAnthropicKey``: None when the probe could not run."""

    phone: str
    valid: bool | None


@record
class GsdStateRead:
    """The answer to ``ReadGsdState``."""

    session_id: str
    state: GsdState


@record
class ImageReceived:
    """A Blossom image downloaded, verified and decrypted."""

    phone: str
    session_id: str
    filename: str
    mime_type: str
    text: str
    data: bytes = field(repr=False)


@record
class ImageRefused:
    """A Blossom download or an image save failed; `reason` is logged."""

    session_id: str
    reason: str


@record
class ImageSaved:
    """The answer to ``SaveImage``: the file's absolute path."""

    session_id: str
    path: str
    text: str


@record
class ModelsListed:
    """The answer to ``ListModels``: the models (may be empty) and the default, if known.

    ``agent`` is the agent the request named (None: a v10 request, Claude Code's models).
    """

    models: tuple[ModelEntry, ...]
    default_model: str | None = None
    agent: str | None = None


@record
class AgentsChecked:
    """The daemon's start-up check of the configured ACP agents finished (one per agent)."""

    checks: tuple[AgentCheck, ...]


@record
class SessionCommitted:
    """HEAD moved in the session's cwd since the session started (a commit landed)."""

    session_id: str


@record
class ToolBlocked:
    """The runner's pre-check refused a tool call on the deny list (logged as a decision)."""

    session_id: str
    tool_name: str
    reasons: tuple[str, ...]
    detail: str


@record
class SyncChunkSent:
    """A ``sync-chunk`` really left for the relays (its publish returned), not just queued.

    The sync's ack wait counts from here (:meth:`~bridge.engine.sync.SyncServer.chunks_sent`),
    so a slow send of many chunks does not trigger needless resends.
    """

    phone: str
    sync_id: str


Input = (
    CommandEventReceived
    | PairingWindowRequested
    | PhonePairedManually
    | PhoneUnpaired
    | RefreshRequested
    | SessionCloseRequested
    | AgentReady
    | AgentEntry
    | AgentStateChanged
    | AgentFailed
    | AgentEnded
    | AgentOptionSet
    | PermissionRequested
    | PermissionStillPending
    | AgentTookInput
    | AgentAnswered
    | AgentRestarted
    | JournalRecord
    | FoldersScanned
    | FolderCreated
    | ProviderProbed
    | CredentialsProbed
    | GsdStateRead
    | ImageReceived
    | ImageRefused
    | ImageSaved
    | ModelsListed
    | AgentsChecked
    | SessionCommitted
    | SyncChunkSent
    | ToolBlocked
    | TaskStartRequested
    | TaskCardAnswered
    | TaskEditsReported
    | TaskInputRequested
    | TaskStopRequested
)
