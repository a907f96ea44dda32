"""What a task's session reports, as the task's events: transcript entries and cards.

:func:`apply_report` takes one ``tasks.watch`` answer for one active task. The mapping:

====================================  ======================================================
the session reports                   the task
====================================  ======================================================
text, ``role: assistant``             ``text_delta{messageId: "msg-<seq>", delta}``
``tool_use`` of ``mcp__desiide__*``   ``tool_call_started{call}``; the tool-call and loop
                                      counts (``budget:maxToolCalls``, ``loop_detected``)
``tool_result`` of such a call        ``tool_call_finished{result}``: ``ok`` + ``output``, or
                                      ``error{kind: blocked|rejected|failed, message,
                                      reasons}``; a ``budget:maxToolCalls`` block or
                                      ``ripgrep_missing`` fails the task
a per-call usage entry                the tokens of the running turn (``budget:maxTokens``)
the ``result`` entry                  ``usage{modelId, usage}``; the turn's exact tokens
an ``error`` entry                    fails ``model_error:<kind>`` (``error.kind`` = kind)
``Interrupted``, then ``stream_end``  ``cancelled`` (someone interrupted the session)
``stream_end``                        ``verifying`` + :class:`RunChecks` when checks are
                                      asked for, else ``done``
a new ``permission`` card             ``approval_required`` (``awaiting_approval``), or at
                                      once :class:`AnswerCard` allow + ``decision_made``
                                      when a ``scope: task`` approval matches exactly
a ``permission`` card labelled       the :class:`Judge` action; :func:`apply_judgement`
``jev:pending``                       then lets it go or raises it to the user
a new ``review`` card                 ``edit_proposed{proposal, files}`` (awaiting); refused
                                      at once when a path is not a plain workspace path
a card labelled ``loop_detected``     fails ``loop_detected``
a card gone without our answer        ``decision_made{outcome: answered_elsewhere}``
====================================  ======================================================

Calls of the agent's own tools (which a task turns off) and entries of other types show
nothing. A card is read once (by id): ``tasks.watch`` repeats the pending ones every time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from bridge.desiide.budgets import token_counts
from bridge.desiide.lifecycle.entries import (
    RETRYABLE_KINDS,
    call_paths,
    file_meta,
    model_error_kind,
    proposal_files,
    refusal,
    ripgrep_missing,
)
from bridge.desiide.lifecycle.task import Approval, Call, Proposal, Task
from bridge.desiide.lifecycle.types import (
    Action,
    AnswerCard,
    CardView,
    Judge,
    Log,
    RunChecks,
    StopSession,
    TaskState,
    model_error_reason,
)
from bridge.desiide.paths import check_relative_path
from bridge.gate.editor_calls import JUDGE_LABEL, editor_tool
from bridge.gate.history import LOOP_THRESHOLD

__all__ = ["MESSAGE_CAP", "OUTPUT_CAP", "apply_report"]

OUTPUT_CAP: Final = 64 * 1024
"""Characters of a tool's output carried by ``tool_call_finished`` (the head)."""
MESSAGE_CAP: Final = 2000
"""Characters of an error text carried by an event."""


def apply_report(
    task: Task,
    entries: Sequence[tuple[int, Mapping[str, Any]]],
    cards: Sequence[CardView],
    alive: bool,
    now: float,
    is_sensitive: Callable[[str], bool],
) -> list[Action]:
    """One ``tasks.watch`` answer for an active task (see the module table).

    Entries are read in seq order, each once; the first report with anything in it moves a
    ``planning`` task to ``running``. Reading stops when the task ends. Cards are read after the
    entries (a card's call comes first in the transcript). A session that is no longer alive
    while the task needs it fails the task ``internal_error`` — once a report brings no more
    entries, so keep watching a dead session until one comes back empty.
    """
    out = task.check_clock(now)
    fresh = sorted((e for e in entries if e[0] > task.last_entry), key=lambda e: e[0])
    if task.state is TaskState.PLANNING and (fresh or cards):
        out.append(task.move(TaskState.RUNNING, now))
    for seq, entry in fresh:
        if not task.active:
            return out
        if seq > task.last_entry:
            task.last_entry = seq
            out += _entry(task, seq, entry, now)
    if not task.active or task.state is TaskState.VERIFYING:
        return out  # ended, or between turns: the session owes nothing now
    if not alive:
        if fresh:  # maybe one batch of several: the rest can still end the turn
            return out
        # Gone while the task needs it (a crash, a daemon restart), with nothing left to read.
        out.append(Log("warn", "the task's session ended unexpectedly", {"taskId": task.id}))
        return out + task.fail("internal_error", "The task's session ended unexpectedly.", now)
    return out + _cards(task, cards, now, is_sensitive)


