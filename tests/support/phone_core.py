"""The phone's identity, state and reactions, without the connection (see :mod:`.phone`).

:class:`PhoneCore` holds everything a phone knows and decides; ``PhoneSimulator``
(:mod:`.phone`) adds the relay pool and the awaitable API. The split keeps each half readable:
here, what an event does to the phone; there, how events and commands travel.

* Subscriptions (the bug-A contract, wire spec §1.4): three, one per storage class, each
  ``authors:[bridge]``, ``#p:[phone]``; 30515 and 24515 with no ``since``; 4516 with
  ``since = lastStoredSeen − 60``, omitted while the cursor is 0. :meth:`PhoneCore.filter_factories`
  returns *factories*: the pool calls them again on every (re)connect, so ``since`` follows the
  cursor, which only stored (4516) events move; live output and heartbeats never do.
* Inbound (:meth:`PhoneCore.handle_event`): the pure pipeline of :mod:`.phone_inbound`, then
  :func:`.phone_react.react` merges the message into the state, then it is logged in
  :attr:`received` (so a waiter woken by it sees its effects). Nothing raises out of it: invalid
  payloads and contract violations are recorded, a simulator bug lands in :attr:`errors`.
* Outbound traffic the phone generates itself (acks, re-requests) goes to the
  :class:`~.phone_outbound.Outbox`.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bridge.nostr.event import VerifiedEvent
from bridge.nostr.filters import Filter
from bridge.nostr.keys import Keypair, PubKeyHex, parse_pubkey
from bridge.nostr.relay import RelayEventReceived
from bridge.protocol.chunking import NIP44_SAFE_PLAINTEXT_BYTES
from bridge.protocol.codec import encode
from bridge.protocol.commands import Command, SyncAckCommand, SyncRequestCommand
from bridge.protocol.kinds import COMMAND_KIND, LIVE_KIND, RESPONSE_KIND, SESSION_LIST_KIND
from bridge.protocol.messages import SyncChunkMessage
from bridge.protocol.ranges import Range
from bridge.protocol.shared import OutputEntry
from tests.support.phone_inbound import InboundDecoder
from tests.support.phone_outbound import Outbox, PhoneError, seal, stamp_command
from tests.support.phone_persist import export_state, restore_state
from tests.support.phone_react import react
from tests.support.phone_state import (
    Conflict,
    InvalidPayload,
    MachineView,
    PendingSession,
    Received,
    SessionBook,
    SessionView,
    TranscriptBook,
)
from tests.support.phone_store import read_state, write_state
from tests.support.phone_sync import SyncTracker
from tests.support.phone_waits import MessageLog

__all__ = [
    "STORED_SINCE_GRACE_SECONDS",
    "SUBSCRIPTION_IDS",
    "PhoneCore",
    "Sent",
]

logger = logging.getLogger(__name__)

STORED_SINCE_GRACE_SECONDS = 60
"""The 4516 subscription reaches this far behind the stored high-water mark (wire spec §1.4)."""

SUBSCRIPTION_IDS: Mapping[int, str] = {
    SESSION_LIST_KIND: "phone-sessions",
    RESPONSE_KIND: "phone-responses",
    LIVE_KIND: "phone-live",
}
"""The phone's three subscriptions, one per storage class, by kind."""

FiltersFactory = Callable[[], tuple[Filter, ...]]


@dataclass(frozen=True, slots=True)
class Sent:
    """A command the phone published (by a test or by itself), with its event."""

    command: Command | None
    """None for raw payloads (:meth:`~tests.support.phone.PhoneSimulator.send_raw`)."""
    event: VerifiedEvent


