"""Periodic work: every job each round, supervised one by one; the retention on its own clock."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

from bridge.runtime.periodic import RETENTION_INTERVAL, PeriodicWork
from tests.runtime.support import WAIT, FakeClock


class Jobs:
    """The four jobs, recording the order they ran in; any of them can be made to raise."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.failing: set[str] = set()

    def job(self, name: str) -> Callable[[], object]:
        async def run() -> None:
            self.ran.append(name)
            if name in self.failing:
                raise RuntimeError(f"{name} broke")

        return run

    def status(self) -> None:
        self.ran.append("status")
        if "status" in self.failing:
            raise RuntimeError("status broke")

    def work(self, clock: FakeClock, **kwargs: float) -> PeriodicWork:
        return PeriodicWork(
            scan_folders=self.job("scan"),  # type: ignore[arg-type]
            retry_outbox=self.job("retry"),  # type: ignore[arg-type]
            sweep_transcripts=self.job("sweep"),  # type: ignore[arg-type]
            refresh_status=self.status,
            monotonic=clock.monotonic,
            **kwargs,
        )


async def test_a_round_runs_every_job_in_order() -> None:
    jobs = Jobs()
    work = jobs.work(FakeClock())
    await work.run_round()
    assert jobs.ran == ["scan", "retry", "sweep", "status"]
    assert work.rounds == 1


@pytest.mark.parametrize(
    ("failing", "logged"),
    [
        ("scan", "! periodic job folder scan failed; it runs again next round"),
        ("retry", "! periodic job outbox retry failed; it runs again next round"),
        ("sweep", "! periodic job transcript retention failed; it runs again next round"),
        ("status", "! periodic job status refresh failed"),
    ],
)
async def test_a_job_that_raises_is_logged_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture, failing: str, logged: str
) -> None:
    jobs = Jobs()
    jobs.failing.add(failing)
    work = jobs.work(FakeClock())
    await work.run_round()
    assert jobs.ran == ["scan", "retry", "sweep", "status"]
    [record] = caplog.records
    assert (record.levelno, record.getMessage()) == (logging.ERROR, logged)
    assert record.exc_info is not None and str(record.exc_info[1]) == f"{failing} broke"
    await work.run_round()  # tried again next round; the retention only when due again
    assert jobs.ran.count(failing) == (1 if failing == "sweep" else 2)
    assert work.rounds == 2


@pytest.mark.parametrize(
    ("second_round_after", "swept"),
    [
        (30.0, 1),
        (RETENTION_INTERVAL - 0.001, 1),
        (RETENTION_INTERVAL, 2),
        (RETENTION_INTERVAL + 30, 2),
    ],
    ids=["next-round", "just-before-a-day", "a-day-later", "past-a-day"],
)
async def test_retention_runs_on_the_first_round_then_once_a_day(
    second_round_after: float, swept: int
) -> None:
    clock, jobs = FakeClock(), Jobs()
    work = jobs.work(clock)
    clock.advance(30)  # the first round, 30 s after boot
    await work.run_round()
    assert jobs.ran.count("sweep") == 1
    clock.advance(second_round_after)
    await work.run_round()
    assert jobs.ran.count("sweep") == swept
    assert jobs.ran.count("scan") == 2  # the other jobs run every round


async def test_retention_follows_the_monotonic_clock_not_the_wall_clock() -> None:
    clock, jobs = FakeClock(), Jobs()
    work = jobs.work(clock)
    await work.run_round()
    clock.now += 10 * RETENTION_INTERVAL  # the wall clock steps (NTP, a suspend): no sweep
    await work.run_round()
    assert jobs.ran.count("sweep") == 1


async def test_run_sleeps_the_interval_between_rounds() -> None:
    jobs = Jobs()
    work = jobs.work(FakeClock(), interval=0.0)
    task = asyncio.create_task(work.run())
    try:
        async with asyncio.timeout(WAIT):
            while work.rounds < 3:
                await asyncio.sleep(0)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert jobs.ran[:8] == ["scan", "retry", "sweep", "status", "scan", "retry", "status", "scan"]
