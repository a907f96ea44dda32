"""The orchestrator's task lifecycle (COR-2): every Desiide task, as a sans-I/O state machine.

Rules (seed, "Task lifecycle (COR-2)", and the bridge's own choices where the seed is silent):

- States ``queued → planning → running ⇄ awaiting_approval → verifying → done | failed |
  cancelled`` (:data:`~.lifecycle_task.TRANSITIONS`). At most two tasks hold a session at once;
  the rest wait in FIFO order, and a task that ends lets the next one start.
- ``awaiting_approval`` covers both waits on the user: a permission card (answered by
  :meth:`TaskBook.approve` / :meth:`TaskBook.reject`) and a ``propose_edit`` review (answered by
  :meth:`TaskBook.report_edits`, possibly over several calls, each file once). The wall-clock
  budget pauses while the task waits.
- ``scope: task`` remembers the approved call: a later card for the exact same call (tool and
  arguments, key order ignored) is allowed at once. A block stays a block: blocks never reach a
  card.
- A failing task emits ``error``, then ``state_changed`` to ``failed`` with ``reason`` = its
  ``failureReason``, and its session is stopped.
- Every ``task.event`` carries ``taskId``, ``seq`` (per task, from 0, +1 each) and ``ts``.

Theory of operation. A task *is* a daemon session (same id). The runtime feeds the book what it
learns and dispatches the :data:`~bridge.desiide.lifecycle.types.Action` s it gets back:

- the editor's requests: :meth:`~TaskBook.create`, :meth:`~TaskBook.cancel`,
  :meth:`~TaskBook.approve`, :meth:`~TaskBook.reject`, :meth:`~TaskBook.report_edits`;
- what ``tasks.watch`` reports for the session: :meth:`~TaskBook.on_session` with the new
  transcript entries (by seq; a seq already seen is ignored, so overlapping reports are safe),
  the *complete* set of pending cards, and whether the session is alive —
  :mod:`.lifecycle_session` has the table of what becomes which event;
- the success checks' outcome: :meth:`~TaskBook.on_checks`;
- time: :meth:`~TaskBook.tick` at :meth:`~TaskBook.next_deadline`; failures the runtime detects
  itself (no model, no workspace, a bug): :meth:`~TaskBook.fail`.

The modules: this one owns the tasks, the FIFO queue and the editor's requests;
:mod:`.lifecycle_task` is one task's state, its transition table and its event numbering;
:mod:`.lifecycle_session` reads the session's reports; :mod:`.lifecycle_types` is the vocabulary
(actions, card view, errors); :mod:`.budgets` the meters; :mod:`.lifecycle_prompts` the prompts.

Loop detection is the gate's (a card labelled ``loop_detected``) and also counted here over the
``tool_use`` entries, so that a call the gate blocks three times in a row (which never makes a
card) is caught as well.

Pure: ``now`` is Unix time in seconds (events need wall time for ``ts``, and a budget of minutes
tolerates the rare clock step); no I/O, no logging — :class:`~.lifecycle_types.Log` is an action.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from bridge.desiide.budgets import Budget
from bridge.desiide.jev.packs import is_sensitive as default_sensitive
from bridge.desiide.lifecycle.prompts import checks_failed_text, task_prompt
from bridge.desiide.lifecycle.session import apply_judgement, apply_report
from bridge.desiide.lifecycle.task import Task
from bridge.desiide.lifecycle.types import (
    FAILURE_REASONS,
    REPORT_STATUSES,
    TERMINAL_STATES,
    Action,
    AnswerCard,
    ApprovalNotFound,
    CardView,
    FileReport,
    InvalidReport,
    Log,
    SendInput,
    StartSession,
    StopSession,
    Success,
    TaskKind,
    TaskNotFound,
    TaskState,
)
from bridge.gate.editor_calls import EDITOR_TOOLS, PROPOSE_EDIT

__all__ = ["DEFAULT_TOOLS", "MAX_RUNNING", "TaskBook"]

MAX_RUNNING: Final = 2
DEFAULT_TOOLS: Final = ("read_file", "list_files", "search", PROPOSE_EDIT)
"""Seed: "Defaults: read-only tools + propose_edit"."""


class TaskBook:
    """Every task of one orchestrator (see the module docstring).

    Args:
        max_running: how many tasks may hold a session at once (COR-2: 2).
        is_sensitive: ``FileMeta.sensitive`` of a workspace path.
    """

    def __init__(
        self,
        *,
        max_running: int = MAX_RUNNING,
        is_sensitive: Callable[[str], bool] = default_sensitive,
    ) -> None:
        self._max_running = max_running
        self._is_sensitive = is_sensitive
        self._tasks: dict[str, Task] = {}
        self._queue: deque[str] = deque()

    # --- queries -------------------------------------------------------------------------------

    def summaries(self) -> list[dict[str, Any]]:
        """``TaskSummary`` of every task, oldest first (``task.list``)."""
        return [task.summary() for task in self._tasks.values()]

    def summary(self, task_id: str) -> dict[str, Any]:
        """``TaskSummary``: ``{id, kind, state, createdAt, updatedAt, failureReason?}``.

        Raises:
            TaskNotFound: no task has this id.
        """
        return self._get(task_id).summary()

    def state(self, task_id: str) -> TaskState:
        """The task's state. Raises :class:`TaskNotFound`."""
        state = self._get(task_id).state
        assert state is not None
        return state

    def next_deadline(self) -> float | None:
        """When :meth:`tick` must run next (the earliest wall-clock budget end), or None."""
        deadlines = [d for t in self._tasks.values() if (d := t.clock.deadline()) is not None]
        return min(deadlines, default=None)

    # --- the editor's requests -----------------------------------------------------------------

    def create(
        self,
        task_id: str,
        kind: TaskKind | str,
        instruction: str,
        allowed_tools: Sequence[str] | None,
        success: Success | None,
        budget: Budget | None,
        now: float,
        *,
        context: object = None,
        check_commands: Sequence[Sequence[str]] | None = None,
    ) -> list[Action]:
        """Queue a task (``task.create``); it starts at once when a slot is free.

        Args:
            task_id: the new task's id (also its session's).
            kind: ``ask``, ``edit`` or ``fix``.
            instruction: the user's words.
            allowed_tools: the editor tools the agent may call (None: :data:`DEFAULT_TOOLS`).
                An ``ask`` task never gets ``propose_edit``: it is read-only by definition.
            success: the checks that must pass (None: none, but ``testsPass`` for ``fix``).
            budget: the limits (None: the defaults).
            now: Unix time.
            context: the editor's ``TaskInput.context``, given to the model as it is.
            check_commands: the project's commands for the asked checks
                (:func:`bridge.desiide.checks.commands.check_commands`); None or empty when it has none,
                and the task then fails ``no_check_command`` at once, before any model spend.

        Raises:
            ValueError: the id is taken, or the kind or a tool is unknown.
        """
        if task_id in self._tasks:
            raise ValueError(f"task {task_id!r} exists already")
        kind = TaskKind(kind)
        tools = tuple(dict.fromkeys(allowed_tools)) if allowed_tools is not None else DEFAULT_TOOLS
        if unknown := [tool for tool in tools if tool not in EDITOR_TOOLS]:
            raise ValueError(f"unknown tools: {unknown!r}")
        if kind is TaskKind.ASK:
            tools = tuple(tool for tool in tools if tool != PROPOSE_EDIT)
        if success is None:
            success = Success(tests_pass=True) if kind is TaskKind.FIX else Success()
        budget = budget or Budget()
        checks = tuple(tuple(c) for c in check_commands or () if c) if success.any else ()
        prompt = task_prompt(kind, instruction, context, tools, budget.max_tool_calls, checks)
        task = Task.new(task_id, kind, instruction, tools, success, budget, checks, prompt, now)
        self._tasks[task_id] = task
        out: list[Action] = [task.move(TaskState.QUEUED, now)]
        if success.any and not checks:
            asked = " and ".join(
                name
                for name, on in (("tests", success.tests_pass), ("lint", success.lint_clean))
                if on
            )
            message = f"The task asks for {asked} to pass, but the project has no such command."
            out += task.fail("no_check_command", message, now)
        else:
            self._queue.append(task_id)
        return out + self._fill(now)

    def cancel(self, task_id: str, now: float) -> list[Action]:
        """Cancel a task (``task.cancel``): a queued one never starts, a running one's session
        is stopped. Nothing happens to a finished task (the result's ``cancelled`` is false).

        Raises:
            TaskNotFound: no task has this id.
        """
        task = self._get(task_id)
        if task.state in TERMINAL_STATES:
            return []
        return task.cancel(now) + self._fill(now)

    def cancel_all(self, now: float) -> list[Action]:
        """Cancel every unfinished task (shutdown): the queued ones first, so that stopping a
        running one starts nothing."""
        out: list[Action] = []
        for task in sorted(self._tasks.values(), key=lambda t: t.state is not TaskState.QUEUED):
            if task.state not in TERMINAL_STATES:
                out += task.cancel(now)
        return out

    def approve(self, task_id: str, approval_id: str, scope: str, now: float) -> list[Action]:
        """Allow a pending call (``task.approve``). ``scope: task`` also allows, for the rest of
        the task, every later card of the exact same call — and the open ones already.

        Raises:
            TaskNotFound: no task has this id.
            ApprovalNotFound: no pending approval has this id in the task.
            ValueError: `scope` is neither ``once`` nor ``task``.
        """
        if scope not in ("once", "task"):
            raise ValueError(f"unknown scope {scope!r}")
        task = self._get(task_id)
        approval = task.take_approval(approval_id)
        out: list[Action] = [
            AnswerCard(task.id, approval_id, True),
            task.decision(approval, "approved", now, f"scope: {scope}"),
        ]
        if scope == "task":
            key = approval.call.key
            task.approved_keys.add(key)
            for other_id, other in list(task.approvals.items()):
                if other.call.key == key:
                    del task.approvals[other_id]
                    out.append(AnswerCard(task.id, other_id, True))
                    out.append(task.decision(other, "auto", now, "scope: task"))
        return out + task.settle(now)

    def reject(
        self, task_id: str, approval_id: str, reason: str | None, now: float
    ) -> list[Action]:
        """Deny a pending call (``task.reject``); the model reads `reason`.

        Raises:
            TaskNotFound: no task has this id.
            ApprovalNotFound: no pending approval has this id in the task.
        """
        task = self._get(task_id)
        approval = task.take_approval(approval_id)
        task.rejected.add(approval.call.id)
        message = (
            f"The user rejected this call: {reason}" if reason else "The user rejected this call."
        )
        return [
            AnswerCard(task.id, approval_id, False, message),
            task.decision(approval, "rejected", now, reason or None),
            *task.settle(now),
        ]

    def report_edits(
        self, task_id: str, proposal_id: str, files: Sequence[FileReport], now: float
    ) -> list[Action]:
        """Record what the editor did with a proposal's files (``edits.report``). When every
        file is reported the proposal's call is answered with the per-file report, which the
        tool hands to the model, and the task runs on.

        Raises:
            TaskNotFound: no task has this id.
            ApprovalNotFound: no pending proposal has this id (unknown, or reported already).
            InvalidReport: no file, a path not in the proposal, a file reported twice, or an
                unknown status. Nothing of the call is recorded then.
        """
        task = self._get(task_id)
        proposal = task.proposals.get(proposal_id)
        if proposal is None:
            if proposal_id in task.reported:
                raise ApprovalNotFound(f"proposal {proposal_id!r} was reported already")
            raise ApprovalNotFound(f"no pending proposal {proposal_id!r} in task {task_id!r}")
        if not files:
            raise InvalidReport("the report names no file")
        seen: set[str] = set()
        for report in files:
            if report.status not in REPORT_STATUSES:
                raise InvalidReport(f"unknown status {report.status!r} for {report.path!r}")
            if report.path not in proposal.paths:
                raise InvalidReport(f"{report.path!r} is not in proposal {proposal_id!r}")
            if report.path in seen or report.path in proposal.reported:
                raise InvalidReport(f"{report.path!r} was reported already")
            seen.add(report.path)
        for report in files:
            proposal.reported[report.path] = report
        if len(proposal.reported) < len(proposal.paths):
            return []
        del task.proposals[proposal_id]
        task.reported.add(proposal_id)
        report_json = tuple(proposal.reported[path].as_json() for path in proposal.paths)
        return [
            AnswerCard(task.id, proposal_id, True, report=report_json),
            *task.settle(now),
        ]

    # --- what the runtime learns ---------------------------------------------------------------

    def on_session(
        self,
        task_id: str,
        entries: Sequence[tuple[int, Mapping[str, Any]]],
        cards: Sequence[CardView],
        alive: bool,
        now: float,
    ) -> list[Action]:
        """What ``tasks.watch`` reported for the task's session.

        Args:
            task_id: the task (= session) id.
            entries: ``(seq, OutputEntry JSON)`` pairs; those at or below the last seq seen are
                ignored.
            cards: every card of the session pending now (a card missing from it was answered).
            alive: whether the session still runs. A session that ended while the task needs
                it fails the task (``internal_error``) on the first report without new entries:
                keep watching until then (the last entries may come in several batches).
            now: Unix time.

        Raises:
            TaskNotFound: no task has this id.
        """
        task = self._get(task_id)
        if not task.active:
            return []  # no session yet, or late news of a finished task
        return apply_report(task, entries, cards, alive, now, self._is_sensitive) + self._fill(now)

    def on_judgement(
        self, task_id: str, card_id: str, raised: bool, reasons: Sequence[str], now: float
    ) -> list[Action]:
        """The judge's verdict on a :class:`Judge` d call: `raised` keeps it for the user (with
        the judge's `reasons`), else the rules' allow stands.

        Raises:
            TaskNotFound: no task has this id.
        """
        task = self._get(task_id)
        return apply_judgement(task, card_id, raised, reasons, now) + self._fill(now)

    def on_checks(
        self,
        task_id: str,
        ok: bool,
        output: str,
        now: float,
        *,
        refused: str | None = None,
    ) -> list[Action]:
        """The outcome of a :class:`RunChecks`.

        Args:
            ok: every command exited 0.
            output: their combined output (its tail goes to the model when they failed).
            refused: ``rejected`` (the user refused to run a check) or ``blocked`` (policy did),
                failing the task ``verification_rejected`` / ``verification_blocked``.

        A failure starts another turn while iterations remain, else fails the task
        ``budget:maxIterations``. A report for a task that is not verifying (cancelled
        meanwhile) changes nothing.

        Raises:
            TaskNotFound: no task has this id.
        """
        task = self._get(task_id)
        if task.state is not TaskState.VERIFYING:
            return [Log("debug", "checks reported outside verifying", {"taskId": task.id})]
        if refused is not None:
            if refused not in ("rejected", "blocked"):
                raise ValueError(f"unknown refusal {refused!r}")
            message = f"A success check was {refused}; the task cannot be verified."
            return task.fail(f"verification_{refused}", message, now) + self._fill(now)
        if ok:
            return [task.move(TaskState.DONE, now), StopSession(task.id), *self._fill(now)]
        if task.turns < task.budget.max_iterations:
            task.turns += 1
            return [
                task.move(TaskState.RUNNING, now),
                SendInput(task.id, checks_failed_text(task.checks, output)),
            ]
        message = f"The checks still fail after {task.turns} iterations."
        return task.fail("budget:maxIterations", message, now) + self._fill(now)

    def fail(
        self, task_id: str, reason: str, message: str, now: float, *, detail: str | None = None
    ) -> list[Action]:
        """Fail a task for a reason the runtime found (``model_unavailable``, ``no_workspace``,
        ``ripgrep_missing``, ``internal_error``, a session that would not start, …). `detail`
        goes to the log only. Nothing happens to a finished task.

        Raises:
            TaskNotFound: no task has this id.
            ValueError: `reason` is not one of the seed's ``failureReason`` s.
        """
        if reason not in FAILURE_REASONS:
            raise ValueError(f"unknown failure reason {reason!r}")
        task = self._get(task_id)
        if task.state in TERMINAL_STATES:
            return []
        out: list[Action] = []
        if detail is not None:
            out.append(Log("error", message, {"taskId": task.id, "detail": detail}))
        return out + task.fail(reason, message, now) + self._fill(now)

    def tick(self, now: float) -> list[Action]:
        """Fail the tasks whose wall-clock budget ran out (``budget:wallClockMs``)."""
        out: list[Action] = []
        for task in list(self._tasks.values()):
            if task.active:
                out += task.check_clock(now)
        return out + self._fill(now)

    # --- state ---------------------------------------------------------------------------------

    def _get(self, task_id: str) -> Task:
        task = self._tasks.get(task_id)
        if task is None:
            raise TaskNotFound(f"no task {task_id!r}")
        return task

    def _fill(self, now: float) -> list[Action]:
        """Start queued tasks, oldest first, while a slot is free."""
        out: list[Action] = []
        running = sum(1 for task in self._tasks.values() if task.active)
        while self._queue and running < self._max_running:
            task = self._tasks[self._queue.popleft()]
            if task.state is not TaskState.QUEUED:
                continue  # cancelled or failed while queued
            out.append(task.move(TaskState.PLANNING, now))
            task.turns = 1
            tools, limit = task.allowed_tools, task.budget.max_tool_calls
            out.append(StartSession(task.id, task.prompt, tools, limit))
            running += 1
        return out