class PhoneCore(MessageLog):
    """A phone's identity, state and reactions. Arguments: see :class:`.phone.PhoneSimulator`."""

    def __init__(
        self,
        *,
        bridge: str | None,
        relays: Sequence[str],
        keypair: Keypair | None,
        caps: Sequence[str] | None,
        version: int | None,
        label: str,
        state_path: str | Path | None,
        drop_ack: Callable[[SyncChunkMessage], bool] | None,
        ack_drop_rate: float,
        seed: int,
        max_rerequests: int,
        seen_capacity: int,
        outbox_retry_seconds: float,
        clock: Callable[[], float],
    ) -> None:
        super().__init__()
        self.state_path = Path(state_path) if state_path is not None else None
        saved = read_state(self.state_path) if self.state_path is not None else None
        restored = restore_state(saved, keypair) if saved is not None else None
        self.keypair = restored.keypair if restored else (keypair or Keypair.generate())
        self._bridge: PubKeyHex | None = parse_pubkey(bridge) if bridge is not None else None
        if self._bridge is None and restored is not None:
            self._bridge = restored.bridge
        self.relays: list[str] = list(dict.fromkeys(relays)) or (
            list(restored.relays) if restored else []
        )
        self.caps = list(caps) if caps is not None else None
        self.version = version
        self.label = label
        self.drop_ack = drop_ack
        self.ack_drop_rate = ack_drop_rate
        self._rng = random.Random(seed)
        self.max_rerequests = max_rerequests
        self._seen_capacity = seen_capacity
        self._clock = clock
        self.book = restored.book if restored else SessionBook()
        self.transcripts = restored.transcripts if restored else TranscriptBook()
        self.last_stored_seen = restored.last_stored_seen if restored else 0
        """The 4516 ``since`` cursor: the newest ``created_at`` of any new stored (4516) event
        from the bridge, usable or not (the relay delivered it; replaying it helps nobody)."""
        self._seen_initial = list(restored.seen) if restored else []
        if restored:
            self.received.extend(restored.received)
            self.invalid.extend(restored.invalid)
            self.violations.extend(restored.violations)
        self.sent: list[Sent] = []
        self.acks_sent: list[tuple[str, Range]] = []
        self.acks_dropped: list[tuple[str, Range]] = []
        self.errors: list[str] = []
        self.syncs: dict[str, SyncTracker] = {}
        self._decoder: InboundDecoder | None = None
        self._outbox = Outbox(
            self.build_command,
            lambda command, event: self.record_sent(self.stamp(command), event),
            retry_seconds=outbox_retry_seconds,
            name=self.npub[:12],
            errors=self.errors,
        )

    # --- identity and views ---------------------------------------------------------------------

    @property
    def pubkey(self) -> PubKeyHex:
        return self.keypair.public_hex

    @property
    def npub(self) -> str:
        return self.keypair.npub

    @property
    def bridge_pubkey(self) -> PubKeyHex | None:
        return self._bridge

    @property
    def sessions(self) -> dict[str, SessionView]:
        """The merged session list (bug-B): stale sessions stay, tombstoned ones are gone."""
        return self.book.sessions

    @property
    def machine(self) -> MachineView:
        return self.book.machine

    @property
    def pending(self) -> dict[str, PendingSession]:
        return self.book.pending

    @property
    def conflicts(self) -> list[Conflict]:
        return self.transcripts.conflicts

    @property
    def undelivered(self) -> list[Command]:
        """The phone's own commands (acks, re-requests) it gave up sending."""
        return self._outbox.undelivered

    @property
    def duplicates(self) -> int:
        """Events dropped by the phone's own dedup by id (after the pool's)."""
        return self._decoder.duplicates if self._decoder is not None else 0

    @property
    def fragments(self) -> int:
        """``chunk`` fragment events received."""
        return self._decoder.fragments if self._decoder is not None else 0

    def transcript(self, session_id: str) -> dict[int, OutputEntry]:
        """The phone's copy of one transcript: seq → entry, in seq order."""
        return self.transcripts.entries(session_id)

    def have_ranges(self, session_id: str) -> list[Range]:
        """What the phone would send as ``haveRanges`` for this session now."""
        return self.transcripts.have_ranges(session_id)

    def subscription_filters(self) -> dict[str, tuple[Filter, ...]]:
        """The filters each subscription would send now (the pool sends them on connect)."""
        return {sub_id: factory() for sub_id, factory in self.filter_factories().items()}

    def filter_factories(self) -> dict[str, FiltersFactory]:
        """The three subscriptions, by id, as factories the pool calls on every (re)connect."""
        bridge = (self.require_bridge(),)
        phone = {"p": (self.pubkey,)}

        def plain(kind: int) -> FiltersFactory:
            return lambda: (Filter(kinds=(kind,), authors=bridge, tags=phone),)

        def stored() -> tuple[Filter, ...]:
            cursor = self.last_stored_seen
            since = max(0, cursor - STORED_SINCE_GRACE_SECONDS) if cursor > 0 else None
            return (Filter(kinds=(RESPONSE_KIND,), authors=bridge, tags=phone, since=since),)

        return {
            SUBSCRIPTION_IDS[SESSION_LIST_KIND]: plain(SESSION_LIST_KIND),
            SUBSCRIPTION_IDS[RESPONSE_KIND]: stored,
            SUBSCRIPTION_IDS[LIVE_KIND]: plain(LIVE_KIND),
        }

    def require_bridge(self) -> PubKeyHex:
        """The bridge's pubkey.

        Raises:
            PhoneError: not known yet.
        """
        if self._bridge is None:
            raise PhoneError("no bridge pubkey: pass bridge= or pair() with a pairing URL")
        return self._bridge

    def set_bridge(self, bridge: PubKeyHex) -> None:
        """Talk to another bridge from now on (the inbound pipeline starts afresh)."""
        if bridge != self._bridge:
            self._bridge = bridge
            self._decoder = None
            self._seen_initial = []

    def save(self) -> None:
        """Write the state file now.

        Raises:
            PhoneError: the phone has no ``state_path``.
        """
        if self.state_path is None:
            raise PhoneError("this phone has no state_path")
        seen = self._decoder.seen.export() if self._decoder is not None else self._seen_initial
        write_state(self.state_path, export_state(self, seen))

    # --- building commands ----------------------------------------------------------------------

    def stamp(self, command: Command) -> Command:
        """``v`` and ``caps`` as the phone stamps them (values the command already has win)."""
        return stamp_command(command, version=self.version, caps=self.caps)

    def build_command(
        self, command: Command, *, created_at: int | None = None, stamp: bool = True
    ) -> VerifiedEvent:
        """The signed 4515 event for ``command``, without publishing it.

        Raises:
            PhoneError: the encoded command needs fragmenting (use ``send_chunked``).
        """
        text = encode(self.stamp(command) if stamp else command)
        if len(text.encode("utf-8")) > NIP44_SAFE_PLAINTEXT_BYTES:
            raise PhoneError("command too large for one event; use send_chunked()")
        return self.build_raw(text, created_at=created_at)

    def build_raw(
        self,
        plaintext: str,
        *,
        created_at: int | None = None,
        encrypted: bool = True,
        kind: int = COMMAND_KIND,
        tags: Sequence[Sequence[str]] | None = None,
    ) -> VerifiedEvent:
        """A signed event carrying any payload (garbage tests): NIP-44 unless ``encrypted=False``."""
        return seal(
            self.keypair,
            self.require_bridge(),
            plaintext,
            created_at=self.now() if created_at is None else created_at,
            kind=kind,
            tags=tags,
            encrypted=encrypted,
        )

    def now(self) -> int:
        """The phone's ``created_at`` for a new event: wall-clock seconds (wire spec §1.2)."""
        return int(self._clock())

    # --- reactions (called by phone_react) ------------------------------------------------------

    def request_sync(self, tracker: SyncTracker) -> None:
        """Queue a ``sync-request`` for ``tracker``'s session with the ranges held now."""
        have = self.transcripts.have_ranges(tracker.session_id)
        tracker.request(have)
        self.enqueue(SyncRequestCommand(sessionId=tracker.session_id, haveRanges=have))

    def ack_chunk(self, chunk: SyncChunkMessage) -> None:
        """Ack one chunk, unless the test's drop hook (or drop rate) says to lose the ack."""
        if self.drop_ack is not None:
            drop = self.drop_ack(chunk)
        else:
            drop = self.ack_drop_rate > 0 and self._rng.random() < self.ack_drop_rate
        if drop:
            self.acks_dropped.append((chunk.syncId, chunk.range))
            return
        self.acks_sent.append((chunk.syncId, chunk.range))
        self.enqueue(SyncAckCommand(syncId=chunk.syncId, range=chunk.range))

    def record_sent(self, command: Command | None, event: VerifiedEvent) -> None:
        """Log a published command in :attr:`sent` and wake waiters."""
        self.sent.append(Sent(command, event))
        self.notify()

    def enqueue(self, command: Command) -> None:
        """Hand a command to the phone's outbox (sent in order, retried until accepted)."""
        self._outbox.put(command)

    def merge_relays(self, relays: Sequence[str]) -> None:
        """Merge relays (from a pairing URL or ``pair-ack``), deduplicated, in order."""
        self.relays = list(dict.fromkeys([*self.relays, *relays]))

    # --- inbound --------------------------------------------------------------------------------

    def decoder(self) -> InboundDecoder:
        """The inbound pipeline for the current bridge (kept across reconnects)."""
        if self._decoder is None:
            self._decoder = InboundDecoder(
                self.keypair,
                self.require_bridge(),
                seen_capacity=self._seen_capacity,
                seen=self._seen_initial,
            )
        return self._decoder

    def handle_event(self, delivered: RelayEventReceived) -> None:
        """One event from a relay. Runs on a relay reader task: never blocks, never raises."""
        event = delivered.event
        try:
            decoder = self.decoder()
            fresh = event.pubkey == self._bridge and event.id not in decoder.seen
            result = decoder.feed(event, time.monotonic())
            if fresh and event.kind == RESPONSE_KIND:
                self.last_stored_seen = max(self.last_stored_seen, event.created_at)
            if result is None:
                return
            if isinstance(result, InvalidPayload):
                logger.info("phone %s: invalid %s: %s", self.npub[:12], result.stage, result.error)
                self.invalid.append(result)
                return
            self.violations.extend(result.violations)
            received = Received(
                result.message,
                result.event_ids[-1],
                result.event_ids,
                result.kind,
                result.created_at,
                delivered.relay,
                len(self.received),
            )
            self.violations.extend(react(self, received))
            self.received.append(received)
        except Exception as exc:  # a simulator bug must show up in the test, not kill the reader
            logger.exception("phone %s: handling event %s failed", self.npub[:12], event.id[:8])
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            self.notify()
