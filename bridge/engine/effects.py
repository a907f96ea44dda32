"""What the engine asks the runtime to do: effects, and the store operations inside a commit.

The engine is sans-I/O (h11, wsproto): it takes inputs and returns a list of effects, in the
order the runtime must perform them. The rules the runtime follows:

1. Effects run in list order. A :class:`Commit` is applied in ONE SQLite transaction, and every
   effect after it runs only once the commit is durable. This is what makes a command run at
   most once (its :class:`MarkProcessed` commits with its state change) and an acknowledged one
   never lost (its inbox row and its durable replies commit with it).
2. The durable replies of a commit (:attr:`Commit.outbox`) are encrypted, signed and written to
   the outbox table *inside* the transaction, then published after it; a row leaves the outbox
   when a relay accepted it, and is retried on every reconnect until its NIP-40 expiry. A retry
   re-sends the identical signed event, so a phone that deduplicates by id sees it once.
3. A :class:`Publish` outside a commit is best effort: live output (24515, already durable in
   the transcript and recoverable by sync), the heartbeat (30515, republished every minute)
   and sync traffic (which has its own acks and resends).
4. The engine never logs; :class:`Dropped` tells the runtime what to log and why.

Names follow the style guide: effects are orders (``Publish``, ``StartRunner``), inputs are
facts (see :mod:`bridge.engine.inputs`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any

from bridge.protocol import BridgeToPhone, OutputEntry, PushReason
from bridge.records import record

__all__ = [
    "AddInbox",
    "AddTombstone",
    "AdvanceCursor",
    "AnswerPermission",
    "AppendTranscript",
    "CloseRunner",
    "Commit",
    "CreateFolder",
    "DeletePhone",
    "DeleteProviderProfile",
    "DeletePushSubscription",
    "DeletePushSubscriptions",
    "DeleteSession",
    "DeleteTranscript",
    "Dropped",
    "Effect",
    "FetchBlossomImage",
    "InterruptRunner",
    "ListModels",
    "MarkInboxTaken",
    "MarkProcessed",
    "Notify",
    "PairedPhone",
    "ProbeAnthropicKey",
    "ProbeProvider",
    "PruneProcessed",
    "Publish",
    "ReadGsdState",
    "RecordDecision",
    "RemoveInbox",
    "Resubscribe",
    "SaveAgentCursor",
    "SaveAnswer",
    "SaveDeviceConfig",
    "SaveImage",
    "SavePhone",
    "SaveProviderProfile",
    "SavePushSubscription",
    "SaveSession",
    "SendSyncChunk",
    "SendToRunner",
    "SessionRecord",
    "SetCredential",
    "SetRunnerOption",
    "StartRunner",
    "StoreOp",
    "WakePhones",
]

# --- records the engine keeps and the store persists ---------------------------------------


@record
class PairedPhone:
    """A phone allowed to command this bridge. Identity is the pubkey, never a payload claim."""

    pubkey: str
    npub: str
    label: str
    paired_at: str  # ISO-8601, as the wire's PairedPhone


@record
class TaskPolicy:
    """What a Desiide task's session may do beyond its permission mode (``DESIIDE.md``).

    Attributes:
        allowed_tools: the editor tools the task allows (``read_file``, ``propose_edit``, …);
            a call of another one is blocked as ``tool_not_allowed``.
        max_tool_calls: the task's tool-call budget; the call after it is blocked as
            ``budget:maxToolCalls``.
    """

    allowed_tools: tuple[str, ...]
    max_tool_calls: int
    strict: bool = False
    """The editor's strict mode: a call the gate would auto-allow is a card
    (``policy_override:strict_mode``)."""
    judge: bool = False
    """The editor's judge is on: a call the gate would auto-allow is a card labelled
    ``jev:pending`` until the orchestrator's judge lets it go or keeps it for the user."""

    @classmethod
    def from_json(cls, value: object) -> TaskPolicy | None:
        """The policy as stored in a session record (a JSON object), or None if unusable."""
        if not isinstance(value, Mapping):
            return None
        tools = value.get("allowed_tools")
        limit = value.get("max_tool_calls")
        if not isinstance(tools, list | tuple) or not all(isinstance(t, str) for t in tools):
            return None
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
            return None
        return cls(tuple(tools), limit, value.get("strict") is True, value.get("judge") is True)


