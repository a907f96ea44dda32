"""One task's state, and the only code that changes its state or numbers its events.

Every transition is checked against :data:`TRANSITIONS` in :meth:`Task.move` — the one place a
state changes — which also runs or pauses the wall-clock budget (it counts in
:data:`CLOCK_RUNS` only: not while the user is asked, not in the queue). Every ``task.event`` is
built by :meth:`Task.event`, which numbers it (``seq`` from 0, +1 each) and stamps it (``ts``).
The ways a task ends live here too, so that each of them closes what the task had open:

- :meth:`Task.fail` — ``error``, then ``state_changed`` to ``failed`` with ``reason`` = the
  ``failureReason`` (seed: "A task that fails emits an error event, then state_changed to
  failed"), then :class:`StopSession` when a session exists;
- :meth:`Task.cancel` — ``state_changed`` to ``cancelled``, then :class:`StopSession`;
- both first finish every open call ``cancelled`` (the editor's tool cards must not spin
  forever) and drop the pending cards (stopping the session denies them in the daemon).

:class:`~bridge.desiide.lifecycle.machine.TaskBook` owns the tasks; :mod:`.lifecycle_session` translates
what the session reports. Pure, like both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from bridge.desiide.budgets import Budget, TokenMeter, WallClock
from bridge.desiide.lifecycle.types import (
    ACTIVE_STATES,
    Action,
    ApprovalNotFound,
    Emit,
    FileReport,
    StopSession,
    Success,
    TaskKind,
    TaskState,
)
from bridge.engine.timefmt import iso
from bridge.gate.history import call_key

__all__ = [
    "CLOCK_RUNS",
    "SUMMARY_INSTRUCTION_CAP",
    "TRANSITIONS",
    "Approval",
    "Call",
    "Proposal",
    "Task",
]

SUMMARY_INSTRUCTION_CAP: Final = 200
"""Characters of the instruction a ``TaskSummary`` repeats (a list shows the start)."""

_Q, _P, _R = TaskState.QUEUED, TaskState.PLANNING, TaskState.RUNNING
_A, _V = TaskState.AWAITING_APPROVAL, TaskState.VERIFYING
_DONE, _FAILED, _CANCELLED = TaskState.DONE, TaskState.FAILED, TaskState.CANCELLED

TRANSITIONS: Final[Mapping[TaskState, frozenset[TaskState]]] = {
    _Q: frozenset({_P, _FAILED, _CANCELLED}),
    _P: frozenset({_R, _FAILED, _CANCELLED}),
    _R: frozenset({_A, _V, _DONE, _FAILED, _CANCELLED}),
    # A turn that ends while a card is open (the CLI withdrew it) goes on from the wait.
    _A: frozenset({_R, _V, _DONE, _FAILED, _CANCELLED}),
    _V: frozenset({_R, _DONE, _FAILED, _CANCELLED}),
    _DONE: frozenset(),
    _FAILED: frozenset(),
    _CANCELLED: frozenset(),
}
"""Every allowed ``state_changed`` (the first one is ``null → queued``)."""
CLOCK_RUNS: Final = frozenset({_P, _R, _V})
"""States the wall-clock budget counts."""


@dataclass(slots=True)
class Call:
    """A call of an editor tool, in the editor's words (``read_file``, not ``mcp__…``)."""

    id: str
    tool: str
    args: dict[str, Any]

    def as_json(self) -> dict[str, Any]:
        """``ToolCall``."""
        return {"id": self.id, "tool": self.tool, "args": self.args}

    @property
    def key(self) -> str:
        """Equal for the exact same call, key order ignored (the gate's loop key)."""
        return call_key(self.tool, self.args)


@dataclass(slots=True)
class Approval:
    """A permission card waiting for the editor (or a phone)."""

    call: Call
    reasons: tuple[str, ...]
    decision_id: int | None


@dataclass(slots=True)
class Proposal:
    """A ``propose_edit`` under review: its files, and those reported so far."""

    paths: tuple[str, ...]
    reported: dict[str, FileReport] = field(default_factory=dict)


