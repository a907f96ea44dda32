"""The editor's commands (``codedeck-bridge desiide`` over the control socket), as effects.

A Desiide task is an ordinary session of this bridge with a :class:`~.effects.TaskPolicy`: its
agent gets the editor's tools (the runtime passes ``editor_tools`` to the session host), its calls
go through :mod:`.task_gate`, and phones see it like any session — in the heartbeat, in the
transcript, and with its permission cards, which either side may answer (the first answer wins;
the broker drops the second).

- **start**: the session is created with the id the orchestrator chose (its task id), in mode
  ``acceptEdits`` — reads and reviewed edits go on, commands are cards — and the instruction is
  the first line of the transcript and the first inbox row, both in the commit that creates the
  session. The agent takes the row when it is ready. A start for an id that exists changes
  nothing: the orchestrator may send it again after losing the answer.
- **answer / report**: a permission card (``task.approve`` / ``task.reject``), or the review of
  an edit proposal (``edits.report``), through :class:`~.cards.Cards` like a phone's answer.
- **input**: more text for the agent (a ``fix`` task's failing checks).
- **stop**: deny the task's cards and interrupt its agent; the session stays, with its history.

Pure: the clock is ``now``.
"""

from __future__ import annotations

from collections.abc import Callable

from bridge.engine.effects import (
    AddInbox,
    Commit,
    Dropped,
    Effect,
    InterruptRunner,
    Publish,
    SendToRunner,
    SessionRecord,
    StartRunner,
)
from bridge.engine.heartbeat import Heartbeat
from bridge.engine.inputs import (
    TaskCardAnswered,
    TaskEditsReported,
    TaskInputRequested,
    TaskStartRequested,
    TaskStopRequested,
)
from bridge.engine.phones.paired import PhoneBook
from bridge.engine.sessions.cards import Cards
from bridge.engine.sessions.rules import PENDING_STATE, title_from_input
from bridge.engine.state import Liveness, SessionTable
from bridge.engine.timefmt import iso
from bridge.engine.transcript import Transcript
from bridge.protocol import OutputEntry, SessionPendingMessage

__all__ = ["TASK_MODE", "EditorTasks"]

IDLE_STATE = "idle"
TASK_MODE = "acceptEdits"
"""A task's permission mode: reads and reviewed edits go on; every command is a card."""


class EditorTasks:
    """The handlers of the editor's task commands (see the module docstring)."""

    def __init__(
        self,
        machine: str,
        sessions: SessionTable,
        phones: PhoneBook,
        heartbeat: Heartbeat,
        transcript: Transcript,
        cards: Cards,
        new_id: Callable[[], str],
    ) -> None:
        self._machine = machine
        self._sessions = sessions
        self._phones = phones
        self._heartbeat = heartbeat
        self._transcript = transcript
        self._cards = cards
        self._new_id = new_id

    def start(self, event: TaskStartRequested, now: float) -> list[Effect]:
        if self._sessions.get(event.session_id) is not None:
            return [Dropped(f"task {event.session_id[:16]} was started already")]
        if event.session_id in self._sessions.tombstones:
            return [Dropped(f"task {event.session_id[:16]} was closed")]
        record = SessionRecord(
            session_id=event.session_id,
            cwd=event.cwd,
            created_at=iso(now),
            last_activity=iso(now),
            state=PENDING_STATE,
            title=event.title or title_from_input(event.instruction),
            permission_mode=TASK_MODE,
            model=event.model,
            task=event.policy,
        )
        state = self._sessions.add(record)
        entry = OutputEntry(
            entryType="text",
            content=event.instruction,
            timestamp=iso(now),
            metadata={"role": "user", "source": "editor"},
        )
        appended = self._transcript.append(state, [entry], save=True)
        pending = SessionPendingMessage(
            pendingId=event.session_id, machine=self._machine, createdAt=iso(now)
        )
        inbox = AddInbox(self._new_id(), event.session_id, event.instruction, None)
        outbox = (Publish(pending, self._phones.audience()),)
        return [
            Commit((*appended.ops, inbox), outbox=outbox),
            StartRunner(state.record, resume=False),
        ]

    def answer(self, event: TaskCardAnswered, now: float) -> list[Effect]:
        state = self._sessions.get(event.session_id)
        result = (
            state.cards.permission_response(
                event.card_id,
                event.allow,
                event.scope,
                now,
                answerer="editor",
                reason=event.reason,
            )
            if state is not None
            else None
        )
        if state is None or result is None:
            return [Dropped("the editor answered no pending card (answered already?)")]
        return self._cards.effects(state, result)

    def report(self, event: TaskEditsReported, now: float) -> list[Effect]:
        state = self._sessions.get(event.session_id)
        result = (
            state.cards.review_response(event.card_id, event.report, now)
            if state is not None
            else None
        )
        if state is None or result is None:
            return [Dropped("the editor reported on no open edit review")]
        return self._cards.effects(state, result)

    def input(self, event: TaskInputRequested, now: float) -> list[Effect]:
        state = self._sessions.active(event.session_id)
        if state is None or state.liveness is Liveness.ENDED:
            return [Dropped("input for a task whose session is not running")]
        entry = OutputEntry(
            entryType="text",
            content=event.text,
            timestamp=iso(now),
            metadata={"role": "user", "source": "editor"},
        )
        appended = self._transcript.append(state, [entry], save=True, last_activity=iso(now))
        inbox = AddInbox(self._new_id(), state.session_id, event.text, None)
        return [Commit((*appended.ops, inbox)), *appended.live, SendToRunner(state.session_id)]

    def stop(self, event: TaskStopRequested, now: float) -> list[Effect]:
        state = self._sessions.get(event.session_id)
        if state is None:
            return [Dropped("stop for a task with no session")]
        pending = bool(state.cards.pending())
        effects = self._cards.deny_all(state, "The task was cancelled.", now, "cancelled")
        # A task that finished leaves its agent idle: nothing to interrupt (an interrupt of an
        # idle agent would only show phones an "Interrupted" line for nothing).
        busy = pending or state.record.state != IDLE_STATE
        if state.liveness is Liveness.ALIVE and busy:
            effects.append(InterruptRunner(event.session_id))
        return effects
