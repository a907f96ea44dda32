"""``decisions.list`` and ``decisions.replay``: the gate's audit log, as the editor reads it.

There is one log: the ``decisions`` table of the bridge's store, which phones' cards and the
editor's tasks both write (:mod:`store.decisions`). It is read here through a read-only
connection (:mod:`store.readonly`), so listing works with or without a daemon, and never writes.

Vocabulary. The store keeps the daemon's outcomes: ``allow`` / ``card`` / ``block`` for the gate's
verdicts, ``review`` for an edit proposal, and the answers (``phone_allow``, ``editor_deny``,
``editor_report``, ``timeout``, ``interrupted``, …). The seed's verdicts are ``auto`` /
``confirm`` / ``block``; a filter may use either (``auto`` finds ``allow``, ``confirm`` finds
``card``), and a replay reports today's verdict in the seed's words. Every row of the log is a
``risk_gate@1`` decision (the rules gate); the other packs make no rows yet, so filtering on them
lists nothing. A row belongs to a task when its session is one (``task-…`` ids).

Paging is by row id, newest first: ``nextCursor`` is the id of the last row of the page, and the
next page holds the rows below it — stable while new rows arrive.

Replay judges the recorded call (kept since schema v9, secrets masked) again with today's gate,
in the session's context as the store knows it (its cwd as the workspace, its mode and task
policy; a closed session falls back to the editor's workspace), and says whether the verdict ``differs``. A row without a
call (an answer, a row from before v9, a call too big to keep) cannot be replayed: that is an
``InvalidParams`` answer naming why.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from bridge.desiide.errors import INVALID_PARAMS, DesiideError
from bridge.engine.editor.task_gate import NOT_ALLOWED_LABEL
from bridge.engine.effects import TaskPolicy
from bridge.gate import GateContext, Outcome, evaluate
from bridge.gate.editor_calls import PROPOSE_EDIT, editor_tool, judged_calls
from bridge.sandbox.hidden import hidden_paths
from store.decisions import DecisionRecord, read_decisions
from store.errors import StoreError
from store.readonly import ReadOnlyDatabase, open_readonly

__all__ = ["RISK_GATE_PACK", "list_decisions", "replay_decision"]

RISK_GATE_PACK: Final = "risk_gate@1"
TASK_PREFIX: Final = "task-"
_ALIASES: Final = {"auto": "allow", "confirm": "card"}
_SEED_OUTCOME: Final = {"allow": "auto", "card": "confirm", "review": "confirm", "block": "block"}
_VERDICT: Final = {Outcome.ALLOW: "auto", Outcome.ASK: "confirm", Outcome.BLOCK: "block"}


def _open(home: Path) -> ReadOnlyDatabase | None:
    """The store, read-only; None before the bridge ever ran in this home."""
    if not (home / "bridge.db").exists():
        return None
    try:
        return open_readonly(home)
    except StoreError as exc:
        raise DesiideError(INVALID_PARAMS, f"the bridge's store cannot be read: {exc}") from None


def record_json(record: DecisionRecord) -> dict[str, Any]:
    """A row as the protocol's ``DecisionRecord``."""
    out: dict[str, Any] = {
        "id": record.id,
        "at": record.at,
        "tool": record.tool,
        "outcome": record.outcome,
        "reasons": list(record.reasons),
        "pack": RISK_GATE_PACK,
    }
    if record.session_id.startswith(TASK_PREFIX):
        out["taskId"] = record.session_id
    if record.detail is not None:
        out["detail"] = record.detail
    return out


def list_decisions(
    home: Path,
    *,
    task_id: str | None,
    pack: str | None,
    outcome: str | None,
    limit: int,
    cursor: str | None,
) -> dict[str, Any]:
    """One page of ``decisions.list`` (see the module docstring).

    Raises:
        DesiideError: a cursor that is not one of ours, or an unreadable store.
    """
    before: int | None = None
    if cursor is not None:
        if not cursor.isdigit() or int(cursor) <= 0:
            raise DesiideError(INVALID_PARAMS, "cursor: not a cursor of decisions.list")
        before = int(cursor)
    if pack is not None and pack != RISK_GATE_PACK:
        return {"decisions": []}
    db = _open(home)
    if db is None:
        return {"decisions": []}
    with db:
        rows = read_decisions(
            db,
            task_id,
            limit + 1,
            outcome=_ALIASES.get(outcome, outcome) if outcome is not None else None,
            before_id=before,
        )
    page: dict[str, Any] = {"decisions": [record_json(r) for r in rows[:limit]]}
    if len(rows) > limit:
        page["nextCursor"] = str(rows[limit - 1].id)
    return page


def replay_decision(
    home: Path, decision_id: int, workspace: str | None, user_home: str
) -> dict[str, Any]:
    """``decisions.replay`` without the judge: the record, today's rules and ``differs``.

    Raises:
        DesiideError: no such decision, or one that recorded no call to judge.
    """
    db = _open(home)
    if db is None:
        raise DesiideError(INVALID_PARAMS, f"there is no decision {decision_id}")
    with db:
        rows = read_decisions(db, decision_id=decision_id)
        if not rows:
            raise DesiideError(INVALID_PARAMS, f"there is no decision {decision_id}")
        record = rows[0]
        session = _session(db, record.session_id)
    call = record.call
    if call is None or call.get("truncated") or not isinstance(call.get("input"), dict):
        raise DesiideError(
            INVALID_PARAMS,
            f"decision {decision_id} ({record.outcome}) recorded no call to judge: only the "
            "gate's verdicts written since this version can be replayed",
        )
    tool = str(call.get("tool", record.tool))
    cwd = str(session.get("cwd") or workspace or "/")
    task = TaskPolicy.from_json(session.get("task"))
    mode = str(session.get("permission_mode") or ("acceptEdits" if task else "default"))
    # The session's cwd stands for its workspace: a task's only root, and for a phone's session
    # the root it was opened in (the daemon's configured roots are not the editor's to read).
    context = GateContext(mode, cwd, (cwd,), user_home, secrets=hidden_paths(user_home, str(home)))
    outcome, reasons = _judge(tool, call["input"], task, context)
    recorded = _SEED_OUTCOME.get(record.outcome)
    return {
        "record": record_json(record),
        "rules": {"outcome": outcome, "reasons": reasons},
        "differs": recorded is not None and recorded != outcome,
        "call": {"tool": tool, "input": call["input"]},  # for the judge; not sent as it is
    }


def _judge(
    tool_name: str, tool_input: Mapping[str, Any], task: TaskPolicy | None, context: GateContext
) -> tuple[str, list[str]]:
    tool = editor_tool(tool_name)
    if tool is None:
        decision = evaluate(tool_name, tool_input, context)
        return _VERDICT[decision.outcome], list(decision.reasons)
    if task is not None and tool not in task.allowed_tools:
        return "block", [NOT_ALLOWED_LABEL]
    decisions = [evaluate(name, fields, context) for name, fields in judged_calls(tool, tool_input)]
    reasons = sorted({r for d in decisions for r in d.reasons})
    if any(d.outcome is Outcome.BLOCK for d in decisions):
        return "block", reasons
    if tool == PROPOSE_EDIT or any(d.outcome is Outcome.ASK for d in decisions) or not decisions:
        return "confirm", reasons
    return "auto", reasons


def _session(db: ReadOnlyDatabase, session_id: str) -> dict[str, Any]:
    row = db.fetchone("SELECT record FROM sessions WHERE session_id = ?", (session_id,))
    if row is None:
        return {}
    try:
        value = json.loads(row[0])
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
