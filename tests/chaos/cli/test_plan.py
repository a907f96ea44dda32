"""The kill plan of the real-CLI chaos run, pure: deterministic, every point present."""

from __future__ import annotations

import pytest

from tests.chaos.cli.plan import KillPoint, make_plan

CASES = [(seed, kills) for seed in (1, 2, 3, 20_260_102) for kills in (7, 12, 120)]


@pytest.mark.parametrize(("seed", "kills"), CASES)
def test_same_seed_same_plan(seed: int, kills: int) -> None:
    assert make_plan(seed, kills) == make_plan(seed, kills)


@pytest.mark.parametrize(("seed", "kills"), CASES)
def test_every_point_at_least_once_and_the_count_kept(seed: int, kills: int) -> None:
    plan = make_plan(seed, kills)
    assert len(plan) == kills
    assert all(plan.count(point) >= 1 for point in KillPoint)


def test_another_seed_another_order() -> None:
    assert make_plan(1, 120).rounds != make_plan(2, 120).rounds


def test_a_long_run_spreads_over_every_point() -> None:
    counts = make_plan(1, 120).counts()
    assert min(counts.values()) >= 10, counts


def test_only_some_points() -> None:
    only = (KillPoint.HOST_KILL, KillPoint.CLI_KILL)
    plan = make_plan(5, 9, only)
    assert set(plan) == set(only) and len(plan) == 9


@pytest.mark.parametrize(
    ("kills", "points", "message"),
    [
        (6, None, "at least 7 kills"),
        (1, (KillPoint.HOST_KILL, KillPoint.CLI_KILL), "at least 2 kills"),
        (3, (), "no kill point"),
    ],
    ids=["too-few", "too-few-only", "none"],
)
def test_refused(kills: int, points: tuple[KillPoint, ...] | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_plan(1, kills, points)
