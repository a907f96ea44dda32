"""Web Push in the bridge database (schema v10): the VAPID key and the phones' subscriptions.

The VAPID key (`push_key`, one row) is the P-256 private scalar the bridge signs its pushes with;
push services bind a subscription to its public half, so it is made once and kept, like the
Nostr identity (`store.identity`): `save_push_key` never replaces a different key. The bytes
never reach a log line, repr or exception message.

Subscriptions (`push_subscriptions`): one row per endpoint, owned by the phone that subscribed
it last (a browser that paired again under a new key takes its endpoint along, so it is never
woken twice). A phone keeps at most `MAX_SUBSCRIPTIONS_PER_PHONE`; past that its oldest go. The
`auth` secret is secret: only the sender reads it.
"""

from __future__ import annotations

import hmac
import time
from dataclasses import dataclass, field
from typing import Final

from store.db import BridgeDatabase, Statement
from store.errors import IdentityConflict

__all__ = [
    "MAX_SUBSCRIPTIONS_PER_PHONE",
    "PUSH_KEY_LENGTH",
    "StoredSubscription",
    "delete_phone_subscriptions_statement",
    "delete_subscription",
    "delete_subscription_statement",
    "load_push_key",
    "load_subscriptions",
    "save_push_key",
    "save_subscription_statements",
]

PUSH_KEY_LENGTH: Final = 32
MAX_SUBSCRIPTIONS_PER_PHONE: Final = 10
"""Browsers, profiles and re-subscriptions of one phone identity: far more than one person has,
few enough that a runaway client cannot fill the table."""


@dataclass(frozen=True, slots=True)
class StoredSubscription:
    """One subscription as the sender needs it (`auth` kept out of repr)."""

    phone: str
    endpoint: str = field(repr=False)
    p256dh: str = field(repr=False)
    auth: str = field(repr=False)


def _check_phone(phone: str) -> None:
    if len(phone) != 64:
        raise ValueError("a phone is identified by its 64-hex-character pubkey")


async def load_push_key(db: BridgeDatabase) -> bytes | None:
    """The stored VAPID private key, or None before the first run with push on.

    Raises:
        StoreError: the database failed.
    """
    row = await db.fetchone("SELECT private_key FROM push_key WHERE id = 1")
    return None if row is None else bytes(row[0])


async def save_push_key(db: BridgeDatabase, secret: bytes, *, now: int | None = None) -> None:
    """Store the VAPID private key; a no-op if the same key is stored already.

    Raises:
        ValueError: `secret` is not 32 bytes long.
        IdentityConflict: a different key is stored (it was kept: the phones' subscriptions
            are bound to it).
        StoreError: the database failed.
    """
    key = bytes(secret)
    if len(key) != PUSH_KEY_LENGTH:
        raise ValueError(f"the VAPID key must be {PUSH_KEY_LENGTH} bytes, got {len(key)}")
    async with db.transaction():
        row = await db.fetchone("SELECT private_key FROM push_key WHERE id = 1")
        if row is not None:
            if hmac.compare_digest(bytes(row[0]), key):
                return
            raise IdentityConflict(
                f"{db.path} already holds a different VAPID key; refusing to replace it",
                path=db.path,
            )
        await db.execute(
            "INSERT INTO push_key (id, private_key, created_at) VALUES (1, ?, ?)",
            (key, int(time.time()) if now is None else now),
        )


def save_subscription_statements(
    phone: str, endpoint: str, p256dh: str, auth: str, *, now: int
) -> list[Statement]:
    """Add (or move to `phone` and refresh) the subscription of `endpoint`, then drop the
    phone's oldest beyond :data:`MAX_SUBSCRIPTIONS_PER_PHONE`."""
    _check_phone(phone)
    if not endpoint:
        raise ValueError("a subscription needs an endpoint")
    return [
        Statement("DELETE FROM push_subscriptions WHERE endpoint = ?", (endpoint,)),
        Statement(
            "INSERT INTO push_subscriptions (phone, endpoint, p256dh, auth, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (phone, endpoint, p256dh, auth, now),
        ),
        Statement(
            "DELETE FROM push_subscriptions WHERE phone = ? AND id NOT IN "
            "(SELECT id FROM push_subscriptions WHERE phone = ? ORDER BY id DESC LIMIT ?)",
            (phone, phone, MAX_SUBSCRIPTIONS_PER_PHONE),
        ),
    ]


def delete_subscription_statement(phone: str, endpoint: str) -> Statement:
    """Forget `endpoint` if `phone` owns it (a phone cannot drop another's subscription)."""
    _check_phone(phone)
    return Statement(
        "DELETE FROM push_subscriptions WHERE phone = ? AND endpoint = ?", (phone, endpoint)
    )


def delete_phone_subscriptions_statement(phone: str) -> Statement:
    """Forget every subscription of `phone` (it was unpaired)."""
    _check_phone(phone)
    return Statement("DELETE FROM push_subscriptions WHERE phone = ?", (phone,))


async def delete_subscription(db: BridgeDatabase, phone: str, endpoint: str) -> bool:
    """Forget one subscription (its push service said it is gone); whether it existed."""
    statement = delete_subscription_statement(phone, endpoint)
    return await db.execute(statement.sql, statement.params) > 0


async def load_subscriptions(
    db: BridgeDatabase, phone: str | None = None
) -> list[StoredSubscription]:
    """The subscriptions, oldest first; only those of `phone` when given."""
    select = "SELECT phone, endpoint, p256dh, auth FROM push_subscriptions"
    if phone is None:
        rows = await db.fetchall(f"{select} ORDER BY id")
    else:
        rows = await db.fetchall(f"{select} WHERE phone = ? ORDER BY id", (phone,))
    return [StoredSubscription(str(p), str(e), str(k), str(a)) for p, e, k, a in rows]
