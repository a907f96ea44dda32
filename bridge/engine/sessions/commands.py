"""The phone's commands about sessions, and the runtime's answers to the errands they start.

What each command does (PROTOCOL-v10-wire.md §5, REFERENCE-BEHAVIOUR §1.9–1.13):

- ``create-session``: a *pending* record is saved with ``session-pending`` to every phone, then
  the runner starts; ``session-ready`` (or ``session-failed``) follows from the agent's events.
  The session's agent is the one ``backend`` / ``agent`` name (:mod:`bridge.engine.agents`),
  Claude Code when neither is given. An agent that is not offered, a provider profile that
  cannot serve the session, or a profile for an agent other than Claude Code (profiles are
  Anthropic-compatible endpoints for Claude Code) refuses it at once (pending, then failed).
- ``input``: the user's line is recorded, an inbox row is written for the runner and the
  ``input-ack`` goes out — all in one commit — then the runner is told to take its inbox. A
  session being created or gone answers ``input-failed{no-session}``, one whose runner ended for
  good ``input-failed{error}``. While a question card is open, typed text answers it instead.
- ``close-session``: the session and its transcript are deleted (a listed one leaves a
  tombstone), its syncs and uploads in flight are aborted, the runner is closed.
- ``mode`` / ``effort`` / ``model``: only for a running session; the runner answers with the
  value in force (``AgentOptionSet``), which the agent events confirm to the phones.
- ``interrupt``: every open card of the session is denied, then the runner is interrupted.
- ``create-folder``, ``sync-request`` / ``sync-ack``, ``usage-request``, ``gsd-request``,
  ``models-request``, ``upload-image``: checked here, the slow part is an errand of the runtime
  whose answer comes back as an input. ``models-request`` answers Claude Code's models, or
  those of the agent its additive ``backend`` / ``agent`` names.

Handlers return only their own effects; admission adds the processed marks (see
:mod:`bridge.engine.admission`).

Pure: ids come from the injected ``new_id``, the clock is ``now``.
"""

from __future__ import annotations

from collections.abc import Callable

from bridge.engine.agents import CLAUDE, AgentCatalog, Refused, agent_of_backend
from bridge.engine.effects import (
    AddInbox,
    AddTombstone,
    CloseRunner,
    Commit,
    CreateFolder,
    DeleteSession,
    DeleteTranscript,
    Dropped,
    Effect,
    InterruptRunner,
    ListModels,
    Publish,
    ReadGsdState,
    SaveSession,
    SendToRunner,
    SessionRecord,
    SetRunnerOption,
    StartRunner,
    StoreOp,
)
from bridge.engine.heartbeat import Heartbeat
from bridge.engine.host import EngineConfig
from bridge.engine.inputs import (
    FolderCreated,
    GsdStateRead,
    ImageReceived,
    ImageSaved,
    ModelsListed,
)
from bridge.engine.phones.accounts import Accounts
from bridge.engine.phones.paired import PhoneBook
from bridge.engine.sessions.attachments import Attachments
from bridge.engine.sessions.cards import Cards
from bridge.engine.sessions.rules import (
    PENDING_STATE,
    check_folder_path,
    session_cwd_problem,
    title_from_input,
)
from bridge.engine.sessions.uploads import injected_text
from bridge.engine.state import Liveness, SessionState, SessionTable
from bridge.engine.sync import SyncServer
from bridge.engine.timefmt import iso
from bridge.engine.transcript import Transcript
from bridge.protocol import (
    BridgeToPhone,
    CloseSessionAckMessage,
    CloseSessionCommand,
    CreateFolderCommand,
    CreateSessionCommand,
    EffortCommand,
    FolderAckMessage,
    GsdRequestCommand,
    GsdStateMessage,
    InputAckMessage,
    InputCommand,
    InputFailedMessage,
    InterruptCommand,
    ModeCommand,
    ModelCommand,
    ModelsMessage,
    ModelsRequestCommand,
    OutputEntry,
    QuestionInputCommand,
    SessionFailedMessage,
    SessionPendingMessage,
    SyncAckCommand,
    SyncRequestCommand,
    UploadImageBlossomCommand,
    UploadImageChunkedCommand,
    UsageData,
    UsageMessage,
    UsageRequestCommand,
)

