"""NIP-42: authentication of clients to relays.

A relay sends ``["AUTH", <challenge>]``; a client that wants to prove its key answers with
``["AUTH", <event>]`` where the event is kind 22242, empty content, and carries the tags
``["relay", <relay url>]`` and ``["challenge", <challenge>]``, signed by the client's key. The
relay answers with an ``OK`` for that event's id.

Relays say that a request needs authentication with the ``auth-required:`` prefix on an
``OK false`` (for EVENT) or a ``CLOSED`` (for REQ); the connection then authenticates and
retries the request once. The relay compares the ``relay`` tag with its own URL, so it must be
the URL we connected to, verbatim.
"""

from __future__ import annotations

from bridge.nostr.event import VerifiedEvent, sign_event
from bridge.nostr.keys import Keypair
from bridge.nostr.messages import message_prefix

__all__ = [
    "AUTH_KIND",
    "AUTH_REQUIRED_PREFIX",
    "build_auth_event",
    "is_auth_required",
]

AUTH_KIND = 22242
"""NIP-42: the kind of the (ephemeral, never stored) authentication event."""

AUTH_REQUIRED_PREFIX = "auth-required"
"""NIP-42 machine-readable prefix of OK/CLOSED messages that ask the client to authenticate."""


def build_auth_event(
    keypair: Keypair, relay_url: str, challenge: str, *, created_at: int
) -> VerifiedEvent:
    """Sign the kind-22242 event that answers ``challenge`` from the relay at ``relay_url``.

    Args:
        keypair: the key to authenticate as.
        relay_url: the URL we connected to (the relay checks it against its own).
        challenge: the string from the relay's ``AUTH`` frame.
        created_at: unix seconds; relays accept a window of about ten minutes around now.

    Raises:
        ValueError: ``relay_url`` or ``challenge`` is empty.
    """
    if not relay_url:
        raise ValueError("relay url is empty")
    if not challenge:
        raise ValueError("challenge is empty")
    return sign_event(
        keypair,
        AUTH_KIND,
        "",
        (("relay", relay_url), ("challenge", challenge)),
        created_at=created_at,
    )


def is_auth_required(message: str) -> bool:
    """True when an OK/CLOSED message starts with the NIP-42 ``auth-required:`` prefix."""
    return message_prefix(message) == AUTH_REQUIRED_PREFIX
