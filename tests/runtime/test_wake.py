"""The wake watcher with injected clocks: exact readings in, exact wakes out, no sleeping."""

from __future__ import annotations

import logging
import time

import pytest

from bridge.runtime.edges.wake import SleepDetector, boottime_clock, watch_wakes

# (boottime, monotonic) readings after a first one at (100.0, 50.0), and what each reports.
CASES = [
    ("one ordinary tick", [(101.0, 51.0)], [None]),
    ("a late tick is not a wake (both clocks ran)", [(130.0, 80.0)], [None]),
    ("a suspend of 60 s", [(161.0, 51.0)], [60.0]),
    ("at the threshold: not a suspend", [(102.0, 51.0)], [None]),
    ("just above the threshold", [(102.25, 51.0)], [1.25]),
    ("the reference moves on after a wake", [(161.0, 51.0), (162.0, 52.0)], [60.0, None]),
    ("two suspends", [(111.0, 51.0), (122.0, 52.0)], [10.0, 10.0]),
    ("a difference that shrank reports nothing", [(99.0, 51.0), (105.0, 52.0)], [None, 5.0]),
]


@pytest.mark.parametrize(("name", "readings", "expected"), CASES, ids=[c[0] for c in CASES])
def test_sleep_detector(
    name: str, readings: list[tuple[float, float]], expected: list[float | None]
) -> None:
    detector = SleepDetector()
    assert detector.observe(100.0, 50.0) is None  # the first reading is the reference
    got = [detector.observe(boot, mono) for boot, mono in readings]
    assert got == [pytest.approx(e) if e is not None else None for e in expected]


def test_threshold_is_configurable_and_positive() -> None:
    detector = SleepDetector(threshold=5.0)
    detector.observe(0.0, 0.0)
    assert detector.observe(5.0, 0.0) is None
    assert detector.observe(10.5, 0.0) == 5.5
    with pytest.raises(ValueError, match="threshold must be > 0"):
        SleepDetector(threshold=0.0)


class Machine:
    """Two clocks and a sleep that advances them; a scripted suspend before some ticks."""

    def __init__(self, suspends: dict[int, float], ticks: int) -> None:
        self.boot = 1000.0
        self.mono = 10.0
        self.suspends = suspends
        self.ticks = ticks
        self.slept: list[float] = []
        self.tick = 0

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.tick += 1
        if self.tick > self.ticks:
            raise Finished
        self.mono += seconds
        self.boot += seconds + self.suspends.get(self.tick, 0.0)


class Finished(Exception):
    """Ends a scripted watch (watch_wakes runs until cancelled)."""


async def test_watch_reports_each_suspend_once_with_its_length() -> None:
    machine = Machine({3: 3600.0, 7: 2.5}, ticks=10)
    woke: list[float] = []
    with pytest.raises(Finished):
        await watch_wakes(
            woke.append,
            boottime=lambda: machine.boot,
            monotonic=lambda: machine.mono,
            sleep=machine.sleep,
        )
    assert woke == [3600.0, 2.5]
    assert machine.slept == [1.0] * 11  # one reading a second


async def test_a_failing_handler_is_logged_and_the_watch_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    machine = Machine({1: 10.0, 2: 10.0}, ticks=3)
    calls: list[float] = []

    def handler(slept: float) -> None:
        calls.append(slept)
        raise RuntimeError("boom")

    with caplog.at_level(logging.INFO, logger="bridge.runtime.edges.wake"), pytest.raises(Finished):
        await watch_wakes(
            handler,
            boottime=lambda: machine.boot,
            monotonic=lambda: machine.mono,
            sleep=machine.sleep,
            interval=0.5,
        )
    assert calls == [10.0, 10.0]
    assert machine.slept == [0.5] * 4
    failures = [r for r in caplog.records if r.getMessage() == "! the wake handler failed"]
    assert len(failures) == 2
    assert "the machine woke after 10.0 s asleep" in caplog.text


def test_boottime_clock_reads_the_kernel_clock_that_counts_suspend() -> None:
    clock = boottime_clock()
    if not hasattr(time, "CLOCK_BOOTTIME"):
        assert clock is None
        return
    assert clock is not None
    # Booted before this process: BOOTTIME >= MONOTONIC (equal on a machine that never slept).
    assert clock() >= time.monotonic() - 0.01
    assert abs(clock() - time.clock_gettime(time.CLOCK_BOOTTIME)) < 1.0


async def test_no_boottime_clock_means_no_watch(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delattr(time, "CLOCK_BOOTTIME", raising=False)
    with caplog.at_level(logging.INFO, logger="bridge.runtime.edges.wake"):
        await watch_wakes(lambda _: None)  # returns at once instead of watching
    assert "no CLOCK_BOOTTIME here" in caplog.text
