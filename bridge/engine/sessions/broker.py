"""The permission broker: every tool call the agent asks about becomes a verdict or a card.

Order for a ``PermissionRequested`` (REFERENCE-BEHAVIOUR §1.9, with the risk gate in front):

1. ``AskUserQuestion`` → one ``ask_question`` card per question; answered by
   ``keypress{context:"question"}`` (a 1-based option), ``question-input`` or a plain ``input``,
   in order; when every question has an answer the call is allowed with
   ``answers: {question text: answer}`` added to its input.
2. ``EnterPlanMode`` → allowed (the agent switches itself; the runner reports the mode).
3. ``ExitPlanMode`` → the plan as a text entry (``special:"plan"``), then a ``plan_approval``
   card: key 1 approves and switches to ``acceptEdits``, 2 approves (the agent leaves plan mode
   for ``default`` by itself), 3 denies ("revise") and the session stays in plan.
4. Anything else → the risk gate (:mod:`bridge.gate`): ``block`` denies at once and the
   agent reads why in its tool result; ``allow`` allows; ``ask`` shows a ``permission_request``
   card with the gate's reason labels in ``metadata.reasons``, answered by ``permission-res``
   (``always`` adds an allow rule for the tool; ``never`` only changes the deny text).

A Desiide task's calls (:mod:`bridge.engine.editor.task_gate`) add two things: the verdict on
an editor tool is the worst over the calls it amounts to (``judge_as``), and an edit proposal
opens a ``review`` card that only the editor answers (``edits.report``; the report rides to the
tool as its input's ``report``). The editor's ``task.approve``/``task.reject`` answer permission
cards as a phone's ``permission-res`` does; the first answer wins.

Cards time out after an hour (denied). ``interrupt``, a restart, the end or a close of the
session deny every card of it. Every verdict is appended to the ``decisions`` audit log.

The cards and the call history of one session live in its :class:`SessionCards` (held by the
session's state in the engine), so whatever ends a session ends its cards with it. A call that
asks is routed by its tool's name (:data:`Route`, the four steps above), each route one method
of :meth:`SessionCards.request`; what each kind of card holds and the lines it shows are
:mod:`bridge.engine.sessions.card_kinds`. Turning a :class:`BrokerResult` into effects
(transcript lines, the audit rows, the answers) is the engine's
:mod:`bridge.engine.sessions.cards`.

Pure: the clock is ``now``; entries, answers and log rows come back as data for the engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, assert_never

from bridge.engine.effects import AnswerPermission, RecordDecision, SetRunnerOption
from bridge.engine.sessions.card_kinds import (
    Card,
    permission_line,
    plan_lines,
    question_lines,
    question_options,
    review_line,
)
from bridge.engine.timefmt import iso
from bridge.gate import (
    CallHistory,
    GateContext,
    GateDecision,
    Outcome,
    describe_decision,
    evaluate,
    order_labels,
)
from bridge.gate.editor_calls import JUDGE_LABEL, STRICT_LABEL
from bridge.protocol import OutputEntry
from bridge.records import record

__all__ = [
    "CARD_TIMEOUT_SECONDS",
    "AskedCall",
    "BrokerResult",
    "Card",
    "GateFacts",
    "SessionCards",
    "TaskJudging",
]

CARD_TIMEOUT_SECONDS = 3600.0
ASK_QUESTION = "AskUserQuestion"
EXIT_PLAN = "ExitPlanMode"
ENTER_PLAN = "EnterPlanMode"

Route = Literal["question", "enter_plan", "plan", "gate"]
"""Where a call that asks goes: by its tool's name, else to the risk gate."""

_ROUTES: Mapping[str, Route] = {
    ASK_QUESTION: "question",
    ENTER_PLAN: "enter_plan",
    EXIT_PLAN: "plan",
}


def _route(tool_name: str) -> Route:
    return _ROUTES.get(tool_name, "gate")


@record
class AskedCall:
    """One tool call the agent asks about, as the runner reported it.

    Attributes:
        request_id: the runner's id for the ask (the card's ``tool_use_id``).
        tool_name: the tool as the agent named it.
        tool_input: the call's input; the card and the audit row keep a copy.
        description: the agent's own words for the call (a permission card's title).
        agent_id: the subagent that made the call, or None for the session's agent.
    """

    request_id: str
    tool_name: str
    tool_input: Mapping[str, Any]
    description: str | None = None
    agent_id: str | None = None


