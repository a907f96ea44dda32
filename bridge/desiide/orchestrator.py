"""The orchestrator's tasks at run time: the task book, the daemon link and the watch, wired.

:class:`~bridge.desiide.lifecycle.machine.TaskBook` decides (pure); this class performs what it returns
and feeds it what happens:

- **Requests** (``task.create``, ``task.cancel``, ``task.approve``, ``task.reject``,
  ``edits.report``) call the book and perform its actions before they answer, so the editor's
  ``task.event`` notifications for a request are written before its result.
- **Actions**: ``Emit`` → a ``task.event`` notification; ``StartSession`` → ``tasks.start`` (the
  daemon creates the session, phones see it); ``AnswerCard`` → ``tasks.answer`` or, for a review,
  ``tasks.report``; ``SendInput`` → ``tasks.input``; ``StopSession`` → ``tasks.stop``;
  ``RunChecks`` → the project's checks, in their own task, their outcome fed back; ``Judge`` →
  the editor's judge (JEV ``risk_gate@1``) on a call the rules allow, its verdict fed back (a
  judge that fails keeps the call for the user); ``Log`` → a log line and the ``log``
  notification.
- **The watch**: one long poll (``tasks.watch``) over the sessions of the tasks that hold one; what
  it reports goes to the book (``on_session``).
- **Time**: the book's next deadline (a wall-clock budget) is waited for and ``tick`` ed.

One lock serialises "ask the book, perform its actions": the book's events leave in the order it
made them, and a daemon answer for one request never interleaves with another's actions. A
failure of the daemon link fails the task it concerned (``internal_error``; the cause goes to the
log only) rather than the orchestrator.

The daemon is reached lazily, at the first task: ``initialize``, settings and decisions need none.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Final, assert_never

from bridge.desiide.budgets import Budget
from bridge.desiide.checks.commands import check_commands, find_checks
from bridge.desiide.checks.runner import blocked_check, run_checks
from bridge.desiide.daemon_link import DaemonLink, DaemonLinkError
from bridge.desiide.errors import INTERNAL_ERROR, DesiideError
from bridge.desiide.lifecycle.machine import TaskBook
from bridge.desiide.lifecycle.types import (
    Action,
    AnswerCard,
    CardView,
    Emit,
    FileReport,
    Judge,
    LifecycleError,
    Log,
    RunChecks,
    SendInput,
    StartSession,
    StopSession,
    Success,
)
from bridge.engine.editor.task_gate import GATE_ERROR_LABEL
from bridge.engine.timefmt import iso
from bridge.ripgrep import find_ripgrep
from bridge.sandbox.hidden import hidden_paths
from bridge.tasks import TaskSet

__all__ = ["Judge_", "Orchestrator"]

Judge_ = Callable[[str, dict[str, Any]], Awaitable[tuple[bool, tuple[str, ...]]]]
"""The judge of a call: (tool, args) → (raise it to the user?, the reason labels)."""

logger = logging.getLogger(__name__)

SEARCH_TOOLS: Final = frozenset({"list_files", "search"})
RETRIED: Final = frozenset({"tasks.start", "tasks.answer", "tasks.report", "tasks.stop"})
RECONNECT_WINDOW: Final = 30.0
"""How long a restarting daemon (systemd's ``Restart=``) is waited for before tasks fail."""
RECONNECT_PAUSE: Final = 0.25
TERMINAL: Final = frozenset({"done", "failed", "cancelled"})
_LOG_LEVELS: Final = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING}


