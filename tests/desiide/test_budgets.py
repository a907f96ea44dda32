"""Task budgets (bridge.desiide.budgets): the limits, the token meter, the pausing wall clock."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.desiide.budgets import (
    DEFAULT_BUDGET,
    Budget,
    TokenCounts,
    TokenMeter,
    WallClock,
    token_counts,
)


def test_the_defaults_are_the_seeds() -> None:
    assert DEFAULT_BUDGET.as_json() == {
        "maxIterations": 8,
        "maxToolCalls": 40,
        "maxTokens": 200_000,
        "wallClockMs": 600_000,
    }


def test_from_json_keeps_defaults_for_missing_fields() -> None:
    assert Budget.from_json(None) == DEFAULT_BUDGET
    assert Budget.from_json({"maxToolCalls": 5, "maxTokens": None}) == Budget(max_tool_calls=5)


@pytest.mark.parametrize(
    "data",
    [
        {"maxToolCalls": 0},
        {"maxTokens": -1},
        {"wallClockMs": 1.5},
        {"maxIterations": True},
        {"turns": 3},
    ],
)
def test_from_json_refuses_bad_limits(data: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Budget.from_json(data)


def test_token_counts_leave_cache_reads_out_of_the_budget() -> None:
    usage = {
        "input_tokens": 10,
        "cache_creation_input_tokens": 5,
        "cache_read_input_tokens": 1000,
        "output_tokens": 7,
    }
    counts = token_counts(usage)
    assert counts == TokenCounts(input=15, output=7, cache_read=1000)
    assert counts.billed == 22
    assert token_counts({"input_tokens": "9", "output_tokens": True}) == TokenCounts(0, 0, 0)
    assert token_counts(None) is None


def test_the_turns_total_replaces_its_calls() -> None:
    meter = TokenMeter()
    meter.add_call(TokenCounts(100, 10, 0))
    meter.add_call(TokenCounts(200, 10, 0))
    assert meter.total == 320
    meter.end_turn(TokenCounts(250, 30, 0))
    assert meter.total == 280
    meter.add_call(TokenCounts(1, 1, 0))
    meter.end_turn(None)  # a result without usage keeps what the calls counted
    assert meter.total == 282


def test_the_wall_clock_counts_only_while_running() -> None:
    clock = WallClock(10_000)
    assert clock.deadline() is None and not clock.running
    clock.start(100.0)
    clock.start(105.0)  # already counting: no reset
    assert clock.deadline() == 110.0
    clock.pause(104.0)
    clock.pause(200.0)  # already paused
    assert clock.spent_ms(500.0) == 4000.0
    clock.start(300.0)
    assert clock.deadline() == 306.0
    assert not clock.expired(305.999)
    assert clock.expired(306.0)
