"""A signal that the engine loop moved on: what a long-polling reader waits for.

The editor's ``tasks.watch`` (:mod:`bridge.runtime.edges.control_tasks`) answers as soon as a task's
session has something new — a transcript line, a card, a state — or its timeout passes. Rather
than poll the store on a timer (latency for nothing, work while idle), it waits for this signal,
which the engine loop raises after every input it handled (its commits are durable by then), and
then reads what it needs. A generation number makes the wait race-free: a reader that looked at
generation *n* waits until it is past *n*, so a change between its read and its wait is never
missed.
"""

from __future__ import annotations

import asyncio

__all__ = ["Progress"]


class Progress:
    """A generation counter with waiters (see the module docstring)."""

    def __init__(self) -> None:
        self.generation = 0
        self._changed: asyncio.Future[None] | None = None

    def bump(self) -> None:
        """The engine handled something: wake every waiter."""
        self.generation += 1
        changed, self._changed = self._changed, None
        if changed is not None and not changed.done():
            changed.set_result(None)

    async def wait_past(self, generation: int, timeout: float) -> bool:
        """Wait until the generation is past `generation`, at most `timeout` seconds.

        Returns:
            Whether it moved on (False: the timeout passed first).
        """
        if self.generation > generation:
            return True
        if self._changed is None or self._changed.done():
            self._changed = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(asyncio.shield(self._changed), timeout)
        except TimeoutError:
            return self.generation > generation
        return True
