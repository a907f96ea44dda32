"""What the agents report, as the engine records and publishes it.

A runner (:mod:`bridge.agents`) reports its session's life through inputs:

- ``AgentReady`` — up (first start or a resume). A pending session becomes listed:
  ``session-ready`` goes to every phone, then the heartbeat. Any session then takes its inbox
  (``SendToRunner``). Cards of an earlier runner of the session are dropped: it denied them.
- ``AgentEntry`` — one transcript line, numbered and published (:mod:`bridge.engine.transcript`).
  The agent's first session-meta names the session (topic, project); a turn's result carries
  the context window, its use and the session's cost.
- ``AgentStateChanged`` — idle / running / waiting_*: saved, shown in the heartbeat.
- ``AgentFailed`` — could not start: a pending session is dropped with ``session-failed``; a
  listed one ends ("Session could not be resumed").
- ``AgentEnded`` — gone for good: the session ends ("Session ended unexpectedly"). An ended
  session stays listed (idle) and refuses input until a resume at the next boot.
- ``AgentOptionSet`` — the value of mode / effort / model now in force: confirmed to the phones.
- ``AgentAnswered`` — the agent finished the turns of these inputs: their inbox rows go.
- ``AgentRestarted`` — the agent was resumed in a new host: the ``session_restart`` line, and
  the rows of the inputs it cut short leave the inbox, in one commit.
- ``SessionCommitted`` — a commit landed in the session's project (the heartbeat's ``committed``).

Pure: the clock is ``now``.
"""

from __future__ import annotations

from bridge.engine.effects import (
    CloseRunner,
    Commit,
    DeleteSession,
    Dropped,
    Effect,
    Publish,
    RecordDecision,
    RemoveInbox,
    SaveSession,
    SendToRunner,
    StoreOp,
)
from bridge.engine.heartbeat import Heartbeat
from bridge.engine.inputs import (
    AgentAnswered,
    AgentEnded,
    AgentEntry,
    AgentFailed,
    AgentOptionSet,
    AgentReady,
    AgentRestarted,
    AgentStateChanged,
    SessionCommitted,
)
from bridge.engine.phones.paired import PhoneBook
from bridge.engine.state import Liveness, SessionState, SessionTable
from bridge.engine.timefmt import iso
from bridge.engine.transcript import Transcript
from bridge.protocol import (
    BridgeToPhone,
    EffortConfirmedMessage,
    ModeConfirmedMessage,
    ModelConfirmedMessage,
    OutputEntry,
    SessionFailedMessage,
    SessionReadyMessage,
)

__all__ = ["AgentEvents"]

META_FIELD_MAX = 40
"""The session-meta's topic and project are cut to 40 characters each."""


