"""The publish plan: one bridge → phone message becomes the events to encrypt and sign.

PROTOCOL-v10-wire.md §1.2, §1.3 and §3, REFERENCE-BEHAVIOUR §1.4. For a ``Publish(message,
audience)`` effect the runtime asks :meth:`PublishPlanner.plan` for a list of
:class:`PlannedEvent`, then encrypts each ``plaintext`` with NIP-44 to its ``phone`` and signs it
with the given ``kind``, ``tags`` and ``created_at``. The plan fixes everything but the crypto:

- egress validation and the JSON text (:func:`bridge.protocol.codec.encode`): a malformed message
  raises :class:`~bridge.protocol.EncodeError` here, at the sender, and nothing is planned;
- the kind (30515 / 24515 / 4516) and the tags, in the order of the §1.3 table;
- ``created_at``, computed once per message and shared by every phone and every fragment. It never
  goes backwards: ``max(int(now), last)``. A heartbeat (replaceable) also strictly increases,
  ``max(int(now), last_heartbeat + 1)``, so one published twice in one second is never refused as
  older. Unlike the reference (``+1`` for every message), ordinary messages do not step ahead: at
  hundreds of output entries a second, ``+1`` per message runs minutes into the future, where
  relays refuse events (strfry: 900 s) and NIP-40 expiries drift. The heartbeat is debounced
  to about one a second by the engine, so its clock stays with the wall clock;
- a heartbeat's ``d`` tag is ``<machine>`` plus the recipient's pubkey prefix: the relay keeps
  one replaceable event per (author, kind, ``d``), and with one shared ``d`` every paired phone's
  heartbeat would replace the others' (the last phone would be the only one with a stored
  heartbeat, and the others would see the machine as offline: bug A). Phones select heartbeats by
  ``authors`` and ``#p``, never by ``d`` (PROTOCOL.md, "Tags");
- one event per phone (duplicates in the audience are sent once), phone after phone;
- fragments (§3) when the JSON is over 40,960 UTF-8 bytes: every fragment keeps the parent's kind
  and carries ``p`` (plus ``expiration`` on 4516) but no ``d``, ``s`` or ``seq``. The group id
  ``cid`` is passed in (16 random bytes as hex, drawn by the runtime) and shared by all phones:
  each phone reassembles per sender, so sharing it is harmless and keeps the frames identical.

A 30515 heartbeat is never fragmented: its fragments would share one ``d`` and one
``created_at``, and a relay applying NIP-33 replacement would keep only one of them (the quirk of
REFERENCE-BEHAVIOUR §1.4). :func:`fit_heartbeat` makes it fit instead: it drops ``folders`` first
(the phone can live without the folder picker for a while), then the oldest ``removedSessions``
tombstones (a phone that missed one keeps a stale entry it can close), and raises
:class:`HeartbeatTooLargeError` if the session list alone is still too large.

:func:`is_durable` tells the engine which messages belong in ``Commit.outbox`` (stored 4516
replies, retried until a relay accepts them) and which are best effort (live output, heartbeat,
sync traffic); :func:`expires_at` is the NIP-40 expiry the outbox keeps a row until.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Final

from bridge.protocol import (
    COMMAND_EXPIRY_SECONDS,
    COMMAND_KIND,
    NIP44_SAFE_PLAINTEXT_BYTES,
    RESPONSE_EXPIRY_SECONDS,
    RESPONSE_KIND,
    SYNC_MESSAGE_TYPES,
    BridgeToPhone,
    SessionsMessage,
    encode,
    fragment_tags,
    kind_for,
    split,
    tags_for,
)
from bridge.records import record

__all__ = [
    "HEARTBEAT_MAX_BYTES",
    "HeartbeatTooLargeError",
    "PlannedEvent",
    "PublishPlanner",
    "expires_at",
    "fit_heartbeat",
    "heartbeat_d_tag",
    "is_durable",
]

HEARTBEAT_MAX_BYTES: Final = NIP44_SAFE_PLAINTEXT_BYTES
"""The largest heartbeat JSON (UTF-8 bytes) that travels as one event, since it cannot be split."""


class HeartbeatTooLargeError(ValueError):
    """Even without ``folders`` and tombstones the heartbeat is over one event's plaintext limit.

    The session list itself is too long; the message names sizes and counts, never contents.
    """


@record
class PlannedEvent:
    """One event to encrypt (NIP-44, to ``phone``) and sign.

    Attributes:
        phone: The recipient's hex pubkey (also the ``p`` tag).
        kind: The event kind; a fragment keeps its parent's kind.
        tags: The tags, in the order of PROTOCOL-v10-wire.md §1.3.
        created_at: Shared by every event of one message.
        plaintext: The encoded message, or one ``chunk`` envelope of it.
    """

    phone: str
    kind: int
    tags: list[list[str]]
    created_at: int
    plaintext: str


def heartbeat_d_tag(machine: str, phone: str) -> str:
    """The per-phone ``d`` of a heartbeat (see the module docstring for why not just ``machine``)."""
    return f"{machine}#{phone[:16]}"


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def _fit(message: SessionsMessage, limit: int) -> tuple[SessionsMessage, str]:
    """The heartbeat trimmed to ``limit`` bytes, with its JSON text (encoded once more at most)."""
    text = encode(message)
    if _size(text) <= limit:
        return message, text
    if message.folders is not None:
        message = message.model_copy(update={"folders": None})
        text = encode(message)
        if _size(text) <= limit:
            return message, text
    tombstones = message.removedSessions or []
    if tombstones:
        bare = message.model_copy(update={"removedSessions": None})
        bare_text = encode(bare)
        if _size(bare_text) > limit:
            raise HeartbeatTooLargeError(_too_large(bare_text, bare, limit))
        # Drop the fewest oldest tombstones (the list is oldest first, as the registry appends).
        # Fewer dropped means a larger text, so the smallest count that fits is found by bisection.
        low, high = 1, len(tombstones)  # dropping all of them (high) fits: just checked
        best: tuple[SessionsMessage, str] = (bare, bare_text)
        while low < high:
            middle = (low + high) // 2
            candidate = message.model_copy(update={"removedSessions": tombstones[middle:]})
            candidate_text = encode(candidate)
            if _size(candidate_text) <= limit:
                best, high = (candidate, candidate_text), middle
            else:
                low = middle + 1
        return best  # the candidate for `high`, which is `low` now
    raise HeartbeatTooLargeError(_too_large(text, message, limit))


def _too_large(text: str, message: SessionsMessage, limit: int) -> str:
    return (
        f"heartbeat of {len(message.sessions)} sessions is {_size(text)} bytes without folders "
        f"and tombstones, over the {limit}-byte limit of one event"
    )


def fit_heartbeat(message: SessionsMessage, limit: int = HEARTBEAT_MAX_BYTES) -> SessionsMessage:
    """Make a heartbeat fit in one event: it must never be fragmented.

    Args:
        message: The heartbeat; ``removedSessions`` is ordered oldest first.
        limit: Largest JSON size in UTF-8 bytes (default: the chunk threshold, 40,960).

    Returns:
        ``message`` itself when it fits; else a copy without ``folders``; else also without the
        fewest oldest tombstones that make it fit (``removedSessions`` absent if none is left).

    Raises:
        HeartbeatTooLargeError: It does not fit even without folders and tombstones.
        EncodeError: The heartbeat fails egress validation.
    """
    return _fit(message, limit)[0]


def is_durable(message: BridgeToPhone) -> bool:
    """Whether the message goes through the outbox (``Commit.outbox``) rather than best effort.

    True for the stored 4516 replies (acks, lifecycle, pairing, models…), which must reach the
    phone even across a crash or a relay outage. False for the 30515 heartbeat (republished every
    minute), live 24515 traffic (already durable in the transcript, recovered by sync) and the
    ``sync-*`` messages (their own acks and resends recover a loss).
    """
    return kind_for(message) == RESPONSE_KIND and message.type not in SYNC_MESSAGE_TYPES


def expires_at(planned: PlannedEvent) -> int | None:
    """The NIP-40 expiry of a planned event: ``created_at + 3600`` for stored kinds, else None."""
    if planned.kind == RESPONSE_KIND:
        return planned.created_at + RESPONSE_EXPIRY_SECONDS
    if planned.kind == COMMAND_KIND:
        return planned.created_at + COMMAND_EXPIRY_SECONDS
    return None


class PublishPlanner:
    """Plans the events of each outgoing message; holds the monotonic ``created_at`` clock.

    Args:
        last_created_at: The ``created_at`` of the last message already published (0 for none).
            A runtime that persists it keeps ``created_at`` monotonic across restarts too.

    Raises:
        ValueError: ``last_created_at`` is negative.
    """

    def __init__(self, last_created_at: int = 0) -> None:
        if isinstance(last_created_at, bool) or last_created_at < 0:
            raise ValueError("last_created_at must be a non-negative integer")
        self._last = int(last_created_at)
        self._last_heartbeat = int(last_created_at)

    @property
    def last_created_at(self) -> int:
        """The newest ``created_at`` planned so far (persist it to stay monotonic on restart)."""
        return max(self._last, self._last_heartbeat)

    def peek_created_at(self, now: float, *, heartbeat: bool = False) -> int:
        """The ``created_at`` the next message would get at ``now`` (the clock does not move)."""
        if not (math.isfinite(now) and now >= 0):
            raise ValueError("now must be a finite, non-negative number of Unix seconds")
        if heartbeat:
            return max(int(now), self._last_heartbeat + 1, self._last)
        return max(int(now), self._last)

    def plan(
        self,
        message: BridgeToPhone,
        audience: Iterable[str],
        now: float,
        machine: str,
        cid: str,
        *,
        text: str | None = None,
    ) -> list[PlannedEvent]:
        """The events carrying ``message`` to every phone of ``audience``.

        Args:
            message: The bridge → phone message (a heartbeat is trimmed by :func:`fit_heartbeat`).
            audience: Recipient hex pubkeys; a duplicate gets one event.
            now: The wall clock, in Unix seconds.
            machine: The heartbeat's ``d`` tag (the configured machine name).
            cid: The ``chunk`` group id, used only when the message must be fragmented.
            text: ``message`` already encoded, by a caller that built the text from parts that
                were validated before (a ``sync-chunk`` from stored transcript lines, which
                would otherwise be decoded and encoded again, line by line); ``message`` then
                only gives the kind and the tags. Not for a heartbeat.

        Returns:
            Phone after phone, the message's event (or its fragments, in index order); all share
            one ``created_at``. Empty for an empty audience, and the clock then does not move.

        Raises:
            EncodeError: The message fails egress validation.
            HeartbeatTooLargeError: A heartbeat that cannot be made to fit one event.
            ValueError: A malformed recipient pubkey, a bad ``now``, or an unusable ``cid`` for a
                message that must be fragmented. Nothing is planned and the clock does not move.
        """
        kind = kind_for(message)
        if isinstance(message, SessionsMessage):
            if text is not None:
                raise ValueError("a heartbeat is always encoded (and fitted) here")
            message, text = _fit(message, HEARTBEAT_MAX_BYTES)
            parts = [text]
        else:
            if text is None:
                text = encode(message)
            parts = split(text, cid=cid)
        phones = list(dict.fromkeys(audience))
        if not phones:
            return []
        heartbeat = isinstance(message, SessionsMessage)
        created_at = self.peek_created_at(now, heartbeat=heartbeat)
        events: list[PlannedEvent] = []
        for phone in phones:
            if len(parts) == 1:
                tags = tags_for(message, phone, created_at, machine)
                if heartbeat:
                    tags = [
                        ["d", heartbeat_d_tag(machine, phone)] if t[0] == "d" else t for t in tags
                    ]
                events.append(PlannedEvent(phone, kind, tags, created_at, text))
                continue
            for part in parts:
                tags = fragment_tags(kind, phone, created_at)
                events.append(PlannedEvent(phone, kind, tags, created_at, part))
        if heartbeat:
            self._last_heartbeat = created_at
        self._last = max(self._last, created_at)
        return events
