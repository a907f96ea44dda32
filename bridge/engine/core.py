"""The bridge engine: every input of the daemon in, the ordered effects out.

Theory of operation. The runtime feeds one input at a time (:mod:`bridge.engine.inputs`) with the
current unix time, and performs the returned effects (:mod:`bridge.engine.effects`) in order.
Timers are data: the runtime sleeps until :meth:`Engine.next_deadline` and calls
:meth:`Engine.tick`. This module is only the router; each job is a component of its own:

============================  =================================================================
:mod:`~.admission`            who sent a command event, is it new and fresh, what it says; folds
                              the processed marks into the command's first commit
:mod:`~.session_commands`     the phone's commands about sessions, and errands' answers
:mod:`~.cards`                permission cards (the rules per session: :mod:`~.broker`)
:mod:`~.agent_events`         what the runners report
:mod:`~.pairing`              the pairing window, pair-requests, manual pairing, unpairing
:mod:`~.heartbeat`            the ``sessions`` message and its timer
:mod:`~.agents`               which agents sessions can run (Claude Code, checked ACP agents)
:mod:`~.transcript`           numbering, storing and publishing transcript lines
:mod:`~.state`                one :class:`~.state.SessionState` per session
:mod:`~.phones`               the paired phones and their capabilities
:mod:`~.accounts`             provider profiles, credentials, device config
:mod:`~.push`                 Web Push subscriptions, and which committed lines wake phones
:mod:`~.sync`, :mod:`~.attachments`  transcript sync, image uploads
============================  =================================================================

Both dispatches below (inputs, and the commands inside command events) are ``match`` statements
over closed unions ending in ``assert_never``: a new input or command type that is not routed is
a type error, not a silent drop.

The rule every command obeys (ARCHITECTURE §4): its effects start with one ``Commit`` holding its
``MarkProcessed`` (and the cursor) with its own state changes and durable replies; admission puts
the marks there, in one place. Live output is published after the line it carries is committed.

The runtime reads the engine only through the queries at the end of :class:`Engine` and changes
it only through inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from typing import assert_never

from bridge.engine.admission import Admission, Admitted, fold_marks
from bridge.engine.agents import AgentCatalog
from bridge.engine.editor.tasks import EditorTasks
from bridge.engine.effects import (
    CloseRunner,
    Commit,
    Dropped,
    Effect,
    MarkInboxTaken,
    PairedPhone,
    PruneProcessed,
    Publish,
    SaveAgentCursor,
    SessionRecord,
    StartRunner,
)
from bridge.engine.heartbeat import Heartbeat
from bridge.engine.host import BRIDGE_CAPABILITIES, EngineConfig
from bridge.engine.ingest import PROCESSED_RETENTION_SECONDS, Decrypt, IngestGate
from bridge.engine.inputs import (
    AgentAnswered,
    AgentEnded,
    AgentEntry,
    AgentFailed,
    AgentOptionSet,
    AgentReady,
    AgentRestarted,
    AgentsChecked,
    AgentStateChanged,
    AgentTookInput,
    CommandEventReceived,
    CredentialsProbed,
    FolderCreated,
    FoldersScanned,
    GsdStateRead,
    ImageReceived,
    ImageRefused,
    ImageSaved,
    Input,
    JournalRecord,
    ModelsListed,
    PairingWindowRequested,
    PermissionRequested,
    PermissionStillPending,
    PhonePairedManually,
    PhoneUnpaired,
    ProviderProbed,
    RefreshRequested,
    SessionCloseRequested,
    SessionCommitted,
    SyncChunkSent,
    TaskCardAnswered,
    TaskEditsReported,
    TaskInputRequested,
    TaskStartRequested,
    TaskStopRequested,
    ToolBlocked,
)
from bridge.engine.phones.accounts import Accounts
from bridge.engine.phones.credentials import Credentials
from bridge.engine.phones.paired import PhoneBook
from bridge.engine.phones.pairing import Pairing, PairingWindow
from bridge.engine.phones.providers import ProviderProfile, ResolvedProvider
from bridge.engine.phones.push import Push
from bridge.engine.sessions.agent_events import AgentEvents
from bridge.engine.sessions.attachments import Attachments
from bridge.engine.sessions.broker import Card
from bridge.engine.sessions.cards import Cards
from bridge.engine.sessions.commands import SessionCommands
from bridge.engine.state import Liveness, SessionTable
from bridge.engine.sync import SyncServer
from bridge.engine.transcript import Transcript
from bridge.nostr.filters import Filter
from bridge.protocol import (
    CloseSessionCommand,
    CreateFolderCommand,
    CreateSessionCommand,
    EffortCommand,
    GsdRequestCommand,
    InputCommand,
    InterruptCommand,
    KeypressCommand,
    ModeCommand,
    ModelCommand,
    ModelsRequestCommand,
    PairRequestCommand,
    PermissionResCommand,
    ProviderProfilesRequestCommand,
    PushSubscribeCommand,
    PushUnsubscribeCommand,
    QuestionInputCommand,
    RefreshSessionsCommand,
    SessionsMessage,
    SetCredentialsCommand,
    SetDeviceConfigCommand,
    SetProviderProfileCommand,
    SyncAckCommand,
    SyncRequestCommand,
    UploadImageBlossomCommand,
    UploadImageChunkedCommand,
    UsageRequestCommand,
)
from bridge.protocol.kinds import COMMAND_KIND
from bridge.records import record

__all__ = ["BRIDGE_CAPABILITIES", "Engine", "EngineConfig", "EngineState"]

PRUNE_INTERVAL = 60.0


@record
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
        self.sessions = SessionTable(state.sessions, state.tombstones)
        self.phones = PhoneBook(state.phones)
        self.accounts = Accounts(
            config.machine, state.providers, state.credentials, config.env_api_key
        )
        self.sync = SyncServer()
        self.attachments = Attachments()
        self.agent_catalog = AgentCatalog(config.agents)
        self.heartbeat = Heartbeat(
            config, self.sessions, self.phones, self.accounts, self.agent_catalog, now
        )
        self.pairing = Pairing(config, self.phones, self.heartbeat, self.sync, self.attachments)
        ingest = IngestGate(config.bridge_pubkey, state.processed, state.last_seen, decrypt)
        self.admission = Admission(ingest, self.phones, self.pairing)
        transcript = Transcript(self.sessions, self.phones)
        self.cards = Cards(config, self.sessions, self.phones, transcript)
        self.commands = SessionCommands(
            config,
            self.sessions,
            self.phones,
            self.heartbeat,
            transcript,
            self.cards,
            self.accounts,
            self.agent_catalog,
            self.sync,
            self.attachments,
            new_id,
        )
        self.agents = AgentEvents(self.sessions, self.phones, self.heartbeat, transcript)
        self.tasks = EditorTasks(
            config.machine,
            self.sessions,
            self.phones,
            self.heartbeat,
            transcript,
            self.cards,
            new_id,
        )
        self.push = Push(config, self.sessions, self.phones)
        self._prune_at = now + PRUNE_INTERVAL

    # --- boot and shutdown ---------------------------------------------------------------------

    def boot(self, now: float) -> list[Effect]:
        """Resume every listed session, finish pending creations, announce ourselves."""
        effects: list[Effect] = []
        for state in self.sessions.states():
            if state.pending:
                effects.append(StartRunner(state.record, resume=False))
            else:
                record = self.sessions.update(state, state="idle")
                effects.append(StartRunner(record, resume=True))
        effects.extend(self.heartbeat.publish(now))
        return effects

    def shutdown(self, now: float) -> list[Effect]:
        """Close the window, abort syncs, say goodbye: every session offline, machine offline."""
        self.pairing.close_window()
        self.sync.abort_all()
        effects: list[Effect] = []
        for state in self.sessions.states():
            effects.append(CloseRunner(state.session_id))
            if state.liveness is Liveness.ALIVE:
                state.liveness = Liveness.STARTING
        if self.phones:
            effects.append(Publish(self.heartbeat.message(offline=True), self.phones.audience()))
        return effects

    # --- timers --------------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        deadlines = (
            self.heartbeat.next_deadline(),
            self._prune_at,
            self.pairing.next_deadline(),
            self.sync.next_deadline(),
            self.attachments.next_deadline(),
            self.cards.next_deadline(),
        )
        return min((d for d in deadlines if d is not None), default=None)

    def tick(self, now: float) -> list[Effect]:
        effects: list[Effect] = list(self.sync.tick(now))
        effects.extend(self.attachments.tick(now))
        effects.extend(self.cards.tick(now))
        effects.extend(self.pairing.tick(now))
        effects.extend(self.heartbeat.tick(now))
        if now >= self._prune_at:
            self._prune_at = now + PRUNE_INTERVAL
            self.admission.ingest.prune(now)
            effects.append(Commit((PruneProcessed(int(now) - PROCESSED_RETENTION_SECONDS),)))
        effects.extend(self.admission.given_up())  # groups the prune's sweep let expire
        return effects

    # --- inputs --------------------------------------------------------------------------------

    def handle(self, event: Input, now: float) -> list[Effect]:
        """One input → its effects (in the order the runtime must perform them), each line that
        should wake an absent phone followed by its ``WakePhones`` (:mod:`~.push`)."""
        return self.push.with_wakes(self._dispatch(event, now))

    def _dispatch(self, event: Input, now: float) -> list[Effect]:
        agents, commands = self.agents, self.commands
        match event:
            case CommandEventReceived():
                return self._on_command_event(event, now)
            case AgentReady():
                return agents.ready(event, now)
            case AgentEntry():
                return agents.entry(event, now)
            case AgentStateChanged():
                return agents.state_changed(event, now)
            case AgentFailed():
                return agents.failed(event, now)
            case AgentEnded():
                return agents.ended(event, now)
            case AgentOptionSet():
                return agents.option_set(event, now)
            case SessionCommitted():
                return agents.committed(event, now)
            case PermissionRequested():
                return self.cards.on_permission_requested(event, now)
            case PermissionStillPending():
                return self.cards.on_permission_still_pending(event, now)
            case AgentTookInput():
                return [Commit((MarkInboxTaken(event.uid),))]
            case AgentAnswered():
                return agents.answered(event)
            case AgentRestarted():
                return agents.restarted(event, now)
            case JournalRecord():
                return self._on_journal_record(event, now)
            case ToolBlocked():
                return self.cards.on_tool_blocked(event, now)
            case PairingWindowRequested():
                return self.pairing.open_window(event.token, event.duration, now)
            case PhonePairedManually():
                return self.pairing.pair(event.pubkey, event.label, now)
            case PhoneUnpaired():
                return self.pairing.unpair(event.pubkey, now)
            case RefreshRequested():
                return self.heartbeat.publish(now)
            case SessionCloseRequested():
                return commands.close(CloseSessionCommand(sessionId=event.session_id), now)
            case FoldersScanned():
                self.heartbeat.set_folders(event.folders, now)
                return []
            case SyncChunkSent():
                self.sync.chunks_sent(event.phone, event.sync_id, now)
                return []
            case ModelsListed():
                return commands.models_listed(event)
            case AgentsChecked():
                if self.agent_catalog.checked(event.checks):
                    self.heartbeat.mark_dirty(now)
                return []
            case ProviderProbed():
                return self.accounts.provider_probed(
                    event.phone, event.profile_id, event.valid, self.phones.audience()
                )
            case CredentialsProbed():
                return self.accounts.credentials_probed(event.phone, event.valid)
            case GsdStateRead():
                return commands.gsd_read(event)
            case ImageReceived():
                return commands.image_received(event, now)
            case ImageRefused():
                return [Dropped(f"image for {event.session_id[:8]} refused: {event.reason}")]
            case ImageSaved():
                return commands.image_saved(event, now)
            case FolderCreated():
                return commands.folder_created(event, now)
            case TaskStartRequested():
                return self.tasks.start(event, now)
            case TaskCardAnswered():
                return self.tasks.answer(event, now)
            case TaskEditsReported():
                return self.tasks.report(event, now)
            case TaskInputRequested():
                return self.tasks.input(event, now)
            case TaskStopRequested():
                return self.tasks.stop(event, now)
            case _:
                assert_never(event)

    def _on_journal_record(self, record: JournalRecord, now: float) -> list[Effect]:
        """A session host's record, applied once: its seq commits with its own effects."""
        state = self.sessions.get(record.session_id)
        if state is None:
            return [
                Dropped(f"journal record {record.seq} of unknown session {record.session_id[:8]}")
            ]
        if record.seq <= state.record.agent_seq:
            return [
                Dropped(f"journal record {record.seq} of {record.session_id[:8]} applied already")
            ]
        self.sessions.update(state, agent_seq=record.seq)
        effects = self._dispatch(record.event, now) if record.event is not None else []
        return fold_marks((SaveAgentCursor(record.session_id, record.seq),), effects)

    def _on_command_event(self, received: CommandEventReceived, now: float) -> list[Effect]:
        admitted = self.admission.admit(received, now)
        if isinstance(admitted, Admitted):
            effects = fold_marks(admitted.marks, self._run_command(admitted, now))
        else:
            effects = admitted
        return [*effects, *self.admission.given_up()]

    def _run_command(self, admitted: Admitted, now: float) -> list[Effect]:
        decoded = admitted.decoded
        command = decoded.command
        if not admitted.paired:  # admission lets a stranger send nothing but this
            assert isinstance(command, PairRequestCommand)
            return self.pairing.on_pair_request(command, decoded, now)
        if decoded.stale:
            return self.admission.stale(admitted, self.phones.audience())
        phone, commands, cards = decoded.author, self.commands, self.cards
        match command:
            case InputCommand():
                return commands.input(command, now)
            case QuestionInputCommand():
                return commands.question_input(command, now)
            case PermissionResCommand():
                return cards.on_permission_res(command, now)
            case KeypressCommand():
                return cards.on_keypress(command, now)
            case ModeCommand() | EffortCommand() | ModelCommand():
                return commands.option(command)
            case SyncRequestCommand():
                return commands.sync_request(command, phone, now)
            case SyncAckCommand():
                return commands.sync_ack(command, phone, now)
            case CreateSessionCommand():
                return commands.create(command, now)
            case RefreshSessionsCommand():
                return self.heartbeat.publish(now)
            case CloseSessionCommand():
                return commands.close(command, now)
            case InterruptCommand():
                return commands.interrupt(command, now)
            case CreateFolderCommand():
                return commands.create_folder(command)
            case UploadImageBlossomCommand() | UploadImageChunkedCommand():
                return commands.upload(command, phone, now)
            case UsageRequestCommand():
                return commands.usage(command, now)
            case GsdRequestCommand():
                return commands.gsd_request(command)
            case ModelsRequestCommand():
                return commands.models_request(command)
            case SetCredentialsCommand():
                return self.accounts.set_credentials(command, phone)
            case SetDeviceConfigCommand():
                return self.accounts.set_device_config(command, phone)
            case PairRequestCommand():
                return self.pairing.on_pair_request(command, decoded, now)
            case SetProviderProfileCommand():
                return self.accounts.set_provider_profile(
                    command, phone, now, self.phones.audience()
                )
            case ProviderProfilesRequestCommand():
                return self.accounts.profiles_for(phone)
            case PushSubscribeCommand():
                return self.push.subscribe(command, phone)
            case PushUnsubscribeCommand():
                return self.push.unsubscribe(command, phone)
            case _:
                assert_never(command)

    # --- queries for the runtime ---------------------------------------------------------------

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
                authors=self.phones.audience(),
                since=max(0, self.admission.ingest.since(now)),
                tags={"p": (self.config.bridge_pubkey,)},
            )
        ]

    def pairing_filters(self, now: float) -> list[Filter]:
        """Filters of the pairing subscription (no authors); empty when no window is open."""
        return self.pairing.filters(now)

    def session(self, session_id: str) -> SessionRecord | None:
        """A session's record (pending ones included)."""
        return self.sessions.record(session_id)

    def session_records(self) -> list[SessionRecord]:
        """Every session's record (pending ones included)."""
        return self.sessions.records()

    def is_alive(self, session_id: str) -> bool:
        """Whether the session's runner reported ready (and has not ended since)."""
        state = self.sessions.get(session_id)
        return state is not None and state.liveness is Liveness.ALIVE

    def has_ended(self, session_id: str) -> bool:
        """Whether the session's runner failed or ended for good (a starting one has not)."""
        state = self.sessions.get(session_id)
        return state is not None and state.liveness is Liveness.ENDED

    def paired_phones(self) -> list[PairedPhone]:
        """The paired phones, oldest pairing first."""
        return self.phones.all()

    def phone(self, pubkey: str) -> PairedPhone | None:
        return self.phones.get(pubkey)

    def diff_allowed(self) -> bool:
        """The ``diff`` gate: every phone heard from this boot can show diffs."""
        return self.phones.diff_allowed()

    def window_for(self, now: float) -> PairingWindow | None:
        """The pairing window open at `now`, if any."""
        return self.pairing.window_for(now)

    def pairing_window_until(self) -> int | None:
        """Until when the current pairing window is open (unix seconds), None without one."""
        window = self.pairing.window
        return int(window.expires_at) if window is not None else None

    @property
    def last_command_at(self) -> float | None:
        """When the last command of a paired phone was admitted."""
        return self.admission.last_command_at

    def heartbeat_message(self) -> SessionsMessage:
        """The current heartbeat (for status and tests)."""
        return self.heartbeat.message()

    def pending_cards(self, session_id: str) -> list[Card]:
        """The open cards of a session, oldest first."""
        return self.cards.pending(session_id)

    def agent_label(self, agent_id: str) -> str:
        """How messages name an agent (``Claude Code``, a configured label, else its id)."""
        return self.agent_catalog.label(agent_id)

    def resolve_provider(self, provider_id: str, model: str | None) -> ResolvedProvider | str:
        """A provider-bound session's profile for a spawn, or why it cannot run."""
        return self.accounts.book.resolve_for_session(provider_id, model)

    def stored_api_key(self) -> str | None:
        """The Anthropic key sessions use when the environment has none (never logged)."""
        return self.accounts.api_key
