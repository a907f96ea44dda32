"""Shared pieces of the benchmark harness: the table row, and one way to measure.

Every ``tests/bench/bench_*.py`` module exposes ``run() -> list[Row]`` (and optionally
``notes() -> list[str]``, extra lines for docs/BENCHMARKS.md). Numbers are throughputs of the
median round, and every row that has a baseline is a ratio measured in the same run, on the same
machine: absolute numbers on a shared 2-core box drift, ratios much less.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = ["Row", "measure", "measure_many"]


@dataclass(frozen=True, slots=True)
class Row:
    """One benchmark result: ours against a baseline doing the same work (if any)."""

    group: str
    name: str
    ours: float
    baseline: float | None
    baseline_name: str | None
    unit: str = "ops/s"

    @property
    def ratio(self) -> float | None:
        """ours / baseline (higher is better for ops/s), or None without a baseline."""
        if self.baseline is None or self.baseline <= 0:
            return None
        return self.ours / self.baseline


def _calibrate(fn: Callable[[], object], min_time: float) -> int:
    """Iterations per round so that one round lasts at least ``min_time`` (timeit's autorange)."""
    number = 1
    while True:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return number
        # Aim a little past min_time so noise does not leave a round just short of it.
        number = (
            max(number * 2, int(number * 1.2 * min_time / elapsed) + 1) if elapsed else number * 10
        )


def measure_many(
    cases: Mapping[str, Callable[[], object]], *, min_time: float = 0.2, rounds: int = 5
) -> dict[str, float]:
    """Median ops/s of each case, running the cases round-robin.

    Round-robin (case A round 1, case B round 1, A round 2, …) spreads slow phases of a shared
    machine over every case instead of penalising whichever ran during them.
    """
    numbers = {name: _calibrate(fn, min_time) for name, fn in cases.items()}
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            number = numbers[name]
            start = time.perf_counter()
            for _ in range(number):
                fn()
            samples[name].append(number / (time.perf_counter() - start))
    return {name: statistics.median(values) for name, values in samples.items()}


def measure(fn: Callable[[], object], *, min_time: float = 0.2, rounds: int = 5) -> float:
    """Median ops/s of ``fn`` over ``rounds`` rounds of at least ``min_time`` seconds each."""
    return measure_many({"case": fn}, min_time=min_time, rounds=rounds)["case"]
