"""Shared fixtures: real relays on 127.0.0.1, started per test and always stopped.

Resources only (style guide: builders over fixtures); event builders live with the tests.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from tests.support.relay import LoopbackRelay

RelayFactory = Callable[..., Awaitable[LoopbackRelay]]


@pytest.fixture
async def relay() -> AsyncIterator[LoopbackRelay]:
    """A running rust-nostr LocalRelay (memory database, raised rate limits, no policy)."""
    async with LoopbackRelay() as running:
        yield running


@pytest.fixture
async def relay_factory() -> AsyncIterator[RelayFactory]:
    """``await relay_factory(**LoopbackRelay options)`` → a started relay, stopped at teardown."""
    started: list[LoopbackRelay] = []

    async def make(**options: Any) -> LoopbackRelay:
        running = LoopbackRelay(**options)
        started.append(running)
        await running.start()
        return running

    try:
        yield make
    finally:
        for running in reversed(started):
            await running.stop()
