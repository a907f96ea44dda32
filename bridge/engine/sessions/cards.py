"""Permission cards as the engine runs them: from a tool call's question to the runner's answer.

The rules of the cards themselves (which tool gets which card, what each key means) are the
per-session :class:`~bridge.engine.sessions.broker.SessionCards`. This component turns what they
decide into effects, always in the same order:

1. one ``Commit`` with the audit rows (``RecordDecision``) and the card's transcript lines, so
   nothing about a card leaves before it is durable;
   — with the answers themselves (``SaveAnswer``), kept until the session host has them;
2. the live copies of those lines;
3. the answers to the runner (``AnswerPermission``, and ``SetRunnerOption`` when plan approval
   switches the mode).

A card answered by typed text (an open ``AskUserQuestion``) also records the user's line first,
and the ``input-ack`` rides on the same commit.

Pure: the clock is ``now``.
"""

from __future__ import annotations

from collections.abc import Sequence

from bridge.engine.editor.task_gate import task_request
from bridge.engine.effects import (
    AnswerPermission,
    Commit,
    Dropped,
    Effect,
    Publish,
    RecordDecision,
    SaveAnswer,
    StoreOp,
)
from bridge.engine.host import EngineConfig
from bridge.engine.inputs import PermissionRequested, PermissionStillPending, ToolBlocked
from bridge.engine.phones.paired import PhoneBook
from bridge.engine.sessions.broker import AskedCall, BrokerResult, Card, GateFacts
from bridge.engine.state import SessionState, SessionTable
from bridge.engine.timefmt import iso
from bridge.engine.transcript import Transcript
from bridge.protocol import (
    InputAckMessage,
    InputCommand,
    KeypressCommand,
    OutputEntry,
    PermissionResCommand,
)

__all__ = ["Cards"]


