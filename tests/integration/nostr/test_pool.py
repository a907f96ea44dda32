"""RelayPool against real relays (rust-nostr LocalRelay on 127.0.0.1).

Backoff and timeouts are shrunk through the constructor, so reconnects take tens of
milliseconds; waits are bounded by ``asyncio.timeout`` and never asserted as speed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection

from bridge.nostr.event import VerifiedEvent, sign_event
from bridge.nostr.filters import Filter
from bridge.nostr.keys import Keypair
from bridge.nostr.pool import RelayPool, RelayState
from bridge.nostr.relay import PublishStatus, RelayConnection, RelayEventReceived
from tests.support.relay import LoopbackRelay, ScriptedRelay, SilentPolicy

pytestmark = pytest.mark.timeout(60)

RelayFactory = Callable[..., Awaitable[LoopbackRelay]]

BRIDGE = Keypair.generate()
PHONE = Keypair.generate()

FAST: dict[str, Any] = {
    "backoff_base": 0.05,
    "backoff_cap": 0.2,
    "rng": random.Random(1).random,
    "connect_timeout": 2.0,
    "ok_timeout": 2.0,
    "close_timeout": 0.5,
}


def make_event(
    keys: Keypair = PHONE,
    kind: int = 4515,
    content: str = "cmd",
    created_at: int | None = None,
) -> VerifiedEvent:
    when = int(time.time()) if created_at is None else created_at
    return sign_event(keys, kind, content, (("p", BRIDGE.public_hex),), created_at=when)


class Subscriber:
    """Records what a pool delivers, and keeps a cursor like the bridge does."""

    def __init__(self) -> None:
        self.events: list[RelayEventReceived] = []
        self.eose: list[tuple[str, str]] = []
        self.opened: list[str] = []
        self.cursor = 0
        self.factory_calls = 0
        self._changed = asyncio.Event()

    def on_event(self, received: RelayEventReceived) -> None:
        self.events.append(received)
        self.cursor = max(self.cursor, received.event.created_at)
        self._changed.set()

    def on_eose(self, subscription_id: str, relay: str) -> None:
        self.eose.append((subscription_id, relay))
        self._changed.set()

    def on_open(self, relay: str) -> None:
        self.opened.append(relay)
        self._changed.set()

    def filters(self) -> Sequence[Filter]:
        """Commands to the bridge since the cursor (NIP-01 `since` is inclusive)."""
        self.factory_calls += 1
        since = self.cursor if self.cursor else None
        return [Filter(kinds=(4515,), tags={"p": (BRIDGE.public_hex,)}, since=since)]

    def ids(self) -> list[str]:
        return [received.event.id for received in self.events]

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        async with asyncio.timeout(timeout):
            while not predicate():
                self._changed.clear()
                await self._changed.wait()


async def eventually(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll a condition that no callback announces (e.g. a relay's state)."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


PoolFactory = Callable[..., Awaitable[tuple[RelayPool, Subscriber]]]


@pytest.fixture
async def make_pool() -> AsyncIterator[PoolFactory]:
    pools: list[RelayPool] = []

    async def make(urls: Sequence[str], **options: Any) -> tuple[RelayPool, Subscriber]:
        subscriber = Subscriber()
        pool = RelayPool(
            urls,
            BRIDGE,
            on_event=subscriber.on_event,
            on_eose=subscriber.on_eose,
            on_open=subscriber.on_open,
            **{**FAST, **options},
        )
        pools.append(pool)
        await pool.start()
        return pool, subscriber

    yield make
    for pool in pools:
        await pool.close()


async def publish_directly(url: str, *events: VerifiedEvent) -> None:
    """Publish through a separate plain connection (the "phone")."""
    connection = RelayConnection(url, PHONE, close_timeout=0.5)
    await connection.connect()
    try:
        for event in events:
            assert (await connection.publish(event)).accepted
    finally:
        await connection.close()


async def test_publish_to_two_relays(relay_factory: RelayFactory, make_pool: PoolFactory) -> None:
    first, second = await relay_factory(), await relay_factory()
    pool, _ = await make_pool([first.url, second.url])
    event = make_event(BRIDGE, kind=4516)
    report = await pool.publish(event, wait_all=True)
    assert report.delivered
    assert report.event_id == event.id
    assert [(o.relay, o.status) for o in report.outcomes] == [
        (first.url, PublishStatus.ACCEPTED),
        (second.url, PublishStatus.ACCEPTED),
    ]


async def test_same_event_through_two_relays_is_delivered_once(
    relay_factory: RelayFactory, make_pool: PoolFactory
) -> None:
    first, second = await relay_factory(), await relay_factory()
    pool, subscriber = await make_pool([first.url, second.url])
    await pool.subscribe("cmds", subscriber.filters)
    await subscriber.wait_for(lambda: len(subscriber.eose) == 2)

    event = make_event()
    await publish_directly(first.url, event)
    await publish_directly(second.url, event)
    only_second = make_event(content="second only")
    await publish_directly(second.url, only_second)
    await subscriber.wait_for(lambda: only_second.id in subscriber.ids())
    # `only_second` went out after `event` on the same relay: if `event` were to be delivered
    # twice, its copy from the second relay would have arrived by now.
    assert subscriber.ids() == [event.id, only_second.id]
    assert all(isinstance(r.event, VerifiedEvent) for r in subscriber.events)


async def test_publish_is_delivered_when_one_relay_is_down(
    relay_factory: RelayFactory, make_pool: PoolFactory
) -> None:
    up, down = await relay_factory(), await relay_factory()
    await down.stop()
    pool, _ = await make_pool([up.url, down.url])
    report = await pool.publish(make_event(BRIDGE, kind=4516), wait_all=True)
    assert report.delivered
    statuses = {o.relay: o.status for o in report.outcomes}
    assert statuses == {up.url: PublishStatus.ACCEPTED, down.url: PublishStatus.NOT_CONNECTED}
    down_outcome = next(o for o in report.outcomes if o.relay == down.url)
    assert "cannot connect" in down_outcome.message
    status = {s.url: s for s in pool.status()}
    assert status[up.url].state is RelayState.OPEN
    assert status[down.url].state in (RelayState.CLOSED, RelayState.CONNECTING)
    assert status[down.url].last_error is not None
    assert "cannot connect" in status[down.url].last_error


async def test_nothing_delivered_when_all_relays_are_down(
    relay_factory: RelayFactory, make_pool: PoolFactory, caplog: pytest.LogCaptureFixture
) -> None:
    down = await relay_factory()
    await down.stop()
    pool, _ = await make_pool([down.url])
    event = make_event(BRIDGE, kind=4516)
    report = await pool.publish(event)
    assert not report.delivered
    assert f"event {event.id[:8]} kind 4516 not delivered" in caplog.text


async def test_silent_relay_times_out_without_blocking_delivery(
    relay_factory: RelayFactory, make_pool: PoolFactory
) -> None:
    good, silent = await relay_factory(), await relay_factory(policy=SilentPolicy())
    pool, _ = await make_pool([good.url, silent.url], ok_timeout=0.3)
    await asyncio.wait_for(pool.wait_open(every=True), 10)
    report = await asyncio.wait_for(pool.publish(make_event(BRIDGE, kind=4516), wait_all=True), 10)
    assert report.delivered
    statuses = {o.relay: o.status for o in report.outcomes}
    assert statuses == {good.url: PublishStatus.ACCEPTED, silent.url: PublishStatus.TIMEOUT}

    alone, _ = await make_pool([silent.url], ok_timeout=0.3)
    report = await asyncio.wait_for(alone.publish(make_event(BRIDGE, kind=4516)), 10)
    assert not report.delivered
    assert report.outcomes[0].status is PublishStatus.TIMEOUT


async def test_publish_returns_once_one_relay_accepted(
    relay_factory: RelayFactory, make_pool: PoolFactory
) -> None:
    good, silent = await relay_factory(), await relay_factory(policy=SilentPolicy())
    # An OK timeout far beyond the test's bound: any publish that waited for it would fail.
    pool, _ = await make_pool([good.url, silent.url], ok_timeout=30)
    await asyncio.wait_for(pool.wait_open(every=True), 10)
    events = [make_event(BRIDGE, kind=4516, content=f"n{n}") for n in range(20)]
    for event in events:
        report = await asyncio.wait_for(pool.publish(event), 5)
        statuses = {o.relay: o.status for o in report.outcomes}
        assert statuses == {good.url: PublishStatus.ACCEPTED, silent.url: PublishStatus.PENDING}
    assert pool.trailing == 20
    await pool.close()  # trailing sends are the pool's: cancelled and awaited
    assert pool.trailing == 0


async def test_a_lagging_relay_is_skipped_past_the_trailing_cap(
    relay_factory: RelayFactory, make_pool: PoolFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bridge.nostr.pool")
    good, silent = await relay_factory(), await relay_factory(policy=SilentPolicy())
    pool, _ = await make_pool([good.url, silent.url], ok_timeout=0.5, max_trailing=3)
    await asyncio.wait_for(pool.wait_open(every=True), 10)
    for n in range(3):
        await pool.publish(make_event(BRIDGE, kind=4516, content=f"n{n}"))
    report = await pool.publish(make_event(BRIDGE, kind=4516, content="skipped"))
    skipped = next(o for o in report.outcomes if o.relay == silent.url)
    assert skipped.status is PublishStatus.NOT_CONNECTED
    assert "backlogged" in skipped.message
    # The trailing sends time out, are logged, and the relay is tried again.
    async with asyncio.timeout(10):
        while pool.trailing:
            await asyncio.sleep(0.05)
    assert "timeout" in caplog.text
    report = await pool.publish(make_event(BRIDGE, kind=4516, content="again"))
    assert {o.relay: o.status for o in report.outcomes}[silent.url] is PublishStatus.PENDING


async def test_reconnect_replays_subscription_without_loss_or_duplicates(
    relay_factory: RelayFactory, make_pool: PoolFactory, tmp_path: Path
) -> None:
    relay = await relay_factory(lmdb_dir=tmp_path / "lmdb")
    pool, subscriber = await make_pool([relay.url])
    await pool.subscribe("cmds", subscriber.filters)
    await subscriber.wait_for(lambda: len(subscriber.eose) == 1)

    now = int(time.time())
    before = make_event(content="before", created_at=now - 3)
    await publish_directly(relay.url, before)
    await subscriber.wait_for(lambda: subscriber.ids() == [before.id])

    await relay.stop()
    await eventually(lambda: pool.status()[0].state is not RelayState.OPEN)
    # Written while the subscriber was cut off; one shares `before`'s second, so `since`
    # (inclusive) must re-fetch `before` too, and the pool must drop it as a duplicate.
    same_second = make_event(content="same second", created_at=now - 3)
    while_down = make_event(content="while down", created_at=now - 2)
    for event in (same_second, while_down):
        await relay.save_event(event.to_dict())
    await relay.start()

    await subscriber.wait_for(lambda: len(subscriber.eose) == 2)
    live = make_event(content="live after reconnect", created_at=now - 1)
    await publish_directly(relay.url, live)
    await subscriber.wait_for(lambda: live.id in subscriber.ids())

    assert sorted(subscriber.ids()[1:3]) == sorted([same_second.id, while_down.id])
    assert subscriber.ids()[0] == before.id and subscriber.ids()[3] == live.id
    assert len(subscriber.ids()) == len(set(subscriber.ids())) == 4
    assert subscriber.factory_calls >= 2  # filters recomputed for the replay
    assert subscriber.opened == [relay.url, relay.url]
    status = pool.status()[0]
    assert status.state is RelayState.OPEN
    assert status.failures == 0  # reset by the EOSE after the reconnect
    assert status.last_event_at is not None


async def test_pool_started_before_the_relay_connects_when_it_appears(
    relay_factory: RelayFactory, make_pool: PoolFactory
) -> None:
    relay = await relay_factory()
    await relay.stop()
    pool, subscriber = await make_pool([relay.url])
    await pool.subscribe("cmds", subscriber.filters)
    await eventually(lambda: pool.status()[0].failures >= 2)
    assert "cannot connect" in (pool.status()[0].last_error or "")
    await relay.start()
    await asyncio.wait_for(pool.wait_open(), 10)
    await subscriber.wait_for(lambda: len(subscriber.eose) == 1)
    event = make_event()
    await publish_directly(relay.url, event)
    await subscriber.wait_for(lambda: subscriber.ids() == [event.id])


async def test_subscribe_on_an_open_pool_and_unsubscribe(
    relay: LoopbackRelay, make_pool: PoolFactory
) -> None:
    pool, subscriber = await make_pool([relay.url])
    await asyncio.wait_for(pool.wait_open(), 10)
    await pool.subscribe("cmds", subscriber.filters)
    await subscriber.wait_for(lambda: subscriber.eose == [("cmds", relay.url)])
    first = make_event(content="first")
    await publish_directly(relay.url, first)
    await subscriber.wait_for(lambda: subscriber.ids() == [first.id])

    await pool.unsubscribe("cmds")
    await pool.unsubscribe("never-registered")
    # A second, unrelated subscription proves the connection is alive and events flow.
    await pool.subscribe("probe", lambda: [Filter(kinds=(1,))])
    after = make_event(content="after unsubscribe")
    probe = make_event(kind=1, content="probe")
    await publish_directly(relay.url, after, probe)
    await subscriber.wait_for(lambda: probe.id in subscriber.ids())
    assert subscriber.ids() == [first.id, probe.id]


async def test_publish_right_after_start_waits_for_the_connection(
    relay: LoopbackRelay, make_pool: PoolFactory
) -> None:
    pool, _ = await make_pool([relay.url])
    report = await pool.publish(make_event(BRIDGE, kind=4516))
    assert report.delivered


async def test_one_relays_answer_is_the_report_and_settles_the_publish(
    relay: LoopbackRelay, make_pool: PoolFactory, caplog: pytest.LogCaptureFixture
) -> None:
    # One relay: the send runs in the publishing task; on_settled still hears the answer once,
    # and a callback that raises is logged, never raised into the publisher.
    pool, _ = await make_pool([relay.url])
    await asyncio.wait_for(pool.wait_open(), 10)
    settled: list[Any] = []
    event = make_event(BRIDGE, kind=4516)
    report = await pool.publish(event, on_settled=settled.append)
    assert [(o.relay, o.status) for o in report.outcomes] == [(relay.url, PublishStatus.ACCEPTED)]
    assert settled == [report]

    def boom(_report: Any) -> None:
        raise RuntimeError("boom")

    second = make_event(BRIDGE, kind=4516, content="second")
    assert (await pool.publish(second, on_settled=boom)).delivered
    assert f"! on_settled callback for {second.id[:8]} failed" in caplog.text


async def test_close_during_a_publish_ends_its_sends_as_not_connected(
    relay_factory: RelayFactory, make_pool: PoolFactory
) -> None:
    policy = SilentPolicy()
    silent = await relay_factory(policy=policy)
    pool, _ = await make_pool([silent.url], ok_timeout=30)
    await asyncio.wait_for(pool.wait_open(), 10)
    event = make_event(BRIDGE, kind=4516)
    settled: list[Any] = []
    publishing = asyncio.create_task(pool.publish(event, on_settled=settled.append))
    await eventually(lambda: policy.seen == [event.id])  # at the relay, which never answers
    await pool.close()  # the send is the pool's: cancelled, and the publish answers
    report = await asyncio.wait_for(publishing, 5)
    assert [(o.status, o.message) for o in report.outcomes] == [
        (PublishStatus.NOT_CONNECTED, "relay pool is closed")
    ]
    assert settled == []  # the pool closed first: nothing is known


async def test_close_leaves_no_task_and_is_idempotent(
    relay_factory: RelayFactory, make_pool: PoolFactory
) -> None:
    up, down = await relay_factory(), await relay_factory()
    await down.stop()
    pool, subscriber = await make_pool([up.url, down.url])
    await pool.subscribe("cmds", subscriber.filters)
    await subscriber.wait_for(lambda: len(subscriber.eose) == 1)
    await pool.close()
    await pool.close()
    leftover = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert [t.get_name() for t in leftover if t.get_name().startswith("relay-")] == []
    assert {s.state for s in pool.status()} == {RelayState.CLOSED}
    report = await pool.publish(make_event(BRIDGE, kind=4516))
    assert {o.status for o in report.outcomes} == {PublishStatus.NOT_CONNECTED}
    with pytest.raises(RuntimeError, match="closed"):
        await pool.start()


async def test_on_event_exception_does_not_stop_the_pool(
    relay: LoopbackRelay, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[str] = []

    def fragile(received: RelayEventReceived) -> None:
        seen.append(received.event.id)
        if len(seen) == 1:
            raise RuntimeError("consumer bug")

    async with RelayPool([relay.url], BRIDGE, on_event=fragile, **FAST) as pool:
        await pool.subscribe("cmds", lambda: [Filter(kinds=(4515,))])
        first, second = make_event(content="1"), make_event(content="2")
        await publish_directly(relay.url, first, second)
        await eventually(lambda: len(seen) == 2)
    assert seen == [first.id, second.id]
    assert f"on_event failed for {first.id[:8]}" in caplog.text


def test_constructor_validation() -> None:
    with pytest.raises(ValueError, match="at least one relay"):
        RelayPool([], BRIDGE, on_event=lambda r: None)
    with pytest.raises(ValueError, match="cap must be >= base"):
        RelayPool(["ws://x"], BRIDGE, on_event=lambda r: None, backoff_base=5, backoff_cap=1)
    with pytest.raises(ValueError, match="seen_capacity"):
        RelayPool(["ws://x"], BRIDGE, on_event=lambda r: None, seen_capacity=0)


async def test_subscribe_validation() -> None:
    pool = RelayPool(["ws://127.0.0.1:9"], BRIDGE, on_event=lambda r: None)
    with pytest.raises(ValueError, match=r"1\.\.64 chars"):
        await pool.subscribe("x" * 65, lambda: [Filter()])
    with pytest.raises(ValueError, match="at least one filter"):
        await pool.subscribe("s", lambda: [])
    await pool.close()


async def test_logs_name_relay_and_short_ids_only(
    relay: LoopbackRelay, make_pool: PoolFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="bridge.nostr")
    pool, subscriber = await make_pool([relay.url])
    await pool.subscribe("cmds", subscriber.filters)
    secret_content = "do-not-log-this-content"
    event = make_event(content=secret_content)
    await publish_directly(relay.url, event)
    await subscriber.wait_for(lambda: subscriber.ids() == [event.id])
    assert event.id[:8] in caplog.text
    assert secret_content not in caplog.text
    assert event.id not in caplog.text
    assert BRIDGE.secret_hex not in caplog.text and PHONE.secret_hex not in caplog.text


async def answering_relay(relay: ScriptedRelay, connection: ServerConnection, text: str) -> None:
    frame = json.loads(text)
    if frame[0] == "REQ":
        await connection.send(json.dumps(["EOSE", frame[1]]))
    elif frame[0] == "EVENT":
        await connection.send(json.dumps(["OK", frame[1]["id"], True, ""]))


async def test_transient_closed_is_resubscribed(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="bridge.nostr.pool")
    subscriber = Subscriber()
    async with (
        ScriptedRelay(answering_relay) as relay,
        RelayPool([relay.url], BRIDGE, on_event=subscriber.on_event, **FAST) as pool,
    ):
        await pool.subscribe("cmds", subscriber.filters)
        assert (await relay.next_frame("REQ"))[1] == "cmds"
        calls = subscriber.factory_calls

        await relay.send(["CLOSED", "cmds", "error: shutting down the index"])
        again = await relay.next_frame("REQ")
        assert again[1] == "cmds"
        assert subscriber.factory_calls == calls + 1  # filters recomputed
        assert "resubscribing cmds" in caplog.text

        await relay.send(["CLOSED", "cmds", "blocked: not for you"])
        # A publish round trip: the CLOSED above was handled before its OK.
        assert (await pool.publish(make_event(BRIDGE, kind=4516))).delivered
        assert caplog.text.count("resubscribing cmds") == 1  # `blocked:` is not retried
