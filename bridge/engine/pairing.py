"""The pairing window and the budget of negative answers (REFERENCE-BEHAVIOUR §1.8).

Rules:

- A window is opened by the operator (``codedeck-bridge pair``) for 10 minutes by default, with a
  fresh 16-byte token. Opening a window replaces any open one. It closes when it expires, when a
  phone pairs through it, or when the daemon stops.
- While it is open the bridge also listens to 4515 events from *any* author addressed to it, with
  ``since = window start − 5`` fixed for the whole window (so a re-subscribe replays the gap).
- The token is compared in constant time. Identity is the event author, never the payload.
- Negative answers (``window-closed``, ``bad-token``) are limited to 5 per fixed 10-minute window;
  past that, rejections are dropped unanswered, so a stranger cannot use the bridge as a free
  relay-write amplifier.

Pure: the clock is the ``now`` argument (unix seconds).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

__all__ = [
    "DEFAULT_WINDOW_SECONDS",
    "NACK_BUDGET",
    "NACK_PERIOD_SECONDS",
    "NackBudget",
    "PairingWindow",
    "check_token",
]

DEFAULT_WINDOW_SECONDS = 600.0
NACK_BUDGET = 5
NACK_PERIOD_SECONDS = 600.0
SINCE_GRACE_SECONDS = 5


@dataclass(frozen=True, slots=True)
class PairingWindow:
    """An open window: its token and its lifetime in unix seconds."""

    token: str
    opened_at: float
    expires_at: float

    def is_open(self, now: float) -> bool:
        return self.opened_at <= now < self.expires_at

    @property
    def since(self) -> int:
        """The pairing subscription's fixed ``since``."""
        return int(self.opened_at) - SINCE_GRACE_SECONDS


def check_token(window: PairingWindow, token: str) -> bool:
    """Constant-time comparison of the offered token with the window's."""
    return hmac.compare_digest(window.token.encode(), token.encode())


class NackBudget:
    """At most `budget` negative pair-acks per fixed period of `period` seconds."""

    def __init__(self, budget: int = NACK_BUDGET, period: float = NACK_PERIOD_SECONDS) -> None:
        self._budget = budget
        self._period = period
        self._period_start: float | None = None
        self._used = 0

    def take(self, now: float) -> bool:
        """Spend one negative answer; False when the budget of this period is exhausted."""
        if self._period_start is None or now - self._period_start >= self._period:
            self._period_start = now
            self._used = 0
        if self._used >= self._budget:
            return False
        self._used += 1
        return True
