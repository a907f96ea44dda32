"""The phone's inbound pipeline, pure: dedup by id → NIP-44 decrypt → reassemble → decode → checks.

Order and rules (PROTOCOL-v10-wire.md §1.4, §2.3, §3):

1. **Dedup by event id** in a bounded LRU. The relay pool already drops an event that arrives
   through two relays; this layer also catches the replays of a *new* connection (the 4516
   subscription's ``since`` reaches 60 s back, so a reconnect gets recent responses again) and,
   with the ids saved in the state file, those after a restart.
2. **Decrypt** with the conversation key of (phone, bridge). A payload that is not NIP-44 is
   recorded as invalid (stage ``decrypt``), never raised.
3. **Reassemble** ``chunk`` fragments (:class:`bridge.protocol.chunking.Assembler`, keyed by the
   author so that nobody can inject parts into the bridge's messages).
4. **Decode** with the strict v10 codec; a failure is recorded (stage ``decode``).
5. **Contract checks** on the carrying event(s): the kind must be :func:`kind_for` the message;
   the tags must be exactly those of §1.3 (:func:`tags_for`, :func:`fragment_tags`); the fragments
   of one message share one kind and one ``created_at``. A failure is a
   :class:`~tests.support.phone_state.ContractViolation`; the message is still delivered, as the
   real phone would (it routes by ``type``), so the test sees both the data and the violation.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

import orjson

from bridge.engine.publish import heartbeat_d_tag
from bridge.nostr.event import Event
from bridge.nostr.keys import Keypair
from bridge.nostr.nip44 import ConversationKeyCache, Nip44Error, decrypt
from bridge.nostr.seen_ids import SeenIds as BridgeSeenIds
from bridge.protocol.chunking import CHUNK_PREFIX, Assembler
from bridge.protocol.codec import DecodeError, decode_bridge_to_phone
from bridge.protocol.kinds import fragment_tags, kind_for, tags_for
from bridge.protocol.messages import BridgeToPhone, SessionsMessage
from tests.support.phone_state import ContractViolation, InvalidPayload

__all__ = [
    "Decoded",
    "InboundDecoder",
    "SeenIds",
]

_MAX_TRACKED_GROUPS = 128


class SeenIds(BridgeSeenIds):
    """The bridge pool's LRU of event ids, seeded from and saved to the phone's state file."""

    def __init__(self, capacity: int, initial: Iterable[str] = ()) -> None:
        super().__init__(capacity)
        for event_id in initial:
            self.add(event_id)

    def export(self) -> list[str]:
        """The ids, oldest first (for the state file)."""
        return list(self)


@dataclass(frozen=True, slots=True)
class Decoded:
    """A complete, decoded message and the event(s) that carried it."""

    message: BridgeToPhone
    event_ids: tuple[str, ...]
    kind: int
    created_at: int
    violations: tuple[ContractViolation, ...] = ()


@dataclass(slots=True)
class _Group:
    """What the phone saw of one fragment group, for the ids and the consistency checks."""

    event_ids: list[str] = field(default_factory=list)
    kinds: set[int] = field(default_factory=set)
    created_ats: set[int] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)


def _chunk_cid(plaintext: str) -> str | None:
    """The ``cid`` of a chunk envelope (only called for plaintexts the assembler took as one)."""
    try:
        obj = orjson.loads(plaintext)
    except orjson.JSONDecodeError:
        return None
    cid = obj.get("cid") if isinstance(obj, dict) else None
    return cid if isinstance(cid, str) else None


def _tags(event: Event) -> list[list[str]]:
    return [list(tag) for tag in event.tags]


class InboundDecoder:
    """Turns the bridge's events into decoded messages, for one phone and one bridge.

    Args:
        keypair: the phone's keys (the NIP-44 conversation key is derived once).
        bridge_pubkey: hex; events from anyone else are not the bridge's and are ignored.
        seen_capacity: how many event ids the dedup remembers.
        seen: ids already seen (from a state file), oldest first.
    """

    def __init__(
        self,
        keypair: Keypair,
        bridge_pubkey: str,
        *,
        seen_capacity: int = 20_000,
        seen: Iterable[str] = (),
    ) -> None:
        self._phone = keypair.public_hex
        self._bridge = bridge_pubkey
        self._key = ConversationKeyCache(keypair.secret, max_entries=4).get(bridge_pubkey)
        self.seen = SeenIds(seen_capacity, seen)
        self.assembler = Assembler()
        self._groups: OrderedDict[str, _Group] = OrderedDict()
        self.duplicates = 0
        self.fragments = 0
        self.foreign = 0

    def feed(self, event: Event, now: float) -> Decoded | InvalidPayload | None:
        """Take one verified event delivered by a relay.

        Args:
            now: a monotonic clock in seconds (for the fragment time-to-live).

        Returns:
            The decoded message when the event completes one; an :class:`InvalidPayload` when
            it cannot be used; None for a duplicate, a foreign author, or a fragment of a group
            that is not complete yet.
        """
        if event.pubkey != self._bridge:
            self.foreign += 1
            return None
        if not self.seen.add(event.id):
            self.duplicates += 1
            return None
        try:
            plaintext = decrypt(event.content, self._key)
        except Nip44Error as exc:
            return InvalidPayload(event.id, event.kind, event.created_at, "decrypt", str(exc))
        joined = self.assembler.feed(plaintext, now, sender=event.pubkey)
        # The assembler hands back the very same object for anything that is not a fragment.
        if joined is plaintext:
            return self._decode(plaintext, event, (event.id,), None)
        self.fragments += 1
        key, group = self._track_fragment(plaintext, event)
        if joined is None:
            return None
        self._groups.pop(key, None)
        return self._decode(joined, event, tuple(group.event_ids), group)

    # --- internals ------------------------------------------------------------------------------

    def _track_fragment(self, plaintext: str, event: Event) -> tuple[str, _Group]:
        cid = _chunk_cid(plaintext) if plaintext.startswith(CHUNK_PREFIX) else None
        key = cid if cid is not None else event.id
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _Group()
            while len(self._groups) > _MAX_TRACKED_GROUPS:
                self._groups.popitem(last=False)
        group.event_ids.append(event.id)
        group.kinds.add(event.kind)
        group.created_ats.add(event.created_at)
        try:
            expected = fragment_tags(event.kind, self._phone, event.created_at)
        except ValueError as exc:
            group.problems.append(f"fragment {event.id[:8]}: {exc}")
        else:
            if _tags(event) != expected:
                group.problems.append(
                    f"fragment {event.id[:8]} tags {_tags(event)} != expected {expected}"
                )
        return key, group

    def _decode(
        self, text: str, event: Event, event_ids: tuple[str, ...], group: _Group | None
    ) -> Decoded | InvalidPayload:
        try:
            message = decode_bridge_to_phone(text)
        except DecodeError as exc:
            return InvalidPayload(event.id, event.kind, event.created_at, "decode", str(exc))
        problems = self._check(message, event, group)
        violations = tuple(
            ContractViolation(event.id, event.kind, message.type, problem) for problem in problems
        )
        return Decoded(message, event_ids, event.kind, event.created_at, violations)

    def _check(self, message: BridgeToPhone, event: Event, group: _Group | None) -> list[str]:
        expected_kind = kind_for(message)
        problems: list[str] = []
        if group is None:
            if event.kind != expected_kind:
                problems.append(f"kind {event.kind}, expected {expected_kind}")
            expected = tags_for(message, self._phone, event.created_at)
            if isinstance(message, SessionsMessage):
                # One stored heartbeat per phone: d = machine + phone prefix (engine.publish).
                expected = [
                    ["d", heartbeat_d_tag(message.machine, self._phone)] if t[0] == "d" else t
                    for t in expected
                ]
            if _tags(event) != expected:
                problems.append(f"tags {_tags(event)} != expected {expected}")
            return problems
        problems.extend(group.problems)
        if group.kinds != {expected_kind}:
            problems.append(f"fragment kinds {sorted(group.kinds)}, expected {expected_kind}")
        if len(group.created_ats) != 1:
            problems.append(f"fragments have several created_at: {sorted(group.created_ats)}")
        return problems
