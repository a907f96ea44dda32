"""The bridge engine: every input of the daemon in, the ordered effects out.

Theory of operation. The runtime feeds one input at a time (:mod:`bridge.engine.inputs`) with
the current unix time, and performs the returned effects (:mod:`bridge.engine.effects`) in
order. Timers are data: the runtime sleeps until :meth:`Engine.next_deadline` and calls
:meth:`Engine.tick`.

A command's effects always start with one :class:`Commit` holding ``MarkProcessed`` (and the
cursor) together with the command's own state changes and durable replies; that is the
exactly-once rule of the design (ARCHITECTURE.md §4, effects module docstring). Live output is
published after the transcript line it carries is committed.

What this engine answers (v10): pairing (window and ``pair-request``, manual pairing, unpair),
the heartbeat, ``create-session``, ``input``, ``close-session``, ``refresh-sessions``,
``interrupt``, ``mode`` / ``effort`` / ``model``, ``create-folder``, ``sync-request`` /
``sync-ack``. Other commands are recorded as processed and dropped with a log line until the
features behind them exist; their capabilities are not advertised.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from bridge.engine.accounts import Accounts
from bridge.engine.attachments import Attachments
from bridge.engine.broker import Broker, BrokerResult
from bridge.engine.credentials import Credentials
from bridge.engine.effects import (
    AddInbox,
    AddTombstone,
    AdvanceCursor,
    AnswerPermission,
    AppendTranscript,
    CloseRunner,
    Commit,
    CreateFolder,
    DeletePhone,
    DeleteSession,
    DeleteTranscript,
    Dropped,
    Effect,
    InterruptRunner,
    ListModels,
    MarkProcessed,
    Notify,
    PairedPhone,
    PruneProcessed,
    Publish,
    ReadGsdState,
    RecordDecision,
    Resubscribe,
    SavePhone,
    SaveSession,
    SendToRunner,
    SessionRecord,
    SetRunnerOption,
    StartRunner,
    StoreOp,
)
from bridge.engine.ingest import PROCESSED_RETENTION_SECONDS, Decoded, Decrypt, IngestGate
from bridge.engine.inputs import (
    AgentEnded,
    AgentEntry,
    AgentFailed,
    AgentOptionSet,
    AgentReady,
    AgentStateChanged,
    CommandEventReceived,
    CredentialsProbed,
    FolderCreated,
    FoldersScanned,
    GsdStateRead,
    ImageReceived,
    ImageRefused,
    ImageSaved,
    Input,
    ModelsListed,
    PairingWindowRequested,
    PermissionRequested,
    PhonePairedManually,
    PhoneUnpaired,
    ProviderProbed,
    RefreshRequested,
    SessionCommitted,
    ToolBlocked,
)
from bridge.engine.pairing import NackBudget, PairingWindow, check_token
from bridge.engine.providers import ProviderProfile
from bridge.engine.sessions import (
    PENDING_STATE,
    Registry,
    check_folder_path,
    title_from_input,
    to_remote_info,
)
from bridge.engine.sync import SyncServer
from bridge.engine.timefmt import iso
from bridge.engine.uploads import injected_text
from bridge.nostr.event import VerifiedEvent
from bridge.nostr.filters import Filter
from bridge.nostr.keys import hex_to_npub
from bridge.protocol import (
    CHUNKED,
    CUSTOM_PROVIDERS,
    DIFF,
    FOLDERS,
    GSD,
    IMAGES,
    MODELS,
    PROTOCOL_VERSION,
    SYNC_V1,
    USAGE,
    BridgeToPhone,
    CloseSessionAckMessage,
    CloseSessionCommand,
    CreateFolderCommand,
    CreateSessionCommand,
    EffortCommand,
    EffortConfirmedMessage,
    FolderAckMessage,
    GsdRequestCommand,
    GsdStateMessage,
    InputAckMessage,
    InputCommand,
    InputFailedMessage,
    InterruptCommand,
    KeypressCommand,
    ModeCommand,
    ModeConfirmedMessage,
    ModelCommand,
    ModelConfirmedMessage,
    ModelsMessage,
    ModelsRequestCommand,
    OutputEntry,
    OutputMessage,
    PairAckMessage,
    PairRequestCommand,
    PermissionResCommand,
    PhoneToBridge,
    ProviderProfilesRequestCommand,
    QuestionInputCommand,
    RefreshSessionsCommand,
    RemoteSessionInfo,
    SessionFailedMessage,
    SessionPendingMessage,
    SessionReadyMessage,
    SessionsMessage,
    SetCredentialsCommand,
    SetDeviceConfigCommand,
    SetProviderProfileCommand,
    SyncAckCommand,
    SyncRequestCommand,
    UploadImageBlossomCommand,
    UploadImageChunkedCommand,
    UsageData,
    UsageMessage,
    UsageRequestCommand,
)
from bridge.protocol.kinds import COMMAND_KIND

__all__ = ["BRIDGE_CAPABILITIES", "Engine", "EngineConfig", "EngineState", "iso"]

BRIDGE_CAPABILITIES: tuple[str, ...] = (
    SYNC_V1,
    FOLDERS,
    GSD,
    IMAGES,
    USAGE,
    MODELS,
    DIFF,
    CUSTOM_PROVIDERS,
    CHUNKED,
)
"""What this bridge really implements today (a heartbeat never advertises more)."""

NO_MODELS_ERROR = "No live Claude session answered — start or open a session and try again."
HEARTBEAT_INTERVAL = 60.0
HEARTBEAT_DEBOUNCE = 1.0
"""Changes within a second share one heartbeat (keeps its strictly increasing clock real)."""
PRUNE_INTERVAL = 60.0


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """What the engine knows of its host (from the settings)."""

    bridge_pubkey: str
    machine: str
    host: str = "cli"
    relays: tuple[str, ...] = ()
    roots: tuple[str, ...] = ()
    capabilities: tuple[str, ...] = BRIDGE_CAPABILITIES
    heartbeat_interval: float = HEARTBEAT_INTERVAL
    heartbeat_debounce: float = HEARTBEAT_DEBOUNCE
    home: str = "/"
    """The user's home directory (the risk gate guards it)."""
    env_api_key: str | None = field(default=None, repr=False)
    """The daemon environment's ``ANTHROPIC_API_KEY`` (it wins over a stored key)."""