# --- entries ---------------------------------------------------------------------------------


def _entry(task: Task, seq: int, entry: Mapping[str, Any], now: float) -> list[Action]:
    kind = entry.get("entryType")
    raw_meta = entry.get("metadata")
    meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
    content = entry.get("content")
    text = content if isinstance(content, str) else ""
    if isinstance(model := meta.get("model"), str) and model:
        task.model = model
    if kind == "text":
        if meta.get("role") != "assistant" or not text:
            return []
        return [task.event("text_delta", now, messageId=f"msg-{seq}", delta=text)]
    if kind == "tool_use":
        return _tool_use(task, meta, now)
    if kind == "tool_result":
        return _tool_result(task, meta, text, now)
    if kind == "error":
        error_type = meta.get("error_type") or meta.get("special")
        error_kind = model_error_kind(text, error_type if isinstance(error_type, str) else None)
        message = text[:MESSAGE_CAP] or "The model stream ended with an error."
        retryable = error_kind in RETRYABLE_KINDS
        reason = model_error_reason(error_kind)
        return task.fail(reason, message, now, kind=error_kind, retryable=retryable)
    if kind == "system":
        return _system(task, meta, now)
    return []


def _tool_use(task: Task, meta: Mapping[str, Any], now: float) -> list[Action]:
    name, tool_id, args = meta.get("tool_name"), meta.get("tool_use_id"), meta.get("tool_input")
    if not isinstance(name, str) or not isinstance(tool_id, str):
        return []
    tool = editor_tool(name)
    if tool is None:
        return [Log("warn", "the agent called a non-editor tool", {"taskId": task.id})]
    call = Call(tool_id, tool, dict(args) if isinstance(args, Mapping) else {})
    task.calls[tool_id] = call
    task.open_calls[tool_id] = call
    task.tool_calls += 1
    out: list[Action] = [task.event("tool_call_started", now, call=call.as_json())]
    key = call.key
    task.repeats = task.repeats + 1 if key == task.last_call_key else 1
    task.last_call_key = key
    if task.repeats >= LOOP_THRESHOLD:
        message = f"The model made the same {tool} call {task.repeats} times in a row."
        out += task.fail("loop_detected", message, now)
    elif task.tool_calls > task.budget.max_tool_calls:
        message = f"The task used up its {task.budget.max_tool_calls} tool calls."
        out += task.fail("budget:maxToolCalls", message, now)
    return out


def _tool_result(task: Task, meta: Mapping[str, Any], text: str, now: float) -> list[Action]:
    tool_id = meta.get("tool_use_id")
    call = task.calls.get(tool_id) if isinstance(tool_id, str) else None
    if call is None:
        return []  # the result of a call that was not an editor tool's
    task.open_calls.pop(call.id, None)
    is_error = meta.get("is_error") is True
    refused = refusal(text, is_error)
    result: dict[str, Any] = {"callId": call.id, "ok": not is_error}
    if call.id in task.rejected:
        result["error"] = {"kind": "rejected", "message": text[:MESSAGE_CAP], "reasons": []}
    elif refused is not None:
        result["error"] = {
            "kind": refused.kind,
            "message": text[:MESSAGE_CAP],
            "reasons": list(refused.reasons),
        }
    elif is_error:
        result["error"] = {"kind": "failed", "message": text[:MESSAGE_CAP]}
    else:
        result["output"] = text[:OUTPUT_CAP]
    out: list[Action] = [task.event("tool_call_finished", now, result=result)]
    if call.tool in ("list_files", "search") and ripgrep_missing(text, is_error):
        message = "list_files and search need ripgrep (rg), which is not installed."
        out += task.fail("ripgrep_missing", message, now)
    elif refused is not None and "budget:maxToolCalls" in refused.reasons:
        message = f"The task used up its {task.budget.max_tool_calls} tool calls."
        out += task.fail("budget:maxToolCalls", message, now)
    return out


