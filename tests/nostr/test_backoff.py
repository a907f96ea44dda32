"""Reconnect delays: exact sequences with a scripted rng, bounds with a seeded one."""

from __future__ import annotations

import itertools
import random

import pytest

from bridge.nostr.backoff import DEFAULT_CAP, backoff


def take(iterator: object, count: int) -> list[float]:
    return list(itertools.islice(iterator, count))  # type: ignore[call-overload]


def test_without_jitter_doubles_from_base_up_to_cap() -> None:
    delays = take(backoff(lambda: 0.0), 8)
    assert delays == [1.0, 2.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0]


def test_maximum_jitter_takes_a_quarter_off() -> None:
    # rng() is < 1, so 0.999… is the largest draw: just above 75 % of each delay.
    delays = take(backoff(lambda: 0.999999), 5)
    assert delays == pytest.approx([0.75, 1.5, 2.25, 2.25, 2.25], abs=1e-5)


def test_jitter_scales_with_the_rng_draw() -> None:
    draws = iter([0.0, 0.5, 0.2, 0.8])
    delays = take(backoff(lambda: next(draws)), 4)
    assert delays == pytest.approx([1.0, 1.75, 2.85, 2.4])


def test_no_delay_ever_exceeds_the_cap_so_a_returning_relay_is_dialled_within_it() -> None:
    """The 5 s promise: the longest sleep after a failed attempt is the cap, jitter included."""
    delays = take(backoff(random.Random(7).random), 10_000)
    assert max(delays) <= DEFAULT_CAP == 3.0
    assert min(delays[2:]) >= 0.75 * DEFAULT_CAP  # once capped, never a burst of attempts
    # At most ~27 attempts a minute against a relay that stays down (the docstring's rate).
    capped = delays[2:]
    assert 60 / (sum(capped) / len(capped)) < 27


def test_seeded_rng_is_deterministic_and_bounded() -> None:
    first = take(backoff(random.Random(42).random), 50)
    second = take(backoff(random.Random(42).random), 50)
    assert first == second
    nominal = [min(1.0 * 2**n, 3.0) for n in range(50)]
    for delay, ceiling in zip(first, nominal, strict=True):
        assert ceiling * 0.75 < delay <= ceiling
    assert len(set(first[10:])) > 1  # jitter really varies once capped


def test_custom_base_cap_and_jitter() -> None:
    delays = take(backoff(lambda: 0.5, base=0.01, cap=0.05, jitter=0.1), 5)
    assert delays == pytest.approx([0.0095, 0.019, 0.038, 0.0475, 0.0475])


def test_reset_is_a_new_generator() -> None:
    first = backoff(lambda: 0.0)
    take(first, 3)
    assert next(first) == 3.0
    assert next(backoff(lambda: 0.0)) == 1.0


BAD = [
    ({"base": 0.0}, "base must be > 0"),
    ({"base": -1.0}, "base must be > 0"),
    ({"base": 5.0, "cap": 4.0}, "cap must be >= base"),
    ({"jitter": -0.1}, r"jitter must be in \[0, 1\)"),
    ({"jitter": 1.0}, r"jitter must be in \[0, 1\)"),
    ({"base": float("nan")}, "base must be > 0"),
]


@pytest.mark.parametrize(("kwargs", "message"), BAD, ids=[m for _, m in BAD])
def test_bad_parameters_fail_at_the_call(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        backoff(lambda: 0.0, **kwargs)
