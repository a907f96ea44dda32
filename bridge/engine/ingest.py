"""The inbound command gate: who may speak, what was seen, what is too old, what it says.

Order for every kind-4515 event (the pool already checked its id and signature):

1. shape: kind 4515 and a ``p`` tag naming this bridge;
2. author: a paired phone, or (while a pairing window is open) anyone — but then only a
   ``pair-request`` is acted on. This check comes before dedup so strangers cannot evict ids;
3. dedup against the processed set, which is persisted and reloaded at boot;
4. NIP-44 decrypt with the author's conversation key;
5. chunk reassembly (a fragment completes nothing until every part is in, and is not recorded
   as processed until then: see below);
6. decode against the v10 schema (invalid payloads are dropped, never answered);
7. staleness: a command older than 300 s is never executed.

The caller then commits ``MarkProcessed`` (for every event that reached step 3, whatever its
fate, so a replay is a no-op) and ``AdvanceCursor`` in the same transaction as the command's
own effects.

Why ids are kept for 65 minutes and not 1,000 of them: a relay keeps a command for its NIP-40
hour, and may replay it at any time in that hour (after our crash, on a resubscribe with an
older ``since``). An id forgotten earlier would come back as "new" — a stale one would then be
answered ``input-failed{expired}`` after it was already acknowledged. Keeping every id until the
relays must have dropped the event closes that gap; memory is bounded by ``max_ids``.

Why a fragment's id is recorded only with its completed group: the held parts live in memory.
Were the first fragment's id committed at once and the daemon killed before the last arrived,
the relay's replay of that first fragment would be dropped as a duplicate and the command could
never complete. Unrecorded, the replay refills the group; a duplicate delivery meanwhile is
absorbed by the assembler (same ``(cid, i)``). The completed command's commit records every
fragment id of its group (:attr:`Decoded.fragments`). A group that can no longer complete
(expired, evicted past the caps, restarted with another ``n``) has its ids recorded then
(:meth:`IngestGate.take_given_up`): otherwise a flood of incomplete groups would come back
from the relays after every restart and evict real groups again.

Why ``since`` reaches back at least 300 s: a phone whose clock runs behind stamps its commands
in the past. After a crash, ``last_seen − 5`` could lie after such a command that was never
processed, and the relay would not replay it. Any command younger than 300 s may still run, so
the subscription always covers that window; dedup makes the overlap free.

Pure: the clock is ``now``; decryption is an injected function of the caller's key.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import cast

from bridge.nostr.event import VerifiedEvent
from bridge.protocol import Assembler, DecodeError, PhoneToBridge, decode_phone_to_bridge
from bridge.protocol.kinds import COMMAND_EXPIRY_SECONDS, COMMAND_KIND
from bridge.records import record

__all__ = [
    "MAX_COMMAND_AGE_SECONDS",
    "PROCESSED_RETENTION_SECONDS",
    "Decoded",
    "IngestGate",
    "Refused",
]

MAX_COMMAND_AGE_SECONDS = 300
"""A command older than this (by its ``created_at``) is never executed."""

PROCESSED_RETENTION_SECONDS = COMMAND_EXPIRY_SECONDS + MAX_COMMAND_AGE_SECONDS
"""How long a processed id is remembered: past it, relays no longer hold the event."""

SINCE_GRACE_SECONDS = 5
MAX_REMEMBERED_IDS = 200_000

Decrypt = Callable[[str, str], str]
"""(author pubkey hex, NIP-44 payload) → plaintext; raises ValueError when it cannot."""


@record
class Decoded:
    """A command that passed every check but staleness (reported in `stale`)."""

    command: PhoneToBridge
    event_id: str
    author: str
    created_at: int
    stale: bool
    fragments: tuple[tuple[str, int], ...] = ()
    """(event id, created_at) of the group's other fragments, to record with this one."""


@record
class Refused:
    """Dropped; `mark` says whether the id must still be recorded as processed."""

    reason: str
    mark: bool
    fragments: tuple[tuple[str, int], ...] = ()
    """Other fragment ids of a completed group, recorded with this one when `mark`."""