def _system(task: Task, meta: Mapping[str, Any], now: float) -> list[Action]:
    if meta.get("stream_end") is True:
        return _end_turn(task, now)
    subtype = meta.get("subtype")
    if subtype == "interrupted":
        task.interrupted = True
        return []
    if subtype == "result":
        return _turn_usage(task, meta, now)
    if subtype is None and (counts := token_counts(meta.get("usage"))) is not None:
        task.tokens.add_call(counts)  # one model call of the running turn
        return _check_tokens(task, now)
    return []


def _turn_usage(task: Task, meta: Mapping[str, Any], now: float) -> list[Action]:
    counts = token_counts(meta.get("usage"))
    task.tokens.end_turn(counts)
    model = task.model
    model_usage = meta.get("model_usage")
    if model is None and isinstance(model_usage, Mapping) and model_usage:
        model = str(next(iter(model_usage)))
    usage: dict[str, Any] = {
        "inputTokens": counts.input if counts else 0,
        "outputTokens": counts.output if counts else 0,
    }
    cost = meta.get("cost_usd")
    if isinstance(cost, int | float) and not isinstance(cost, bool) and cost >= 0:
        usage["costUsd"] = float(cost)
    if counts is not None and counts.cache_read:
        usage["cacheReadTokens"] = counts.cache_read
    event = task.event("usage", now, modelId=model or "unknown", usage=usage)
    return [event, *_check_tokens(task, now)]


def _check_tokens(task: Task, now: float) -> list[Action]:
    if task.tokens.total <= task.budget.max_tokens:
        return []
    message = f"The task used up its {task.budget.max_tokens} tokens."
    return task.fail("budget:maxTokens", message, now)


def _end_turn(task: Task, now: float) -> list[Action]:
    if task.interrupted:
        # Someone interrupted the session (a phone): the user stopped the task.
        return task.cancel(now, "interrupted")
    out = task.close_calls(now)  # a turn that ended has no call running or waiting
    if task.success.any:
        return [*out, task.move(TaskState.VERIFYING, now), RunChecks(task.id, task.checks)]
    return [*out, task.move(TaskState.DONE, now), StopSession(task.id)]


# --- cards -----------------------------------------------------------------------------------


def _cards(
    task: Task, cards: Sequence[CardView], now: float, is_sensitive: Callable[[str], bool]
) -> list[Action]:
    out: list[Action] = []
    pending = {card.id for card in cards}
    for approval_id in [a for a in task.approvals if a not in pending]:
        # Answered elsewhere (a phone: the first answer wins), or withdrawn by the session.
        out.append(task.decision(task.approvals.pop(approval_id), "answered_elsewhere", now))
    for card_id in [c for c in task.judging if c not in pending]:
        del task.judging[card_id]  # answered elsewhere while the judge thought: nothing to ask
    for proposal_id in [p for p in task.proposals if p not in pending]:
        del task.proposals[proposal_id]
        out.append(Log("info", "a proposal's review ended elsewhere", {"taskId": task.id}))
    for card in cards:
        if card.id in task.seen_cards:
            continue
        task.seen_cards.add(card.id)
        out += _card(task, card, now, is_sensitive)
        if not task.active:
            return out
    return out + task.settle(now)