class Cards:
    """Every session's cards, as effects."""

    def __init__(
        self,
        config: EngineConfig,
        sessions: SessionTable,
        phones: PhoneBook,
        transcript: Transcript,
    ) -> None:
        self._config = config
        self._sessions = sessions
        self._phones = phones
        self._transcript = transcript

    # --- queries ---------------------------------------------------------------------------

    def pending(self, session_id: str) -> list[Card]:
        state = self._sessions.get(session_id)
        return state.cards.pending() if state is not None else []

    def next_deadline(self) -> float | None:
        return min(
            (d for s in self._sessions.states() if (d := s.cards.next_deadline()) is not None),
            default=None,
        )

    # --- inputs ----------------------------------------------------------------------------

    def tick(self, now: float) -> list[Effect]:
        """Deny every card that waited an hour (one commit for all of them)."""
        expired = BrokerResult()
        for state in self._sessions.states():
            state.cards.expire(now, expired)
        if not expired.answers:
            return []
        return self.effects(None, expired)

    def on_permission_requested(self, event: PermissionRequested, now: float) -> list[Effect]:
        """The runner's ``can_use_tool`` asks about one call."""
        state = self._sessions.get(event.session_id)
        if state is None:
            return [AnswerPermission(event.session_id, event.request_id, False, "No such session.")]
        return self.effects(state, self._ask(state, event, now))

    def on_permission_still_pending(
        self, event: PermissionStillPending, now: float
    ) -> list[Effect]:
        """A restarted daemon found an ask still parked: rebuild its card in memory.

        The card's lines and audit row were committed when the ask first came; only the card is
        missing from this daemon's memory. Should the gate decide the call by itself now (the
        mode changed meanwhile), that answer goes out like any other.
        """
        request = event.request
        state = self._sessions.get(request.session_id)
        if state is None:
            return [
                AnswerPermission(request.session_id, request.request_id, False, "No such session.")
            ]
        if state.cards.has(request.request_id):
            return []
        result = self._ask(state, request, now)
        if not result.answers:
            return []  # the card is back; its lines are in the transcript already
        result.entries.clear()
        return self.effects(state, result)

    def _ask(self, state: SessionState, event: PermissionRequested, now: float) -> BrokerResult:
        """The session's cards take one call (a card, or the gate's own verdict)."""
        record = state.record
        config = self._config
        mode = record.permission_mode or "default"
        if record.task is not None:
            # The editor's workspace is the task's only root; a task's calls name no subagent.
            facts = GateFacts(mode, record.cwd, (record.cwd,), config.home, config.secrets)
            asked = AskedCall(
                event.request_id, event.tool_name, event.tool_input, event.description
            )
            return task_request(state.cards, record.task, asked, facts, now)
        facts = GateFacts(mode, record.cwd, tuple(config.roots), config.home, config.secrets)
        asked = AskedCall(
            event.request_id, event.tool_name, event.tool_input, event.description, event.agent_id
        )
        return state.cards.request(asked, facts, now)

    @staticmethod
    def on_tool_blocked(event: ToolBlocked, now: float) -> list[Effect]:
        """The PreToolUse check refused a call on the deny list: the audit log records it."""
        decision = RecordDecision(
            at=iso(now),
            session_id=event.session_id,
            tool=event.tool_name,
            outcome="block",
            reasons=event.reasons,
            detail=event.detail,
        )
        return [Commit((decision,))]

    def on_permission_res(self, command: PermissionResCommand, now: float) -> list[Effect]:
        state = self._sessions.get(command.sessionId)
        result = (
            state.cards.permission_response(command.requestId, command.allow, command.modifier, now)
            if state is not None
            else None
        )
        if state is None or result is None:
            return [Dropped("permission-res for no pending card")]
        return self.effects(state, result)

    def on_keypress(self, command: KeypressCommand, now: float) -> list[Effect]:
        state = self._sessions.get(command.sessionId)
        result: BrokerResult | None = None
        if state is not None:
            if command.context == "plan-approval":
                result = state.cards.plan_key(command.key, now)
            elif (
                command.context == "question"
                and command.key.isascii()
                and command.key.isdigit()
                and len(command.key) <= 4
            ):
                result = state.cards.answer_question(option=int(command.key), now=now)
        if state is None or result is None:
            return [Dropped(f"keypress {command.context or 'without context'} ignored")]
        return self.effects(state, result)

    def answer_with_text(self, state: SessionState, text: str, now: float) -> list[Effect] | None:
        """``question-input``: the text answers the open question, or None when none is open."""
        result = state.cards.answer_question(text=text, now=now)
        return self.effects(state, result) if result is not None else None

    def input_answers_question(
        self, state: SessionState, command: InputCommand, now: float
    ) -> list[Effect]:
        """While a question card is open, typed text answers it (it is not a new prompt).

        The user's line is recorded first (it is what they typed), then the answer's effects;
        the ``input-ack`` rides on the same commit.
        """
        entry = OutputEntry(
            entryType="text", content=command.text, timestamp=iso(now), metadata={"role": "user"}
        )
        user = self._transcript.append(state, [entry])
        answered = state.cards.answer_question(text=command.text, now=now) or BrokerResult()
        effects = self.effects(state, answered, before=user.ops)
        commit = effects[0]
        assert isinstance(commit, Commit)
        if command.inputId:
            ack = InputAckMessage(sessionId=state.session_id, inputId=command.inputId)
            effects[0] = Commit(commit.ops, outbox=(Publish(ack, self._phones.audience()),))
        effects[1:1] = user.live
        return effects

    def deny_all(self, state: SessionState, message: str, now: float, outcome: str) -> list[Effect]:
        """Deny every open card of the session (interrupt)."""
        return self.effects(state, state.cards.deny_all(message, now, outcome))

    # --- effects ---------------------------------------------------------------------------

    def effects(
        self,
        state: SessionState | None,
        result: BrokerResult,
        *,
        before: Sequence[StoreOp] = (),
    ) -> list[Effect]:
        """Audit rows and card lines (durable), their live copies, then the runner's answers."""
        ops: list[StoreOp] = [*before, *result.decisions]
        # Every answer is durable with the decision that made it (see SaveAnswer).
        ops.extend(SaveAnswer(a) for a in result.answers if isinstance(a, AnswerPermission))
        live: tuple[Publish, ...] = ()
        if state is not None and result.entries:
            appended = self._transcript.append(state, result.entries)
            ops.extend(appended.ops)
            live = appended.live
        return [Commit(tuple(ops)), *live, *result.answers]
