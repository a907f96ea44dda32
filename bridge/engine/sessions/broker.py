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

A Desiide task's calls (:mod:`bridge.engine.editor.task_gate`) add two things: the verdict on an editor
tool is the worst over the calls it amounts to (``judge_as``), and an edit proposal opens a
``review`` card that only the editor answers (``edits.report``; the report rides to the tool as
its input's ``report``). The editor's ``task.approve``/``task.reject`` answer permission cards as
a phone's ``permission-res`` does; the first answer wins.

Cards time out after an hour (denied). ``interrupt``, a restart, the end or a close of the
session deny every card of it. Every verdict is appended to the ``decisions`` audit log.

The cards and the call history of one session live in its :class:`SessionCards` (held by the
session's state in the engine), so whatever ends a session ends its cards with it. Turning a
:class:`BrokerResult` into effects (transcript lines, the audit rows, the answers) is the engine's
:mod:`bridge.engine.sessions.cards`.

Pure: the clock is ``now``; entries, answers and log rows come back as data for the engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bridge.engine.effects import AnswerPermission, RecordDecision, SetRunnerOption
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

__all__ = ["CARD_TIMEOUT_SECONDS", "BrokerResult", "Card", "SessionCards"]

CARD_TIMEOUT_SECONDS = 3600.0
ASK_QUESTION = "AskUserQuestion"
EXIT_PLAN = "ExitPlanMode"
ENTER_PLAN = "EnterPlanMode"


@dataclass(slots=True)
class Card:
    """A question the phone has to answer before the agent goes on."""

    session_id: str
    request_id: str
    kind: str  # "permission" | "plan" | "question" | "review"
    tool_name: str
    tool_input: dict[str, Any]
    created_at: float
    questions: list[dict[str, Any]] = field(default_factory=list)
    answers: dict[int, str] = field(default_factory=dict)
    """Answers by question index (two questions may share a text)."""
    reasons: tuple[str, ...] = ()
    """The gate's reason labels (a permission or review card)."""


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
        """Editor tool calls asked about (a Desiide task's budget, :mod:`.task_gate`)."""

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
        request_id: str,
        tool_name: str,
        tool_input: Mapping[str, Any],
        *,
        mode: str,
        cwd: str,
        roots: Sequence[str],
        home: str,
        secrets: Sequence[str],
        description: str | None,
        agent_id: str | None,
        now: float,
        judge_as: Sequence[tuple[str, Mapping[str, object]]] | None = None,
        strict: bool = False,
        judge: bool = False,
    ) -> BrokerResult:
        """One call asks: a card, or the gate's own verdict.

        `judge_as` gives the calls of the gate's vocabulary this call amounts to (an editor
        tool, :mod:`bridge.gate.editor_calls`): the verdict is the worst over them, while
        the card and the audit row keep the call as the agent made it. `strict` (a task in the
        editor's strict mode) turns an allow into a card labelled ``policy_override:strict_mode``;
        `judge` (the editor's judge is on) into a card labelled ``jev:pending``, which the
        orchestrator answers once its judge has spoken.
        """
        session_id = self.session_id
        result = BrokerResult()
        ts = _timestamp(now)
        data = dict(tool_input)
        if tool_name == ASK_QUESTION:
            raw = data.get("questions")
            questions = [q for q in raw if isinstance(q, dict)] if isinstance(raw, list) else []
            if not questions:
                result.answers.append(
                    AnswerPermission(session_id, request_id, False, "No question to ask.")
                )
                result.decisions.append(
                    _decision(ts, session_id, tool_name, "block", (), "no usable question")
                )
                return result
            card = Card(session_id, request_id, "question", tool_name, data, now, questions)
            self._cards[request_id] = card
            for index, question in enumerate(questions):
                metadata: dict[str, Any] = {
                    "special": "ask_question",
                    "tool_use_id": request_id,
                    "options": _options(question),
                    "question_index": index,
                    "question_count": len(questions),
                }
                if question.get("header"):
                    metadata["header"] = str(question["header"])
                if question.get("multiSelect"):
                    metadata["multiSelect"] = True
                result.entries.append(
                    OutputEntry(
                        entryType="system",
                        content=str(question.get("question", "")),
                        timestamp=ts,
                        metadata=metadata,
                    )
                )
            result.decisions.append(_decision(ts, session_id, tool_name, "card", (), "question"))
            return result
        if tool_name == ENTER_PLAN:
            result.answers.append(AnswerPermission(session_id, request_id, True))
            result.decisions.append(_decision(ts, session_id, tool_name, "allow", (), "plan mode"))
            return result
        if tool_name == EXIT_PLAN:
            plan = str(data.get("plan") or "")
            self._cards[request_id] = Card(session_id, request_id, "plan", tool_name, data, now)
            if plan:
                result.entries.append(
                    OutputEntry(
                        entryType="text",
                        content=plan,
                        timestamp=ts,
                        metadata={
                            "role": "assistant",
                            "special": "plan",
                            "tool_use_id": request_id,
                        },
                    )
                )
            result.entries.append(
                OutputEntry(
                    entryType="system",
                    content="Plan approval needed",
                    timestamp=ts,
                    metadata={
                        "special": "plan_approval",
                        "tool_use_id": request_id,
                        "has_plan": bool(plan),
                    },
                )
            )
            result.decisions.append(_decision(ts, session_id, tool_name, "card", (), "plan"))
            return result
        repeats = self._history.record(tool_name, data)
        gate_failure: str | None = None
        try:
            context = GateContext(
                mode=mode, cwd=cwd, roots=tuple(roots), home=home, secrets=tuple(secrets)
            )
            if judge_as is None:
                decision = evaluate(tool_name, data, context, repeat_count=repeats)
            else:
                decision = _worst(
                    [evaluate(n, i, context, repeat_count=repeats) for n, i in judge_as]
                )
        except Exception as exc:
            # No usable workspace context, or a bug in the gate (a RecursionError on deep
            # input, ...): never auto-allow, never stop the session; the user decides on a card.
            # Only the type is kept: the message may quote the tool input.
            decision = None
            gate_failure = f"the gate could not judge this call ({type(exc).__name__})"
        if strict and decision is not None and decision.outcome is Outcome.ALLOW:
            decision = GateDecision(Outcome.ASK, (*decision.reasons, STRICT_LABEL))
        elif judge and decision is not None and decision.outcome is Outcome.ALLOW:
            decision = GateDecision(Outcome.ASK, (*decision.reasons, JUDGE_LABEL))
        if decision is not None and decision.outcome is Outcome.BLOCK:
            text = describe_decision(decision)
            result.answers.append(AnswerPermission(session_id, request_id, False, text))
            result.decisions.append(
                _decision(ts, session_id, tool_name, "block", decision.reasons, text, data)
            )
            return result
        if decision is not None and decision.outcome is Outcome.ALLOW:
            result.answers.append(AnswerPermission(session_id, request_id, True))
            result.decisions.append(
                _decision(
                    ts, session_id, tool_name, "allow", decision.reasons, f"mode {mode}", data
                )
            )
            return result
        reasons = decision.reasons if decision is not None else ()
        self._cards[request_id] = Card(
            session_id, request_id, "permission", tool_name, data, now, reasons=tuple(reasons)
        )
        metadata = {
            "special": "permission_request",
            "tool_name": tool_name,
            "tool_use_id": request_id,
            "tool_input": data,
            "reasons": list(reasons),
        }
        if reasons and decision is not None:
            metadata["reason_text"] = describe_decision(decision)
        elif gate_failure is not None:
            metadata["reason_text"] = gate_failure
        if description:
            metadata["description"] = description
        if agent_id:
            metadata["subagent"] = True
            metadata["agent_id"] = agent_id
        result.entries.append(
            OutputEntry(
                entryType="system",
                content=description or f"Permission needed: {tool_name}",
                timestamp=ts,
                metadata=metadata,
            )
        )
        result.decisions.append(
            _decision(ts, session_id, tool_name, "card", reasons, gate_failure, data)
        )
        return result

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
        self._cards[request_id] = Card(
            self.session_id, request_id, "review", tool_name, data, now, reasons=tuple(reasons)
        )
        files = data.get("files")
        count = len(files) if isinstance(files, list) else 0
        summary = data.get("summary")
        text = f"Edit proposed ({count} file{'s' if count != 1 else ''}): review it in the editor"
        if isinstance(summary, str) and summary.strip():
            text = f"{text}. {summary.strip()[:500]}"
        metadata: dict[str, Any] = {
            "special": "edit_review",
            "tool_name": tool_name,
            "tool_use_id": request_id,
            "reasons": list(reasons),
        }
        ts = _timestamp(now)
        result = BrokerResult()
        result.entries.append(
            OutputEntry(entryType="system", content=text, timestamp=ts, metadata=metadata)
        )
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
            options = _options(question)
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


def _options(question: Mapping[str, Any]) -> list[dict[str, str]]:
    raw = question.get("options")
    out: list[dict[str, str]] = []
    for option in raw if isinstance(raw, list) else []:
        if isinstance(option, dict) and option.get("label") is not None:
            item = {"label": str(option["label"])}
            if option.get("description"):
                item["description"] = str(option["description"])
            out.append(item)
        elif isinstance(option, str):
            out.append({"label": option})
    return out


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
