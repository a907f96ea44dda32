"""One session's inputs on their way into Claude Code: queued, written, answered.

The runner's side of the exactly-once hand-off (:mod:`bridge.agents.base`). An input is
*queued* by ``send_input``, *written* to the CLI's stdin by the session task (it then waits in
the CLI's own queue until the CLI takes it into the conversation and records it in its
transcript), and *answered* when a result lists its uuid (``ResultMessage.user_message_uuids``;
one result can answer several inputs that queued up during a turn).

When the CLI dies, inputs written but never answered may or may not have reached its transcript;
:meth:`InputHandoff.requeue` puts those it did not record back at the front of the queue, in
their order, and forgets the rest (they are part of the conversation that is resumed).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Collection, Iterable

from .transcript import input_uuid

__all__ = ["InputHandoff"]


class InputHandoff:
    """Queued, written and open inputs of one session (uuid = :func:`input_uuid` of the uid)."""

    def __init__(self) -> None:
        self._queue: deque[tuple[str, str]] = deque()
        self._ready = asyncio.Event()
        self._written: dict[str, tuple[str, str]] = {}  # uuid → (uid, text), in order
        self._open: list[str] = []  # written and not answered yet

    def put(self, uid: str, text: str) -> None:
        """Queue one input (no await: cancel-safe)."""
        self._queue.append((uid, text))
        self._ready.set()

    async def take(self) -> tuple[str, str]:
        """Wait for the next queued input; ``(uuid, text)``, counted as written and open.

        Counted *before* the write: the answer can only follow the write, and if the write fails
        the input is among those :meth:`requeue` considers.
        """
        while not self._queue:
            self._ready.clear()
            await self._ready.wait()
        uid, text = self._queue.popleft()
        key = input_uuid(uid)
        self._written[key] = (uid, text)
        self._open.append(key)
        return key, text

    def answered(self, uuids: Iterable[str]) -> None:
        """A result answered these inputs (none listed: the oldest open one)."""
        keys = list(uuids) or self._open[:1]
        for key in keys:
            self._written.pop(key, None)
            if key in self._open:
                self._open.remove(key)

    @property
    def waiting(self) -> bool:
        """Whether an input is written and not answered yet (the agent owes a turn)."""
        return bool(self._open)

    @property
    def unanswered(self) -> list[str]:
        """The uuids written and not answered, oldest first."""
        return list(self._written)

    def requeue(self, recorded: Collection[str]) -> int:
        """After a crash: inputs the transcript did not record go back first; how many."""
        lost = [item for key, item in self._written.items() if key not in recorded]
        self._written.clear()
        self._open.clear()
        for item in reversed(lost):
            self._queue.appendleft(item)
        if lost:
            self._ready.set()
        return len(lost)
