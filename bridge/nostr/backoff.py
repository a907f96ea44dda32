"""Reconnect delays: exponential backoff with a cap and proportional jitter, as a generator.

The n-th delay (n = 0, 1, …) is ``min(base * 2**n, cap) * (1 + jitter * r)`` with ``r`` drawn
from ``rng()`` in [0, 1). With the defaults that is 2, 4, 8, 16, 30, 30, … seconds plus up to
25 %: the reference bridge's numbers, which keep a dead relay from being hammered while a
briefly restarted one is back within seconds. Jitter is added on top of the cap (not
inside it), so many clients that lost the same relay at once spread out instead of
reconnecting in lockstep.

The generator only computes; the caller sleeps, and "resetting" the backoff means starting a
new generator (the pool does that on EOSE and on an accepted publish). The randomness is a
parameter so tests are deterministic with a seeded ``random.Random().random``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

__all__ = [
    "DEFAULT_BASE",
    "DEFAULT_CAP",
    "DEFAULT_JITTER",
    "backoff",
]

DEFAULT_BASE = 2.0
DEFAULT_CAP = 30.0
DEFAULT_JITTER = 0.25


def backoff(
    rng: Callable[[], float],
    *,
    base: float = DEFAULT_BASE,
    cap: float = DEFAULT_CAP,
    jitter: float = DEFAULT_JITTER,
) -> Iterator[float]:
    """Yield an endless sequence of reconnect delays in seconds.

    Args:
        rng: returns a float in [0, 1), e.g. ``random.Random(seed).random``.
        base: the first delay before jitter; must be > 0.
        cap: the largest delay before jitter; must be >= ``base``.
        jitter: the largest extra fraction added to a delay (0.25 = up to +25 %); >= 0.

    Raises:
        ValueError: on a parameter out of range (at the call, not at the first ``next()``).
    """
    if not base > 0:
        raise ValueError("backoff base must be > 0")
    if not cap >= base:
        raise ValueError("backoff cap must be >= base")
    if not jitter >= 0:
        raise ValueError("backoff jitter must be >= 0")
    return _delays(rng, base, cap, jitter)


def _delays(rng: Callable[[], float], base: float, cap: float, jitter: float) -> Iterator[float]:
    delay = base
    while True:
        yield delay * (1.0 + jitter * rng())
        delay = min(delay * 2.0, cap)
