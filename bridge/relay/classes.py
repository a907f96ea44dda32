"""How a relay keeps an event: NIP-01's four storage classes, and the address of one.

NIP-01 splits kinds into ranges, and the range decides what "storing" means:

* regular (1000–9999, 4–44, 1, 2): every event is kept;
* replaceable (0, 3, 10000–19999): only the newest per author and kind;
* ephemeral (20000–29999): never kept, only passed to the subscriptions open now;
* addressable (30000–39999; NIP-33 in older texts): only the newest per author, kind and ``d``
  tag.

"Newest" is the larger ``created_at``; on a tie the lower id (in lexical order) stays, so every
relay keeps the same one. The CodeDeck kinds use three of the classes: 4515/4516 are regular,
24515 is ephemeral and the heartbeat 30515 is addressable (one per machine name).
"""

from __future__ import annotations

import enum

from bridge.nostr.event import Event

__all__ = [
    "StorageClass",
    "address_of",
    "d_tag_of",
    "is_newer",
    "storage_class",
]


class StorageClass(enum.Enum):
    """What a relay does with an event of a given kind (NIP-01, "Kinds")."""

    REGULAR = "regular"
    REPLACEABLE = "replaceable"
    EPHEMERAL = "ephemeral"
    ADDRESSABLE = "addressable"


def storage_class(kind: int) -> StorageClass:
    """The storage class of ``kind``."""
    if kind in (0, 3) or 10000 <= kind < 20000:
        return StorageClass.REPLACEABLE
    if 20000 <= kind < 30000:
        return StorageClass.EPHEMERAL
    if 30000 <= kind < 40000:
        return StorageClass.ADDRESSABLE
    return StorageClass.REGULAR


def d_tag_of(event: Event) -> str:
    """The first ``d`` tag's value, or ``""`` (NIP-01: a missing ``d`` is the empty one)."""
    for tag in event.tags:
        if len(tag) >= 2 and tag[0] == "d":
            return tag[1]
    return ""


def address_of(event: Event) -> str | None:
    """The ``d`` value that, with author and kind, names the one event kept (None if all are)."""
    match storage_class(event.kind):
        case StorageClass.ADDRESSABLE:
            return d_tag_of(event)
        case StorageClass.REPLACEABLE:
            return ""
        case StorageClass.REGULAR | StorageClass.EPHEMERAL:
            return None


def is_newer(created_at: int, event_id: str, than_created_at: int, than_id: str) -> bool:
    """True when (created_at, id) replaces (than_created_at, than_id) under NIP-01's rule."""
    if created_at != than_created_at:
        return created_at > than_created_at
    return event_id < than_id
