"""Noticing that the machine woke from suspend, to reconnect the relays at once.

Theory of operation. Linux keeps two clocks that differ in exactly one way: ``CLOCK_MONOTONIC``
(``time.monotonic()``, the clock asyncio's timers run on) stops while the machine is suspended,
``CLOCK_BOOTTIME`` goes on counting. Their difference therefore grows by the time spent asleep,
and by nothing else: both are slewed alike by NTP and neither steps with the wall clock. A
watcher reads both about once a second; when the difference grew by more than
:data:`WAKE_THRESHOLD` since the last reading, the machine slept that long, and ``on_wake`` is
called with the seconds slept.

Why this and not "the tick came late": a tick measured on one clock is also late when the event
loop was busy (a long commit, a swapping machine), which would look like a wake; the difference
of the two clocks is blind to that, so the threshold can be low. Why a wake matters: asyncio's
timers are monotonic, so a backoff delay of 3 s that had 2 s left when the lid closed still has
2 s left after it opens, and a connection that was open is usually dead without a FIN (see
:meth:`bridge.nostr.pool.RelayPool.reconnect_now`). A wake is noticed within one tick of the
loop running again (``interval``, 1 s), which leaves the reconnect well inside the 2 s the
bridge promises.

:class:`SleepDetector` is the pure part (readings in, seconds slept out), tested with injected
clock readings; :func:`watch_wakes` is the small loop that reads the real clocks and sleeps.
Where ``CLOCK_BOOTTIME`` does not exist (not Linux) the watcher does not run; keepalive still
finds dead connections, only later.

logind's ``PrepareForSleep`` signal is not used: it needs a D-Bus client this project does not
have (a new dependency and a bus connection to keep), and would announce the wake at best a
fraction of a tick earlier.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

__all__ = ["TICK_INTERVAL", "WAKE_THRESHOLD", "SleepDetector", "boottime_clock", "watch_wakes"]

logger = logging.getLogger(__name__)

TICK_INTERVAL = 1.0
"""Seconds between readings: the longest a wake goes unnoticed once the event loop runs again."""
WAKE_THRESHOLD = 1.0
"""Seconds asleep that count as a suspend. The two clocks are read microseconds apart, so any
real suspend is far above it; a nap shorter than this leaves TCP connections alive anyway."""


class SleepDetector:
    """Turns readings of CLOCK_BOOTTIME and CLOCK_MONOTONIC into "the machine slept N s".

    Args:
        threshold: seconds of suspend below which nothing is reported.
    """

    def __init__(self, *, threshold: float = WAKE_THRESHOLD) -> None:
        if not threshold > 0:
            raise ValueError("the wake threshold must be > 0")
        self._threshold = threshold
        self._offset: float | None = None

    def observe(self, boottime: float, monotonic: float) -> float | None:
        """Take one reading of both clocks; the seconds slept since the last one, if a suspend.

        The first reading only sets the reference. A difference that shrank (it cannot on a
        real system) moves the reference without reporting anything.
        """
        offset = boottime - monotonic
        previous, self._offset = self._offset, offset
        if previous is None:
            return None
        slept = offset - previous
        return slept if slept > self._threshold else None


def boottime_clock() -> Callable[[], float] | None:
    """``CLOCK_BOOTTIME`` as a function, or None where the platform has no such clock."""
    clock_id: int | None = getattr(time, "CLOCK_BOOTTIME", None)
    if clock_id is None:
        return None
    return lambda: time.clock_gettime(clock_id)


async def watch_wakes(
    on_wake: Callable[[float], None],
    *,
    boottime: Callable[[], float] | None = None,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    interval: float = TICK_INTERVAL,
    threshold: float = WAKE_THRESHOLD,
) -> None:
    """Call ``on_wake(seconds_slept)`` after every suspend, until cancelled.

    Args:
        on_wake: told of each wake; must not block (it runs on this task). An exception it
            raises is logged and the watch goes on.
        boottime: the clock that counts suspended time; defaults to :func:`boottime_clock`.
            Returns at once (logged) when there is none.
        monotonic: the clock that does not; ``time.monotonic`` reads CLOCK_MONOTONIC.
        sleep / interval / threshold: how to wait between readings, how long, and the
            smallest suspend reported.

    Cancel-safe: it holds nothing between readings.
    """
    read_boottime = boottime if boottime is not None else boottime_clock()
    if read_boottime is None:
        logger.info("no CLOCK_BOOTTIME here: a wake from suspend is found by keepalive only")
        return
    detector = SleepDetector(threshold=threshold)
    detector.observe(read_boottime(), monotonic())
    while True:
        await sleep(interval)
        slept = detector.observe(read_boottime(), monotonic())
        if slept is None:
            continue
        logger.info("= the machine woke after %.1f s asleep", slept)
        try:
            on_wake(slept)
        except Exception:
            logger.exception("! the wake handler failed")
