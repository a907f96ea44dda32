"""Waiting without sleeping: a received-message log that tests can query and await.

Every wait has a timeout and fails with a :class:`TimeoutError` that says what it waited for and
what did arrive, so a broken daemon makes a test fail with a readable reason instead of hanging.

The mechanism is one :class:`asyncio.Event` that is *replaced* on every change: a waiter checks
its condition synchronously and then awaits the event object it saw before checking, so no change
can slip between the check and the wait (asyncio runs one callback at a time).

Selectors name messages by their wire ``type`` (``"input-ack"``), by model class
(``InputAckMessage``), or by a tuple of either. Predicates receive the message itself.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar, cast, overload

from bridge.protocol.primitives import WireModel
from tests.support.phone_state import ContractViolation, InvalidPayload, Received

__all__ = [
    "MessageLog",
    "Notifier",
    "Selector",
    "matches",
]

M = TypeVar("M", bound=WireModel)
T = TypeVar("T")

Selector = str | type[WireModel] | tuple[str | type[WireModel], ...] | None
"""Which messages: a ``type`` string, a model class, a tuple of them, or None for any."""


def matches(selector: Selector, message: WireModel) -> bool:
    """Whether ``message`` is of the kind ``selector`` names."""
    if selector is None:
        return True
    if isinstance(selector, tuple):
        return any(matches(item, message) for item in selector)
    if isinstance(selector, str):
        return getattr(message, "type", None) == selector
    return isinstance(message, selector)


def _describe(selector: Selector) -> str:
    if selector is None:
        return "any message"
    if isinstance(selector, tuple):
        return " or ".join(_describe(item) for item in selector)
    if isinstance(selector, str):
        return repr(selector)
    return selector.__name__


class Notifier:
    """Change notification plus bounded waits (shared by the phone and the fake bridge)."""

    def __init__(self) -> None:
        self._changed = asyncio.Event()

    def notify(self) -> None:
        """Wake every waiter (call after any state change)."""
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def describe_state(self) -> str:
        """Appended to timeout messages; subclasses say what they hold."""
        return ""

    async def wait_until(
        self, condition: Callable[[], T | None], *, timeout: float = 10.0, what: str = "condition"
    ) -> T:
        """Wait until ``condition()`` returns something other than None or False; return it.

        Raises:
            TimeoutError: not within ``timeout`` seconds (with what was waited for).
        """
        try:
            async with asyncio.timeout(timeout):
                while True:
                    changed = self._changed
                    result = condition()
                    if result is not None and result is not False:
                        return result
                    await changed.wait()
        except TimeoutError:
            state = self.describe_state()
            raise TimeoutError(
                f"timed out after {timeout:g}s waiting for {what}" + (f"; {state}" if state else "")
            ) from None

    async def quiesce(self, idle: float = 0.5, *, timeout: float = 10.0) -> None:
        """Return once nothing changed for ``idle`` seconds (e.g. before asserting a count).

        Raises:
            TimeoutError: still busy after ``timeout`` seconds.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            changed = self._changed
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(f"still receiving after {timeout:g}s")
            try:
                async with asyncio.timeout(min(idle, remaining)):
                    await changed.wait()
            except TimeoutError:
                if min(idle, remaining) >= idle:
                    return


class MessageLog(Notifier):
    """The phone's received log (:class:`Received` records) with queries and waits."""

    def __init__(self) -> None:
        super().__init__()
        self.received: list[Received[Any]] = []
        self.invalid: list[InvalidPayload] = []
        self.violations: list[ContractViolation] = []

    def mark(self) -> int:
        """The current end of the log: pass it as ``after=`` to look only at what comes next."""
        return len(self.received)

    @overload
    def messages(
        self, selector: type[M], predicate: Callable[[M], bool] | None = None, *, after: int = 0
    ) -> list[Received[M]]: ...
    @overload
    def messages(
        self,
        selector: Selector = None,
        predicate: Callable[[Any], bool] | None = None,
        *,
        after: int = 0,
    ) -> list[Received[Any]]: ...
    def messages(
        self,
        selector: Selector = None,
        predicate: Callable[[Any], bool] | None = None,
        *,
        after: int = 0,
    ) -> list[Received[Any]]:
        """Every received message matching ``selector`` and ``predicate``, from ``after`` on."""
        return [
            item
            for item in self.received[after:]
            if matches(selector, item.message) and (predicate is None or predicate(item.message))
        ]

    def count(
        self,
        selector: Selector = None,
        predicate: Callable[[Any], bool] | None = None,
        *,
        after: int = 0,
    ) -> int:
        return len(self.messages(selector, predicate, after=after))

    def describe_state(self) -> str:
        types = Counter(item.message.type for item in self.received)
        parts = [f"received {dict(types) or 'nothing'}"]
        if self.invalid:
            parts.append(f"{len(self.invalid)} invalid")
        if self.violations:
            parts.append(f"{len(self.violations)} contract violations")
        return ", ".join(parts)

    @overload
    async def wait_for(
        self,
        selector: type[M],
        predicate: Callable[[M], bool] | None = None,
        *,
        after: int = 0,
        timeout: float = 10.0,
    ) -> Received[M]: ...
    @overload
    async def wait_for(
        self,
        selector: Selector,
        predicate: Callable[[Any], bool] | None = None,
        *,
        after: int = 0,
        timeout: float = 10.0,
    ) -> Received[Any]: ...
    async def wait_for(
        self,
        selector: Selector,
        predicate: Callable[[Any], bool] | None = None,
        *,
        after: int = 0,
        timeout: float = 10.0,
    ) -> Received[Any]:
        """The first matching message at or after index ``after`` (already there, or to come).

        Raises:
            TimeoutError: none within ``timeout`` seconds.
        """
        items = await self.wait_for_count(selector, 1, predicate, after=after, timeout=timeout)
        return items[0]

    async def wait_for_count(
        self,
        selector: Selector,
        count: int,
        predicate: Callable[[Any], bool] | None = None,
        *,
        after: int = 0,
        timeout: float = 10.0,
    ) -> list[Received[Any]]:
        """Wait until at least ``count`` matching messages arrived; return the first ``count``.

        To assert "exactly once", wait for one, :meth:`quiesce`, then check :meth:`count`.
        """
        found: list[Received[Any]] = []
        scanned = after

        def check() -> list[Received[Any]] | None:
            nonlocal scanned
            while scanned < len(self.received) and len(found) < count:
                item = self.received[scanned]
                scanned += 1
                if matches(selector, item.message) and (
                    predicate is None or predicate(item.message)
                ):
                    found.append(item)
            return found if len(found) >= count else None

        what = f"{count} x {_describe(selector)}" + (" matching the predicate" if predicate else "")
        return cast(list[Received[Any]], await self.wait_until(check, timeout=timeout, what=what))