class IngestGate:
    """Dedup memory, cursor and reassembly for inbound commands.

    Args:
        bridge_pubkey: our x-only pubkey (hex).
        processed: the persisted processed ids (event id → created_at), loaded at boot.
        last_seen: the persisted cursor (newest processed ``created_at``), 0 if none.
        decrypt: see :data:`Decrypt`.
        max_ids: hard cap on remembered ids (oldest forgotten first).
    """

    def __init__(
        self,
        bridge_pubkey: str,
        processed: Mapping[str, int],
        last_seen: int,
        decrypt: Decrypt,
        *,
        max_ids: int = MAX_REMEMBERED_IDS,
    ) -> None:
        self._bridge = bridge_pubkey
        self._decrypt = decrypt
        self._max_ids = max_ids
        self._seen: OrderedDict[str, int] = OrderedDict(
            sorted(processed.items(), key=lambda item: item[1])
        )
        self.last_seen = last_seen
        self.assembler = Assembler()

    # --- queries -------------------------------------------------------------------------------

    def since(self, now: float) -> int:
        """``since`` for the command subscription (see the module docstring)."""
        floor = int(now) - MAX_COMMAND_AGE_SECONDS
        if self.last_seen <= 0:
            return floor
        return min(self.last_seen - SINCE_GRACE_SECONDS, floor)

    def seen(self, event_id: str) -> bool:
        return event_id in self._seen

    @property
    def remembered(self) -> int:
        return len(self._seen)

    # --- the gate ------------------------------------------------------------------------------

    def admit(self, event: VerifiedEvent, now: float, *, paired: bool) -> Decoded | Refused:
        """Run steps 1 and 3–7 for an event whose author check (step 2) the caller made.

        `paired` says whether the author is a paired phone; for a stranger (pairing window)
        decrypt failures are not recorded, so junk takes no dedup slot.
        """
        if event.kind != COMMAND_KIND:
            return Refused(f"kind {event.kind} is not a command", mark=False)
        if not any(
            len(tag) >= 2 and tag[0] == "p" and tag[1] == self._bridge for tag in event.tags
        ):
            return Refused("not addressed to this bridge", mark=False)
        if event.id in self._seen:
            return Refused("duplicate (already processed)", mark=False)
        try:
            plaintext = self._decrypt(event.pubkey, event.content)
        except ValueError:
            return Refused("cannot decrypt (wrong key or corrupt payload)", mark=paired)
        assembled, tokens = self.assembler.feed_tracked(
            plaintext,
            now,
            sender=event.pubkey,
            token=(event.id, event.created_at),
            sent_at=event.created_at,
        )
        if assembled is None:
            return Refused("fragment held, waiting for the rest", mark=False)
        held = (cast("tuple[str, int]", token) for token in tokens)
        fragments = tuple(fragment for fragment in held if fragment[0] != event.id)
        try:
            command = decode_phone_to_bridge(assembled)
        except DecodeError as exc:
            return Refused(f"invalid payload: {exc}", mark=True, fragments=fragments)
        stale = event.created_at < int(now) - MAX_COMMAND_AGE_SECONDS
        return Decoded(command, event.id, event.pubkey, event.created_at, stale, fragments)

    def take_given_up(self) -> list[tuple[str, int]]:
        """(event id, created_at) of fragments whose group was given up: to record now."""
        return [cast("tuple[str, int]", token) for token in self.assembler.take_given_up()]

    def remember(self, event_id: str, created_at: int) -> None:
        """Record an id as processed (the caller commits ``MarkProcessed`` for it)."""
        self._seen[event_id] = created_at
        self._seen.move_to_end(event_id)
        while len(self._seen) > self._max_ids:
            self._seen.popitem(last=False)

    def advance(self, created_at: int, now: float) -> int | None:
        """Move the cursor to `created_at` (capped at `now`); the new value, or None."""
        candidate = min(created_at, int(now))
        if candidate > self.last_seen:
            self.last_seen = candidate
            return candidate
        return None

    def prune(self, now: float) -> list[str]:
        """Forget ids the relays can no longer replay; returns them (to delete from the store)."""
        horizon = int(now) - PROCESSED_RETENTION_SECONDS
        expired = [event_id for event_id, created in self._seen.items() if created < horizon]
        for event_id in expired:
            del self._seen[event_id]
        self.assembler.sweep(now)
        return expired