@record
class SessionRecord:
    """One agent session as the registry keeps it (REFERENCE-BEHAVIOUR §1.11)."""

    session_id: str
    cwd: str
    created_at: str
    last_activity: str
    state: str = "idle"
    title: str | None = None
    project: str = ""
    sdk_session_id: str | None = None
    previous_sdk_session_id: str | None = None
    model: str | None = None
    provider_id: str | None = None
    effort_level: str | None = None
    permission_mode: str | None = None
    committed: bool = False
    context_window: int | None = None
    context_percentage: float | None = None
    seq_high: int = 0
    agent_seq: int = 0
    """The seq of the last record of the session host's journal applied (committed with it)."""
    agent: str = "claude"
    """The agent the session runs (``claude``, or the id of an ``[agents.<id>]`` table)."""
    task: TaskPolicy | None = None
    """Set for the session of a Desiide task: the editor's tools and the task's policy."""
    sandboxed: bool | None = None
    """Whether its agent runs under the sandbox (as its host said); None before it started."""


# --- store operations (only inside a Commit) -------------------------------------------------


@record
class MarkProcessed:
    """Record a command event as processed: a replay of it is then a no-op, forever."""

    event_id: str
    created_at: int


@record
class AdvanceCursor:
    """The newest ``created_at`` processed; the command subscription resumes at it − 5 s."""

    last_seen: int


@record
class SavePhone:
    phone: PairedPhone


@record
class DeletePhone:
    pubkey: str


@record
class SaveSession:
    record: SessionRecord


@record
class DeleteSession:
    session_id: str


@record
class AddTombstone:
    """Remember a closed session id (at most 100 kept, oldest dropped, no duplicates)."""

    session_id: str


@record
class AppendTranscript:
    """Store one transcript line under the seq the engine assigned (never renumbered)."""

    session_id: str
    seq: int
    entry: OutputEntry


@record
class DeleteTranscript:
    session_id: str


@record
class PruneProcessed:
    """Forget processed ids older than `before` (relays no longer hold those events)."""

    before: int


@record
class SaveProviderProfile:
    """Upsert a provider profile (the record holds the token: secret storage)."""

    profile_id: str
    record: dict[str, Any] = field(repr=False)


@record
class DeleteProviderProfile:
    profile_id: str


@record
class SetCredential:
    """Store (or, with None, delete) one credential."""

    name: str
    value: str | None = field(repr=False)


@record
class SaveDeviceConfig:
    phone: str
    config: dict[str, Any]


@record
class RecordDecision:
    """Append one permission verdict to the audit log (labels and a short text, no tool input)."""

    at: str
    session_id: str
    tool: str
    outcome: str
    reasons: tuple[str, ...] = ()
    detail: str | None = None
    call: Mapping[str, Any] | None = None
    """The call judged (``{"tool", "input"}``), kept so that ``decisions.replay`` can judge it
    again; the store masks secrets in it and caps its size."""


@record
class SaveAgentCursor:
    """The session host's journal is applied up to `seq` (committed with that record's effects)."""

    session_id: str
    seq: int


@record
class MarkInboxTaken:
    """The agent took this input: a restart never hands it over again."""

    uid: str


@record
class RemoveInbox:
    """The agent finished the turns of these inputs: their inbox rows are done."""

    uids: tuple[str, ...]


@record
class SaveAnswer:
    """Keep an answer to a parked permission ask until its session host confirms it.

    Committed with the decision that made it, so an answer the daemon decided is delivered even
    if the daemon dies before the host has it (it is sent again at the next connection).
    """

    answer: AnswerPermission


@record
class AddInbox:
    """An accepted input waiting for its runner; `uid` makes the hand-off exactly-once."""

    uid: str
    session_id: str
    text: str
    input_id: str | None


@record
class SavePushSubscription:
    """Keep a phone's Web Push subscription (one per endpoint; the store caps each phone's)."""

    phone: str
    endpoint: str = field(repr=False)
    p256dh: str = field(repr=False)
    auth: str = field(repr=False)


@record
class DeletePushSubscription:
    """Forget one of a phone's push subscriptions (``push-unsubscribe``)."""

    phone: str
    endpoint: str = field(repr=False)


@record
class DeletePushSubscriptions:
    """Forget every push subscription of a phone (it was unpaired)."""

    phone: str


StoreOp = (
    MarkProcessed
    | AdvanceCursor
    | SavePhone
    | DeletePhone
    | SaveSession
    | DeleteSession
    | AddTombstone
    | AppendTranscript
    | DeleteTranscript
    | AddInbox
    | PruneProcessed
    | SaveProviderProfile
    | DeleteProviderProfile
    | SetCredential
    | SaveDeviceConfig
    | RecordDecision
    | SaveAgentCursor
    | MarkInboxTaken
    | RemoveInbox
    | SaveAnswer
    | SavePushSubscription
    | DeletePushSubscription
    | DeletePushSubscriptions
)


# --- effects ---------------------------------------------------------------------------------


@record
class Publish:
    """Send `message` to every phone of `audience` (one NIP-44 event per phone).

    Kind, tags, ``created_at`` and fragmenting are decided by the publish plan
    (:mod:`bridge.engine.publish`), not here.
    """

    message: BridgeToPhone
    audience: tuple[str, ...]


