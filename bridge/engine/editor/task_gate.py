"""A Desiide task's tool calls: the task's policy in front of the permission gate.

A task's session gives its agent the editor's five tools (``mcp__desiide__<tool>``,
:mod:`bridge.gate.editor_calls`). Each call the agent asks about goes, in order:

1. **not an editor tool** (an agent-internal tool the CLI still asks about) → the session's
   ordinary gate, as for any session;
2. **outside the task's ``allowedTools``** (or a name the editor does not serve) → blocked,
   reason ``tool_not_allowed``; the model reads why;
3. **over the tool-call budget** (the call after ``maxToolCalls``) → blocked,
   ``budget:maxToolCalls``; the orchestrator fails the task when it sees the block;
4. ``propose_edit`` → judged as one ``Write`` per file: a deny rule blocks it; otherwise a
   ``review`` card the editor answers with ``edits.report`` (the floors' labels ride on it; the
   review is the approval, it never raises a permission card too);
5. any other editor tool → the gate, judged as the call it amounts to (``Read``, ``Glob``,
   ``Grep``, ``Bash``): auto-allowed by the mode, a card (phone and editor both see it), or
   blocked.

Task-scoped approvals (``task.approve{scope:"task"}``) are the orchestrator's: it answers a later
exact-match card at once, so the audit log shows each such call as an editor answer.

The budget counts calls asked about since the daemon started the session's cards: a daemon
restart starts the count again, which can only let a task run longer, never refuse a call it was
owed; the orchestrator counts the calls it sees too and fails the task at the budget.

Pure: the clock is ``now``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from bridge.engine.effects import TaskPolicy
from bridge.engine.sessions.broker import (
    AskedCall,
    BrokerResult,
    GateFacts,
    SessionCards,
    TaskJudging,
)
from bridge.gate import Outcome, describe_decision, evaluate, order_labels
from bridge.gate.editor_calls import PROPOSE_EDIT, editor_tool, judged_calls

__all__ = ["BUDGET_LABEL", "GATE_ERROR_LABEL", "NOT_ALLOWED_LABEL", "task_request"]

NOT_ALLOWED_LABEL: Final = "tool_not_allowed"
BUDGET_LABEL: Final = "budget:maxToolCalls"
GATE_ERROR_LABEL: Final = "gate_error"


def task_request(
    cards: SessionCards, policy: TaskPolicy, asked: AskedCall, facts: GateFacts, now: float
) -> BrokerResult:
    """The verdict on one call of a task's agent (see the module docstring for the order).

    `facts` are the task's own: its roots are the editor's workspace alone."""
    tool = editor_tool(asked.tool_name)
    if tool is None:
        # Not an editor tool (one the CLI asks about itself): the session's ordinary gate.
        return cards.request(asked, facts, now)
    request_id, tool_name, tool_input = asked.request_id, asked.tool_name, asked.tool_input
    refused = _refusal(cards, policy, request_id, tool_name, tool, tool_input, now)
    if refused is not None:
        return refused
    judged = judged_calls(tool, tool_input)
    if tool == PROPOSE_EDIT:
        return _review(cards, request_id, tool_name, tool_input, judged, facts, now)
    judging = TaskJudging(judged, strict=policy.strict, judge=policy.judge)
    return cards.request(asked, facts, now, judging)


def _refusal(
    cards: SessionCards,
    policy: TaskPolicy,
    request_id: str,
    tool_name: str,
    tool: str,
    tool_input: Mapping[str, Any],
    now: float,
) -> BrokerResult | None:
    """The task policy's block of an editor call (not allowed, over budget), or None."""
    if tool not in policy.allowed_tools:
        allowed = ", ".join(policy.allowed_tools) or "none"
        text = f"Blocked: tool_not_allowed — this task does not allow {tool} (allowed: {allowed})."
        return cards.block(request_id, tool_name, tool_input, (NOT_ALLOWED_LABEL,), text, now)
    cards.tool_calls += 1
    if cards.tool_calls > policy.max_tool_calls:
        text = (
            f"Blocked: budget:maxToolCalls — the task's budget of {policy.max_tool_calls} tool "
            "calls is spent."
        )
        return cards.block(request_id, tool_name, tool_input, (BUDGET_LABEL,), text, now)
    return None


def _review(
    cards: SessionCards,
    request_id: str,
    tool_name: str,
    tool_input: Mapping[str, Any],
    judged: list[tuple[str, dict[str, object]]],
    facts: GateFacts,
    now: float,
) -> BrokerResult:
    """An edit proposal: blocked when a file hits a deny rule, else the editor's review."""
    try:
        context = facts.context()
        decisions = [evaluate(name, fields, context) for name, fields in judged]
    except Exception:
        # The gate could not judge a path: the editor still reviews every file.
        reasons: tuple[str, ...] = (GATE_ERROR_LABEL,)
    else:
        reasons = order_labels({r for d in decisions for r in d.reasons})
        blocked = [d for d in decisions if d.outcome is Outcome.BLOCK]
        if blocked:
            text = f"Blocked: {describe_decision(blocked[0])}"
            return cards.block(request_id, tool_name, tool_input, reasons, text, now)
    return cards.review(request_id, tool_name, tool_input, reasons, now)
