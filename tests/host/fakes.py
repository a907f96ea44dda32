"""A :class:`~bridge.host.driver.HostServices` for driver tests: events in a list, answers by hand.

Drivers are tested without a host process: :class:`FakeServices` records what they emit, in
order, and holds every permission ask and pre-tool check until the test answers it (or answers it
at once with a preset policy). Every wait has a deadline, so a driver that never emits fails the
test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from bridge.host.driver import PermissionAnswer, ToolVerdict
from bridge.host.events import (
    Entry,
    HostEvent,
    PermissionAsked,
    StateChanged,
    decode_event,
    encode_event,
)

__all__ = ["WAIT", "FakeServices", "PendingAsk", "PendingCheck"]

WAIT = 30.0
"""Seconds any wait of a test may take."""

E = TypeVar("E", bound=HostEvent)


@dataclass
class PendingAsk:
    request: PermissionAsked
    future: asyncio.Future[PermissionAnswer]


@dataclass
class PendingCheck:
    request_id: str
    tool_name: str
    tool_input: dict[str, Any]
    future: asyncio.Future[ToolVerdict]


@dataclass
class FakeServices:
    """Records events; answers asks and checks by policy or by hand.

    Attributes:
        permission_policy: answers every ask at once when set (else the test answers).
        tool_policy: answers every check at once when set (else the test answers).
        diff: what :meth:`diff_allowed` says.
        clock: what :meth:`now` says.
    """

    permission_policy: Callable[[PermissionAsked], PermissionAnswer] | None = None
    tool_policy: Callable[[str, Mapping[str, Any]], ToolVerdict] | None = None
    diff: bool = False
    clock: Callable[[], float] = time.time
    events: list[HostEvent] = field(default_factory=list)
    asks: list[PendingAsk] = field(default_factory=list)
    checks: list[PendingCheck] = field(default_factory=list)
    withdrawn: list[str] = field(default_factory=list)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    # --- HostServices ---------------------------------------------------------------------------

    def emit(self, event: HostEvent) -> None:
        # Every event must survive the journal's JSON round trip, as in a real host.
        assert decode_event(encode_event(event)) == event, event
        self.events.append(event)
        self._poke()

    async def ask_permission(self, request: PermissionAsked) -> PermissionAnswer:
        self.emit(request)
        if self.permission_policy is not None:
            return self.permission_policy(request)
        future: asyncio.Future[PermissionAnswer] = asyncio.get_running_loop().create_future()
        pending = PendingAsk(request, future)
        self.asks.append(pending)
        self._poke()
        try:
            return await future
        except asyncio.CancelledError:
            self.withdrawn.append(request.request_id)
            raise
        finally:
            self.asks.remove(pending)

    async def check_tool(
        self, request_id: str, tool_name: str, tool_input: Mapping[str, Any]
    ) -> ToolVerdict:
        if self.tool_policy is not None:
            return self.tool_policy(tool_name, tool_input)
        future: asyncio.Future[ToolVerdict] = asyncio.get_running_loop().create_future()
        pending = PendingCheck(request_id, tool_name, dict(tool_input), future)
        self.checks.append(pending)
        self._poke()
        try:
            return await future
        finally:
            self.checks.remove(pending)

    def diff_allowed(self) -> bool:
        return self.diff

    def now(self) -> float:
        return self.clock()

    # --- for tests -------------------------------------------------------------------------------

    def of(self, kind: type[E]) -> list[E]:
        """The events of one kind, in order."""
        return [e for e in self.events if isinstance(e, kind)]

    def entries(self) -> list[dict[str, Any]]:
        """The transcript entries emitted so far (JSON objects)."""
        return [dict(e.entry) for e in self.of(Entry)]

    def states(self) -> list[str]:
        return [e.state for e in self.of(StateChanged)]

    async def wait_for(self, check: Callable[[], Any], timeout: float = WAIT) -> Any:
        """Until `check()` is truthy (re-checked after every event, ask or check); its value."""
        async with asyncio.timeout(timeout):
            while not (value := check()):
                self._changed.clear()
                await self._changed.wait()
            return value

    async def wait_event(self, kind: type[E], count: int = 1, timeout: float = WAIT) -> E:
        """The `count`-th event of `kind` (waiting for it)."""
        await self.wait_for(lambda: len(self.of(kind)) >= count, timeout)
        return self.of(kind)[count - 1]

    async def next_ask(self, timeout: float = WAIT) -> PendingAsk:
        """The oldest unanswered permission ask (waiting for one)."""
        return await self.wait_for(lambda: next(iter(self.asks), None), timeout)  # type: ignore[no-any-return]

    async def next_check(self, timeout: float = WAIT) -> PendingCheck:
        """The oldest unanswered pre-tool check (waiting for one)."""
        return await self.wait_for(lambda: next(iter(self.checks), None), timeout)  # type: ignore[no-any-return]

    def _poke(self) -> None:
        self._changed.set()