@dataclass(slots=True, eq=False)
class Task:
    """One task: what was asked, where it stands, what it spent, what it waits for."""

    id: str
    kind: TaskKind
    instruction: str
    allowed_tools: tuple[str, ...]
    success: Success
    budget: Budget
    checks: tuple[tuple[str, ...], ...]
    prompt: str
    created_at: float
    updated_at: float
    clock: WallClock
    state: TaskState | None = None
    failure_reason: str | None = None
    next_seq: int = 0
    last_entry: int = -1
    """The seq of the last transcript entry read (entries at or below it are old news)."""
    turns: int = 0
    """Turns started: the iterations the budget counts."""
    tool_calls: int = 0
    tokens: TokenMeter = field(default_factory=TokenMeter)
    model: str | None = None
    interrupted: bool = False
    calls: dict[str, Call] = field(default_factory=dict)
    open_calls: dict[str, Call] = field(default_factory=dict)
    rejected: set[str] = field(default_factory=set)
    """Calls the editor rejected: their results are ``rejected``, whatever their text."""
    approvals: dict[str, Approval] = field(default_factory=dict)
    judging: dict[str, Approval] = field(default_factory=dict)
    """Cards the judge is asked about (not yet the user's: the task is not waiting on them)."""
    proposals: dict[str, Proposal] = field(default_factory=dict)
    reported: set[str] = field(default_factory=set)
    """Proposals fully reported (a second report is an error that says so)."""
    seen_cards: set[str] = field(default_factory=set)
    approved_keys: set[str] = field(default_factory=set)
    """Calls approved with ``scope: task``."""
    last_call_key: str | None = None
    repeats: int = 0

    @classmethod
    def new(
        cls,
        task_id: str,
        kind: TaskKind,
        instruction: str,
        tools: tuple[str, ...],
        success: Success,
        budget: Budget,
        checks: tuple[tuple[str, ...], ...],
        prompt: str,
        now: float,
    ) -> Task:
        return cls(
            id=task_id,
            kind=kind,
            instruction=instruction,
            allowed_tools=tools,
            success=success,
            budget=budget,
            checks=checks,
            prompt=prompt,
            created_at=now,
            updated_at=now,
            clock=WallClock(budget.wall_clock_ms),
        )

    # --- queries -------------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        """Whether the task holds a running slot (a session exists)."""
        return self.state in ACTIVE_STATES

    @property
    def waiting(self) -> bool:
        """Whether the task waits on the user (a card or a proposal)."""
        return bool(self.approvals or self.proposals)

    def summary(self) -> dict[str, Any]:
        """``TaskSummary``."""
        assert self.state is not None
        out: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind.value,
            "state": self.state.value,
            "createdAt": iso(self.created_at),
            "updatedAt": iso(self.updated_at),
            "instruction": self.instruction[:SUMMARY_INSTRUCTION_CAP],
        }
        if self.failure_reason is not None:
            out["failureReason"] = self.failure_reason
        return out

    # --- events --------------------------------------------------------------------------------

    def event(self, event_type: str, now: float, /, **payload: Any) -> Emit:
        """The next ``task.event`` of this task (positional parameters: a payload may have a
        ``kind``, as ``error`` does)."""
        event = {"taskId": self.id, "seq": self.next_seq, "ts": iso(now), "type": event_type}
        event.update(payload)
        self.next_seq += 1
        self.updated_at = now
        return Emit(self.id, event)

    def move(self, to: TaskState, now: float, reason: str | None = None) -> Emit:
        """Change state (checked against :data:`TRANSITIONS`): ``state_changed``."""
        before = self.state
        assert (before is None and to is _Q) or (before is not None and to in TRANSITIONS[before])
        self.state = to
        if to in CLOCK_RUNS:
            self.clock.start(now)
        else:
            self.clock.pause(now)
        payload: dict[str, Any] = {"from": before.value if before else None, "to": to.value}
        if reason is not None:
            payload["reason"] = reason
        return self.event("state_changed", now, **payload)

    def settle(self, now: float) -> list[Action]:
        """Enter or leave ``awaiting_approval`` as the waits on the user open and close."""
        if self.waiting and self.state is _R:
            return [self.move(_A, now, "approval" if self.approvals else "edit_review")]
        if not self.waiting and self.state is _A:
            return [self.move(_R, now)]
        return []

    def decision(
        self, approval: Approval, outcome: str, now: float, detail: str | None = None
    ) -> Emit:
        """``decision_made`` for an answer to an approval.

        `outcome` is ``approved``, ``rejected``, ``auto`` (a ``scope: task`` approval matched)
        or ``answered_elsewhere`` (the card went away without our answer: a phone answered
        first, or the session withdrew it). ``id`` is the card's audit-log row when the daemon
        reported it; ``approvalId`` links the record to its ``approval_required``.
        """
        record: dict[str, Any] = {
            "at": iso(now),
            "taskId": self.id,
            "approvalId": approval.call.id,
            "tool": approval.call.tool,
            "outcome": outcome,
            "reasons": list(approval.reasons),
        }
        if approval.decision_id is not None:
            record["id"] = approval.decision_id
        if detail is not None:
            record["detail"] = detail
        return self.event("decision_made", now, decision=record)

    def take_approval(self, approval_id: str) -> Approval:
        """Remove and return a pending approval.

        Raises:
            ApprovalNotFound: none has this id (never had, or answered already).
        """
        approval = self.approvals.pop(approval_id, None)
        if approval is None:
            raise ApprovalNotFound(f"no pending approval {approval_id!r} in task {self.id!r}")
        return approval

    # --- endings -------------------------------------------------------------------------------

    def fail(
        self,
        reason: str,
        message: str,
        now: float,
        *,
        kind: str | None = None,
        retryable: bool = False,
    ) -> list[Action]:
        """Fail the task: ``error`` (`kind` defaults to the reason), ``state_changed`` to
        ``failed`` with ``reason``, and the session stopped when there is one."""
        had_session = self.active
        out = self.close_calls(now)
        error = {"kind": kind or reason, "message": message, "retryable": retryable}
        out.append(self.event("error", now, **error))
        self.failure_reason = reason
        out.append(self.move(_FAILED, now, reason))
        if had_session:
            out.append(StopSession(self.id))
        return out

    def cancel(self, now: float, reason: str = "cancelled") -> list[Action]:
        """Cancel the task, stopping its session when there is one."""
        had_session = self.active
        out = self.close_calls(now)
        out.append(self.move(_CANCELLED, now, reason))
        if had_session:
            out.append(StopSession(self.id))
        return out

    def close_calls(self, now: float) -> list[Action]:
        """Stop waiting for anything: open calls finish ``cancelled``; cards and proposals are
        dropped."""
        self.approvals.clear()
        self.judging.clear()
        self.proposals.clear()
        calls, self.open_calls = list(self.open_calls.values()), {}
        message = "The task ended before the call finished."
        return [
            self.event(
                "tool_call_finished",
                now,
                result={
                    "callId": call.id,
                    "ok": False,
                    "error": {"kind": "cancelled", "message": message},
                },
            )
            for call in calls
        ]

    def check_clock(self, now: float) -> list[Action]:
        """Fail ``budget:wallClockMs`` when the wall-clock budget ran out."""
        if not self.clock.expired(now):
            return []
        message = f"The task ran out of its {self.budget.wall_clock_ms} ms of wall clock."
        return self.fail("budget:wallClockMs", message, now)
