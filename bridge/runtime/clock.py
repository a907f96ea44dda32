"""The daemon's two clocks: wall time for the protocol, monotonic time for its own timers.

Wall time (``time.time``) is protocol time: ``created_at`` of events, NIP-40 expirations, the
staleness of a command, the ISO timestamps of transcript lines, and the engine's ``now``. It can
step (NTP, a suspended laptop waking up), so the runtime never measures its own intervals with
it: how long to wait, how long something took, when periodic work is due — those use the
monotonic clock (``time.monotonic``, the clock asyncio's timeouts run on).

Tests pass a fake :class:`Clock` to move both by hand.
"""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "SystemClock"]


class Clock(Protocol):
    """Where the runtime reads the time."""

    def wall(self) -> float:
        """Unix seconds (protocol time; may step)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never steps (the runtime's own timers)."""
        ...


class SystemClock:
    """The real clocks."""

    def wall(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()
