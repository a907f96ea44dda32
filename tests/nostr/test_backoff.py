"""Reconnect delays: exact sequences with a scripted rng, bounds with a seeded one."""

from __future__ import annotations

import itertools
import random

import pytest

from bridge.nostr.backoff import backoff


def take(iterator: object, count: int) -> list[float]:
    return list(itertools.islice(iterator, count))  # type: ignore[call-overload]


def test_without_jitter_doubles_from_base_up_to_cap() -> None:
    delays = take(backoff(lambda: 0.0), 8)
    assert delays == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0, 30.0]


def test_maximum_jitter_adds_a_quarter() -> None:
    delays = take(backoff(lambda: 1.0), 6)
    assert delays == [2.5, 5.0, 10.0, 20.0, 37.5, 37.5]


def test_jitter_scales_with_the_rng_draw() -> None:
    draws = iter([0.0, 0.5, 0.2, 1.0])
    delays = take(backoff(lambda: next(draws)), 4)
    assert delays == pytest.approx([2.0, 4.5, 8.4, 20.0])


def test_seeded_rng_is_deterministic_and_bounded() -> None:
    first = take(backoff(random.Random(42).random), 50)
    second = take(backoff(random.Random(42).random), 50)
    assert first == second
    nominal = [min(2.0 * 2**n, 30.0) for n in range(50)]
    for delay, floor in zip(first, nominal, strict=True):
        assert floor <= delay <= floor * 1.25
    assert len(set(first[10:])) > 1  # jitter really varies once capped


def test_custom_base_cap_and_jitter() -> None:
    delays = take(backoff(lambda: 0.5, base=0.01, cap=0.05, jitter=0.1), 5)
    assert delays == pytest.approx([0.0105, 0.021, 0.042, 0.0525, 0.0525])


def test_reset_is_a_new_generator() -> None:
    first = backoff(lambda: 0.0)
    take(first, 3)
    assert next(first) == 16.0
    assert next(backoff(lambda: 0.0)) == 2.0


BAD = [
    ({"base": 0.0}, "base must be > 0"),
    ({"base": -1.0}, "base must be > 0"),
    ({"base": 5.0, "cap": 4.0}, "cap must be >= base"),
    ({"jitter": -0.1}, "jitter must be >= 0"),
    ({"base": float("nan")}, "base must be > 0"),
]


@pytest.mark.parametrize(("kwargs", "message"), BAD, ids=[m for _, m in BAD])
def test_bad_parameters_fail_at_the_call(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        backoff(lambda: 0.0, **kwargs)
