"""TaskSet: names, crash logs, critical exits, close and drain."""

from __future__ import annotations

import asyncio
import logging

import pytest

from bridge.tasks import TaskSet


async def test_a_crash_is_logged_with_its_name_and_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tasks = TaskSet("owner")

    async def boom() -> None:
        raise RuntimeError("kaput")

    with caplog.at_level(logging.ERROR):
        task = tasks.spawn(boom(), "boom-task")
        assert task is not None
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.sleep(0)
    record = next(r for r in caplog.records if "boom-task" in r.getMessage())
    assert "owner" in record.getMessage() and record.exc_info is not None
    assert len(tasks) == 0


async def test_close_cancels_awaits_and_then_refuses() -> None:
    tasks = TaskSet("owner")
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        finally:
            cancelled.set()

    tasks.spawn(forever(), "forever")
    await started.wait()
    await tasks.close()
    assert cancelled.is_set() and len(tasks) == 0 and tasks.closed

    async def late() -> None:
        raise AssertionError("must never run")

    coro = late()
    assert tasks.spawn(coro, "late") is None
    assert coro.cr_frame is None  # closed unstarted: no "never awaited" warning


async def test_a_critical_task_that_ends_is_reported() -> None:
    seen: list[tuple[str, str | None]] = []
    tasks = TaskSet("owner", on_critical_exit=lambda n, e: seen.append((n, repr(e) if e else None)))

    async def returns() -> None:
        return None

    async def raises() -> None:
        raise ValueError("x")

    for coro, name in ((returns(), "ret"), (raises(), "err")):
        task = tasks.spawn(coro, name, critical=True)
        assert task is not None
        await asyncio.gather(task, return_exceptions=True)
    await asyncio.sleep(0)
    assert seen == [("ret", None), ("err", "ValueError('x')")]


async def test_cancellation_and_close_are_not_critical_exits() -> None:
    seen: list[str] = []
    tasks = TaskSet("owner", on_critical_exit=lambda n, e: seen.append(n))
    task = tasks.spawn(asyncio.sleep(3600), "sleeper", critical=True)
    assert task is not None
    await asyncio.sleep(0)
    await tasks.close()
    assert seen == []


async def test_drain_waits_without_cancelling() -> None:
    tasks = TaskSet("owner")
    done: list[int] = []

    async def work(n: int) -> None:
        await asyncio.sleep(0.01 * n)
        done.append(n)

    for n in (3, 1, 2):
        tasks.spawn(work(n), f"work-{n}")
    assert await tasks.drain(timeout=5)
    assert sorted(done) == [1, 2, 3]
    tasks.spawn(asyncio.sleep(3600), "slow")
    assert not await tasks.drain(timeout=0.01)
    await tasks.close()
