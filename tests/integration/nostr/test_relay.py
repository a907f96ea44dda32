"""RelayConnection against a real relay (rust-nostr LocalRelay on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from bridge.nostr.event import VerifiedEvent, expiration_tag, sign_event
from bridge.nostr.filters import Filter
from bridge.nostr.keys import Keypair
from bridge.nostr.relay import (
    ConnectionState,
    PublishOutcome,
    PublishStatus,
    RelayConnection,
    RelayConnectionError,
    RelayEventReceived,
)
from tests.support.relay import LoopbackRelay, SilentPolicy

pytestmark = pytest.mark.timeout(60)

ALICE = Keypair.generate()
PHONE = Keypair.generate()


def make_event(
    keys: Keypair = ALICE,
    kind: int = 1,
    content: str = "hello",
    tags: tuple[tuple[str, ...], ...] = (),
    created_at: int | None = None,
) -> VerifiedEvent:
    when = int(time.time()) if created_at is None else created_at
    return sign_event(keys, kind, content, tags, created_at=when)


class Inbox:
    """Collects what a connection delivers; lets a test wait for it without sleeping blindly."""

    def __init__(self) -> None:
        self.events: list[RelayEventReceived] = []
        self.eose: list[str] = []
        self.closed: list[tuple[str, str]] = []
        self._changed = asyncio.Event()

    def on_event(self, received: RelayEventReceived) -> None:
        self.events.append(received)
        self._changed.set()

    def on_eose(self, subscription_id: str) -> None:
        self.eose.append(subscription_id)
        self._changed.set()

    def on_closed(self, subscription_id: str, message: str) -> None:
        self.closed.append((subscription_id, message))
        self._changed.set()

    def ids(self) -> list[str]:
        return [received.event.id for received in self.events]

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        async with asyncio.timeout(timeout):
            while not predicate():
                self._changed.clear()
                await self._changed.wait()


ConnectionFactory = Callable[..., Awaitable[tuple[RelayConnection, Inbox]]]


@pytest.fixture
async def open_connection() -> AsyncIterator[ConnectionFactory]:
    """Opens RelayConnections with an Inbox; all closed at teardown."""
    opened: list[RelayConnection] = []

    async def make(
        url: str, keys: Keypair = ALICE, **options: Any
    ) -> tuple[RelayConnection, Inbox]:
        inbox = Inbox()
        connection = RelayConnection(
            url,
            keys,
            on_event=inbox.on_event,
            on_eose=inbox.on_eose,
            on_closed=inbox.on_closed,
            **{"connect_timeout": 5.0, "ok_timeout": 5.0, "close_timeout": 1.0, **options},
        )
        opened.append(connection)
        await connection.connect()
        return connection, inbox

    yield make
    for connection in opened:
        await connection.close()


async def test_publish_gets_ok_and_duplicate_is_accepted(
    relay: LoopbackRelay, open_connection: ConnectionFactory
) -> None:
    connection, _ = await open_connection(relay.url)
    assert connection.state is ConnectionState.OPEN
    event = make_event()
    first = await connection.publish(event)
    assert first == PublishOutcome(relay.url, PublishStatus.ACCEPTED, "")
    second = await connection.publish(event)
    assert second.accepted and second.message.startswith("duplicate:")


async def test_bad_signature_is_refused_by_the_relay(
    relay: LoopbackRelay, open_connection: ConnectionFactory
) -> None:
    connection, _ = await open_connection(relay.url)
    good = make_event()
    forged = VerifiedEvent(**{**good.to_dict(), "tags": (), "sig": "00" * 64})
    outcome = await connection.publish(forged)
    assert outcome.status is PublishStatus.REJECTED
    assert outcome.message.startswith("invalid:")
    assert not outcome.delivered


async def test_req_delivers_stored_events_then_eose_then_live(
    relay: LoopbackRelay, open_connection: ConnectionFactory
) -> None:
    publisher, _ = await open_connection(relay.url)
    stored = make_event(content="stored")
    assert (await publisher.publish(stored)).accepted

    subscriber, inbox = await open_connection(relay.url, PHONE)
    await subscriber.subscribe("feed", [Filter(kinds=(1,), authors=(ALICE.public_hex,))])
    await inbox.wait_for(lambda: inbox.eose == ["feed"])
    assert inbox.ids() == [stored.id]
    received = inbox.events[0]
    assert isinstance(received.event, VerifiedEvent)
    assert (received.relay, received.subscription_id) == (relay.url, "feed")
    assert subscriber.last_event_at is not None

    live = make_event(content="live")
    assert (await publisher.publish(live)).accepted
    await inbox.wait_for(lambda: len(inbox.events) == 2)
    assert inbox.ids() == [stored.id, live.id]

    await subscriber.unsubscribe("feed")
    assert subscriber.subscription_ids == ()
    after = make_event(content="after close")
    assert (await publisher.publish(after)).accepted
    # A fresh subscription on the same connection sees `after`: so the old one had its chance.
    await subscriber.subscribe("probe", [Filter(ids=(after.id,))])
    await inbox.wait_for(lambda: "probe" in inbox.eose)
    assert [r.subscription_id for r in inbox.events] == ["feed", "feed", "probe"]


async def test_addressable_event_only_newest_served(
    relay: LoopbackRelay, open_connection: ConnectionFactory
) -> None:
    connection, inbox = await open_connection(relay.url)
    now = int(time.time())
    tags = (("d", "sessions"), ("p", PHONE.public_hex))
    older = make_event(kind=30515, content="v1", tags=tags, created_at=now - 10)
    newer = make_event(kind=30515, content="v2", tags=tags, created_at=now - 5)
    other_d = make_event(kind=30515, content="other", tags=(("d", "x"),), created_at=now - 7)
    for event in (older, newer, other_d):
        assert (await connection.publish(event)).accepted
    stale = make_event(kind=30515, content="v0", tags=tags, created_at=now - 20)
    assert not (await connection.publish(stale)).accepted

    await connection.subscribe("s", [Filter(kinds=(30515,), authors=(ALICE.public_hex,))])
    await inbox.wait_for(lambda: inbox.eose == ["s"])
    assert sorted(inbox.ids()) == sorted([newer.id, other_d.id])


async def test_ephemeral_event_is_delivered_live_and_not_stored(
    relay: LoopbackRelay, open_connection: ConnectionFactory
) -> None:
    publisher, _ = await open_connection(relay.url)
    subscriber, inbox = await open_connection(relay.url, PHONE)
    flt = Filter(kinds=(24515,), tags={"p": (PHONE.public_hex,)})
    await subscriber.subscribe("live", [flt])
    await inbox.wait_for(lambda: inbox.eose == ["live"])

    event = make_event(kind=24515, tags=(("p", PHONE.public_hex),))
    assert (await publisher.publish(event)).accepted
    await inbox.wait_for(lambda: inbox.ids() == [event.id])

    later, later_inbox = await open_connection(relay.url, PHONE)
    await later.subscribe("late", [flt])
    await later_inbox.wait_for(lambda: later_inbox.eose == ["late"])
    assert later_inbox.events == []


async def test_expired_event_is_refused_and_not_served(
    relay: LoopbackRelay, open_connection: ConnectionFactory
) -> None:
    connection, inbox = await open_connection(relay.url)
    now = int(time.time())
    expired = make_event(kind=4516, tags=(expiration_tag(now - 1),), created_at=now - 60)
    outcome = await connection.publish(expired)
    assert outcome.status is PublishStatus.REJECTED
    assert "expired" in outcome.message
    fresh = make_event(kind=4516, tags=(expiration_tag(now + 3600),))
    assert (await connection.publish(fresh)).accepted

    await connection.subscribe("s", [Filter(kinds=(4516,))])
    await inbox.wait_for(lambda: inbox.eose == ["s"])
    assert inbox.ids() == [fresh.id]


async def test_since_and_p_filters(
    relay: LoopbackRelay, open_connection: ConnectionFactory
) -> None:
    connection, inbox = await open_connection(relay.url)
    now = int(time.time())
    to_phone_old = make_event(kind=4516, tags=(("p", PHONE.public_hex),), created_at=now - 100)
    to_phone_new = make_event(kind=4516, tags=(("p", PHONE.public_hex),), created_at=now - 10)
    to_other = make_event(kind=4516, tags=(("p", ALICE.public_hex),), created_at=now - 10)
    for event in (to_phone_old, to_phone_new, to_other):
        assert (await connection.publish(event)).accepted

    await connection.subscribe(
        "s", [Filter(kinds=(4516,), since=now - 50, tags={"p": (PHONE.public_hex,)})]
    )
    await inbox.wait_for(lambda: inbox.eose == ["s"])
    assert inbox.ids() == [to_phone_new.id]


async def test_nip42_auth_for_publish_and_subscribe(
    relay_factory: Callable[..., Awaitable[LoopbackRelay]],
    open_connection: ConnectionFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="bridge.nostr.relay")
    guarded = await relay_factory(auth="both")
    connection, inbox = await open_connection(guarded.url)
    event = make_event()
    # The relay answers `auth-required:`; the connection authenticates and retries once.
    assert (await connection.publish(event)).accepted

    reader, reader_inbox = await open_connection(guarded.url, PHONE)
    await reader.subscribe("s", [Filter(ids=(event.id,))])
    await reader_inbox.wait_for(lambda: reader_inbox.ids() == [event.id])
    # The auth-required CLOSED was handled, not passed on (LocalRelay may end an `ids`
    # subscription with a CLOSED of its own once everything was sent).
    assert all("auth-required" not in reason for _, reason in reader_inbox.closed)
    assert inbox.events == []
    assert caplog.text.count("authenticated (NIP-42)") == 2


async def test_silent_relay_gives_a_timeout_outcome(
    relay_factory: Callable[..., Awaitable[LoopbackRelay]], open_connection: ConnectionFactory
) -> None:
    policy = SilentPolicy()
    silent = await relay_factory(policy=policy)
    connection, _ = await open_connection(silent.url, ok_timeout=0.3)
    event = make_event()
    outcome = await connection.publish(event)
    assert outcome.status is PublishStatus.TIMEOUT
    assert outcome.message == "no OK within 0.3s"
    assert not outcome.delivered
    assert policy.seen == [event.id]


async def test_relay_shutdown_ends_the_connection(
    relay: LoopbackRelay, open_connection: ConnectionFactory
) -> None:
    connection, _ = await open_connection(relay.url)
    await relay.stop()
    await asyncio.wait_for(connection.wait_closed(), 10)
    assert connection.state is ConnectionState.CLOSED
    assert connection.close_reason == "connection lost (no close frame)"
    after = await connection.publish(make_event())
    assert after.status is PublishStatus.NOT_CONNECTED
    assert "connection is closed" in after.message
    with pytest.raises(RelayConnectionError, match="connection is closed"):
        await connection.subscribe("s", [Filter()])


async def test_connect_refused_raises_a_clear_error(relay: LoopbackRelay) -> None:
    url = relay.url
    await relay.stop()
    connection = RelayConnection(url, ALICE, connect_timeout=2.0)
    with pytest.raises(RelayConnectionError, match=r"ws://127\.0\.0\.1:\d+: cannot connect"):
        await connection.connect()
    assert connection.state is ConnectionState.CLOSED
    with pytest.raises(RelayConnectionError, match="single-use"):
        await connection.connect()
    await connection.close()


async def test_connect_times_out_on_a_mute_server() -> None:
    async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # accept TCP, never answer the websocket handshake
        writer.close()

    server = await asyncio.start_server(mute, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        connection = RelayConnection(f"ws://127.0.0.1:{port}", ALICE, connect_timeout=0.3)
        with pytest.raises(RelayConnectionError, match="cannot connect"):
            await connection.connect()
    finally:
        server.close()
        await server.wait_closed()


async def test_bad_url_raises_a_clear_error() -> None:
    connection = RelayConnection("http://127.0.0.1:1", ALICE)
    with pytest.raises(RelayConnectionError, match="cannot connect"):
        await connection.connect()


def test_delivered_rule() -> None:
    def outcome(status: PublishStatus, message: str = "") -> PublishOutcome:
        return PublishOutcome("ws://r", status, message)

    assert outcome(PublishStatus.ACCEPTED).delivered
    assert outcome(PublishStatus.ACCEPTED, "duplicate: have it").delivered
    assert outcome(PublishStatus.REJECTED, "replaced: have newer event").delivered
    assert outcome(PublishStatus.REJECTED, "error: newer event exists").delivered
    assert not outcome(PublishStatus.REJECTED, "blocked: no").delivered
    assert not outcome(PublishStatus.TIMEOUT, "replaced").delivered
    assert not outcome(PublishStatus.NOT_CONNECTED, "newer event").delivered