class Orchestrator:
    """The tasks of one editor connection (see the module docstring).

    Args:
        home: the bridge home (its daemon runs the tasks).
        notify: sends one notification (method, params) to the editor.
        open_link: connects to the daemon; its argument says whether it may start one in this
            process when none runs.
        clock: Unix time.
    """

    def __init__(
        self,
        *,
        home: Path,
        notify: Callable[[str, dict[str, Any]], None],
        open_link: Callable[[bool], Awaitable[DaemonLink]],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.home = home
        self.book = TaskBook()
        self._notify = notify
        self._open_link = open_link
        self._clock = clock
        self._link: DaemonLink | None = None
        self._external = False
        """Whether the daemon is another process's (it may restart; ours may not)."""
        self._link_lock = asyncio.Lock()
        self._turn = asyncio.Lock()
        self._cursors: dict[str, dict[str, Any]] = {}
        self._models: dict[str, str] = {}
        """The model each task asked for (by its role or preference), for its session's start."""
        self._watching = asyncio.Event()
        self._deadline_changed = asyncio.Event()
        self._background = TaskSet("desiide orchestrator")
        self._started = False
        self.workspace: Path | None = None
        self.strict = False
        """``gating.strict``: every auto-allowed call becomes a card (set by ``config.update``)."""
        self.judge: Judge_ | None = None
        """The editor's judge on a call the rules allow: (raise it to the user?, its labels).
        Set by ``config.update`` when ``jev.riskGate`` is on."""

    # --- lifetime ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the watch and the budget timer (once)."""
        if self._started:
            return
        self._started = True
        self._background.spawn(self._watch_loop(), "the task watch")
        self._background.spawn(self._timer_loop(), "the task budget timer")

    async def shutdown(self) -> None:
        """Cancel every unfinished task (their sessions are interrupted), then let go of the
        daemon (stopping it if it runs in this process)."""
        try:
            async with self._turn:
                await self._perform(self.book.cancel_all(self._clock()))
        except Exception:
            logger.exception("! cancelling the tasks at shutdown failed")
        await self._background.close(timeout=5)
        if self._link is not None:
            await self._link.close()
            self._link = None

    # --- requests ------------------------------------------------------------------------------

    async def create(
        self, params: Any, *, model: str | None = None, unavailable: str | None = None
    ) -> dict[str, Any]:
        """``task.create``: queue the task (it starts when a slot is free).

        Args:
            params: the validated ``TaskInput``.
            model: the model Claude Code runs the task with (None: its default).
            unavailable: why no usable model serves the task (it fails ``model_unavailable``).
        """
        task_id = f"task-{uuid.uuid4().hex}"
        now = self._clock()
        success = Success.from_json(
            params.success.model_dump(exclude_none=True) if params.success else None
        )
        budget = params.budget
        book_budget = Budget(
            max_iterations=budget.maxIterations,
            max_tool_calls=budget.maxToolCalls,
            max_tokens=budget.maxTokens,
            wall_clock_ms=budget.wallClockMs,
        )
        tools = [str(tool) for tool in params.allowedTools]
        context = params.context.model_dump(exclude_none=True) if params.context else None
        wanted = success if success.any or str(params.kind) != "fix" else Success(tests_pass=True)
        commands: list[list[str]] | None = None
        if self.workspace is not None and wanted.any:
            found = await asyncio.to_thread(find_checks, self.workspace)
            commands = check_commands(found, tests=wanted.tests_pass, lint=wanted.lint_clean)
        async with self._turn:
            actions = self.book.create(
                task_id,
                str(params.kind),
                params.instruction,
                tools,
                success if success.any else None,
                book_budget,
                now,
                context=context,
                check_commands=commands,
            )
            failure = self._precondition(tools)
            if failure is None and unavailable is not None:
                failure = ("model_unavailable", unavailable)
            if model is not None:
                self._models[task_id] = model
            if failure is not None:
                # The task exists (the editor sees it fail), but its session never starts.
                actions = [
                    a for a in actions if not (isinstance(a, StartSession) and a.task_id == task_id)
                ]
                actions += self.book.fail(task_id, failure[0], failure[1], now)
            await self._perform(actions)
            return {"task": self.book.summary(task_id)}

    def _precondition(self, tools: Sequence[str]) -> tuple[str, str] | None:
        """A reason the task cannot run at all, found before it starts."""
        if self.workspace is None:
            return "no_workspace", "No folder is open: open one to run tasks in it."
        if SEARCH_TOOLS & set(tools) and find_ripgrep() is None:
            return (
                "ripgrep_missing",
                "list_files and search need ripgrep (rg): install it (apt install ripgrep, "
                "brew install ripgrep) or leave those tools out of allowedTools.",
            )
        return None

    async def cancel(self, task_id: str) -> dict[str, Any]:
        async with self._turn:
            before = self.book.state(task_id)
            await self._perform(self.book.cancel(task_id, self._clock()))
            after = self.book.state(task_id)
        return {"cancelled": before != after and str(after) == "cancelled"}

    async def approve(self, task_id: str, approval_id: str, scope: str) -> dict[str, Any]:
        async with self._turn:
            await self._perform(self.book.approve(task_id, approval_id, scope, self._clock()))
        return {"ok": True}

    async def reject(self, task_id: str, approval_id: str, reason: str | None) -> dict[str, Any]:
        async with self._turn:
            await self._perform(self.book.reject(task_id, approval_id, reason, self._clock()))
        return {"ok": True}

    async def report(
        self, task_id: str, proposal_id: str, files: Sequence[FileReport]
    ) -> dict[str, Any]:
        async with self._turn:
            actions = self.book.report_edits(task_id, proposal_id, files, self._clock())
            await self._perform(actions)
        return {"ok": True}

    def summaries(self) -> dict[str, Any]:
        return {"tasks": self.book.summaries()}

    # --- performing ----------------------------------------------------------------------------

    async def _perform(self, actions: Sequence[Action]) -> None:
        """Perform `actions` in order (the caller holds the turn lock)."""
        for action in actions:
            match action:
                case Emit():
                    self._notify("task.event", action.event)
                case Log():
                    self._log(action)
                case StartSession():
                    await self._start_session(action)
                case AnswerCard():
                    await self._daemon_call(action.task_id, *_answer_call(action))
                case SendInput():
                    params = {"session_id": action.task_id, "text": action.text}
                    await self._daemon_call(action.task_id, "tasks.input", params)
                case StopSession():
                    if self._cursors.pop(action.task_id, None) is None:
                        continue  # its session never started
                    await self._daemon_call(
                        action.task_id, "tasks.stop", {"session_id": action.task_id}
                    )
                case RunChecks():
                    self._background.spawn(self._checks(action), f"checks of {action.task_id}")
                case Judge():
                    self._background.spawn(self._judge(action), f"judge for {action.task_id}")
                case _:
                    assert_never(action)
        self._deadline_changed.set()

    async def _start_session(self, action: StartSession) -> None:
        assert self.workspace is not None  # a task without one fails before it starts
        params = {
            "session_id": action.task_id,
            "cwd": str(self.workspace),
            "instruction": action.prompt,
            "allowed_tools": list(action.allowed_tools),
            "max_tool_calls": action.max_tool_calls,
            "strict": self.strict,
            "judge": self.judge is not None,
        }
        if (model := self._models.get(action.task_id)) is not None:
            params["model"] = model
        if await self._daemon_call(action.task_id, "tasks.start", params) is not None:
            self._cursors[action.task_id] = {"after_seq": 0, "cards": [], "state": None}
            self._watching.set()

    async def _daemon_call(self, task_id: str, method: str, params: dict[str, Any]) -> Any:
        """A ``tasks.*`` call for one task; a failure fails that task, not the orchestrator.

        A call that may be sent twice (:data:`RETRIED`) is sent again once the daemon is back
        (systemd restarts a daemon that stopped): a start finds its session, an answer its card
        answered, a stop its session stopped. ``tasks.input`` is not: the first may have been
        taken before the connection broke, and a second would run the input twice.
        """
        for attempt in (1, 2):
            try:
                link = await self._ensure_link()
                return await link.call(method, params)
            except DaemonLinkError as exc:
                await self._drop_link()
                if attempt == 1 and method in RETRIED and await self._daemon_back():
                    continue
                self._cursors.pop(task_id, None)
                message = "The bridge daemon could not run this task's step (see the log)."
                actions = self.book.fail(
                    task_id, "internal_error", message, self._clock(), detail=f"{method}: {exc}"
                )
                await self._perform(actions)
        return None

    async def _ensure_link(self) -> DaemonLink:
        async with self._link_lock:
            if self._link is None:
                self._link = await self._open_link(not self._external)
                self._external = self._external or not self._link.in_process
            return self._link

    async def _drop_link(self) -> None:
        async with self._link_lock:
            if self._link is not None:
                await self._link.close()
                self._link = None

    async def _daemon_back(self) -> bool:
        """Wait (at most :data:`RECONNECT_WINDOW`) for another process's daemon to answer again.

        A daemon this process ran cannot come back: it failed, and the tasks fail with it.
        """
        if not self._external:
            return False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RECONNECT_WINDOW
        while loop.time() < deadline:
            try:
                await self._ensure_link()
            except DaemonLinkError:
                await asyncio.sleep(RECONNECT_PAUSE)
                continue
            logger.info("the bridge daemon answers again")
            return True
        return False

    def _log(self, action: Log) -> None:
        level = _LOG_LEVELS.get(action.level, logging.ERROR)
        logger.log(level, "%s", action.message, extra={"desiide": action.fields})
        # Details of an internal error stay in the log; the editor gets the message only.
        params: dict[str, Any] = {
            "level": action.level,
            "message": action.message,
            "ts": iso(self._clock()),
        }
        fields = {k: v for k, v in action.fields.items() if k != "detail"}
        if fields:
            params["fields"] = fields
        self._notify("log", params)

    async def _judge(self, action: Judge) -> None:
        """Ask the judge about a call the rules allow; a judge that fails keeps the call for the
        user (``gate_error``): the judge may only raise a call, and fails closed."""
        judge = self.judge
        raised: bool
        reasons: tuple[str, ...]
        if judge is None:  # turned off since the task started: the rules' allow stands
            raised, reasons = False, ()
        else:
            try:
                raised, reasons = await judge(action.tool, action.args)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning("! the judge failed on a %s call: %s", action.tool, exc)
                raised, reasons = True, (GATE_ERROR_LABEL,)
        async with self._turn:
            verdict = self.book.on_judgement(
                action.task_id, action.card_id, raised, reasons, self._clock()
            )
            await self._perform(verdict)

    async def _checks(self, action: RunChecks) -> None:
        """Run the success checks; a check the gate's deny list blocks is never run
        (``verification_blocked``). The others run without a card: the task asked for them, and
        they are the project's own commands."""
        assert self.workspace is not None
        secrets = hidden_paths(str(Path.home()), str(self.home))
        blocked = blocked_check(self.workspace, action.commands, secrets)
        if blocked is not None:
            logger.warning("! a check of %s is blocked: %s", action.task_id, blocked)
            async with self._turn:
                actions = self.book.on_checks(
                    action.task_id, False, blocked, self._clock(), refused="blocked"
                )
                await self._perform(actions)
            return
        outcome = await run_checks(self.workspace, action.commands)
        logger.info("checks of %s: %s in %.1f s", action.task_id, outcome.ok, outcome.seconds)
        async with self._turn:
            actions = self.book.on_checks(action.task_id, outcome.ok, outcome.output, self._clock())
            await self._perform(actions)

    # --- the watch and the timer ---------------------------------------------------------------

    async def _watch_loop(self) -> None:
        while True:
            if not self._cursors:
                self._watching.clear()
                await self._watching.wait()
                continue
            link = await self._ensure_link()
            try:
                sessions = await link.watch(dict(self._cursors))
            except DaemonLinkError as exc:
                logger.warning("! the bridge daemon link failed: %s", exc)
                await self._drop_link()
                if not await self._daemon_back():
                    await self._link_lost(exc)
                continue
            async with self._turn:
                for task_id, view in sessions.items():
                    if task_id not in self._cursors or not isinstance(view, dict):
                        continue
                    try:
                        actions = self._on_view(task_id, view)
                    except Exception:
                        # A bug: the task fails (details in the log), the others go on.
                        logger.exception("! the task book failed on %s", task_id)
                        self._cursors.pop(task_id, None)
                        actions = self.book.fail(
                            task_id,
                            "internal_error",
                            "The orchestrator failed on this task (see its log).",
                            self._clock(),
                        )
                    await self._perform(actions)
                    if task_id in self._cursors and self.book.state(task_id) in TERMINAL:
                        del self._cursors[task_id]  # finished: its session is the phone's now

    def _on_view(self, task_id: str, view: dict[str, Any]) -> list[Action]:
        cursor = self._cursors[task_id]
        entries = [
            (int(item["seq"]), item["entry"])
            for item in view.get("entries", [])
            if isinstance(item, dict) and isinstance(item.get("entry"), dict)
        ]
        cards = [CardView.parse(card) for card in view.get("cards", []) if isinstance(card, dict)]
        if entries:
            cursor["after_seq"] = max(seq for seq, _ in entries)
        cursor["cards"] = [card.id for card in cards]
        cursor["state"] = view.get("state")
        now = self._clock()
        if not view.get("exists", True):
            self._cursors.pop(task_id, None)
            return self.book.fail(
                task_id,
                "internal_error",
                "The task's session is gone (closed from a phone?).",
                now,
                detail="the daemon no longer has the session",
            )
        return self.book.on_session(task_id, entries, cards, bool(view.get("alive")), now)

    async def _link_lost(self, exc: DaemonLinkError) -> None:
        """The daemon is gone for good: every task that holds a session fails (the cause is
        logged); their sessions, if the daemon comes back, are the phones' to finish."""
        logger.error("! the bridge daemon is gone: %s", exc)
        async with self._turn:
            for task_id in list(self._cursors):
                self._cursors.pop(task_id, None)
                await self._perform(
                    self.book.fail(
                        task_id,
                        "internal_error",
                        "The bridge daemon stopped while the task ran.",
                        self._clock(),
                        detail=str(exc),
                    )
                )
            if self._link is not None:
                await self._link.close()
                self._link = None

    async def _timer_loop(self) -> None:
        while True:
            deadline = self.book.next_deadline()
            self._deadline_changed.clear()
            timeout = None if deadline is None else max(0.0, deadline - self._clock())
            try:
                await asyncio.wait_for(self._deadline_changed.wait(), timeout)
            except TimeoutError:
                async with self._turn:
                    await self._perform(self.book.tick(self._clock()))


def _answer_call(action: AnswerCard) -> tuple[str, dict[str, Any]]:
    if action.report is not None:
        return "tasks.report", {
            "session_id": action.task_id,
            "card_id": action.card_id,
            "report": [dict(item) for item in action.report],
        }
    params: dict[str, Any] = {
        "session_id": action.task_id,
        "card_id": action.card_id,
        "allow": action.allow,
    }
    if action.message:
        params["reason"] = action.message
    return "tasks.answer", params


def lifecycle_error(exc: LifecycleError) -> DesiideError:
    """The book's refusal as the protocol's error (TaskNotFound, ApprovalNotFound, …)."""
    code = exc.code if exc.code != -32603 else INTERNAL_ERROR
    return DesiideError(code, str(exc))
