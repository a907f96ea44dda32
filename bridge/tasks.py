"""One owner for background tasks: :class:`TaskSet`.

Why this exists. A bare ``asyncio.create_task`` whose task nobody awaits loses its exception (it
surfaces, if at all, as "Task exception was never retrieved" when the task is collected), and a
task nobody cancels outlives the object that started it. Every part of the daemon that runs work
in the background (runner hand-offs, errands, relay registration, the outbound sender, relay
links, control connections) owns its tasks through one of these:

- :meth:`TaskSet.spawn` starts a task with a name and keeps a strong reference to it;
- a task that raises is logged at ERROR with its traceback (the style guide: crashed tasks are
  bugs), and a *critical* task that ends at all, by returning or raising, is reported to the
  owner's ``on_critical_exit`` (the daemon stops on it: a dead engine loop or sender must not
  leave a process that looks alive);
- :meth:`TaskSet.close` cancels every task and awaits them all, and the set refuses new work
  from then on (the coroutine is closed unstarted), so nothing is left running after shutdown;
- :meth:`TaskSet.drain` waits for the tasks to finish without cancelling them (work that must
  complete, such as outbox bookkeeping after a send).

Waiting for the first of several things (a queue or a stop event, an answer or an interrupt)
is not background work: :func:`race` runs them, returns the first one's result and cancels and
awaits the others before it returns, so nothing it started outlives it.

Cancellation is never swallowed: :meth:`close` awaits cancelled tasks with
``return_exceptions=True`` so their ``CancelledError`` does not propagate into the closer, and a
closer that is itself cancelled re-raises.

This module is a leaf (asyncio and logging only), so the Nostr I/O layer can use it too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["CriticalExit", "TaskSet", "race"]

_T = TypeVar("_T")

CriticalExit = Callable[[str, BaseException | None], None]
"""``(task name, exception or None)``: a critical task ended (None: it returned)."""


class TaskSet:
    """Background tasks with one owner.

    Args:
        owner: a short name for logs (``"runners"``, ``"relay ws://…"``).
        logger: where crashes are logged (defaults to this module's logger).
        on_critical_exit: called when a task spawned with ``critical=True`` ends other than by
            cancellation.
    """

    def __init__(
        self,
        owner: str,
        *,
        logger: logging.Logger | None = None,
        on_critical_exit: CriticalExit | None = None,
    ) -> None:
        self.owner = owner
        self._logger = logger or logging.getLogger(__name__)
        self._on_critical_exit = on_critical_exit
        self._tasks: set[asyncio.Task[Any]] = set()
        self._critical: set[asyncio.Task[Any]] = set()
        self._closed = False

    def __len__(self) -> int:
        return len(self._tasks)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called; :meth:`spawn` then refuses."""
        return self._closed

    def spawn(
        self, coro: Coroutine[Any, Any, _T], name: str, *, critical: bool = False
    ) -> asyncio.Task[_T] | None:
        """Run `coro` as a task owned by this set; None (and `coro` closed) after close."""
        if self._closed:
            coro.close()
            self._logger.debug("x %s: %s refused, the task set is closed", self.owner, name)
            return None
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        if critical:
            self._critical.add(task)
        task.add_done_callback(self._done)
        return task

    async def drain(self, timeout: float | None = None) -> bool:
        """Wait until every task finished (not cancelling them); False if `timeout` ran out."""
        while self._tasks:
            pending = set(self._tasks)
            _, still = await asyncio.wait(pending, timeout=timeout)
            if still:
                return False
        return True

    async def close(self, timeout: float | None = None) -> None:
        """Refuse new tasks, cancel every task and await them (at most `timeout` s each round)."""
        self._closed = True
        while self._tasks:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            _, still = await asyncio.wait(tasks, timeout=timeout)
            if still:
                names = ", ".join(sorted(t.get_name() for t in still))
                self._logger.error(
                    "! %s: task(s) ignored cancellation for %.1f s: %s", self.owner, timeout, names
                )
                return

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        critical = task in self._critical
        self._critical.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self._logger.error("! %s: task %s crashed", self.owner, task.get_name(), exc_info=exc)
        if critical and self._on_critical_exit is not None and not self._closed:
            self._on_critical_exit(task.get_name(), exc)


async def race(*waits: Awaitable[Any], timeout: float | None = None) -> tuple[int, Any] | None:
    """Wait for the first of `waits` to finish; ``(its index, its result)``.

    The others are cancelled and awaited before this returns (or raises), so nothing started
    here outlives the call. When several finished at once, the one listed first wins: put the
    one whose result must not be lost first (an item taken from a queue, an answer). Returns
    None when `timeout` passed first.

    Raises:
        Exception: the first finished one's exception (``CancelledError`` when the caller was
            cancelled: the waits are cancelled with it).
    """
    tasks = [asyncio.ensure_future(wait) for wait in waits]
    try:
        await asyncio.wait(tasks, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()  # a no-op for the ones that finished
        await asyncio.gather(*tasks, return_exceptions=True)
    for index, task in enumerate(tasks):
        if task.done() and not task.cancelled():
            return index, task.result()
    return None