__all__ = ["NO_MODELS_ERROR", "SessionCommands"]

NO_MODELS_ERROR = "No live Claude session answered — start or open a session and try again."


def no_models_error(label: str) -> str:
    """The ``models.error`` when an agent other than Claude Code listed no model."""
    return f"{label} listed no model — start a session with it and try again."


class SessionCommands:
    """The handlers of the session commands (see the module docstring)."""

    def __init__(
        self,
        config: EngineConfig,
        sessions: SessionTable,
        phones: PhoneBook,
        heartbeat: Heartbeat,
        transcript: Transcript,
        cards: Cards,
        accounts: Accounts,
        agents: AgentCatalog,
        sync: SyncServer,
        attachments: Attachments,
        new_id: Callable[[], str],
    ) -> None:
        self._config = config
        self._sessions = sessions
        self._phones = phones
        self._heartbeat = heartbeat
        self._transcript = transcript
        self._cards = cards
        self._accounts = accounts
        self._agents = agents
        self._sync = sync
        self._attachments = attachments
        self._new_id = new_id

    def _to_all(self, *messages: BridgeToPhone) -> tuple[Publish, ...]:
        audience = self._phones.audience()
        return tuple(Publish(message, audience) for message in messages)

    # --- create and close ------------------------------------------------------------------

    def create(self, command: CreateSessionCommand, now: float) -> list[Effect]:
        session_id = self._new_id()
        model = command.model or None
        agent = self._agents.choose(command.backend, command.agent)
        refusal: str | None = None
        if isinstance(agent, Refused):
            refusal = agent.reason
        elif command.providerId is not None:
            refusal, model = self._bind_provider(command.providerId, agent, model)
        if refusal is None:
            config = self._config
            refusal = session_cwd_problem(
                command.cwd or "", config.roots, config.home, config.secrets
            )
        pending = SessionPendingMessage(
            pendingId=session_id, machine=self._config.machine, createdAt=iso(now)
        )
        if refusal is not None or isinstance(agent, Refused):
            failed = SessionFailedMessage(pendingId=session_id, reason=refusal or "")
            return [Commit((), outbox=self._to_all(pending, failed))]
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
            agent=agent,
        )
        self._sessions.add(record)
        return [
            Commit((SaveSession(record),), outbox=self._to_all(pending)),
            StartRunner(record, resume=False, create_cwd=bool(command.createCwd)),
        ]

    def _bind_provider(
        self, provider_id: str, agent: str, model: str | None
    ) -> tuple[str | None, str | None]:
        """(why the profile cannot serve the session, the session's model)."""
        if agent != CLAUDE:
            # A profile is an Anthropic-compatible endpoint that Claude Code is pointed at.
            label = self._agents.label(agent)
            return (
                f"provider profiles apply to Claude Code sessions only; {label} uses its own "
                "configuration (start the session without a provider)",
                model,
            )
        resolved = self._accounts.book.resolve_for_session(provider_id, model)
        if isinstance(resolved, str):
            return resolved, model
        return None, resolved.model

    def close(self, command: CloseSessionCommand, now: float) -> list[Effect]:
        """Drop the session with all its state (cards, cost, meta go with its SessionState)."""
        session_id = command.sessionId
        removed = self._sessions.remove(session_id)
        self._sync.abort_session(session_id)
        self._attachments.abort_session(session_id)
        ops: list[StoreOp] = []
        follow: list[Effect] = []
        if removed is not None:
            ops += [DeleteSession(session_id), DeleteTranscript(session_id)]
            if not removed.pending:
                ops.append(AddTombstone(session_id))
            follow.append(CloseRunner(session_id))
            self._heartbeat.mark_dirty(now)
        ack = CloseSessionAckMessage(sessionId=session_id, success=removed is not None)
        return [Commit(tuple(ops), outbox=self._to_all(ack)), *follow]

    # --- input -----------------------------------------------------------------------------

    def input(self, command: InputCommand, now: float) -> list[Effect]:
        state = self._sessions.get(command.sessionId)
        # A listed session whose runner is (re)starting takes input: the inbox holds it until the
        # runner reports ready. Only a runner that ended for good refuses it.
        if state is None or state.pending or state.liveness is Liveness.ENDED:
            reason = "no-session" if state is None or state.pending else "error"
            failed = InputFailedMessage(
                sessionId=command.sessionId, reason=reason, inputId=command.inputId
            )
            return [Commit((), outbox=self._to_all(failed))]
        if state.cards.question_open() is not None:
            return self._cards.input_answers_question(state, command, now)
        return self.accept_input(state, command.text, command.text, command.inputId, now)

    def question_input(self, command: QuestionInputCommand, now: float) -> list[Effect]:
        state = self._sessions.get(command.sessionId)
        if state is not None:
            answered = self._cards.answer_with_text(state, command.text, now)
            if answered is not None:
                return answered
        return self.input(InputCommand(sessionId=command.sessionId, text=command.text), now)

    def accept_input(
        self, state: SessionState, shown: str, sent: str, input_id: str | None, now: float
    ) -> list[Effect]:
        """The user line (`shown`, before the agent's reply), the inbox row (`sent`), the ack."""
        changes: dict[str, object] = {"last_activity": iso(now)}
        if state.record.title is None and (title := title_from_input(shown)) is not None:
            changes["title"] = title
            self._heartbeat.mark_dirty(now)
        entry = OutputEntry(
            entryType="text", content=shown, timestamp=iso(now), metadata={"role": "user"}
        )
        appended = self._transcript.append(state, [entry], save=True, **changes)
        outbox: tuple[Publish, ...] = ()
        if input_id:
            outbox = self._to_all(InputAckMessage(sessionId=state.session_id, inputId=input_id))
        inbox = AddInbox(self._new_id(), state.session_id, sent, input_id)
        return [
            Commit((*appended.ops, inbox), outbox=outbox),
            *appended.live,
            SendToRunner(state.session_id),
        ]

    # --- steering --------------------------------------------------------------------------

    def option(self, command: ModeCommand | EffortCommand | ModelCommand) -> list[Effect]:
        state = self._sessions.get(command.sessionId)
        if state is None or state.liveness is not Liveness.ALIVE:
            return [Dropped(f"{command.type} for a session that is not running")]
        option: str
        value: str
        if isinstance(command, ModeCommand):
            option, value = "mode", command.mode
        elif isinstance(command, EffortCommand):
            option, value = "effort", command.level
        else:
            option, value = "model", command.model
            provider = state.record.provider_id
            if provider is not None and not self._accounts.book.allows_model(provider, value):
                # A provider-bound session only runs its profile's models: no reply (§5 row 7).
                return [
                    Dropped(f"model {value!r} is not offered by the session's provider profile")
                ]
        return [SetRunnerOption(command.sessionId, option, value)]

    def interrupt(self, command: InterruptCommand, now: float) -> list[Effect]:
        state = self._sessions.get(command.sessionId)
        if state is None:
            return [Commit(())]
        effects = self._cards.deny_all(state, "Interrupted by the user.", now, "interrupted")
        if state.liveness is Liveness.ALIVE:
            effects.append(InterruptRunner(command.sessionId))
        return effects

    # --- folders, sync, usage, gsd, models -------------------------------------------------

    def create_folder(self, command: CreateFolderCommand) -> list[Effect]:
        checked = check_folder_path(command.path, command.root, self._config.roots)
        if isinstance(checked, str):
            ack = FolderAckMessage(requestId=command.requestId, success=False, error=checked)
            return [Commit((), outbox=self._to_all(ack))]
        root, rel = checked
        return [CreateFolder(command.requestId, root, rel)]

    def folder_created(self, event: FolderCreated, now: float) -> list[Effect]:
        ack = FolderAckMessage(
            requestId=event.request_id,
            success=event.error is None,
            path=event.path if event.error is None else None,
            error=event.error,
        )
        if event.error is None:
            self._heartbeat.mark_dirty(now)
        return [Commit((), outbox=self._to_all(ack))]

    def sync_request(self, command: SyncRequestCommand, phone: str, now: float) -> list[Effect]:
        state = self._sessions.active(command.sessionId)
        if state is None:
            return [Dropped("sync-request for an unknown session")]
        return self._sync.request(
            phone,
            command.sessionId,
            [tuple(r) for r in command.haveRanges],
            state.record.seq_high,
            self._new_id(),
            now,
        )

    def sync_ack(self, command: SyncAckCommand, phone: str, now: float) -> list[Effect]:
        return self._sync.ack(phone, command.syncId, tuple(command.range), now)

    def usage(self, command: UsageRequestCommand, now: float) -> list[Effect]:
        state = self._sessions.active(command.sessionId)
        if state is None:
            return [Dropped("usage-request for an unknown session")]
        if state.record.provider_id is not None:
            # Usage is Anthropic's price table and subscription windows: nothing for a
            # provider-bound session beats a wrong number (PROTOCOL.md §13).
            return []
        usage = UsageData(
            available=False,
            subscriptionType=None,
            sessionCostUsd=state.cost_usd,
            fetchedAt=iso(now),
        )
        return [
            Publish(UsageMessage(sessionId=state.session_id, usage=usage), self._phones.audience())
        ]

    def gsd_request(self, command: GsdRequestCommand) -> list[Effect]:
        state = self._sessions.active(command.sessionId)
        if state is None:
            return [Dropped("gsd-request for an unknown session")]
        return [ReadGsdState(state.session_id, state.record.cwd)]

    def gsd_read(self, event: GsdStateRead) -> list[Effect]:
        if self._sessions.get(event.session_id) is None:
            return []
        message = GsdStateMessage(sessionId=event.session_id, gsd=event.state)
        return [Publish(message, self._phones.audience())]

    def models_request(self, command: ModelsRequestCommand) -> list[Effect]:
        """A v10 request (neither ``backend`` nor ``agent``) lists Claude Code's models."""
        if command.backend is None and command.agent is None:
            return [ListModels()]
        agent = self._agents.choose(command.backend, command.agent)
        if isinstance(agent, Refused):
            named = command.agent or agent_of_backend(command.backend)
            refused = ModelsMessage(models=[], error=agent.reason, agent=named)
            return [Commit((), outbox=self._to_all(refused))]
        return [ListModels(agent)]

    def models_listed(self, event: ModelsListed) -> list[Effect]:
        if event.models:
            models = ModelsMessage(
                models=list(event.models), defaultModel=event.default_model, agent=event.agent
            )
        else:
            error = (
                NO_MODELS_ERROR
                if event.agent in (None, CLAUDE)
                else no_models_error(self._agents.label(event.agent))
            )
            models = ModelsMessage(models=[], error=error, agent=event.agent)
        return [Commit((), outbox=self._to_all(models))]

    # --- images ----------------------------------------------------------------------------

    def upload(
        self, command: UploadImageBlossomCommand | UploadImageChunkedCommand, phone: str, now: float
    ) -> list[Effect]:
        if self._sessions.active(command.sessionId) is None:
            return [Dropped("image upload for an unknown session")]
        if isinstance(command, UploadImageBlossomCommand):
            return self._attachments.blossom(command, phone)
        return self._attachments.chunk(command, phone, now)

    def image_received(self, event: ImageReceived, now: float) -> list[Effect]:
        return self._attachments.ready(
            event.session_id, event.filename, event.mime_type, event.text, event.data, now
        )

    def image_saved(self, event: ImageSaved, now: float) -> list[Effect]:
        """The saved image's path becomes the session's next input."""
        state = self._sessions.active(event.session_id)
        if state is None or state.liveness is Liveness.ENDED:
            return [Dropped(f"image saved for {event.session_id[:8]}, but the session is gone")]
        text = injected_text(event.text, event.path)
        return self.accept_input(state, text, text, None, now)