@dataclass(frozen=True, slots=True)
class EngineState:
    """Everything the engine needs from the store at boot."""

    phones: Sequence[PairedPhone] = ()
    last_seen: int = 0
    processed: Mapping[str, int] = field(default_factory=dict)
    sessions: Sequence[SessionRecord] = ()
    tombstones: Sequence[str] = ()
    providers: Sequence[ProviderProfile] = ()
    credentials: Credentials | None = None


class Engine:
    """The sans-I/O bridge.

    Args:
        config: host facts.
        state: what the store holds (loaded by the runtime at boot).
        decrypt: NIP-44 decrypt with our key for a given author (see ``ingest.Decrypt``).
        new_id: a fresh random id (UUID4 text) — sessions, syncs, inbox rows.
        now: the boot time (unix seconds), to schedule the first timers.
    """

    def __init__(
        self,
        config: EngineConfig,
        state: EngineState,
        *,
        decrypt: Decrypt,
        new_id: Callable[[], str],
        now: float,
    ) -> None:
        self.config = config
        self._new_id = new_id
        self.phones: dict[str, PairedPhone] = {p.pubkey: p for p in state.phones}
        self.ingest = IngestGate(config.bridge_pubkey, state.processed, state.last_seen, decrypt)
        self.registry = Registry(state.sessions, state.tombstones)
        self.sync = SyncServer()
        self.accounts = Accounts(
            config.machine, state.providers, state.credentials, config.env_api_key
        )
        self.attachments = Attachments()
        self.broker = Broker(config.home)
        self._meta_applied: set[str] = set()
        self.session_cost: dict[str, float] = {}
        """The cumulative ``total_cost_usd`` of each session's last result (for ``usage``)."""
        self.window: PairingWindow | None = None
        self._nacks = NackBudget()
        self.folders: tuple[str, ...] = ()
        self.phone_caps: dict[str, tuple[str, ...]] = {}
        self._alive: set[str] = set()
        self._dead: set[str] = set()
        """Sessions whose runner ended for good (until a resume at the next boot)."""
        self._heartbeat_at = now
        self._dirty_since: float | None = None
        self._prune_at = now + PRUNE_INTERVAL
        self.last_command_at: float | None = None

    # --- boot and shutdown ------------------------------------------------------------------------

    def boot(self, now: float) -> list[Effect]:
        """Resume every listed session, finish pending creations, announce ourselves."""
        effects: list[Effect] = []
        for record in self.registry.all():
            if record.state == PENDING_STATE:
                effects.append(StartRunner(record, resume=False))
            else:
                record = self.registry.update(record.session_id, state="idle") or record
                effects.append(StartRunner(record, resume=True))
        effects.extend(self._heartbeat(now))
        return effects

    def shutdown(self, now: float) -> list[Effect]:
        """Close the window, abort syncs, say goodbye: every session offline, machine offline."""
        self.window = None
        self.sync.abort_all()
        effects: list[Effect] = [CloseRunner(r.session_id) for r in self.registry.all()]
        self._alive.clear()
        if self.phones:
            effects.append(Publish(self._sessions_message(offline=True), self._audience()))
        return effects

    # --- queries for the runtime ------------------------------------------------------------------

    def command_filters(self, now: float) -> list[Filter]:
        """Filters of the standing command subscription; empty while no phone is paired."""
        if not self.phones:
            return []
        # `authors` keeps strangers' events on the relay. rust-nostr's LMDB store answers
        # `authors` + `#p` with holes once more than 500 match; the connection's backlog
        # bisection (bridge.nostr.backlog) still gets every command.
        return [
            Filter(
                kinds=(COMMAND_KIND,),
                authors=tuple(sorted(self.phones)),
                since=max(0, self.ingest.since(now)),
                tags={"p": (self.config.bridge_pubkey,)},
            )
        ]

    def pairing_filters(self, now: float) -> list[Filter]:
        """Filters of the pairing subscription (no authors); empty when no window is open."""
        if self.window is None or not self.window.is_open(now):
            return []
        return [
            Filter(
                kinds=(COMMAND_KIND,),
                since=max(0, self.window.since),
                tags={"p": (self.config.bridge_pubkey,)},
            )
        ]

    def is_alive(self, session_id: str) -> bool:
        return session_id in self._alive

    def next_deadline(self) -> float | None:
        deadlines = [self._heartbeat_at if self.phones else None, self._prune_at]
        if self._dirty_since is not None and self.phones:
            deadlines.append(self._dirty_since + self.config.heartbeat_debounce)
        if self.window is not None:
            deadlines.append(self.window.expires_at)
        deadlines.append(self.sync.next_deadline())
        deadlines.append(self.attachments.next_deadline())
        deadlines.append(self.broker.next_deadline())
        return min((d for d in deadlines if d is not None), default=None)

    # --- inputs -----------------------------------------------------------------------------------

    def tick(self, now: float) -> list[Effect]:
        effects: list[Effect] = list(self.sync.tick(now))
        effects.extend(self.attachments.tick(now))
        expired = self.broker.expire(now)
        if expired.answers:
            effects.extend(self._broker_effects(None, expired, now))
        if self.window is not None and not self.window.is_open(now):
            self.window = None
            effects.append(Resubscribe())
            effects.append(Notify("pairing-closed", {"reason": "expired"}))
        if self.phones and (
            now >= self._heartbeat_at
            or (
                self._dirty_since is not None
                and now >= self._dirty_since + self.config.heartbeat_debounce
            )
        ):
            effects.extend(self._heartbeat(now))
        if now >= self._prune_at:
            self._prune_at = now + PRUNE_INTERVAL
            self.ingest.prune(now)
            effects.append(Commit((PruneProcessed(int(now) - PROCESSED_RETENTION_SECONDS),)))
        given_up = self.ingest.take_given_up()  # groups the prune's sweep let expire
        if given_up:
            effects.append(Commit(tuple(self._record_ids(given_up))))
        return effects

    def handle(self, event: Input, now: float) -> list[Effect]:
        """One input → its effects (in the order the runtime must perform them)."""
        match event:
            case CommandEventReceived():
                return self._on_command_event(event, now)
            case AgentEntry():
                return self._on_agent_entry(event, now)
            case AgentReady():
                return self._on_agent_ready(event, now)
            case AgentStateChanged():
                return self._on_agent_state(event, now)
            case AgentFailed():
                return self._on_agent_failed(event, now)
            case AgentEnded():
                return self._on_agent_ended(event, now)
            case AgentOptionSet():
                return self._on_option_set(event, now)
            case PairingWindowRequested():
                self.window = PairingWindow(event.token, now, now + event.duration)
                return [Resubscribe()]
            case PhonePairedManually():
                return self._pair(event.pubkey, event.label, now, ops=(), reply=None)
            case PhoneUnpaired():
                return self._unpair(event.pubkey, now)
            case RefreshRequested():
                return self._heartbeat(now)
            case FoldersScanned():
                if event.folders != self.folders:
                    self.folders = event.folders
                    self._mark_dirty(now)
                return []
            case PermissionRequested():
                return self._on_permission_requested(event, now)
            case ToolBlocked():
                decision = RecordDecision(
                    at=iso(now),
                    session_id=event.session_id,
                    tool=event.tool_name,
                    outcome="block",
                    reasons=event.reasons,
                    detail=event.detail,
                )
                return [Commit((decision,))]
            case SessionCommitted():
                record = self.registry.get(event.session_id)
                if record is None or record.committed:
                    return []
                record = self.registry.update(record.session_id, committed=True) or record
                self._mark_dirty(now)
                return [Commit((SaveSession(record),))]
            case ModelsListed():
                if event.models:
                    models = ModelsMessage(
                        models=list(event.models), defaultModel=event.default_model
                    )
                else:
                    models = ModelsMessage(models=[], error=NO_MODELS_ERROR)
                return [Commit((), outbox=(Publish(models, self._audience()),))]
            case ProviderProbed():
                return self.accounts.provider_probed(
                    event.phone, event.profile_id, event.valid, self._audience()
                )
            case CredentialsProbed():
                return self.accounts.credentials_probed(event.phone, event.valid)
            case GsdStateRead():
                if self.registry.get(event.session_id) is None:
                    return []
                message = GsdStateMessage(sessionId=event.session_id, gsd=event.state)
                return [Publish(message, self._audience())]
            case ImageReceived():
                return self.attachments.ready(
                    event.session_id, event.filename, event.mime_type, event.text, event.data, now
                )
            case ImageRefused():
                return [Dropped(f"image for {event.session_id[:8]} refused: {event.reason}")]
            case ImageSaved():
                return self._on_image_saved(event, now)
            case FolderCreated():
                ack = FolderAckMessage(
                    requestId=event.request_id,
                    success=event.error is None,
                    path=event.path if event.error is None else None,
                    error=event.error,
                )
                if event.error is None:
                    self._mark_dirty(now)
                return [Commit((), outbox=(Publish(ack, self._audience()),))]
        raise AssertionError(f"unhandled input {event!r}")  # pragma: no cover

    # --- commands ---------------------------------------------------------------------------------

    def _on_command_event(self, received: CommandEventReceived, now: float) -> list[Effect]:
        effects = self._admit_command(received, now)
        given_up = self.ingest.take_given_up()
        if given_up:
            effects.append(Commit(tuple(self._record_ids(given_up))))
        return effects

    def _admit_command(self, received: CommandEventReceived, now: float) -> list[Effect]:
        event = received.event
        paired = event.pubkey in self.phones
        window_open = self.window is not None and self.window.is_open(now)
        if not paired and not window_open:
            return [Dropped("author is not a paired phone", event.id, event.pubkey)]
        verdict = self.ingest.admit(event, now, paired=paired)
        if not isinstance(verdict, Decoded):
            effects: list[Effect] = []
            if verdict.mark:
                effects.append(Commit(tuple(self._record(event, verdict.fragments))))
            effects.append(Dropped(verdict.reason, event.id, event.pubkey))
            return effects
        marks = self._record(event, verdict.fragments)
        command = verdict.command
        if not paired:
            if not isinstance(command, PairRequestCommand):
                return [
                    Commit(tuple(marks)),
                    Dropped("stranger sent a non-pairing command", event.id),
                ]
            return self._on_pair_request(command, verdict, now, marks)
        cursor = self.ingest.advance(event.created_at, now)
        if cursor is not None:
            marks.append(AdvanceCursor(cursor))
        self.phone_caps[event.pubkey] = tuple(command.caps or ())
        self.last_command_at = now
        if verdict.stale:
            return self._on_stale(command, verdict, marks)
        return self._dispatch(command, verdict, now, marks)

    def _record(
        self, event: VerifiedEvent, fragments: tuple[tuple[str, int], ...]
    ) -> list[StoreOp]:
        """Remember the event (and its group's other fragments) as processed; the store ops."""
        return self._record_ids(((event.id, event.created_at), *fragments))

    def _record_ids(self, ids: Iterable[tuple[str, int]]) -> list[StoreOp]:
        marks: list[StoreOp] = []
        for event_id, created_at in ids:
            self.ingest.remember(event_id, created_at)
            marks.append(MarkProcessed(event_id, created_at))
        return marks

    def _on_stale(
        self, command: PhoneToBridge, verdict: Decoded, marks: list[StoreOp]
    ) -> list[Effect]:
        reason = f"stale {command.type} (created {verdict.created_at}), not executed"
        if isinstance(command, InputCommand) and command.inputId:
            failed = InputFailedMessage(
                sessionId=command.sessionId, reason="expired", inputId=command.inputId
            )
            return [
                Commit(tuple(marks), outbox=(Publish(failed, self._audience()),)),
                Dropped(reason, verdict.event_id),
            ]
        return [Commit(tuple(marks)), Dropped(reason, verdict.event_id)]

    def _dispatch(
        self, command: PhoneToBridge, verdict: Decoded, now: float, marks: list[StoreOp]
    ) -> list[Effect]:
        phone = verdict.author
        match command:
            case InputCommand():
                return self._on_input(command, now, marks)
            case CreateSessionCommand():
                return self._on_create_session(command, now, marks)
            case CloseSessionCommand():
                return self._on_close_session(command.sessionId, now, marks)
            case RefreshSessionsCommand():
                return [Commit(tuple(marks)), *self._heartbeat(now)]
            case InterruptCommand():
                denied = self.broker.deny_all(
                    command.sessionId, "Interrupted by the user.", now, "interrupted"
                )
                effects = self._broker_effects(command.sessionId, denied, now, marks)
                if command.sessionId in self._alive:
                    effects.append(InterruptRunner(command.sessionId))
                return effects
            case ModeCommand() | EffortCommand() | ModelCommand():
                return self._on_option(command, marks)
            case CreateFolderCommand():
                checked = check_folder_path(command.path, command.root, self.config.roots)
                if isinstance(checked, str):
                    ack = FolderAckMessage(
                        requestId=command.requestId, success=False, error=checked
                    )
                    return [Commit(tuple(marks), outbox=(Publish(ack, self._audience()),))]
                root, rel = checked
                return [Commit(tuple(marks)), CreateFolder(command.requestId, root, rel)]
            case SyncRequestCommand():
                record = self.registry.get(command.sessionId)
                if record is None or record.state == PENDING_STATE:
                    return [Commit(tuple(marks)), Dropped("sync-request for an unknown session")]
                sync_effects = self.sync.request(
                    phone,
                    command.sessionId,
                    [tuple(r) for r in command.haveRanges],
                    record.seq_high,
                    self._new_id(),
                    now,
                )
                return [Commit(tuple(marks)), *sync_effects]
            case SyncAckCommand():
                return [
                    Commit(tuple(marks)),
                    *self.sync.ack(phone, command.syncId, tuple(command.range), now),
                ]
            case PairRequestCommand():
                return self._on_pair_request(command, verdict, now, marks)
            case ModelsRequestCommand():
                return [Commit(tuple(marks)), ListModels()]
            case UsageRequestCommand():
                record = self.registry.get(command.sessionId)
                if record is None or record.state == PENDING_STATE:
                    return [Commit(tuple(marks)), Dropped("usage-request for an unknown session")]
                if record.provider_id is not None:
                    # Usage is Anthropic's price table and subscription windows: nothing for a
                    # provider-bound session beats a wrong number (PROTOCOL.md §13).
                    return [Commit(tuple(marks))]
                usage = UsageData(
                    available=False,
                    subscriptionType=None,
                    sessionCostUsd=self.session_cost.get(record.session_id),
                    fetchedAt=iso(now),
                )
                message = UsageMessage(sessionId=record.session_id, usage=usage)
                return [Commit(tuple(marks)), Publish(message, self._audience())]
            case PermissionResCommand():
                result = self.broker.permission_response(
                    command.sessionId, command.requestId, command.allow, command.modifier, now
                )
                if result is None:
                    return [Commit(tuple(marks)), Dropped("permission-res for no pending card")]
                return self._broker_effects(command.sessionId, result, now, marks)
            case KeypressCommand():
                return self._on_keypress(command, now, marks)
            case QuestionInputCommand():
                answered = self.broker.answer_question(
                    command.sessionId, text=command.text, now=now
                )
                if answered is not None:
                    return self._broker_effects(command.sessionId, answered, now, marks)
                as_input = InputCommand(sessionId=command.sessionId, text=command.text)
                return self._on_input(as_input, now, marks)
            case SetProviderProfileCommand():
                return self.accounts.set_provider_profile(
                    command, phone, now, marks, self._audience
                )
            case ProviderProfilesRequestCommand():
                return self.accounts.profiles_for(phone, marks)
            case SetCredentialsCommand():
                return self.accounts.set_credentials(command, phone, marks)
            case SetDeviceConfigCommand():
                return self.accounts.set_device_config(command, phone, marks)
            case GsdRequestCommand():
                record = self.registry.get(command.sessionId)
                if record is None or record.state == PENDING_STATE:
                    return [Commit(tuple(marks)), Dropped("gsd-request for an unknown session")]
                return [Commit(tuple(marks)), ReadGsdState(record.session_id, record.cwd)]
            case UploadImageBlossomCommand() | UploadImageChunkedCommand():
                record = self.registry.get(command.sessionId)
                if record is None or record.state == PENDING_STATE:
                    return [Commit(tuple(marks)), Dropped("image upload for an unknown session")]
                if isinstance(command, UploadImageBlossomCommand):
                    return [Commit(tuple(marks)), *self.attachments.blossom(command, phone)]
                return [Commit(tuple(marks)), *self.attachments.chunk(command, phone, now)]
        return [
            Commit(tuple(marks)),
            Dropped(f"{command.type} is not supported by this bridge yet", verdict.event_id),
        ]

    def _on_input(self, command: InputCommand, now: float, marks: list[StoreOp]) -> list[Effect]:
        record = self.registry.get(command.sessionId)
        # A listed session whose runner is (re)starting takes input: the inbox holds it until the
        # runner reports ready. Only a runner that ended for good refuses it.
        if record is None or record.state == PENDING_STATE or command.sessionId in self._dead:
            reason = "no-session" if record is None or record.state == PENDING_STATE else "error"
            failed = InputFailedMessage(
                sessionId=command.sessionId, reason=reason, inputId=command.inputId
            )
            return [Commit(tuple(marks), outbox=(Publish(failed, self._audience()),))]
        if self.broker.question_open(record.session_id) is not None:
            return self._input_answers_question(record, command, now, marks)
        return self._accept_input(record, command.text, command.text, command.inputId, now, marks)

    def _input_answers_question(
        self, record: SessionRecord, command: InputCommand, now: float, marks: list[StoreOp]
    ) -> list[Effect]:
        """While a question card is open, typed text answers it (it is not a new prompt)."""
        entry = OutputEntry(
            entryType="text", content=command.text, timestamp=iso(now), metadata={"role": "user"}
        )
        seq = record.seq_high + 1
        record = self.registry.update(record.session_id, seq_high=seq) or record
        answered = self.broker.answer_question(record.session_id, text=command.text, now=now)
        effects = self._broker_effects(
            record.session_id,
            answered or BrokerResult(),
            now,
            [*marks, AppendTranscript(record.session_id, seq, entry)],
        )
        commit = effects[0]
        assert isinstance(commit, Commit)
        if command.inputId:
            ack = InputAckMessage(sessionId=record.session_id, inputId=command.inputId)
            effects[0] = Commit(commit.ops, outbox=(Publish(ack, self._audience()),))
        output = OutputMessage(sessionId=record.session_id, seq=seq, entry=entry)
        effects.insert(1, Publish(output, self._audience()))
        return effects

    def _accept_input(
        self,
        record: SessionRecord,
        shown: str,
        sent: str,
        input_id: str | None,
        now: float,
        marks: list[StoreOp],
    ) -> list[Effect]:
        """The user entry (`shown`, before the agent's reply), the inbox row (`sent`), the ack."""
        changes: dict[str, object] = {"last_activity": iso(now)}
        if record.title is None and (title := title_from_input(shown)) is not None:
            changes["title"] = title
        entry = OutputEntry(
            entryType="text", content=shown, timestamp=iso(now), metadata={"role": "user"}
        )
        seq = record.seq_high + 1
        record = self.registry.update(record.session_id, seq_high=seq, **changes) or record
        outbox: tuple[Publish, ...] = ()
        if input_id:
            ack = InputAckMessage(sessionId=record.session_id, inputId=input_id)
            outbox = (Publish(ack, self._audience()),)
        ops = [
            *marks,
            AppendTranscript(record.session_id, seq, entry),
            SaveSession(record),
            AddInbox(self._new_id(), record.session_id, sent, input_id),
        ]
        if "title" in changes:
            self._mark_dirty(now)
        return [
            Commit(tuple(ops), outbox=outbox),
            Publish(
                OutputMessage(sessionId=record.session_id, seq=seq, entry=entry), self._audience()
            ),
            SendToRunner(record.session_id),
        ]

    # --- permission cards -----------------------------------------------------------------------

    def _on_permission_requested(self, event: PermissionRequested, now: float) -> list[Effect]:
        record = self.registry.get(event.session_id)
        if record is None:
            return [AnswerPermission(event.session_id, event.request_id, False, "No such session.")]
        result = self.broker.request(
            event.session_id,
            event.request_id,
            event.tool_name,
            event.tool_input,
            mode=record.permission_mode or "default",
            cwd=record.cwd,
            roots=self.config.roots,
            description=event.description,
            agent_id=event.agent_id,
            now=now,
        )
        return self._broker_effects(event.session_id, result, now)

    def _on_keypress(
        self, command: KeypressCommand, now: float, marks: list[StoreOp]
    ) -> list[Effect]:
        result: BrokerResult | None = None
        if command.context == "plan-approval":
            result = self.broker.plan_key(command.sessionId, command.key, now)
        elif (
            command.context == "question"
            and command.key.isascii()
            and command.key.isdigit()
            and len(command.key) <= 4
        ):
            result = self.broker.answer_question(
                command.sessionId, option=int(command.key), now=now
            )
        if result is None:
            return [
                Commit(tuple(marks)),
                Dropped(f"keypress {command.context or 'without context'} ignored"),
            ]
        return self._broker_effects(command.sessionId, result, now, marks)

    def _broker_effects(
        self,
        session_id: str | None,
        result: BrokerResult,
        now: float,
        marks: Sequence[StoreOp] = (),
    ) -> list[Effect]:
        """Card entries (durable, then live), the audit rows, then the answers to the runner."""
        ops: list[StoreOp] = [*marks, *result.decisions]
        publishes: list[Effect] = []
        record = self.registry.get(session_id) if session_id is not None else None
        if record is not None:
            for entry in result.entries:
                seq = record.seq_high + 1
                record = self.registry.update(record.session_id, seq_high=seq) or record
                ops.append(AppendTranscript(record.session_id, seq, entry))
                publishes.append(
                    Publish(
                        OutputMessage(sessionId=record.session_id, seq=seq, entry=entry),
                        self._audience(),
                    )
                )
        return [Commit(tuple(ops)), *publishes, *result.answers]

    def _on_image_saved(self, event: ImageSaved, now: float) -> list[Effect]:
        record = self.registry.get(event.session_id)
        if record is None or record.state == PENDING_STATE or event.session_id in self._dead:
            return [Dropped(f"image saved for {event.session_id[:8]}, but the session is gone")]
        text = injected_text(event.text, event.path)
        return self._accept_input(record, text, text, None, now, [])

    def _on_create_session(
        self, command: CreateSessionCommand, now: float, marks: list[StoreOp]
    ) -> list[Effect]:
        session_id = self._new_id()
        refusal: str | None = None
        model = command.model or None
        if command.providerId is not None:
            resolved = self.accounts.book.resolve_for_session(command.providerId, model)
            if isinstance(resolved, str):
                refusal = resolved
            else:
                model = resolved.model
        if command.backend == "opencode":
            refusal = "this bridge runs Claude Code sessions only (backend opencode is unavailable)"
        pending = SessionPendingMessage(
            pendingId=session_id, machine=self.config.machine, createdAt=iso(now)
        )
        if refusal is not None:
            failed = SessionFailedMessage(pendingId=session_id, reason=refusal)
            return [
                Commit(
                    tuple(marks),
                    outbox=(Publish(pending, self._audience()), Publish(failed, self._audience())),
                )
            ]
        record = SessionRecord(
            session_id=session_id,
            cwd=command.cwd or "",
            created_at=iso(now),
            last_activity=iso(now),
            state=PENDING_STATE,
            permission_mode="plan",
            model=model,
            effort_level=command.defaultEffort,
            provider_id=command.providerId,
        )
        self.registry.put(record)
        return [
            Commit((*marks, SaveSession(record)), outbox=(Publish(pending, self._audience()),)),
            StartRunner(record, resume=False, create_cwd=bool(command.createCwd)),
        ]

    def _on_close_session(self, session_id: str, now: float, marks: list[StoreOp]) -> list[Effect]:
        removed = self.registry.remove(session_id)
        self.broker.forget(session_id)
        self._alive.discard(session_id)
        self._dead.discard(session_id)
        self.sync.abort_session(session_id)
        ops: list[StoreOp] = list(marks)
        follow: list[Effect] = []
        if removed is not None:
            ops += [DeleteSession(session_id), DeleteTranscript(session_id)]
            if removed.state != PENDING_STATE:
                ops.append(AddTombstone(session_id))
            follow.append(CloseRunner(session_id))
            self._mark_dirty(now)
        ack = CloseSessionAckMessage(sessionId=session_id, success=removed is not None)
        return [Commit(tuple(ops), outbox=(Publish(ack, self._audience()),)), *follow]

    def _on_option(
        self, command: ModeCommand | EffortCommand | ModelCommand, marks: list[StoreOp]
    ) -> list[Effect]:
        if command.sessionId not in self._alive:
            return [
                Commit(tuple(marks)),
                Dropped(f"{command.type} for a session that is not running"),
            ]
        option: str
        value: str
        if isinstance(command, ModeCommand):
            option, value = "mode", command.mode
        elif isinstance(command, EffortCommand):
            option, value = "effort", command.level
        else:
            option, value = "model", command.model
            record = self.registry.get(command.sessionId)
            if (
                record is not None
                and record.provider_id is not None
                and not self.accounts.book.allows_model(record.provider_id, value)
            ):
                # A provider-bound session only runs its profile's models: no reply (§5 row 7).
                return [
                    Commit(tuple(marks)),
                    Dropped(f"model {value!r} is not offered by the session's provider profile"),
                ]
        return [Commit(tuple(marks)), SetRunnerOption(command.sessionId, option, value)]

    def _on_option_set(self, event: AgentOptionSet, now: float) -> list[Effect]:
        record = self.registry.get(event.session_id)
        if record is None:
            return []
        attr = {"mode": "permission_mode", "effort": "effort_level", "model": "model"}[event.option]
        message: BridgeToPhone | None = None
        if event.value is not None:
            record = self.registry.update(record.session_id, **{attr: event.value}) or record
            self._mark_dirty(now)
        current = getattr(record, attr)
        if event.option == "mode":
            if event.value is not None:
                message = ModeConfirmedMessage(sessionId=record.session_id, mode=event.value)
        elif event.option == "effort":
            level = event.value or current
            if level is not None:
                message = EffortConfirmedMessage(sessionId=record.session_id, level=level)
        else:
            model = event.value or current
            if model:
                message = ModelConfirmedMessage(sessionId=record.session_id, model=model)
        outbox = (Publish(message, self._audience()),) if message is not None else ()
        return [Commit((SaveSession(record),), outbox=outbox)]

    # --- pairing ----------------------------------------------------------------------------------

    def _on_pair_request(
        self, command: PairRequestCommand, verdict: Decoded, now: float, marks: list[StoreOp]
    ) -> list[Effect]:
        author = verdict.author
        if verdict.stale:
            return [Commit(tuple(marks)), Dropped("stale pair-request", verdict.event_id)]
        window = self.window if self.window is not None and self.window.is_open(now) else None
        reason: str | None = None
        if window is None:
            reason = "window-closed"
        elif not check_token(window, command.token):
            reason = "bad-token"
        if reason is not None:
            if not self._nacks.take(now):
                return [
                    Commit(tuple(marks)),
                    Dropped(
                        f"pair-request refused ({reason}); nack budget spent", verdict.event_id
                    ),
                ]
            nack = PairAckMessage(machine=self.config.machine, ok=False, reason=reason)
            return [
                Commit(tuple(marks), outbox=(Publish(nack, (author,)),)),
                Dropped(f"pair-request refused ({reason})", verdict.event_id, author),
            ]
        self.window = None
        ack = PairAckMessage(
            machine=self.config.machine,
            ok=True,
            relays=list(self.config.relays),
            host=self.config.host,
        )
        return self._pair(author, command.label or "Phone", now, ops=tuple(marks), reply=ack)

    def _pair(
        self,
        pubkey: str,
        label: str,
        now: float,
        *,
        ops: tuple[StoreOp, ...],
        reply: PairAckMessage | None,
    ) -> list[Effect]:
        existing = self.phones.get(pubkey)
        phone = PairedPhone(
            pubkey=pubkey,
            npub=hex_to_npub(pubkey),
            label=label.strip() or "Phone",
            paired_at=existing.paired_at if existing is not None else iso(now),
        )
        self.phones[pubkey] = phone
        outbox = (Publish(reply, (pubkey,)),) if reply is not None else ()
        return [
            Commit((*ops, SavePhone(phone)), outbox=outbox),
            Resubscribe(),
            *self._heartbeat(now),
            Notify("paired", {"npub": phone.npub, "label": phone.label}),
        ]

    def _unpair(self, pubkey: str, now: float) -> list[Effect]:
        if self.phones.pop(pubkey, None) is None:
            return []
        self.phone_caps.pop(pubkey, None)
        self.sync.abort_phone(pubkey)
        return [Commit((DeletePhone(pubkey),)), Resubscribe(), *self._heartbeat(now)]

    # --- agent events -----------------------------------------------------------------------------

    def _on_agent_ready(self, event: AgentReady, now: float) -> list[Effect]:
        record = self.registry.get(event.session_id)
        if record is None:
            return [CloseRunner(event.session_id)]
        self._alive.add(event.session_id)
        self._dead.discard(event.session_id)
        self.broker.forget(event.session_id)  # after a restart the runner denied its own cards
        changes: dict[str, object] = {}
        if event.sdk_session_id and event.sdk_session_id != record.sdk_session_id:
            changes["sdk_session_id"] = event.sdk_session_id
        if event.model and not record.model:
            changes["model"] = event.model
        if event.cwd:
            changes["cwd"] = event.cwd
        if record.state == PENDING_STATE:
            changes["state"] = "idle"
            record = self.registry.update(record.session_id, **changes) or record
            self._mark_dirty(now)
            ready = SessionReadyMessage(pendingId=record.session_id, session=self._info(record))
            return [
                Commit((SaveSession(record),), outbox=(Publish(ready, self._audience()),)),
                *self._heartbeat(now),
                SendToRunner(record.session_id),
            ]
        if changes:
            record = self.registry.update(record.session_id, **changes) or record
        self._mark_dirty(now)
        return [Commit((SaveSession(record),)), SendToRunner(record.session_id)]

    def _on_agent_failed(self, event: AgentFailed, now: float) -> list[Effect]:
        self.broker.forget(event.session_id)
        record = self.registry.get(event.session_id)
        self._alive.discard(event.session_id)
        self._dead.add(event.session_id)
        if record is None:
            return []
        if record.state == PENDING_STATE:
            self.registry.remove(event.session_id)
            failed = SessionFailedMessage(pendingId=event.session_id, reason=event.reason)
            return [
                Commit(
                    (DeleteSession(event.session_id),), outbox=(Publish(failed, self._audience()),)
                )
            ]
        return self._end(record, f"Session could not be resumed: {event.reason}", now)

    def _on_agent_ended(self, event: AgentEnded, now: float) -> list[Effect]:
        self.broker.forget(event.session_id)
        record = self.registry.get(event.session_id)
        self._alive.discard(event.session_id)
        self._dead.add(event.session_id)
        if record is None:
            return []
        return self._end(record, f"Session ended unexpectedly: {event.reason}", now)

    def _end(self, record: SessionRecord, text: str, now: float) -> list[Effect]:
        entry = OutputEntry(
            entryType="error",
            content=text,
            timestamp=iso(now),
            metadata={"special": "session_died"},
        )
        effects = self._append(record, entry, now, state="idle")
        self._mark_dirty(now)
        return effects

    def _on_agent_state(self, event: AgentStateChanged, now: float) -> list[Effect]:
        record = self.registry.get(event.session_id)
        if record is None or record.state == event.state or record.state == PENDING_STATE:
            return []
        record = self.registry.update(record.session_id, state=event.state) or record
        self._mark_dirty(now)
        return [Commit((SaveSession(record),))]

    def _on_agent_entry(self, event: AgentEntry, now: float) -> list[Effect]:
        record = self.registry.get(event.session_id)
        if record is None or record.state == PENDING_STATE:
            return [Dropped(f"entry for unknown session {event.session_id[:8]}")]
        entry = event.entry
        metadata = dict(entry.metadata or {})
        changes: dict[str, object] = {}
        meta = metadata.pop("session_meta", None)
        if isinstance(meta, dict) and record.session_id not in self._meta_applied:
            # The agent's first session-meta names the session (each at most 40 characters).
            self._meta_applied.add(record.session_id)
            topic, project = str(meta.get("topic") or "")[:40], str(meta.get("project") or "")[:40]
            if topic:
                changes["title"] = topic
            if project:
                changes["project"] = project
        if metadata.get("subtype") == "result":
            window = metadata.get("context_window")
            percentage = metadata.get("context_percentage")
            if isinstance(window, int) and not isinstance(window, bool) and window > 0:
                changes["context_window"] = window
            if isinstance(percentage, (int, float)) and not isinstance(percentage, bool):
                changes["context_percentage"] = float(min(100.0, max(0.0, percentage)))
            cost = metadata.get("total_cost_usd")
            if isinstance(cost, (int, float)) and not isinstance(cost, bool):
                self.session_cost[record.session_id] = float(cost)
        if changes:
            self._mark_dirty(now)
        if meta is not None:
            entry = entry.model_copy(update={"metadata": metadata or None})
            if not entry.content:  # the text was only the tag: nothing to show
                record = self.registry.update(record.session_id, **changes) or record
                return [Commit((SaveSession(record),))]
        return self._append(record, entry, now, **changes)

    def _append(
        self, record: SessionRecord, entry: OutputEntry, now: float, **changes: object
    ) -> list[Effect]:
        seq = record.seq_high + 1
        record = (
            self.registry.update(record.session_id, seq_high=seq, last_activity=iso(now), **changes)
            or record
        )
        ops: list[StoreOp] = [AppendTranscript(record.session_id, seq, entry)]
        if changes:
            ops.append(SaveSession(record))
        return [
            Commit(tuple(ops)),
            Publish(
                OutputMessage(sessionId=record.session_id, seq=seq, entry=entry), self._audience()
            ),
        ]

    # --- heartbeat --------------------------------------------------------------------------------

    def _info(self, record: SessionRecord, *, offline: bool = False) -> RemoteSessionInfo:
        label = self.accounts.book.label_of(record.provider_id) if record.provider_id else None
        return to_remote_info(record, offline=offline, provider_label=label)

    def _audience(self) -> tuple[str, ...]:
        return tuple(sorted(self.phones))

    def _mark_dirty(self, now: float) -> None:
        if self._dirty_since is None:
            self._dirty_since = now

    def _sessions_message(self, *, offline: bool = False) -> SessionsMessage:
        roots = list(self.config.roots)
        return SessionsMessage(
            machine=self.config.machine,
            host=self.config.host,
            sessions=[self._info(r, offline=offline) for r in self.registry.listed()],
            protocolVersion=PROTOCOL_VERSION,
            capabilities=list(self.config.capabilities),
            folders=list(self.folders) if roots else None,
            roots=roots or None,
            removedSessions=list(self.registry.tombstones) or None,
            machineOffline=True if offline else None,
        )

    def _heartbeat(self, now: float) -> list[Effect]:
        self._heartbeat_at = now + self.config.heartbeat_interval
        self._dirty_since = None
        if not self.phones:
            return []
        return [Publish(self._sessions_message(), self._audience())]

    def heartbeat_message(self) -> SessionsMessage:
        """The current heartbeat (for status and tests)."""
        return self._sessions_message()

    def iter_phones(self) -> Iterable[PairedPhone]:
        return self.phones.values()

    def window_for(self, now: float) -> PairingWindow | None:
        return self.window if self.window is not None and self.window.is_open(now) else None
