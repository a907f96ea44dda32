"""The phone side of one session's transcript sync (PROTOCOL-v10-wire.md §8), pure.

Theory of operation. :meth:`SyncTracker.request` is called for every ``sync-request`` the phone
sends, with the ``haveRanges`` it sent. The bridge answers each request with one ``sync-begin``
(in request order) unless a newer request supersedes it before it runs; a superseded sync never
gets a ``sync-end``. So the tracker keeps the requests in a FIFO: a ``sync-begin`` belongs to the
oldest request not yet begun, and only the ``sync-end`` of the *latest* begun sync counts.

On that ``sync-end`` the phone checks ``[1, seqHigh]`` against what it had when it asked plus the
``deliveredRanges`` (the contract: "phones must reconcile against deliveredRanges, never assume
ranges was fulfilled"). A gap means a re-request at once, at most ``max_rerequests`` times (the
reference phone: 3); after that the sync ends incomplete. Acking chunks is not tracked here: the
phone acks every chunk, whatever sync it belongs to.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from bridge.protocol import ranges
from bridge.protocol.ranges import Range

__all__ = [
    "MAX_REREQUESTS",
    "SyncOutcome",
    "SyncResult",
    "SyncTracker",
]

MAX_REREQUESTS = 3
"""The reference phone re-requests a partial sync at once, up to 3 times."""


class SyncOutcome(enum.Enum):
    """What the phone does after a ``sync-end``."""

    IGNORED = "ignored"
    """Not the sync the phone is waiting for (superseded, or unsolicited)."""
    REREQUEST = "rerequest"
    """Something of ``[1, seqHigh]`` is missing: send a new ``sync-request`` now."""
    DONE = "done"


@dataclass(frozen=True, slots=True)
class SyncResult:
    """How a sync ended, from the phone's point of view."""

    session_id: str
    complete: bool
    """True when nothing of ``[1, seq_high]`` is missing."""
    seq_high: int
    delivered: tuple[Range, ...]
    """Union of the ``deliveredRanges`` of every ``sync-end`` this sync got."""
    missing: tuple[Range, ...]
    """What is still missing when it ended (empty when complete)."""
    requests: int
    """``sync-request``\\ s sent, the first one included."""
    sync_ids: tuple[str, ...]


@dataclass(slots=True)
class _Begun:
    sync_id: str
    seq_high: int
    have: list[Range]


class SyncTracker:
    """One session's sync, from the first request to completion (or giving up)."""

    def __init__(self, session_id: str, max_rerequests: int = MAX_REREQUESTS) -> None:
        if max_rerequests < 0:
            raise ValueError("max_rerequests must be >= 0")
        self.session_id = session_id
        self.max_rerequests = max_rerequests
        self.requests = 0
        self.rerequests = 0
        self._waiting: deque[list[Range]] = deque()
        self._current: _Begun | None = None
        self._delivered: list[Range] = []
        self._sync_ids: list[str] = []
        self.result: SyncResult | None = None

    @property
    def done(self) -> bool:
        return self.result is not None

    @property
    def current_sync_id(self) -> str | None:
        return self._current.sync_id if self._current is not None else None

    def request(self, have: Sequence[Range]) -> None:
        """Record a ``sync-request`` the phone sends now, with its ``haveRanges``.

        Raises:
            RuntimeError: the sync is over; a new sync needs a new tracker.
        """
        if self.done:
            raise RuntimeError("this sync is over; start a new tracker")
        self.requests += 1
        self._waiting.append(ranges.normalize(have))

    def on_begin(self, sync_id: str, seq_high: int) -> bool:
        """A ``sync-begin`` for this session; False when no request of ours awaits one."""
        if not self._waiting:
            return False
        self._current = _Begun(sync_id, seq_high, self._waiting.popleft())
        self._sync_ids.append(sync_id)
        return True

    def on_end(self, sync_id: str, delivered: Sequence[Range]) -> SyncOutcome:
        """A ``sync-end``: decide whether the sync is complete, to be retried, or not ours."""
        current = self._current
        if current is None or sync_id != current.sync_id or self._waiting or self.done:
            # Not ours, or a newer request is already on its way: wait for its sync-begin.
            return SyncOutcome.IGNORED
        self._current = None
        self._delivered = ranges.union(self._delivered, delivered)
        gap = ranges.missing(ranges.union(current.have, delivered), 1, current.seq_high)
        if gap and self.rerequests < self.max_rerequests:
            self.rerequests += 1
            return SyncOutcome.REREQUEST
        self.result = SyncResult(
            session_id=self.session_id,
            complete=not gap,
            seq_high=current.seq_high,
            delivered=tuple(self._delivered),
            missing=tuple(gap),
            requests=self.requests,
            sync_ids=tuple(self._sync_ids),
        )
        return SyncOutcome.DONE
