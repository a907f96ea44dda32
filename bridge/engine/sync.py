"""The transcript sync server (PROTOCOL-v10-wire.md §8, REFERENCE-BEHAVIOUR §1.7), sans-I/O.

Theory of operation. A phone that reconnects asks ``sync-request{sessionId, haveRanges}``; the
engine calls :meth:`SyncServer.request` with the session's ``seqHigh`` and a fresh ``syncId``:

1. ``missing`` = the parts of ``[1, seqHigh]`` that the (normalized) ``haveRanges`` do not cover;
2. ``sync-begin{syncId, seqHigh, ranges: missing}``, then one :class:`SendSyncChunk` per piece of
   at most 50 seqs (the runtime reads those lines from the store and sends the ``sync-chunk``);
3. the phone answers each chunk with ``sync-ack{syncId, range}`` (:meth:`SyncServer.ack`); the
   range must equal one chunk's range exactly, anything else is ignored;
4. when every chunk is acked: ``sync-end{deliveredRanges}`` = the union of the acked ranges.

Timers are data (:meth:`SyncServer.next_deadline` / :meth:`SyncServer.tick`). Chunks still unacked
when the ack wait runs out are resent; the wait is 10 s after the first send, then doubles
(20 s, 40 s) after each of at most 2 resend passes, so a chunk is sent at most 3 times. When the
last wait runs out the sync ends with the acked ranges only (``retries-exhausted``): the phone
learns exactly what arrived and re-requests the rest. Each wait counts from the time the chunks
were emitted, or, better, from :meth:`SyncServer.chunks_sent` when the runtime reports that it has
finished sending them (the reference starts waiting after its sequential sends complete).

Idle close. A sync with no activity (no send, no ack) for 60 s closes, and it closes like a
retries-exhausted one: with a ``sync-end`` of what was acked, because an honest
``deliveredRanges`` costs one small event and spares the phone a wait on its own timeout. With
the default constants the ack schedule always ends a sync first (the last wait is 40 s after the
last send); the idle limit is the safety net that bounds a sync's life under any configuration.

Silent ends, without ``sync-end``: a newer request for the same (session, phone) supersedes the
active one (§8: "the old one gets no sync-end"); shutdown (:meth:`SyncServer.abort_all`); a closed
session (:meth:`SyncServer.abort_session`) or an unpaired phone (:meth:`SyncServer.abort_phone`);
and eviction: at most ``max_syncs`` (256) syncs are held, and starting one more evicts the oldest.
A phone that lost its sync re-requests what it lacks on its next connect.

Every message goes to the requesting phone only, as a best-effort :class:`Publish` (never inside
a ``Commit``): sync traffic is not durable, its own acks and resends recover a loss.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from bridge.engine.effects import Effect, Publish, SendSyncChunk
from bridge.protocol import SyncBeginMessage, SyncEndMessage, ranges
from bridge.protocol.ranges import Range

__all__ = [
    "MAX_ACTIVE_SYNCS",
    "SYNC_ACK_TIMEOUT_SECONDS",
    "SYNC_CHUNK_SIZE",
    "SYNC_IDLE_TIMEOUT_SECONDS",
    "SYNC_MAX_RETRIES",
    "SyncOutcome",
    "SyncServer",
]

SYNC_CHUNK_SIZE: Final = 50
"""Most seqs in one ``sync-chunk``."""
SYNC_ACK_TIMEOUT_SECONDS: Final = 10.0
"""The first ack wait; pass *p* waits ``10 × 2**p`` seconds (10, 20, 40)."""
SYNC_MAX_RETRIES: Final = 2
"""Resend passes before a sync ends with the acked ranges only."""
SYNC_IDLE_TIMEOUT_SECONDS: Final = 60.0
"""A sync with no send and no ack for this long is closed."""
MAX_ACTIVE_SYNCS: Final = 256
"""Most syncs held at once; one more evicts the oldest (memory stays bounded)."""


class SyncOutcome(enum.Enum):
    """How a sync ended; :attr:`SyncServer.outcomes` counts them (for status and logs)."""

    COMPLETE = "complete"
    """Every chunk acked; ``sync-end`` sent."""
    RETRIES_EXHAUSTED = "retries-exhausted"
    """The last ack wait ran out; ``sync-end`` sent with the acked ranges."""
    IDLE = "idle"
    """No activity for the idle limit; ``sync-end`` sent with the acked ranges."""
    SUPERSEDED = "superseded"
    """A newer request for the same (session, phone); no ``sync-end``."""
    EVICTED = "evicted"
    """Dropped to respect the cap on active syncs; no ``sync-end``."""
    ABORTED = "aborted"
    """Shutdown, closed session or unpaired phone; no ``sync-end``."""


@dataclass(slots=True)
class _Sync:
    phone: str
    session_id: str
    sync_id: str
    chunks: frozenset[Range]  # every chunk range: an ack must name one of them exactly
    pending: dict[Range, None]  # unacked chunks, in send order (a dict is an ordered set)
    ack_deadline: float
    last_activity: float
    acked: set[Range] = field(default_factory=set)
    passes: int = 0  # resend passes done


class SyncServer:
    """Every active transcript sync of the bridge: one per (session, phone).

    Args:
        chunk_size: Most seqs per chunk.
        ack_timeout: The first ack wait, in seconds; it doubles after each resend pass.
        max_retries: Resend passes before giving up.
        idle_timeout: Seconds without a send or an ack after which a sync closes.
        max_syncs: Most syncs held at once.

    Attributes:
        outcomes: How many syncs ended each way since this server was created.

    Raises:
        ValueError: A non-positive size, timeout or cap, or a negative ``max_retries``.
    """

    def __init__(
        self,
        *,
        chunk_size: int = SYNC_CHUNK_SIZE,
        ack_timeout: float = SYNC_ACK_TIMEOUT_SECONDS,
        max_retries: int = SYNC_MAX_RETRIES,
        idle_timeout: float = SYNC_IDLE_TIMEOUT_SECONDS,
        max_syncs: int = MAX_ACTIVE_SYNCS,
    ) -> None:
        if chunk_size < 1 or max_syncs < 1 or max_retries < 0:
            raise ValueError("chunk_size and max_syncs must be positive, max_retries >= 0")
        if not (ack_timeout > 0 and idle_timeout > 0):
            raise ValueError("ack_timeout and idle_timeout must be positive")
        self._chunk_size = chunk_size
        self._ack_timeout = float(ack_timeout)
        self._max_retries = max_retries
        self._idle_timeout = float(idle_timeout)
        self._max_syncs = max_syncs
        # Insertion order is start order: the first entry is the oldest (evicted first).
        self._by_key: dict[tuple[str, str], _Sync] = {}
        self._by_id: dict[str, _Sync] = {}
        self.outcomes: dict[SyncOutcome, int] = dict.fromkeys(SyncOutcome, 0)

    # --- queries -------------------------------------------------------------------------------

    def active_count(self) -> int:
        """How many syncs are waiting for acks."""
        return len(self._by_key)

    def is_active(self, sync_id: str) -> bool:
        """Whether ``sync_id`` names a sync that has not ended."""
        return sync_id in self._by_id

    def next_deadline(self) -> float | None:
        """When :meth:`tick` next has work (a resend, a give-up or an idle close), or None."""
        return min((self._deadline(sync) for sync in self._by_key.values()), default=None)

    # --- inputs --------------------------------------------------------------------------------

    def request(
        self,
        phone: str,
        session_id: str,
        have_ranges: Iterable[Sequence[int]],
        seq_high: int,
        sync_id: str,
        now: float,
    ) -> list[Effect]:
        """Start a sync for ``phone`` (a ``sync-request``), superseding its previous one.

        Args:
            phone: The requesting phone's hex pubkey (the event author).
            session_id: The session to sync; the caller checked that it exists.
            have_ranges: The phone's ``haveRanges``, in any order, overlapping or inverted.
            seq_high: The session's highest transcript seq (0 for an empty transcript).
            sync_id: A fresh id for this sync (a UUID drawn by the runtime).
            now: The current time, in seconds.

        Returns:
            ``sync-begin``, then one :class:`SendSyncChunk` per chunk; or, when the phone lacks
            nothing, ``sync-begin{ranges:[]}`` and ``sync-end{deliveredRanges:[]}`` at once.

        Raises:
            ValueError: ``seq_high`` is negative, ``now`` is not finite, or ``sync_id`` is empty
                or names another active sync (the runtime must draw a fresh one).
        """
        if isinstance(seq_high, bool) or not isinstance(seq_high, int) or seq_high < 0:
            raise ValueError("seq_high must be a non-negative integer")
        if not math.isfinite(now):
            raise ValueError("now must be a finite number of seconds")
        if not sync_id:
            raise ValueError("sync_id must not be empty")
        key = (session_id, phone)
        existing = self._by_id.get(sync_id)
        if existing is not None and (existing.session_id, existing.phone) != key:
            raise ValueError("sync_id is already used by another active sync")
        previous = self._by_key.get(key)
        if previous is not None:
            # §8: "A newer request replaces the old one, and the old one gets no sync-end."
            self._remove(previous, SyncOutcome.SUPERSEDED)

        missing = ranges.missing(have_ranges, 1, seq_high)
        begin = SyncBeginMessage(
            sessionId=session_id, syncId=sync_id, seqHigh=seq_high, ranges=missing
        )
        effects: list[Effect] = [Publish(begin, (phone,))]
        if not missing:
            effects.append(self._end_message(phone, session_id, sync_id, ()))
            self.outcomes[SyncOutcome.COMPLETE] += 1
            return effects

        while len(self._by_key) >= self._max_syncs:
            self._remove(next(iter(self._by_key.values())), SyncOutcome.EVICTED)
        chunks = ranges.chunk_ranges(missing, self._chunk_size)
        sync = _Sync(
            phone=phone,
            session_id=session_id,
            sync_id=sync_id,
            chunks=frozenset(chunks),
            pending=dict.fromkeys(chunks),
            ack_deadline=now + self._ack_timeout,
            last_activity=now,
        )
        self._by_key[key] = sync
        self._by_id[sync_id] = sync
        effects.extend(SendSyncChunk(phone, session_id, sync_id, chunk) for chunk in chunks)
        return effects

    def chunks_sent(self, phone: str, sync_id: str, now: float) -> None:
        """The runtime finished sending the chunks of this sync's latest pass.

        Optional but recommended: the ack wait then starts when the last chunk left, as in the
        reference, rather than when the chunks were emitted, so a slow send of many chunks does
        not trigger needless resends. Unknown ids (or another phone's sync) are ignored.
        """
        sync = self._by_id.get(sync_id)
        if sync is None or sync.phone != phone:
            return
        sync.ack_deadline = now + self._wait(sync.passes)
        sync.last_activity = max(sync.last_activity, now)

    def ack(self, phone: str, sync_id: str, seq_range: Sequence[int], now: float) -> list[Effect]:
        """A ``sync-ack`` from ``phone``.

        Args:
            phone: The ack's author; only the phone that requested the sync may ack it.
            sync_id: The ack's ``syncId``.
            seq_range: The ack's ``range``; it must equal one chunk's range exactly.
            now: The current time, in seconds.

        Returns:
            ``[sync-end]`` when this ack completes the sync, else nothing. An ack for an unknown
            or finished sync, from another phone, or for a range that is not one of the sync's
            chunks is ignored; a duplicate ack only counts as activity.
        """
        sync = self._by_id.get(sync_id)
        if sync is None or sync.phone != phone or len(seq_range) != 2:
            return []
        chunk = (seq_range[0], seq_range[1])
        if chunk not in sync.chunks:
            return []
        sync.last_activity = max(sync.last_activity, now)
        if chunk not in sync.pending:
            return []  # duplicate
        del sync.pending[chunk]
        sync.acked.add(chunk)
        if sync.pending:
            return []
        return [self._finish(sync, SyncOutcome.COMPLETE)]

    def tick(self, now: float) -> list[Effect]:
        """Run every timer due at ``now``: resend unacked chunks, give up, or close idle syncs.

        A late tick does one step per sync (the next wait counts from ``now``), so a daemon that
        was suspended resends once instead of running through its whole schedule at once.
        """
        effects: list[Effect] = []
        for sync in list(self._by_key.values()):
            if sync.ack_deadline <= now:
                if sync.passes < self._max_retries:
                    sync.passes += 1
                    sync.ack_deadline = now + self._wait(sync.passes)
                    sync.last_activity = max(sync.last_activity, now)
                    effects.extend(
                        SendSyncChunk(sync.phone, sync.session_id, sync.sync_id, chunk)
                        for chunk in sync.pending
                    )
                else:
                    effects.append(self._finish(sync, SyncOutcome.RETRIES_EXHAUSTED))
            elif sync.last_activity + self._idle_timeout <= now:
                effects.append(self._finish(sync, SyncOutcome.IDLE))
        return effects

    def abort_all(self) -> None:
        """Shutdown: forget every sync, without ``sync-end`` (REFERENCE-BEHAVIOUR §1.7)."""
        for sync in list(self._by_key.values()):
            self._remove(sync, SyncOutcome.ABORTED)

    def abort_session(self, session_id: str) -> None:
        """The session closed (its transcript is gone): forget its syncs, without ``sync-end``."""
        for sync in [s for s in self._by_key.values() if s.session_id == session_id]:
            self._remove(sync, SyncOutcome.ABORTED)

    def abort_phone(self, phone: str) -> None:
        """The phone was unpaired (nothing more is published to it): forget its syncs."""
        for sync in [s for s in self._by_key.values() if s.phone == phone]:
            self._remove(sync, SyncOutcome.ABORTED)

    # --- internals -----------------------------------------------------------------------------

    def _wait(self, passes: int) -> float:
        return self._ack_timeout * (1 << passes)

    def _deadline(self, sync: _Sync) -> float:
        return min(sync.ack_deadline, sync.last_activity + self._idle_timeout)

    def _remove(self, sync: _Sync, outcome: SyncOutcome) -> None:
        del self._by_key[(sync.session_id, sync.phone)]
        del self._by_id[sync.sync_id]
        self.outcomes[outcome] += 1

    def _finish(self, sync: _Sync, outcome: SyncOutcome) -> Publish:
        self._remove(sync, outcome)
        return self._end_message(sync.phone, sync.session_id, sync.sync_id, sync.acked)

    @staticmethod
    def _end_message(phone: str, session_id: str, sync_id: str, acked: Iterable[Range]) -> Publish:
        # §8: deliveredRanges is the union of the *acked* chunk ranges only, normalized.
        end = SyncEndMessage(
            sessionId=session_id, syncId=sync_id, deliveredRanges=ranges.normalize(acked)
        )
        return Publish(end, (phone,))