@record
class Commit:
    """Apply `ops` and queue `outbox` in one transaction; later effects wait for it."""

    ops: tuple[StoreOp, ...]
    outbox: tuple[Publish, ...] = ()


@record
class SendSyncChunk:
    """Read the transcript lines of `seq_range` and send them as one ``sync-chunk``.

    The engine decides *which* range to send and when; reading the lines is I/O, so the
    runtime builds the message (missing seqs were pruned and are simply absent).
    """

    phone: str
    session_id: str
    sync_id: str
    seq_range: tuple[int, int]


@record
class Resubscribe:
    """The set of paired phones (or the pairing window) changed: rebuild the subscriptions."""


@record
class StartRunner:
    """Start (or, with `resume`, resume) the agent behind a session.

    For a new session the runtime first resolves ``record.cwd`` inside the workspace roots
    (creating it with ``git init`` when `create_cwd`), then reports ``AgentReady`` with the
    resolved cwd, or ``AgentFailed`` with a readable reason.
    """

    record: SessionRecord
    resume: bool
    create_cwd: bool = False


@record
class CreateFolder:
    """``mkdir -p`` + ``git init`` of `path` (already validated) under `root`; the runtime
    answers with ``FolderCreated``."""

    request_id: str
    root: str
    path: str


@record
class SendToRunner:
    """Hand pending inbox rows of a session to its runner (the runtime reads the inbox)."""

    session_id: str


@record
class InterruptRunner:
    session_id: str


@record
class SetRunnerOption:
    """Change the permission mode, effort or model of a running session."""

    session_id: str
    option: str  # "mode" | "effort" | "model"
    value: str


@record
class AnswerPermission:
    """Answer a pending ``PermissionRequested`` of a runner.

    `always` asks the runner to add a persistent allow rule for this tool (the phone's
    ``permission-res{allow, modifier:"always"}``); `message` is the deny text the agent reads;
    `updated_input` replaces the tool input (e.g. AskUserQuestion answers).
    """

    session_id: str
    request_id: str
    allow: bool
    message: str = ""
    always: bool = False
    updated_input: dict[str, Any] | None = None


@record
class CloseRunner:
    session_id: str


@record
class ProbeProvider:
    """Check a provider token (``POST {baseUrl}/v1/messages``); answer ``ProviderProbed``."""

    phone: str
    profile_id: str
    base_url: str
    token: str = field(repr=False)
    model: str = ""


@record
class ProbeAnthropicKey:
    """Check an Anthropic API key; answer ``CredentialsProbed``."""

    phone: str
    key: str = field(repr=False)


@record
class ReadGsdState:
    """Read the GSD planning state of a session's project; answer ``GsdStateRead``."""

    session_id: str
    cwd: str


@record
class FetchBlossomImage:
    """Download, check and decrypt a Blossom image; answer ``ImageReceived``/``ImageRefused``."""

    phone: str
    session_id: str
    url: str
    sha256: str
    key: str = field(repr=False)
    iv: str = field(repr=False)
    size_bytes: int = 0
    filename: str = ""
    mime_type: str = ""
    text: str = ""


@record
class SaveImage:
    """Write an image under the first workspace root's uploads folder; answer ``ImageSaved``."""

    session_id: str
    name: str
    data: bytes = field(repr=False)
    text: str = ""


@record
class ListModels:
    """Ask the agent which models it offers (a live session's, or a short-lived one's).

    ``agent`` is the agent the request named (None: a v10 request, Claude Code).
    """

    agent: str | None = None


@record
class Notify:
    """Tell local listeners (the CLI waiting in ``pair``) that something happened."""

    event: str
    data: dict[str, str] = field(default_factory=dict)


@record
class WakePhones:
    """Something happened that a phone away from the app should hear of (Web Push).

    The runtime pushes to those of `phones` that have a subscription and no client connected,
    coalescing each phone's events of a few seconds into one push; `card` (session id, request
    id) lets it skip a card answered in the meantime. Nothing else of the event travels.
    """

    reason: PushReason
    phones: tuple[str, ...]
    card: tuple[str, str] | None = None


@record
class Dropped:
    """An input was dropped on purpose; the runtime logs `reason` (never the payload)."""

    reason: str
    event_id: str | None = None
    author: str | None = None


Effect = (
    Publish
    | Commit
    | SendSyncChunk
    | Resubscribe
    | StartRunner
    | CreateFolder
    | SendToRunner
    | InterruptRunner
    | SetRunnerOption
    | AnswerPermission
    | CloseRunner
    | ProbeProvider
    | ProbeAnthropicKey
    | ReadGsdState
    | FetchBlossomImage
    | SaveImage
    | ListModels
    | Notify
    | WakePhones
    | Dropped
)
