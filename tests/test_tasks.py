"""TaskSet: names, crash logs, critical exits, close and drain; race: the first of several waits."""

from __future__ import annotations

import asyncio
import logging

import pytest

from bridge.tasks import TaskSet, race


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


async def test_race_gives_the_first_result_and_leaves_nothing_running() -> None:
    slow_cancelled = asyncio.Event()

    async def slow() -> str:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            slow_cancelled.set()
            raise
        return "slow"

    async def quick() -> str:
        return "quick"

    assert await race(slow(), quick()) == (1, "quick")
    assert slow_cancelled.is_set()  # cancelled and awaited before race returned


async def test_race_prefers_the_one_listed_first_when_both_finished() -> None:
    done: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    done.set_result("item")
    event = asyncio.Event()
    event.set()
    assert await race(done, event.wait()) == (0, "item")  # an item taken is never dropped


async def test_race_times_out_with_none_and_raises_the_winners_error() -> None:
    assert await race(asyncio.sleep(60), timeout=0.01) is None

    async def broken() -> None:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        await race(broken(), asyncio.sleep(60))


async def test_a_cancelled_race_cancels_its_waits() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def waiting() -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    task = asyncio.ensure_future(race(waiting(), asyncio.sleep(60)))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled.is_set()
