"""Reconnect delays: exponential backoff with a low cap and jitter inside it, as a generator.

The n-th delay (n = 0, 1, …) is ``min(base * 2**n, cap) * (1 - jitter * r)`` with ``r`` drawn
from ``rng()`` in [0, 1). With the defaults that is 1, 2, 3, 3, 3, … seconds, each one up to
25 % shorter.

Why these numbers. A relay that comes back must see the bridge again within 5 s, however long
it was gone (the phone shows the machine offline until then). The worst moment for a relay to
return is just after an attempt failed: the link then sleeps one whole delay, so the wait is at
most ``cap`` plus one connect (a few milliseconds to a refused or local port, a few round trips
— well under a second — for TLS to a relay across the internet): 3 s + connect < 5 s. A doubling
schedule with the usual long cap (30 s or more) would leave the machine offline for up to that cap
after a long outage.

* The first retries stay quick (1 s, then 2 s): most drops are a relay restarting or a
  connection it closed, and the second attempt usually finds it back.
* Jitter is taken *off* the delay, not added on top: the cap is then a hard ceiling, which is
  what the 5 s promise needs, while many clients that lost the same relay at once still spread
  out (each capped delay is uniform in [2.25, 3] s, so they drift apart by a fraction of a second
  each cycle).
* The attempt rate against a relay that stays down is one every 2.25-3 s: about 20-27 a minute,
  about 1,400 an hour, per relay. An attempt to a refused port is one SYN and one RST, to a name
  that does not resolve one (usually cached) DNS answer: nothing a relay or a network notices. A
  relay that accepts TCP but fails the handshake costs it a TLS handshake every 2.25-3 s per
  bridge, still far below what any relay serves.
* The bound assumes attempts that fail fast. When the network silently drops packets (a relay's
  host that is off, a captive portal), an attempt lasts up to the connection's connect timeout;
  the kernel's SYN retransmissions within it (after 1, 3, 7 s) still reach a relay that returns
  during the attempt.

The generator only computes; the caller sleeps, and "resetting" the backoff means starting a
new generator (the pool does that on EOSE, on an accepted publish and when the machine wakes
from suspend). The randomness is a parameter so tests are deterministic with a seeded
``random.Random().random``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

__all__ = [
    "DEFAULT_BASE",
    "DEFAULT_CAP",
    "DEFAULT_JITTER",
    "backoff",
]

DEFAULT_BASE = 1.0
DEFAULT_CAP = 3.0
"""The longest delay: a relay that returns is dialled again at most this long after (above)."""
DEFAULT_JITTER = 0.25


def backoff(
    rng: Callable[[], float],
    *,
    base: float = DEFAULT_BASE,
    cap: float = DEFAULT_CAP,
    jitter: float = DEFAULT_JITTER,
) -> Iterator[float]:
    """Yield an endless sequence of reconnect delays in seconds, none above ``cap``.

    Args:
        rng: returns a float in [0, 1), e.g. ``random.Random(seed).random``.
        base: the first delay before jitter; must be > 0.
        cap: the largest delay; must be >= ``base``.
        jitter: the largest fraction taken off a delay (0.25 = up to 25 % shorter); in [0, 1).

    Raises:
        ValueError: on a parameter out of range (at the call, not at the first ``next()``).
    """
    if not base > 0:
        raise ValueError("backoff base must be > 0")
    if not cap >= base:
        raise ValueError("backoff cap must be >= base")
    if not 0 <= jitter < 1:
        raise ValueError("backoff jitter must be in [0, 1)")
    return _delays(rng, base, cap, jitter)


def _delays(rng: Callable[[], float], base: float, cap: float, jitter: float) -> Iterator[float]:
    delay = base
    while True:
        yield delay * (1.0 - jitter * rng())
        delay = min(delay * 2.0, cap)
