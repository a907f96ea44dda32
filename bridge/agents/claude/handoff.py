"""One CLI's inputs on their way into Claude Code: queued, written, answered.

The driver's side of the exactly-once hand-off. An input is *queued* by ``send_input``, *taken*
by the writer, which writes it to the CLI's stdin as a user message whose ``uuid`` is
:func:`~bridge.agents.claude.transcript.input_uuid` (uid) (it then waits in the CLI's own queue
until the CLI takes it into the conversation and records it in its transcript), and *answered*
when a ``result`` lists its uuid (``user_message_uuids``: one result can answer several inputs
that queued up during a turn; a result that lists none answers the oldest open input).

A driver never restarts its CLI, so nothing is ever written twice here: when the CLI dies, the
inputs taken and not answered (:attr:`InputHandoff.unanswered`) go to the host's ``Exited``, and
the daemon decides from the transcript (``received``) what a resumed CLI still needs.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable

from .transcript import input_uuid

__all__ = ["InputHandoff"]


class InputHandoff:
    """Queued, taken and open inputs of one CLI (uuid = :func:`input_uuid` of the uid)."""

    def __init__(self) -> None:
        self._queue: deque[tuple[str, str]] = deque()
        self._ready = asyncio.Event()
        self._open: dict[str, str] = {}  # uuid → uid, taken and not answered, in order
        self._taken: set[str] = set()  # every uid taken, answered or not

    def put(self, uid: str, text: str) -> None:
        """Queue one input (no await: cancel-safe)."""
        self._queue.append((uid, text))
        self._ready.set()

    async def take(self) -> tuple[str, str, str]:
        """Wait for the next queued input; ``(uid, uuid, text)``, counted as taken and open.

        Counted *before* the write: the answer can only follow the write. Cancel-safe: a
        cancelled wait takes nothing.
        """
        while not self._queue:
            self._ready.clear()
            await self._ready.wait()
        uid, text = self._queue.popleft()
        key = input_uuid(uid)
        self._open[key] = uid
        self._taken.add(uid)
        return uid, key, text

    def unwritten(self, key: str) -> None:
        """The write of this taken input failed (the CLI is gone): it never reached the agent."""
        uid = self._open.pop(key, None)
        if uid is not None:
            self._taken.discard(uid)

    def uid_of(self, key: str) -> str | None:
        """The uid of an open input by its uuid (None when it is not one of ours, or done)."""
        return self._open.get(key)

    def answered(self, uuids: Iterable[str]) -> tuple[str, ...]:
        """A result answered these inputs (none listed: the oldest open one); their uids."""
        keys = list(uuids) or list(self._open)[:1]
        return tuple(uid for key in keys if (uid := self._open.pop(key, None)) is not None)

    @property
    def waiting(self) -> bool:
        """Whether an input is taken and not answered yet (the agent owes a turn)."""
        return bool(self._open)

    @property
    def unanswered(self) -> tuple[str, ...]:
        """The uids taken and not answered, oldest first."""
        return tuple(self._open.values())

    @property
    def taken(self) -> frozenset[str]:
        """Every uid taken so far."""
        return frozenset(self._taken)
