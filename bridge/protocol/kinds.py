"""Event kinds, expiry and tags of CodeDeck v10 events (PROTOCOL-v10-wire.md §1.1, §1.3).

The kind is a storage class, and the split is what keeps the phone's subscriptions honest (the
bug-A contract in PROTOCOL.md):

- 30515, addressable (NIP-33, ``d`` = machine name): the heartbeat, of which a relay keeps one;
- 24515, ephemeral: live ``output`` / ``usage`` / ``gsd-state``, never stored, loss recoverable;
- 4515, stored with a NIP-40 expiry of one hour: phone → bridge commands;
- 4516, stored with the same expiry: every other bridge → phone message.

The functions here are pure: the caller supplies the recipient and the event's ``created_at``.
"""

from __future__ import annotations

from typing import Final

from .commands import Command, PhoneToBridge
from .messages import (
    BridgeToPhone,
    GsdStateMessage,
    OutputMessage,
    SessionsMessage,
    SyncBeginMessage,
    SyncChunkMessage,
    SyncEndMessage,
    UsageMessage,
)

__all__ = [
    "CODEDECK_KINDS",
    "COMMAND_EXPIRY_SECONDS",
    "COMMAND_KIND",
    "LIVE_KIND",
    "LIVE_MESSAGE_TYPES",
    "RESPONSE_EXPIRY_SECONDS",
    "RESPONSE_KIND",
    "SESSION_LIST_KIND",
    "SYNC_MESSAGE_TYPES",
    "command_tags",
    "fragment_tags",
    "kind_for",
    "tags_for",
]

SESSION_LIST_KIND: Final = 30515
LIVE_KIND: Final = 24515
COMMAND_KIND: Final = 4515
RESPONSE_KIND: Final = 4516
CODEDECK_KINDS: Final = (SESSION_LIST_KIND, COMMAND_KIND, RESPONSE_KIND, LIVE_KIND)
"""All kinds a CodeDeck relay must accept from registered agents."""

COMMAND_EXPIRY_SECONDS: Final = 3600
RESPONSE_EXPIRY_SECONDS: Final = 3600

LIVE_MESSAGE_TYPES: Final = frozenset({"output", "usage", "gsd-state"})
SYNC_MESSAGE_TYPES: Final = frozenset({"sync-begin", "sync-chunk", "sync-end"})

_HEX: Final = frozenset("0123456789abcdef")


def _check_pubkey(pubkey: str) -> str:
    if len(pubkey) != 64 or not _HEX.issuperset(pubkey):
        raise ValueError("pubkey must be 64 lowercase hex characters")
    return pubkey


def _check_created_at(created_at: int) -> int:
    if isinstance(created_at, bool) or not isinstance(created_at, int) or created_at < 0:
        raise ValueError("created_at must be a non-negative integer (Unix seconds)")
    return created_at


def kind_for(message: BridgeToPhone | PhoneToBridge) -> int:
    """The event kind a message travels on.

    Returns:
        30515 for ``sessions``, 24515 for ``output``/``usage``/``gsd-state``, 4515 for any command,
        4516 for every other bridge → phone message.
    """
    if isinstance(message, Command):
        return COMMAND_KIND
    if message.type == "sessions":
        return SESSION_LIST_KIND
    if message.type in LIVE_MESSAGE_TYPES:
        return LIVE_KIND
    return RESPONSE_KIND


def tags_for(
    message: BridgeToPhone, phone_pubkey: str, created_at: int, machine: str | None = None
) -> list[list[str]]:
    """The tags of the event carrying ``message`` to one phone (§1.3), in order.

    Args:
        message: The bridge → phone message (for a ``chunk`` fragment use :func:`fragment_tags`).
        phone_pubkey: The recipient phone's hex pubkey (the ``p`` tag).
        created_at: The event's ``created_at``; the expiry is ``created_at + 3600``.
        machine: The ``d`` tag of a heartbeat; defaults to the message's ``machine``.

    Returns:
        ``sessions``: ``p``, ``d``. ``output``: ``p``, ``s``, ``seq``. ``usage``/``gsd-state``:
        ``p``. ``sync-*``: ``p``, ``s``, ``expiration``. Any other message: ``p``, ``expiration``.

    Raises:
        ValueError: A malformed pubkey or ``created_at``, or a command instead of a message.
    """
    tags: list[list[str]] = [["p", _check_pubkey(phone_pubkey)]]
    _check_created_at(created_at)
    if isinstance(message, Command):
        raise ValueError("tags_for() is for bridge → phone messages; use command_tags()")
    if isinstance(message, SessionsMessage):
        tags.append(["d", machine if machine is not None else message.machine])
        return tags
    if isinstance(message, OutputMessage):
        tags.append(["s", message.sessionId])
        tags.append(["seq", str(message.seq)])
        return tags
    if isinstance(message, UsageMessage | GsdStateMessage):
        return tags
    if isinstance(message, SyncBeginMessage | SyncChunkMessage | SyncEndMessage):
        tags.append(["s", message.sessionId])
    tags.append(["expiration", str(created_at + RESPONSE_EXPIRY_SECONDS)])
    return tags


def command_tags(bridge_pubkey: str, created_at: int) -> list[list[str]]:
    """The tags of a phone → bridge command event: ``p`` (the bridge) and ``expiration``."""
    return [
        ["p", _check_pubkey(bridge_pubkey)],
        ["expiration", str(_check_created_at(created_at) + COMMAND_EXPIRY_SECONDS)],
    ]


def fragment_tags(parent_kind: int, phone_pubkey: str, created_at: int) -> list[list[str]]:
    """The tags of one ``chunk`` fragment: ``p``, plus ``expiration`` when the parent is stored.

    A fragment keeps its parent's kind and carries no ``d``, ``s`` or ``seq`` tag (it has no seq of
    its own). ``phone_pubkey`` is the recipient (the bridge, for a fragmented command).

    Raises:
        ValueError: ``parent_kind`` is the 30515 heartbeat, which must never be fragmented: its
            fragments would share one ``d`` and one ``created_at``, and a relay applying NIP-33
            replacement would keep only one of them. Or a malformed pubkey / ``created_at``.
    """
    if parent_kind == SESSION_LIST_KIND:
        raise ValueError("a 30515 heartbeat is never fragmented: keep it under the chunk threshold")
    if parent_kind not in CODEDECK_KINDS:
        raise ValueError(f"not a CodeDeck kind: {parent_kind}")
    tags: list[list[str]] = [["p", _check_pubkey(phone_pubkey)]]
    _check_created_at(created_at)
    if parent_kind in (COMMAND_KIND, RESPONSE_KIND):
        tags.append(["expiration", str(created_at + RESPONSE_EXPIRY_SECONDS)])
    return tags