@record
class GateFacts:
    """The session facts the gate judges a call by (:class:`~bridge.gate.GateContext`'s fields).

    Kept as plain values and turned into a context only when the gate runs
    (:meth:`context`): a bad value is then the gate failing on that call (a card, or a review
    labelled ``gate_error``), not an exception out of the request.
    """

    mode: str
    cwd: str
    roots: tuple[str, ...]
    home: str
    secrets: tuple[str, ...]

    def context(self) -> GateContext:
        """The gate's context (raises ``ValueError`` as :class:`GateContext` does)."""
        return GateContext(
            mode=self.mode, cwd=self.cwd, roots=self.roots, home=self.home, secrets=self.secrets
        )


@record
class TaskJudging:
    """How the gate judges an editor tool's call of a Desiide task
    (:mod:`bridge.engine.editor.task_gate`).

    Attributes:
        judge_as: the calls of the gate's vocabulary the call amounts to
            (:mod:`bridge.gate.editor_calls`): the verdict is the worst over them, while the
            card and the audit row keep the call as the agent made it.
        strict: the task's strict mode: an allow becomes a card labelled
            ``policy_override:strict_mode``.
        judge: the editor's judge is on: an allow becomes a card labelled ``jev:pending``,
            which the orchestrator answers once its judge has spoken.
    """

    judge_as: Sequence[tuple[str, Mapping[str, object]]]
    strict: bool = False
    judge: bool = False


@dataclass(slots=True)
class BrokerResult:
    """What the engine turns into effects: transcript entries first, then answers and logs."""

    entries: list[OutputEntry] = field(default_factory=list)
    answers: list[AnswerPermission | SetRunnerOption] = field(default_factory=list)
    decisions: list[RecordDecision] = field(default_factory=list)


def _timestamp(now: float) -> str:
    return iso(now)