class AgentEvents:
    """The handlers of the agents' inputs (see the module docstring)."""

    def __init__(
        self,
        sessions: SessionTable,
        phones: PhoneBook,
        heartbeat: Heartbeat,
        transcript: Transcript,
    ) -> None:
        self._sessions = sessions
        self._phones = phones
        self._heartbeat = heartbeat
        self._transcript = transcript

    def ready(self, event: AgentReady, now: float) -> list[Effect]:
        state = self._sessions.get(event.session_id)
        if state is None:
            return [CloseRunner(event.session_id)]
        state.liveness = Liveness.ALIVE
        # A new agent does not know the calls the last one asked about: their cards are void.
        withdrawn = self._withdraw_cards(state, now)
        record = state.record
        changes: dict[str, object] = {}
        if event.sdk_session_id and event.sdk_session_id != record.sdk_session_id:
            changes["sdk_session_id"] = event.sdk_session_id
        if event.model and not record.model:
            changes["model"] = event.model
        if event.cwd:
            changes["cwd"] = event.cwd
        if event.sandboxed is not None and event.sandboxed != record.sandboxed:
            changes["sandboxed"] = event.sandboxed
        self._heartbeat.mark_dirty(now)
        if state.pending:
            changes["state"] = "idle"
            record = self._sessions.update(state, **changes)
            ready = SessionReadyMessage(
                pendingId=record.session_id, session=self._heartbeat.info(record)
            )
            return [
                Commit((SaveSession(record),), outbox=(Publish(ready, self._phones.audience()),)),
                *self._heartbeat.publish(now),
                SendToRunner(record.session_id),
            ]
        if changes:
            record = self._sessions.update(state, **changes)
        ops, live = withdrawn
        return [
            Commit((*ops, SaveSession(state.record))),
            *live,
            SendToRunner(record.session_id),
        ]

    def _withdraw_cards(
        self, state: SessionState, now: float
    ) -> tuple[tuple[StoreOp, ...], tuple[Publish, ...]]:
        """Tell the phones that the cards of an agent that is gone can no longer be answered.

        The calls never ran (Claude Code records them as interrupted when it resumes), and a
        card left on the phone would wait for an answer nobody can take.
        """
        cards = state.cards.pending()
        state.cards.forget()
        if not cards:
            return (), ()
        at = iso(now)
        entries = [
            OutputEntry(
                entryType="system",
                content=(
                    f"The request to use {card.tool_name} was withdrawn: the agent restarted "
                    "before it was answered, and the call did not run"
                ),
                timestamp=at,
                metadata={"special": "card_withdrawn", "tool_use_id": card.request_id},
            )
            for card in cards
        ]
        decisions = [
            RecordDecision(
                at=at,
                session_id=state.session_id,
                tool=card.tool_name,
                outcome="withdrawn",
                detail="the agent restarted before the card was answered",
            )
            for card in cards
        ]
        appended = self._transcript.append(state, entries, last_activity=at)
        return (*decisions, *appended.ops), tuple(appended.live)

    def failed(self, event: AgentFailed, now: float) -> list[Effect]:
        state = self._sessions.get(event.session_id)
        if state is None:
            return []
        state.cards.forget()
        state.liveness = Liveness.ENDED
        if state.pending:
            self._sessions.remove(event.session_id)
            failed = SessionFailedMessage(pendingId=event.session_id, reason=event.reason)
            return [
                Commit(
                    (DeleteSession(event.session_id),),
                    outbox=(Publish(failed, self._phones.audience()),),
                )
            ]
        return self._end(state, f"Session could not be resumed: {event.reason}", now)

    def ended(self, event: AgentEnded, now: float) -> list[Effect]:
        state = self._sessions.get(event.session_id)
        if state is None:
            return []
        state.cards.forget()
        state.liveness = Liveness.ENDED
        return self._end(state, f"Session ended unexpectedly: {event.reason}", now)

    def _end(self, state: SessionState, text: str, now: float) -> list[Effect]:
        entry = OutputEntry(
            entryType="error",
            content=text,
            timestamp=iso(now),
            metadata={"special": "session_died"},
        )
        appended = self._transcript.append(
            state, [entry], save=True, last_activity=iso(now), state="idle"
        )
        self._heartbeat.mark_dirty(now)
        return [Commit(appended.ops), *appended.live]

    def state_changed(self, event: AgentStateChanged, now: float) -> list[Effect]:
        state = self._sessions.get(event.session_id)
        if state is None or state.pending or state.record.state == event.state:
            return []
        record = self._sessions.update(state, state=event.state)
        self._heartbeat.mark_dirty(now)
        return [Commit((SaveSession(record),))]

    def entry(self, event: AgentEntry, now: float) -> list[Effect]:
        state = self._sessions.get(event.session_id)
        if state is None or state.pending:
            return [Dropped(f"entry for unknown session {event.session_id[:8]}")]
        entry = event.entry
        metadata = dict(entry.metadata or {})
        changes: dict[str, object] = {}
        meta = metadata.pop("session_meta", None)
        if isinstance(meta, dict) and not state.meta_applied:
            # The agent's first session-meta names the session.
            state.meta_applied = True
            topic = str(meta.get("topic") or "")[:META_FIELD_MAX]
            project = str(meta.get("project") or "")[:META_FIELD_MAX]
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
                state.cost_usd = float(cost)
        if changes:
            self._heartbeat.mark_dirty(now)
        if meta is not None:
            entry = entry.model_copy(update={"metadata": metadata or None})
            if not entry.content:  # the text was only the tag: nothing to show
                record = self._sessions.update(state, **changes)
                return [Commit((SaveSession(record),))]
        appended = self._transcript.append(
            state, [entry], save=bool(changes), last_activity=iso(now), **changes
        )
        return [Commit(appended.ops), *appended.live]

    def option_set(self, event: AgentOptionSet, now: float) -> list[Effect]:
        state = self._sessions.get(event.session_id)
        if state is None:
            return []
        attr = {"mode": "permission_mode", "effort": "effort_level", "model": "model"}[event.option]
        record = state.record
        if event.value is not None:
            record = self._sessions.update(state, **{attr: event.value})
            self._heartbeat.mark_dirty(now)
        current = getattr(record, attr)
        message: BridgeToPhone | None = None
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
        outbox = (Publish(message, self._phones.audience()),) if message is not None else ()
        return [Commit((SaveSession(record),), outbox=outbox)]

    def restarted(self, event: AgentRestarted, now: float) -> list[Effect]:
        """The ``session_restart`` line, with the interrupted inputs' rows gone, in one commit."""
        state = self._sessions.get(event.session_id)
        if state is None:
            return [Dropped(f"restart of unknown session {event.session_id[:8]}")]
        appended = self._transcript.append(state, [event.entry], last_activity=iso(now))
        done = (RemoveInbox(event.interrupted),) if event.interrupted else ()
        return [Commit((*appended.ops, *done)), *appended.live]

    @staticmethod
    def answered(event: AgentAnswered) -> list[Effect]:
        """The agent finished these inputs' turns: their inbox rows are done."""
        if not event.uids:
            return []
        return [Commit((RemoveInbox(event.uids),))]

    def committed(self, event: SessionCommitted, now: float) -> list[Effect]:
        state = self._sessions.get(event.session_id)
        if state is None or state.record.committed:
            return []
        record = self._sessions.update(state, committed=True)
        self._heartbeat.mark_dirty(now)
        return [Commit((SaveSession(record),))]
