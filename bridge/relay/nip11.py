"""NIP-11: the relay information document, and the limits it announces.

A client fetches it with an HTTP GET carrying ``Accept: application/nostr+json`` on the relay's
URL. The limits are the ones the relay enforces (:class:`RelayLimits` is the single source), so
a client that reads them is never surprised by a refusal.
"""

from __future__ import annotations

from typing import Any

from bridge.records import record

__all__ = [
    "INFO_CONTENT_TYPE",
    "RelayLimits",
    "info_document",
]

INFO_CONTENT_TYPE = "application/nostr+json"

SUPPORTED_NIPS = (1, 9, 11, 33, 40)
"""NIP-33 is now part of NIP-01 (addressable events); relays still list it, and clients look."""


@record
class RelayLimits:
    """What one client may ask of the relay.

    The defaults fit CodeDeck: a phone holds three subscriptions and the bridge a few; events
    are at most 64 KiB (the protocol chunks to that); and a phone that was offline asks for
    every stored reply addressed to it with no ``limit`` (the app does not page), so one filter
    may return up to ``max_limit`` events — an hour of replies at the protocol's expiry.
    """

    max_message_length: int = 512 * 1024
    max_event_length: int = 65_536
    max_subscriptions: int = 64
    max_filters: int = 32
    max_limit: int = 20_000
    max_event_tags: int = 2_000
    max_future_seconds: int = 900
    """Events dated further ahead than this are refused (strfry's default)."""
    max_pending_bytes: int = 64 * 1024 * 1024
    """A client that leaves more than this unread is disconnected (it reconnects and re-asks)."""


def info_document(
    limits: RelayLimits, *, name: str, description: str, version: str
) -> dict[str, Any]:
    """The NIP-11 document for a relay with ``limits`` (writes restricted to registered keys)."""
    return {
        "name": name,
        "description": description,
        "software": "codedeck-bridge",
        "version": version,
        "supported_nips": list(SUPPORTED_NIPS),
        "limitation": {
            "max_message_length": limits.max_message_length,
            "max_content_length": limits.max_event_length,
            "max_subscriptions": limits.max_subscriptions,
            "max_filters": limits.max_filters,
            "max_limit": limits.max_limit,
            "max_event_tags": limits.max_event_tags,
            "created_at_upper_limit": limits.max_future_seconds,
            "auth_required": False,
            "payment_required": False,
            "restricted_writes": True,
        },
    }