class SessionCards:
    """The pending cards of one session and the gate's call history for it.

    One per session, held by the session's :class:`~bridge.engine.state.SessionState`, so closing
    the session drops its cards and history with it. Methods take no session id: every card
    here belongs to :attr:`session_id`.
    """

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self._cards: dict[str, Card] = {}
        self._history = CallHistory()
        self.tool_calls = 0
        """Editor tool calls asked about (a Desiide task's budget,
        :mod:`bridge.engine.editor.task_gate`)."""

    # --- queries -------------------------------------------------------------------------------

    def pending(self) -> list[Card]:
        """The open cards, oldest first."""
        return list(self._cards.values())

    def has(self, request_id: str) -> bool:
        """Whether a card waits for this request."""
        return request_id in self._cards

    def question_open(self) -> Card | None:
        """The open question group, if any (typed text answers it)."""
        return next((c for c in self._cards.values() if c.kind == "question"), None)

    def next_deadline(self) -> float | None:
        return min(
            (c.created_at + CARD_TIMEOUT_SECONDS for c in self._cards.values()), default=None
        )

    # --- a tool call asks ----------------------------------------------------------------------

    def request(
        self,
        asked: AskedCall,
        facts: GateFacts,
        now: float,
        judging: TaskJudging | None = None,
    ) -> BrokerResult:
        """One call asks: a card, or the gate's own verdict (the order: the module docstring).

        `judging` is set for an editor tool of a Desiide task
        (:mod:`bridge.engine.editor.task_gate`): how the gate judges it in place of the call as
        made.
        """
        route = _route(asked.tool_name)
        match route:
            case "question":
                return self._question_card(asked, now)
            case "enter_plan":
                return self._enter_plan(asked, now)
            case "plan":
                return self._plan_card(asked, now)
            case "gate":
                return self._gate(asked, facts, now, judging)
            case _:  # pragma: no cover - closed union
                assert_never(route)

    def _question_card(self, asked: AskedCall, now: float) -> BrokerResult:
        """``AskUserQuestion``: one line per question, answered in order (no usable question:
        denied, the agent reads why)."""
        result = BrokerResult()
        ts = _timestamp(now)
        data = dict(asked.tool_input)
        raw = data.get("questions")
        questions = [q for q in raw if isinstance(q, dict)] if isinstance(raw, list) else []
        if not questions:
            result.answers.append(
                AnswerPermission(self.session_id, asked.request_id, False, "No question to ask.")
            )
            result.decisions.append(
                _decision(ts, self.session_id, asked.tool_name, "block", (), "no usable question")
            )
            return result
        self._open(
            Card(
                self.session_id, asked.request_id, "question", asked.tool_name, data, now, questions
            )
        )
        result.entries.extend(question_lines(asked.request_id, questions, ts))
        result.decisions.append(
            _decision(ts, self.session_id, asked.tool_name, "card", (), "question")
        )
        return result

    def _enter_plan(self, asked: AskedCall, now: float) -> BrokerResult:
        """``EnterPlanMode``: allowed; the agent switches itself and the runner reports it."""
        result = BrokerResult()
        result.answers.append(AnswerPermission(self.session_id, asked.request_id, True))
        result.decisions.append(
            _decision(_timestamp(now), self.session_id, asked.tool_name, "allow", (), "plan mode")
        )
        return result

    def _plan_card(self, asked: AskedCall, now: float) -> BrokerResult:
        """``ExitPlanMode``: the plan as a text line, then the approval card (keys 1-3)."""
        ts = _timestamp(now)
        data = dict(asked.tool_input)
        self._open(Card(self.session_id, asked.request_id, "plan", asked.tool_name, data, now))
        result = BrokerResult()
        result.entries.extend(plan_lines(asked.request_id, str(data.get("plan") or ""), ts))
        result.decisions.append(_decision(ts, self.session_id, asked.tool_name, "card", (), "plan"))
        return result

    def _gate(
        self, asked: AskedCall, facts: GateFacts, now: float, judging: TaskJudging | None
    ) -> BrokerResult:
        """Any other tool: the risk gate blocks, allows, or asks with a permission card."""
        data = dict(asked.tool_input)
        decision, failure = self._verdict(asked.tool_name, data, facts, judging)
        match decision.outcome:
            case Outcome.BLOCK:
                text = describe_decision(decision)
                answer = AnswerPermission(self.session_id, asked.request_id, False, text)
                return self._answered(asked, data, answer, decision, text, now)
            case Outcome.ALLOW:
                answer = AnswerPermission(self.session_id, asked.request_id, True)
                return self._answered(asked, data, answer, decision, f"mode {facts.mode}", now)
            case Outcome.ASK:
                return self._permission_card(asked, data, decision, failure, now)
            case _:  # pragma: no cover - closed union
                assert_never(decision.outcome)

    def _answered(
        self,
        asked: AskedCall,
        data: Mapping[str, Any],
        answer: AnswerPermission,
        decision: GateDecision,
        detail: str,
        now: float,
    ) -> BrokerResult:
        """The gate decided alone: the answer, and its audit row with the call."""
        row = _decision(
            _timestamp(now),
            self.session_id,
            asked.tool_name,
            decision.outcome.value,
            decision.reasons,
            detail,
            data,
        )
        return BrokerResult(answers=[answer], decisions=[row])

    def _permission_card(
        self,
        asked: AskedCall,
        data: dict[str, Any],
        decision: GateDecision,
        failure: str | None,
        now: float,
    ) -> BrokerResult:
        """The gate asks: a ``permission_request`` card with its reasons (or why the gate could
        not judge), answered by ``permission-res``."""
        card = Card(
            self.session_id,
            asked.request_id,
            "permission",
            asked.tool_name,
            data,
            now,
            reasons=decision.reasons,
        )
        self._open(card)
        ts = _timestamp(now)
        reason_text = describe_decision(decision) if decision.reasons else failure
        row = _decision(
            ts, self.session_id, asked.tool_name, "card", decision.reasons, failure, data
        )
        return BrokerResult(
            entries=[permission_line(card, reason_text, asked.description, asked.agent_id, ts)],
            decisions=[row],
        )

    def _verdict(
        self,
        tool_name: str,
        data: Mapping[str, Any],
        facts: GateFacts,
        judging: TaskJudging | None,
    ) -> tuple[GateDecision, str | None]:
        """The gate's decision on one call, and why the gate could not judge it (else None).

        A gate that fails (no usable workspace context, or a bug such as a RecursionError on
        deep input) asks: never an auto-allow, never a stopped session; only the exception's
        type is kept, as its message may quote the tool input. An editor task's strict mode or
        judge turns an allow into a card with its label.
        """
        repeats = self._history.record(tool_name, data)
        try:
            context = facts.context()
            if judging is None:
                decision = evaluate(tool_name, data, context, repeat_count=repeats)
            else:
                decision = _worst(
                    [evaluate(n, i, context, repeat_count=repeats) for n, i in judging.judge_as]
                )
        except Exception as exc:
            failure = f"the gate could not judge this call ({type(exc).__name__})"
            return GateDecision(Outcome.ASK, ()), failure
        if judging is not None and decision.outcome is Outcome.ALLOW:
            label = STRICT_LABEL if judging.strict else JUDGE_LABEL if judging.judge else None
            if label is not None:
                decision = GateDecision(Outcome.ASK, (*decision.reasons, label))
        return decision, None

    def _open(self, card: Card) -> None:
        self._cards[card.request_id] = card

    def block(
        self,
        request_id: str,
        tool_name: str,
        tool_input: Mapping[str, Any],
        reasons: Sequence[str],
        text: str,
        now: float,
    ) -> BrokerResult:
        """Refuse a call without a card (a task's policy: ``tool_not_allowed``, a budget)."""
        result = BrokerResult()
        result.answers.append(AnswerPermission(self.session_id, request_id, False, text))
        ts = _timestamp(now)
        result.decisions.append(
            _decision(ts, self.session_id, tool_name, "block", reasons, text, tool_input)
        )
        return result

    def review(
        self,
        request_id: str,
        tool_name: str,
        tool_input: Mapping[str, Any],
        reasons: Sequence[str],
        now: float,
    ) -> BrokerResult:
        """An edit proposal waits for the editor's review (``edits.report``), not a phone card.

        The editor applies proposed edits itself, in its own buffers, so only the editor can
        answer; phones see the proposal as a transcript line. The review is the call's
        approval: it never raises a permission card too.
        """
        data = dict(tool_input)
        card = Card(
            self.session_id, request_id, "review", tool_name, data, now, reasons=tuple(reasons)
        )
        self._open(card)
        files = data.get("files")
        count = len(files) if isinstance(files, list) else 0
        ts = _timestamp(now)
        result = BrokerResult()
        result.entries.append(review_line(card, count, ts))
        result.decisions.append(
            _decision(ts, self.session_id, tool_name, "review", reasons, f"{count} files", data)
        )
        return result

    def review_response(
        self, request_id: str, report: Sequence[Mapping[str, Any]], now: float
    ) -> BrokerResult | None:
        """The editor reported every file of a proposal: the tool reads the report.

        The call is allowed with the report added to its input (``report``), which the
        editor tool hands to the model as the result: applied, rejected (with the reason) or
        stale, per file. None when no review of that id is open.
        """
        card = self._cards.get(request_id)
        if card is None or card.kind != "review":
            return None
        del self._cards[request_id]
        updated = {**card.tool_input, "report": [dict(item) for item in report]}
        applied = sum(1 for item in report if item.get("status") == "applied")
        result = BrokerResult()
        result.answers.append(
            AnswerPermission(self.session_id, request_id, True, updated_input=updated)
        )
        detail = f"{applied} of {len(report)} files applied"
        result.decisions.append(
            _decision(_timestamp(now), self.session_id, card.tool_name, "editor_report", (), detail)
        )
        return result

    # --- the phone answers ---------------------------------------------------------------------

    def permission_response(
        self,
        request_id: str,
        allow: bool,
        modifier: str | None,
        now: float,
        *,
        answerer: str = "phone",
        reason: str | None = None,
    ) -> BrokerResult | None:
        """A phone's ``permission-res`` (or the editor's ``task.approve``/``task.reject``, with
        `answerer` ``"editor"``): the first answer wins, a second finds no card (None).

        `reason` is the editor's rejection reason; the model reads it."""
        card = self._cards.get(request_id)
        if card is None or card.kind != "permission":
            return None
        del self._cards[request_id]
        session_id = self.session_id
        result = BrokerResult()
        ts = _timestamp(now)
        if allow:
            always = modifier == "always"
            result.answers.append(AnswerPermission(session_id, request_id, True, always=always))
            detail = "allowed always" if always else "allowed once"
            if modifier == "task":
                detail = "allowed for the task"
            result.decisions.append(
                _decision(ts, session_id, card.tool_name, f"{answerer}_allow", (), detail)
            )
        else:
            message = (
                "The user denied this tool call and asked not to be asked again; do not retry it."
                if modifier == "never"
                else "The user denied this tool call."
            )
            if reason:
                message = f"The user denied this tool call: {reason}"
            result.answers.append(AnswerPermission(session_id, request_id, False, message))
            result.decisions.append(
                _decision(ts, session_id, card.tool_name, f"{answerer}_deny", (), modifier or None)
            )
        return result

    def plan_key(self, key: str, now: float) -> BrokerResult | None:
        card = next((c for c in self._cards.values() if c.kind == "plan"), None)
        if card is None or key not in ("1", "2", "3"):
            return None
        del self._cards[card.request_id]
        session_id = self.session_id
        result = BrokerResult()
        ts = _timestamp(now)
        if key == "3":
            message = "The user wants to revise the plan. Stay in plan mode and ask what to change."
            result.answers.append(AnswerPermission(session_id, card.request_id, False, message))
            result.decisions.append(
                _decision(ts, session_id, EXIT_PLAN, "phone_deny", (), "revise")
            )
            return result
        result.answers.append(AnswerPermission(session_id, card.request_id, True))
        if key == "1":
            result.answers.append(SetRunnerOption(session_id, "mode", "acceptEdits"))
        detail = "approved, acceptEdits" if key == "1" else "approved, default"
        result.decisions.append(_decision(ts, session_id, EXIT_PLAN, "phone_allow", (), detail))
        return result

    def answer_question(
        self, *, option: int | None = None, text: str | None = None, now: float
    ) -> BrokerResult | None:
        """Answer the next unanswered question of the open group (an option or free text)."""
        session_id = self.session_id
        card = self.question_open()
        if card is None:
            return None
        index = next(i for i in range(len(card.questions)) if i not in card.answers)
        question = card.questions[index]
        if option is not None:
            options = question_options(question)
            if not 1 <= option <= len(options):
                return BrokerResult()  # a key outside the options changes nothing
            answer = options[option - 1]["label"]
        else:
            answer = text or ""
        card.answers[index] = answer
        result = BrokerResult()
        if len(card.answers) == len(card.questions):
            del self._cards[card.request_id]
            by_text = {
                str(q.get("question", "")): card.answers[i] for i, q in enumerate(card.questions)
            }
            updated = {**card.tool_input, "answers": by_text}
            result.answers.append(
                AnswerPermission(session_id, card.request_id, True, updated_input=updated)
            )
            result.decisions.append(
                _decision(_timestamp(now), session_id, ASK_QUESTION, "phone_allow", (), "answered")
            )
        return result

    # --- cards end -----------------------------------------------------------------------------

    def deny_all(self, message: str, now: float, outcome: str) -> BrokerResult:
        session_id = self.session_id
        result = BrokerResult()
        ts = _timestamp(now)
        for card in self.pending():
            del self._cards[card.request_id]
            result.answers.append(AnswerPermission(session_id, card.request_id, False, message))
            result.decisions.append(_decision(ts, session_id, card.tool_name, outcome, (), message))
        return result

    def forget(self) -> None:
        """The runner is gone: drop its cards (it denied them itself) and its history."""
        self._cards.clear()
        self._history = CallHistory()

    def expire(self, now: float, result: BrokerResult) -> None:
        """Deny the cards that waited an hour, adding the answers and rows to `result`."""
        ts = _timestamp(now)
        for card in list(self._cards.values()):
            if now >= card.created_at + CARD_TIMEOUT_SECONDS:
                del self._cards[card.request_id]
                result.answers.append(
                    AnswerPermission(
                        card.session_id,
                        card.request_id,
                        False,
                        "Nobody answered this request within an hour; it was denied.",
                    )
                )
                result.decisions.append(
                    _decision(ts, card.session_id, card.tool_name, "timeout", (), None)
                )


def _worst(decisions: Sequence[GateDecision]) -> GateDecision:
    """One verdict over several calls: any block blocks, any ask asks; the reasons of all."""
    if not decisions:
        return GateDecision(Outcome.ASK, ())
    reasons = order_labels({r for d in decisions for r in d.reasons})
    if any(d.outcome is Outcome.BLOCK for d in decisions):
        return GateDecision(Outcome.BLOCK, reasons)
    if any(d.outcome is Outcome.ASK for d in decisions):
        return GateDecision(Outcome.ASK, reasons)
    return GateDecision(Outcome.ALLOW, reasons)


def _decision(
    at: str,
    session_id: str,
    tool: str,
    outcome: str,
    reasons: Sequence[str],
    detail: str | None,
    call: Mapping[str, Any] | None = None,
) -> RecordDecision:
    return RecordDecision(
        at=at,
        session_id=session_id,
        tool=tool,
        outcome=outcome,
        reasons=tuple(reasons),
        detail=detail,
        call={"tool": tool, "input": dict(call)} if call is not None else None,
    )