def _card(
    task: Task, card: CardView, now: float, is_sensitive: Callable[[str], bool]
) -> list[Action]:
    if "loop_detected" in card.reasons:
        return task.fail("loop_detected", "The model made the same call three times in a row.", now)
    tool = editor_tool(card.tool) or card.tool
    if card.kind == "permission":
        call = Call(card.id, tool, dict(card.input))
        approval = Approval(call, card.reasons, card.decision_id)
        if call.key in task.approved_keys:
            return [
                AnswerCard(task.id, card.id, True),
                task.decision(approval, "auto", now, "scope: task"),
            ]
        if JUDGE_LABEL in card.reasons:
            approval.reasons = tuple(r for r in card.reasons if r != JUDGE_LABEL)
            task.judging[card.id] = approval
            return [Judge(task.id, card.id, tool, dict(card.input))]
        return _ask_user(task, approval, now)
    if card.kind == "review":
        return _proposal(task, card, now, is_sensitive)
    if card.kind in ("question", "plan"):
        message = "Questions and plans are not available in an editor task; go on without."
        return [
            Log("warn", f"the agent opened a {card.kind} card", {"taskId": task.id}),
            AnswerCard(task.id, card.id, False, message),
        ]
    return [Log("warn", "a card of an unknown kind", {"taskId": task.id, "kind": card.kind})]


def _ask_user(task: Task, approval: Approval, now: float) -> list[Action]:
    """``approval_required``: the call waits for the editor (or a phone)."""
    call = approval.call
    task.approvals[call.id] = approval
    payload: dict[str, Any] = {
        "approvalId": call.id,
        "call": call.as_json(),
        "outcome": "confirm",
        "reasons": list(approval.reasons),
        "paths": call_paths(call.tool, call.args),
    }
    if approval.decision_id is not None:
        payload["decisionId"] = approval.decision_id
    return [task.event("approval_required", now, **payload)]


def apply_judgement(
    task: Task, card_id: str, raised: bool, reasons: Sequence[str], now: float
) -> list[Action]:
    """The judge's word on a ``jev:pending`` card: the rules' allow stands (``decision_made``
    ``auto``), or the call is raised to the user with the judge's reasons. A card answered
    elsewhere meanwhile (a phone) is gone: nothing to do."""
    approval = task.judging.pop(card_id, None)
    if approval is None or not task.active:
        return []
    if not raised:
        return [
            AnswerCard(task.id, card_id, True),
            task.decision(approval, "auto", now, "the judge let it go"),
        ]
    approval.reasons = (*approval.reasons, *(r for r in reasons if r not in approval.reasons))
    return _ask_user(task, approval, now) + task.settle(now)


def _proposal(
    task: Task, card: CardView, now: float, is_sensitive: Callable[[str], bool]
) -> list[Action]:
    files = proposal_files(card.input)
    if not files:
        # Nothing to review, so nothing will be reported: the tool tells the model at once.
        return [AnswerCard(task.id, card.id, True, report=())]
    for index, (path, _) in enumerate(files):
        # One spelling per file, the editor's: edits.report must name exactly what was proposed.
        try:
            plain = check_relative_path(path)
        except ValueError as exc:
            problem = f"the path of file {index + 1} {exc}"
        else:
            if plain == path:
                continue
            problem = f"write the path of file {index + 1} as {plain!r}"
        message = f"propose_edit refused: {problem}. Paths are workspace-relative (src/app.py)."
        return [AnswerCard(task.id, card.id, False, message)]
    summary = card.input.get("summary")
    proposal: dict[str, Any] = {
        "id": card.id,
        "taskId": task.id,
        "summary": summary if isinstance(summary, str) else "",
        "files": [{"path": path, "content": content} for path, content in files],
    }
    task.proposals[card.id] = Proposal(tuple(path for path, _ in files))
    metas = [file_meta(path, content, is_sensitive(path)) for path, content in files]
    return [task.event("edit_proposed", now, proposal=proposal, files=metas)]
