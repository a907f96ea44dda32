"""RelayConnection against a scripted relay sending crafted frames.

Every bad frame must be logged and dropped, the connection must stay open, and good events
sent afterwards must still be delivered.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection

from bridge.nostr.event import VerifiedEvent, sign_event
from bridge.nostr.filters import Filter
from bridge.nostr.keys import Keypair
from bridge.nostr.relay import (
    ConnectionState,
    PublishStatus,
    RelayConnection,
    RelayEventReceived,
)
from tests.support.relay import ScriptedRelay

pytestmark = pytest.mark.timeout(60)

ALICE = Keypair.generate()
SUB = "sub1"
FILTERS = [Filter(kinds=(1,), authors=(ALICE.public_hex,))]


def make_event(content: str = "hello", kind: int = 1) -> VerifiedEvent:
    return sign_event(ALICE, kind, content, (), created_at=int(time.time()))


async def eose_on_req(relay: ScriptedRelay, connection: ServerConnection, text: str) -> None:
    frame = json.loads(text)
    if frame[0] == "REQ":
        await connection.send(json.dumps(["EOSE", frame[1]]))


class Session:
    def __init__(self, relay: ScriptedRelay, connection: RelayConnection) -> None:
        self.relay = relay
        self.connection = connection
        self.events: list[RelayEventReceived] = []
        self.arrived = asyncio.Event()

    def on_event(self, received: RelayEventReceived) -> None:
        self.events.append(received)
        self.arrived.set()

    async def deliver(self, event: VerifiedEvent) -> None:
        """Send a good event and wait for it: everything sent before it has been handled."""
        self.arrived.clear()
        await self.relay.send(["EVENT", SUB, event.to_dict()])
        async with asyncio.timeout(5):
            while event.id not in [r.event.id for r in self.events]:
                self.arrived.clear()
                await self.arrived.wait()


@pytest.fixture
async def session() -> AsyncIterator[Session]:
    async with ScriptedRelay(eose_on_req) as relay:
        holder: list[Session] = []
        connection = RelayConnection(
            relay.url,
            ALICE,
            on_event=lambda received: holder[0].on_event(received),
            max_message_size=64 * 1024,
            hard_max_message_size=256 * 1024,
            close_timeout=1.0,
        )
        holder.append(Session(relay, connection))
        await connection.connect()
        await connection.subscribe(SUB, FILTERS)
        await relay.next_frame("REQ")
        try:
            yield holder[0]
        finally:
            await connection.close()


GOOD = make_event("good")
GOOD_JSON = GOOD.to_dict()

# (id, raw frame, text expected in the warning)
BAD_FRAMES: list[tuple[str, str, str]] = [
    ("malformed-json", '["EVENT", "sub1", {', "dropped frame: frame is not valid JSON"),
    ("non-array", json.dumps({"EVENT": GOOD_JSON}), "dropped frame: frame is not a non-empty"),
    ("unknown-type", json.dumps(["HELLO", SUB]), "dropped frame: unknown frame type 'HELLO'"),
    ("wrong-arity", json.dumps(["EOSE", SUB, 1]), "dropped frame: EOSE frame has 3 elements"),
    (
        "malformed-event",
        json.dumps(["EVENT", SUB, {**GOOD_JSON, "kind": "1"}]),
        "dropped frame: EVENT carries a malformed event",
    ),
    (
        "bad-signature",
        json.dumps(["EVENT", SUB, {**GOOD_JSON, "sig": "11" * 64}]),
        f"dropped event {GOOD.id[:8]}: ",
    ),
    (
        "wrong-id",
        json.dumps(["EVENT", SUB, {**GOOD_JSON, "content": "tampered"}]),
        f"dropped event {GOOD.id[:8]}: ",
    ),
    (
        "not-matching-filters",
        json.dumps(["EVENT", SUB, make_event("kind 7", kind=7).to_dict()]),
        "does not match subscription sub1",
    ),
    (
        "huge-frame",
        json.dumps(["NOTICE", "x" * (100 * 1024)]),
        "dropped frame: frame of 102414 bytes exceeds the 65536-byte limit",
    ),
]


@pytest.mark.parametrize(
    ("frame", "warning"), [c[1:] for c in BAD_FRAMES], ids=[c[0] for c in BAD_FRAMES]
)
async def test_bad_frame_is_logged_and_dropped(
    session: Session, frame: str, warning: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="bridge.nostr.relay")
    await session.relay.send(frame)
    later = make_event("after the bad frame")
    await session.deliver(later)
    assert [r.event.id for r in session.events] == [later.id]
    assert session.connection.state is ConnectionState.OPEN
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert warning in warnings[0]
    assert session.relay.url in warnings[0]
    assert "tampered" not in caplog.text and "xxxx" not in caplog.text


async def test_all_bad_frames_in_a_row_then_good_events(
    session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="bridge.nostr.relay")
    for _, frame, _ in BAD_FRAMES:
        await session.relay.send(frame)
    await session.deliver(GOOD)
    second = make_event("second")
    await session.deliver(second)
    assert [r.event.id for r in session.events] == [GOOD.id, second.id]
    assert all(isinstance(r.event, VerifiedEvent) for r in session.events)
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == len(BAD_FRAMES)


async def test_event_for_an_unknown_subscription_is_dropped_quietly(
    session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="bridge.nostr.relay")
    await session.relay.send(["EVENT", "someone-else", make_event("stray").to_dict()])
    await session.deliver(GOOD)
    assert [r.event.id for r in session.events] == [GOOD.id]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_frame_above_the_hard_limit_closes_the_connection(session: Session) -> None:
    await session.relay.send(json.dumps(["NOTICE", "x" * (300 * 1024)]))
    await asyncio.wait_for(session.connection.wait_closed(), 5)
    assert session.connection.state is ConnectionState.CLOSED
    assert session.connection.close_reason is not None
    assert "1009" in session.connection.close_reason


async def test_callback_exception_is_logged_and_connection_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def explode(received: RelayEventReceived) -> None:
        raise RuntimeError("consumer bug")

    async with ScriptedRelay(eose_on_req) as relay:
        connection = RelayConnection(relay.url, ALICE, on_event=explode, close_timeout=1.0)
        await connection.connect()
        try:
            await connection.subscribe(SUB, FILTERS)
            await relay.next_frame("REQ")
            await relay.send(["EVENT", SUB, GOOD_JSON])
            # A publish round trip proves the reader went on after the callback raised.
            event = make_event("probe")
            publishing = asyncio.create_task(connection.publish(event, timeout=5))
            await relay.next_frame("EVENT")
            await relay.send(["OK", event.id, True, ""])
            assert (await publishing).accepted
            assert "callback explode failed" in caplog.text
        finally:
            await connection.close()


def auth_relay(accept_auth: bool, keep_requiring: bool = False) -> Any:
    """EVENT → AUTH challenge + OK false auth-required; AUTH → OK per ``accept_auth``."""
    state = {"authed": False}

    async def handler(relay: ScriptedRelay, connection: ServerConnection, text: str) -> None:
        frame = json.loads(text)
        if frame[0] == "EVENT":
            event_id = frame[1]["id"]
            if state["authed"] and not keep_requiring:
                await connection.send(json.dumps(["OK", event_id, True, ""]))
            else:
                await connection.send(json.dumps(["AUTH", "challenge-1"]))
                await connection.send(json.dumps(["OK", event_id, False, "auth-required: do it"]))
        elif frame[0] == "AUTH":
            auth = frame[1]
            state["authed"] = accept_auth
            message = "" if accept_auth else "auth-required: bad signature"
            await connection.send(json.dumps(["OK", auth["id"], accept_auth, message]))
        elif frame[0] == "REQ":
            if state["authed"]:
                await connection.send(json.dumps(["EOSE", frame[1]]))
            else:
                await connection.send(json.dumps(["AUTH", "challenge-1"]))
                await connection.send(json.dumps(["CLOSED", frame[1], "auth-required: read"]))

    return handler


async def frames(relay: ScriptedRelay) -> list[list[Any]]:
    out = []
    while not relay.received.empty():
        out.append(json.loads(relay.received.get_nowait()))
    return out


async def test_auth_event_content_and_single_retry() -> None:
    async with ScriptedRelay(auth_relay(accept_auth=True)) as relay:
        connection = RelayConnection(relay.url, ALICE, ok_timeout=5, close_timeout=1.0)
        await connection.connect()
        try:
            event = make_event()
            outcome = await connection.publish(event)
            assert outcome.accepted
            sent = await frames(relay)
            assert [f[0] for f in sent] == ["EVENT", "AUTH", "EVENT"]
            auth = sent[1][1]
            assert auth["kind"] == 22242 and auth["pubkey"] == ALICE.public_hex
            assert auth["tags"] == [["relay", relay.url], ["challenge", "challenge-1"]]
            # Already authenticated for this challenge: the next publish needs no AUTH.
            assert (await connection.publish(make_event("2"))).accepted
            assert [f[0] for f in await frames(relay)] == ["EVENT"]
        finally:
            await connection.close()


async def test_refused_auth_is_not_retried_forever() -> None:
    async with ScriptedRelay(auth_relay(accept_auth=False)) as relay:
        connection = RelayConnection(relay.url, ALICE, ok_timeout=5, close_timeout=1.0)
        await connection.connect()
        try:
            outcome = await connection.publish(make_event())
            assert outcome.status is PublishStatus.REJECTED
            assert outcome.message == "auth-required: do it"
            assert [f[0] for f in await frames(relay)] == ["EVENT", "AUTH"]
        finally:
            await connection.close()


async def test_relay_that_keeps_requiring_auth_gets_one_retry() -> None:
    async with ScriptedRelay(auth_relay(accept_auth=True, keep_requiring=True)) as relay:
        connection = RelayConnection(relay.url, ALICE, ok_timeout=5, close_timeout=1.0)
        await connection.connect()
        try:
            outcome = await connection.publish(make_event())
            assert outcome.status is PublishStatus.REJECTED
            assert [f[0] for f in await frames(relay)] == ["EVENT", "AUTH", "EVENT"]
        finally:
            await connection.close()


async def test_closed_auth_required_resubscribes_after_auth() -> None:
    closed: list[tuple[str, str]] = []
    eose: list[str] = []
    done = asyncio.Event()

    def on_eose(subscription_id: str) -> None:
        eose.append(subscription_id)
        done.set()

    async with ScriptedRelay(auth_relay(accept_auth=True)) as relay:
        connection = RelayConnection(
            relay.url,
            ALICE,
            on_eose=on_eose,
            on_closed=lambda s, m: closed.append((s, m)),
            close_timeout=1.0,
        )
        await connection.connect()
        try:
            await connection.subscribe(SUB, FILTERS)
            await asyncio.wait_for(done.wait(), 5)
            assert eose == [SUB] and closed == []
            assert [f[0] for f in await frames(relay)] == ["REQ", "AUTH", "REQ"]
        finally:
            await connection.close()


async def test_closed_auth_required_with_refused_auth_reports_closed() -> None:
    closed: list[tuple[str, str]] = []
    done = asyncio.Event()

    def on_closed(subscription_id: str, message: str) -> None:
        closed.append((subscription_id, message))
        done.set()

    async with ScriptedRelay(auth_relay(accept_auth=False)) as relay:
        connection = RelayConnection(relay.url, ALICE, on_closed=on_closed, close_timeout=1.0)
        await connection.connect()
        try:
            await connection.subscribe(SUB, FILTERS)
            await asyncio.wait_for(done.wait(), 5)
            assert closed == [(SUB, "auth-required: read")]
            assert connection.subscription_ids == ()
        finally:
            await connection.close()


async def test_connection_lost_while_waiting_for_ok() -> None:
    async with ScriptedRelay() as relay:
        connection = RelayConnection(relay.url, ALICE, ok_timeout=30, close_timeout=1.0)
        await connection.connect()
        try:
            publishing = asyncio.create_task(connection.publish(make_event()))
            await relay.next_frame("EVENT")
            for server_side in list(relay.connections):
                await server_side.close(1001, "going away")
            outcome = await asyncio.wait_for(publishing, 5)
            assert outcome.status is PublishStatus.NOT_CONNECTED
            assert outcome.message == "closed with code 1001 going away"
        finally:
            await connection.close()


async def test_concurrent_publishes_of_one_event_share_the_ok() -> None:
    async with ScriptedRelay() as relay:
        connection = RelayConnection(relay.url, ALICE, ok_timeout=5, close_timeout=1.0)
        await connection.connect()
        try:
            event = make_event()
            first = asyncio.create_task(connection.publish(event))
            second = asyncio.create_task(connection.publish(event))
            await relay.next_frame("EVENT")
            await relay.next_frame("EVENT")
            await relay.send(["OK", event.id, True, ""])
            assert (await first).accepted and (await second).accepted
        finally:
            await connection.close()


async def test_close_is_idempotent_and_leaves_no_task() -> None:
    async with ScriptedRelay(eose_on_req) as relay:
        connection = RelayConnection(relay.url, ALICE, close_timeout=1.0)
        await connection.connect()
        await connection.subscribe(SUB, FILTERS)
        await connection.close()
        await connection.close()
        assert connection.state is ConnectionState.CLOSED
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert not [t for t in others if "relay-" in t.get_name()]
