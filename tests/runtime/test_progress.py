"""The engine loop's progress signal: a waiter past a generation never misses a change."""

from __future__ import annotations

import asyncio

from bridge.runtime.progress import Progress


async def test_a_change_before_the_wait_is_not_missed() -> None:
    progress = Progress()
    seen = progress.generation
    progress.bump()
    assert await progress.wait_past(seen, timeout=0.01) is True


async def test_waiters_wake_on_the_next_bump_and_time_out_without_one() -> None:
    progress = Progress()
    seen = progress.generation
    assert await progress.wait_past(seen, timeout=0.01) is False
    waiters = [asyncio.create_task(progress.wait_past(seen, timeout=5)) for _ in range(3)]
    await asyncio.sleep(0)
    progress.bump()
    assert await asyncio.gather(*waiters) == [True, True, True]
    # A waiter cancelled midway leaves the signal usable for the others.
    seen = progress.generation
    cancelled = asyncio.create_task(progress.wait_past(seen, timeout=5))
    other = asyncio.create_task(progress.wait_past(seen, timeout=5))
    await asyncio.sleep(0)
    cancelled.cancel()
    progress.bump()
    assert await other is True
