"""The push edge against the push-service stand-in (in this process, on 127.0.0.1) and a real
bridge database: one push per window, nobody connected, answered cards skipped, 410 forgets,
failures logged by origin only."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from bridge.engine.effects import WakePhones
from bridge.push import VapidKey
from bridge.runtime.edges.push import PushEdge, load_or_create_vapid_key
from store.db import BridgeDatabase, open_bridge_db
from store.push import load_subscriptions, save_subscription_statements
from tests.support.push_service import BrowserSubscription, PushService

A, B = "a" * 64, "b" * 64
BRIDGE = "cd" * 32
WINDOW = 0.2


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[BridgeDatabase]:
    database = await open_bridge_db(tmp_path / "home")
    try:
        yield database
    finally:
        await database.close()


@pytest.fixture
async def service() -> AsyncIterator[PushService]:
    async with PushService() as running:
        yield running


async def subscribe(db: BridgeDatabase, phone: str, subscription: BrowserSubscription) -> None:
    keys = subscription.to_json()["keys"]
    await db.write(
        save_subscription_statements(
            phone, subscription.endpoint, keys["p256dh"], keys["auth"], now=1
        )
    )


def edge(
    db: BridgeDatabase,
    vapid: VapidKey,
    *,
    connected: Callable[[], frozenset[str]] | None = None,
    card_open: Callable[[str, str], bool] = lambda s, r: True,
) -> PushEdge:
    loop = asyncio.get_running_loop()
    return PushEdge(
        db,
        vapid,
        bridge=BRIDGE,
        machine="devbox",
        wall=time.time,
        monotonic=loop.time,
        connected=connected,
        card_open=card_open,
        window=WINDOW,
        timeout=5.0,
    )


async def settle(pusher: PushEdge) -> None:
    """Past the window, and every send finished."""
    await asyncio.sleep(WINDOW * 2)
    for _ in range(50):
        if len(pusher.tasks) <= 1:  # only the windows' timer
            return
        await asyncio.sleep(0.05)


async def test_events_of_one_window_become_one_push_per_subscription(
    db: BridgeDatabase, service: PushService
) -> None:
    vapid = await load_or_create_vapid_key(db)
    phone_a, phone_b = service.subscribe(vapid.public_key), service.subscribe(vapid.public_key)
    other_a = service.subscribe(vapid.public_key)
    await subscribe(db, A, phone_a)
    await subscribe(db, A, other_a)
    await subscribe(db, B, phone_b)
    pusher = edge(db, vapid)
    pusher.start()
    try:
        pusher.wake(WakePhones("turn-ended", (A, B)))
        pusher.wake(WakePhones("approval", (A,), ("s-1", "r-1")))
        await service.wait_for(3)
        await settle(pusher)
    finally:
        await pusher.close()
    assert len(service.received) == 3
    [to_a] = service.pushes_to(phone_a)
    assert to_a.payload == {
        "v": 1,
        "bridge": BRIDGE,
        "machine": "devbox",
        "reason": "approval",
        "count": 2,
    }
    assert (to_a.headers["Urgency"], to_a.headers["TTL"]) == ("high", "3600")
    assert len(to_a.headers["Topic"]) == 32
    assert service.pushes_to(other_a)[0].payload == to_a.payload
    [to_b] = service.pushes_to(phone_b)
    assert (to_b.payload["reason"], to_b.payload["count"]) == ("turn-ended", 1)
    assert (to_b.headers["Urgency"], to_b.headers["TTL"]) == ("normal", "900")
    assert pusher.sent == 3


async def test_a_connected_phone_and_an_answered_card_get_no_push(
    db: BridgeDatabase, service: PushService
) -> None:
    vapid = await load_or_create_vapid_key(db)
    phone_a, phone_b = service.subscribe(vapid.public_key), service.subscribe(vapid.public_key)
    await subscribe(db, A, phone_a)
    await subscribe(db, B, phone_b)
    pusher = edge(db, vapid, connected=lambda: frozenset({A}), card_open=lambda s, r: False)
    pusher.start()
    try:
        pusher.wake(WakePhones("approval", (A, B), ("s-1", "r-1")))
        await settle(pusher)
        assert service.received == [] and service.refused == []
        pusher.wake(WakePhones("session-died", (A, B)))
        await service.wait_for(1)
        await settle(pusher)
    finally:
        await pusher.close()
    assert [p.sub_id for p in service.received] == [phone_b.sub_id]


async def test_a_gone_subscription_is_forgotten_and_others_stay(
    db: BridgeDatabase, service: PushService
) -> None:
    vapid = await load_or_create_vapid_key(db)
    gone, kept = service.subscribe(vapid.public_key), service.subscribe(vapid.public_key)
    await subscribe(db, A, gone)
    await subscribe(db, A, kept)
    service.drop(gone)
    pusher = edge(db, vapid)
    pusher.start()
    try:
        pusher.wake(WakePhones("turn-ended", (A,)))
        await service.wait_for(1)
        await settle(pusher)
    finally:
        await pusher.close()
    assert [s.endpoint for s in await load_subscriptions(db)] == [kept.endpoint]


async def test_a_failure_is_logged_by_origin_only(
    db: BridgeDatabase, service: PushService, caplog: pytest.LogCaptureFixture
) -> None:
    vapid = await load_or_create_vapid_key(db)
    subscription = service.subscribe(vapid.public_key)
    await subscribe(db, A, subscription)
    origin = service.origin
    await service.stop()  # nothing listens there any more
    pusher = edge(db, vapid)
    pusher.start()
    caplog.set_level(logging.INFO, logger="bridge.runtime.edges.push")
    try:
        pusher.wake(WakePhones("turn-ended", (A,)))
        await settle(pusher)
    finally:
        await pusher.close()
    [line] = [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
    assert origin in line
    assert subscription.sub_id not in caplog.text
    assert subscription.p256dh not in caplog.text
    assert len(await load_subscriptions(db)) == 1  # a failure is not a gone subscription


async def test_the_vapid_key_is_made_once_and_kept(db: BridgeDatabase) -> None:
    first = await load_or_create_vapid_key(db)
    again = await load_or_create_vapid_key(db)
    assert again.public_key == first.public_key


async def test_a_window_that_fails_is_logged_and_the_next_one_still_goes(
    db: BridgeDatabase, service: PushService, caplog: pytest.LogCaptureFixture
) -> None:
    vapid = await load_or_create_vapid_key(db)
    browser = service.subscribe(vapid.public_key)
    await subscribe(db, A, browser)

    def card_open(session: str, request: str) -> bool:
        if request == "broken":
            raise RuntimeError("the engine could not say")
        return True

    pusher = edge(db, vapid, card_open=card_open)
    pusher.start()
    try:
        pusher.wake(WakePhones("approval", (A,), ("s-1", "broken")))
        await settle(pusher)
        assert "could not be sent" in caplog.text and service.received == []
        pusher.wake(WakePhones("plan", (A,), ("s-1", "fine")))
        [push] = await service.wait_for(1)
    finally:
        await pusher.close()
    assert push.payload["reason"] == "plan"
