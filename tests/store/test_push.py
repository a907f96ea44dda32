"""Web Push in the store: the VAPID key kept once, subscriptions one per endpoint, ten per phone."""

from __future__ import annotations

import os
import stat

import pytest

from store import BridgeDatabase, IdentityConflict
from store.push import (
    MAX_SUBSCRIPTIONS_PER_PHONE,
    delete_phone_subscriptions_statement,
    delete_subscription,
    load_push_key,
    load_subscriptions,
    save_push_key,
    save_subscription_statements,
)

A, B = "a" * 64, "b" * 64


async def test_the_vapid_key_is_kept_once_and_never_replaced(db: BridgeDatabase) -> None:
    assert await load_push_key(db) is None
    key = os.urandom(32)
    await save_push_key(db, key)
    await save_push_key(db, key)  # the same key again: nothing happens
    with pytest.raises(IdentityConflict) as caught:
        await save_push_key(db, os.urandom(32))
    assert key.hex() not in str(caught.value)
    assert await load_push_key(db) == key
    with pytest.raises(ValueError, match="32 bytes"):
        await save_push_key(db, b"short")
    assert stat.S_IMODE(db.path.stat().st_mode) == 0o600


async def add(db: BridgeDatabase, phone: str, endpoint: str, now: int = 1) -> None:
    await db.write(save_subscription_statements(phone, endpoint, "key", "auth", now=now))


async def test_a_phone_keeps_its_newest_ten(db: BridgeDatabase) -> None:
    for n in range(MAX_SUBSCRIPTIONS_PER_PHONE + 2):
        await add(db, A, f"https://push.example/{n}")
    await add(db, B, "https://push.example/b")
    await add(db, A, "https://push.example/3")  # subscribed again: now the newest
    endpoints = [s.endpoint for s in await load_subscriptions(db, A)]
    assert len(endpoints) == MAX_SUBSCRIPTIONS_PER_PHONE
    assert endpoints[-1] == "https://push.example/3"
    assert "https://push.example/0" not in endpoints and "https://push.example/4" in endpoints
    assert [s.endpoint for s in await load_subscriptions(db, B)] == ["https://push.example/b"]


async def test_an_endpoint_belongs_to_the_phone_that_subscribed_it_last(
    db: BridgeDatabase,
) -> None:
    await add(db, A, "https://push.example/x")
    await add(db, B, "https://push.example/x")
    [only] = await load_subscriptions(db)
    assert only.phone == B
    assert not await delete_subscription(db, A, "https://push.example/x")  # not A's any more
    assert await delete_subscription(db, B, "https://push.example/x")


async def test_unpairing_drops_every_subscription_of_the_phone(db: BridgeDatabase) -> None:
    await add(db, A, "https://push.example/1")
    await add(db, A, "https://push.example/2")
    await add(db, B, "https://push.example/3")
    await db.write([delete_phone_subscriptions_statement(A)])
    assert [s.phone for s in await load_subscriptions(db)] == [B]


async def test_a_subscription_shows_no_secret_in_repr(db: BridgeDatabase) -> None:
    await db.write(
        save_subscription_statements(A, "https://push.example/tok", "pkey", "sekrit", now=1)
    )
    [stored] = await load_subscriptions(db)
    assert "sekrit" not in repr(stored) and "tok" not in repr(stored)


def test_statements_refuse_a_bad_phone_or_endpoint() -> None:
    with pytest.raises(ValueError, match="64-hex"):
        save_subscription_statements("short", "https://x", "k", "a", now=1)
    with pytest.raises(ValueError, match="endpoint"):
        save_subscription_statements(A, "", "k", "a", now=1)
