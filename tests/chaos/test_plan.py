"""The seeded fault plan, pure: deterministic, every kind present, stretches that keep their word."""

from __future__ import annotations

import itertools

import pytest

from tests.chaos.plan import FAULT_RATES, STRETCHES, Action, FaultKind, make_plan

CASES = [(seed, commands) for seed in (1, 2, 3, 17) for commands in (100, 300, 10_000)]


def spans(actions: tuple[Action, ...], kind: FaultKind) -> list[tuple[int, int, str]]:
    begins = [a for a in actions if a.kind is kind and a.phase == "begin"]
    ends = [a for a in actions if a.kind is kind and a.phase == "end"]
    assert len(begins) == len(ends)
    return [(b.at, e.at, b.target) for b, e in zip(begins, ends, strict=True)]


@pytest.mark.parametrize(("seed", "commands"), CASES)
def test_same_seed_same_plan(seed: int, commands: int) -> None:
    assert make_plan(seed, commands) == make_plan(seed, commands)


def test_another_seed_another_plan() -> None:
    assert make_plan(1, 1000).actions != make_plan(2, 1000).actions


@pytest.mark.parametrize(("seed", "commands"), CASES)
def test_every_kind_at_least_its_minimum(seed: int, commands: int) -> None:
    plan = make_plan(seed, commands)
    for kind in FaultKind:
        rate = FAULT_RATES[kind]
        expected = rate.minimum if rate.every == 0 else max(rate.minimum, commands // rate.every)
        assert plan.count(kind) == expected, kind
    assert plan.count(FaultKind.UNPAIR) == 1


def test_a_full_run_scales_the_counts() -> None:
    plan = make_plan(1, 10_000)
    assert plan.count(FaultKind.DAEMON_KILL) == 12
    assert plan.count(FaultKind.DUPLICATE) == 100
    assert plan.count(FaultKind.RELAY_OUTAGE) == 4


@pytest.mark.parametrize(("seed", "commands"), CASES)
def test_stretches_do_not_overlap_and_end_before_the_cooldown(seed: int, commands: int) -> None:
    plan = make_plan(seed, commands)
    warmup, cooldown = min(40, commands // 10), max(20, commands // 25)
    for kind in STRETCHES:
        found = sorted(spans(plan.actions, kind))
        for start, end, _ in found:
            assert warmup <= start < end <= commands - cooldown
        for (_, end, _), (start, _, _) in itertools.pairwise(found):
            assert end < start, f"{kind.value} stretches overlap"
    outages = [target for _, _, target in sorted(spans(plan.actions, FaultKind.RELAY_OUTAGE))]
    assert outages == ["AB"[n % 2] for n in range(len(outages))]


@pytest.mark.parametrize(("seed", "commands"), CASES)
def test_actions_are_ordered_ends_first(seed: int, commands: int) -> None:
    actions = make_plan(seed, commands).actions
    assert list(actions) == sorted(actions)
    for action in actions:
        assert (
            action.order == {"end": 0, "begin": 2 if action.kind in STRETCHES else 1}[action.phase]
        )


def test_too_short_a_run_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 100 commands"):
        make_plan(1, 99)
