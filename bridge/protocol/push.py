"""Web Push wake-ups (additive, behind the capability ``push``; PROTOCOL.md §18).

A phone that is not connected can be woken by the bridge through the phone's own push service
(RFC 8030), with a payload encrypted to the phone's subscription (RFC 8291) and a VAPID
signature (RFC 8292). This module holds what travels in CodeDeck messages: the subscription a
phone hands over (``push-subscribe``), the reasons a push can have, and the payload's shape.

The payload says only which bridge and machine want the user, why in one word, and how many
events it stands for. It never holds transcript text, titles, folders, tool names or session
ids: the push service and the platform's notification store see it, the relay does not.

The subscription's ``auth`` secret is kept out of ``repr`` (it is the key that lets anyone
encrypt to the phone's push subscription).
"""

from __future__ import annotations

from typing import Literal, TypeAlias, get_args

from pydantic import Field

from .primitives import NonEmptyStr, PositiveInt, WireModel

__all__ = [
    "PUSH_PAYLOAD_VERSION",
    "PUSH_REASONS",
    "PushKeys",
    "PushPayload",
    "PushReason",
    "PushSubscription",
]

PushReason: TypeAlias = Literal["approval", "plan", "question", "turn-ended", "session-died"]
"""Why a push was sent: a permission card, a plan-approval card, a question card waits; a turn
ended; a session died."""

PUSH_REASONS: tuple[PushReason, ...] = get_args(PushReason)
"""The reasons, most urgent first (a coalesced push names the most urgent of its events)."""

PUSH_PAYLOAD_VERSION = 1


class PushKeys(WireModel):
    """The keys of a browser's ``PushSubscription``: base64url P-256 point and auth secret."""

    p256dh: NonEmptyStr
    auth: NonEmptyStr = Field(repr=False)


class PushSubscription(WireModel):
    """A browser's ``PushSubscription.toJSON()`` (``expirationTime`` and other keys stripped)."""

    endpoint: NonEmptyStr
    keys: PushKeys


class PushPayload(WireModel):
    """The JSON a push carries: what the service worker reads once the browser decrypted it (the
    push service only ever holds the ciphertext)."""

    v: PositiveInt
    bridge: NonEmptyStr
    """The bridge's pubkey (hex): which paired bridge wants the user."""
    machine: NonEmptyStr
    reason: PushReason
    count: PositiveInt
    """How many events this push stands for (coalesced within a few seconds)."""
