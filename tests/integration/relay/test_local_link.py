"""The daemon's in-process link to its embedded relay (:mod:`bridge.relay.local`), end to end.

The embedded relay runs on its own thread with SQLite on disk, as in the daemon; the bridge's
side is the real :class:`~bridge.nostr.pool.RelayPool` dialing it in process, the phone's a real
websocket. What a socket gave the daemon, the link must too: every frame both ways, the write
policy asked as for this machine, large stored answers complete and bounded in memory, a reader
that stops reading let go, the end of the relay seen as a close — and nothing lost when the link
is dropped again and again mid-stream (the chaos case of this pipe).
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import orjson
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosedError

from bridge.nostr.event import VerifiedEvent, sign_event
from bridge.nostr.filters import Filter
from bridge.nostr.pool import RelayPool
from bridge.nostr.relay import (
    Dial,
    PublishStatus,
    RelayConnection,
    RelayConnectionError,
    RelayEventReceived,
)
from bridge.relay.nip11 import RelayLimits
from bridge.relay.server import RelayServer
from bridge.relay.storage import EventStore
from bridge.runtime.edges.embedded_relay import EmbeddedRelay
from tests.integration.relay.conftest import BRIDGE, PHONE, Policy

pytestmark = pytest.mark.timeout(120)

DROPS = 15


def command(text: str, created_at: int | None = None) -> VerifiedEvent:
    at = int(time.time()) if created_at is None else created_at
    return sign_event(PHONE, 4515, text, [["p", BRIDGE.public_hex]], created_at=at)


def reply(text: str) -> VerifiedEvent:
    return sign_event(BRIDGE, 4516, text, [["p", PHONE.public_hex]], created_at=int(time.time()))


class Received:
    """The events a subscriber was handed, and a way to wait for a count of them."""

    def __init__(self) -> None:
        self.events: list[VerifiedEvent] = []
        self.changed = asyncio.Event()

    def __call__(self, received: RelayEventReceived) -> None:
        self.events.append(received.event)
        self.changed.set()

    async def wait_count(self, count: int, timeout: float = 30) -> None:
        async with asyncio.timeout(timeout):
            while len(self.events) < count:
                self.changed.clear()
                await self.changed.wait()


async def test_frames_travel_both_ways_and_the_policy_sees_this_machine(
    relay: EmbeddedRelay, policy: Policy
) -> None:
    got = Received()
    bridge = RelayConnection(relay.local_url, BRIDGE, on_event=got, dial=relay.dial)
    await bridge.connect()
    try:
        await bridge.subscribe("cmds", [Filter(kinds=(4515,), tags={"p": (BRIDGE.public_hex,)})])
        async with connect(relay.local_url) as phone:
            await phone.send(orjson.dumps(["REQ", "r", {"kinds": [4516]}]).decode())
            assert orjson.loads(await phone.recv()) == ["EOSE", "r"]
            sent = command("from the phone")
            await phone.send(orjson.dumps(["EVENT", sent.to_dict()]).decode())
            await got.wait_count(1)
            assert got.events[0].id == sent.id
            answer = reply("from the bridge")
            outcome = await bridge.publish(answer)
            assert outcome.status is PublishStatus.ACCEPTED
            frames = [orjson.loads(await phone.recv()) for _ in range(2)]
            assert ["EVENT", "r", answer.to_dict()] in frames  # the OK of the phone's is the other
            assert relay.server is not None and relay.server.client_count == 2
            assert len(relay.server.connections()) == 1  # the phone's: the bridge has no socket
        assert policy.addresses[BRIDGE.public_hex] == {"127.0.0.1"}
    finally:
        await bridge.close()


async def test_a_large_stored_answer_arrives_whole_and_in_order(relay: EmbeddedRelay) -> None:
    """3 MB of stored events, past the 1 MB the relay hands the link before the reader takes."""
    async with connect(relay.local_url) as phone:
        base = int(time.time()) - 5_000
        for n in range(3_000):
            event = sign_event(
                PHONE, 4515, f"{n:05d} " + "x" * 1_000, [["p", BRIDGE.public_hex]],
                created_at=base + n,
            )  # fmt: skip
            await phone.send(orjson.dumps(["EVENT", event.to_dict()]).decode())
        for _ in range(3_000):
            assert orjson.loads(await phone.recv())[2] is True
    got = Received()
    eose = asyncio.Event()
    bridge = RelayConnection(
        relay.local_url,
        BRIDGE,
        on_event=got,
        on_eose=lambda _: eose.set(),
        dial=relay.dial,
        eose_timeout=60,
    )
    await bridge.connect()
    try:
        await bridge.subscribe("all", [Filter(kinds=(4515,), limit=5_000)])
        await asyncio.wait_for(eose.wait(), 60)
        assert [event.content[:5] for event in got.events] == [f"{n:05d}" for n in range(3_000)]
    finally:
        await bridge.close()


async def test_a_backlog_below_the_cap_is_one_answer_in_process_and_paged_over_a_socket(
    relay: EmbeddedRelay, caplog: pytest.LogCaptureFixture
) -> None:
    """600 stored commands within two seconds (a phone's burst of sync acks): over the link
    the daemon knows the relay's answers are complete below its cap and takes them in one; a
    socket's client cannot know that, and bisects. Both get every command, oldest first."""
    base = int(time.time()) - 60
    commands = [command(f"{n:03d}", created_at=base + n // 300) for n in range(600)]
    async with connect(relay.local_url) as phone:
        for event in commands:
            await phone.send(orjson.dumps(["EVENT", event.to_dict()]).decode())
        for _ in commands:
            assert orjson.loads(await phone.recv())[2] is True
    backlog = [Filter(kinds=(4515,), tags={"p": (BRIDGE.public_hex,)}, since=base - 10)]

    async def fetch(dial: Dial | None) -> tuple[list[VerifiedEvent], int]:
        """The backlog as a bridge connected through `dial` gets it, and its page count."""
        caplog.clear()
        got = Received()
        eose = asyncio.Event()
        bridge = RelayConnection(
            relay.local_url, BRIDGE, on_event=got, on_eose=lambda _: eose.set(), dial=dial
        )
        await bridge.connect()
        try:
            with caplog.at_level("INFO", logger="bridge.nostr.relay"):
                await bridge.subscribe("cmds", backlog)
                await asyncio.wait_for(eose.wait(), 30)
        finally:
            await bridge.close()
        pages = [r for r in caplog.records if "fetching stored events" in r.getMessage()]
        return got.events, len(pages)

    for dial in (relay.dial, None):
        events, pages = await fetch(dial)
        assert sorted(event.content for event in events) == [f"{n:03d}" for n in range(600)]
        stamps = [event.created_at for event in events]
        assert stamps == sorted(stamps)  # oldest first (within a second, in the relay's order)
        assert (pages == 0) == (dial is not None), pages


async def test_stopping_the_relay_closes_the_link_and_refuses_a_new_one(tmp_path: Path) -> None:
    relay = EmbeddedRelay("127.0.0.1", 0, database_dir=tmp_path / "relay")
    await relay.start()
    bridge = RelayConnection(relay.local_url, BRIDGE, dial=relay.dial)
    await bridge.connect()
    await relay.stop()
    await asyncio.wait_for(bridge.wait_closed(), 10)
    assert bridge.close_reason is not None and "relay stopped" in bridge.close_reason
    again = RelayConnection(relay.local_url, BRIDGE, dial=relay.dial)
    with pytest.raises(RelayConnectionError, match="not running"):
        await again.connect()
    await bridge.close()


async def test_a_local_client_that_stops_reading_is_let_go() -> None:
    """As a socket's peer is: past ``max_pending_bytes`` unread, the link is dropped."""
    limits = RelayLimits(max_pending_bytes=100_000)
    server = RelayServer("127.0.0.1", 0, store=EventStore(None), admit=None, clock=time.time,
                         limits=limits)  # fmt: skip
    await server.start()
    try:
        channel = await server.accept_local(asyncio.get_running_loop())
        await channel.send(orjson.dumps(["REQ", "s", {"kinds": [4515]}]).decode())
        async with connect(f"ws://127.0.0.1:{server.port}") as phone:
            for n in range(1_500):  # 1 MB handed over, the rest queued: never read
                event = command(f"{n} " + "y" * 2_000)
                await phone.send(orjson.dumps(["EVENT", event.to_dict()]).decode())
            for _ in range(1_500):
                await phone.recv()
        assert server.stats["dropped_clients"] == 1
        with pytest.raises(ConnectionClosedError):
            while True:  # what was handed over before the drop is still read, then the end
                await asyncio.wait_for(channel.recv(), 5)
        assert channel.close_code == 1008
        assert server.client_count == 0
    finally:
        await server.close()


async def test_dropping_the_link_mid_stream_loses_nothing(relay: EmbeddedRelay) -> None:
    """The chaos case of the pipe: the bridge's link aborted at random moments while a phone
    sends 300 commands and the bridge answers each. Every command reaches the bridge (its
    subscription is replayed from where it was), and every answer reaches the phone (a publish
    cut off by a drop reports NOT_CONNECTED and is sent again, as the daemon's outbox does)."""
    got = Received()
    opens: list[float] = []
    pool = RelayPool(
        [relay.local_url],
        BRIDGE,
        on_event=got,
        on_open=lambda _: opens.append(time.monotonic()),
        dialers={relay.local_url: relay.dial},
        backoff_base=0.05,
        backoff_cap=0.2,
    )
    await pool.subscribe(
        "cmds", lambda: [Filter(kinds=(4515,), tags={"p": (BRIDGE.public_hex,)}, since=0)]
    )
    await pool.start()
    rng = random.Random(7)

    async def answer(event: VerifiedEvent) -> None:
        while (await pool.publish(reply(f"re {event.content}"), wait_all=True)).outcomes[
            0
        ].status is not PublishStatus.ACCEPTED:
            await asyncio.sleep(0.05)

    async def chaos() -> None:
        # Each drop makes the bridge fetch the whole stored backlog again, which takes longer
        # than a drop every few ms would allow: a bounded number of drops, then quiet.
        for _ in range(DROPS):
            await asyncio.sleep(rng.uniform(0.02, 0.3))
            pool.reconnect_now("chaos")

    try:
        async with connect(relay.local_url) as phone:
            await phone.send(orjson.dumps(["REQ", "r", {"kinds": [4516]}]).decode())
            # The group owns the drops and the answers: none outlives the test, whatever fails.
            async with asyncio.timeout(90), asyncio.TaskGroup() as tasks:
                dropping = tasks.create_task(chaos())
                handed = 0
                base = int(time.time()) - 400  # a second each: the backlog cannot split a second
                for n in range(300):
                    sent = command(f"c{n}", base + n)
                    await phone.send(orjson.dumps(["EVENT", sent.to_dict()]).decode())
                    await asyncio.sleep(0.002)
                    for event in got.events[handed:]:
                        tasks.create_task(answer(event))
                    handed = len(got.events)
                await dropping
                await got.wait_count(300)
                for event in got.events[handed:]:
                    tasks.create_task(answer(event))
            replies: set[str] = set()
            async with asyncio.timeout(30):
                while len(replies) < 300:
                    frame = orjson.loads(await phone.recv())
                    if frame[0] == "EVENT":
                        replies.add(frame[2]["content"])
        assert sorted(event.content for event in got.events) == sorted(f"c{n}" for n in range(300))
        assert replies == {f"re c{n}" for n in range(300)}
        assert len(opens) > DROPS // 2  # reopened after most drops (some land mid-connect)
    finally:
        await pool.close()


async def test_a_dial_given_up_leaves_no_client_behind(relay: EmbeddedRelay) -> None:
    """A connect that times out after the relay accepted: the accepted link is closed."""
    for _ in range(20):
        dialing = asyncio.ensure_future(relay.dial())
        await asyncio.sleep(0)  # the accept is on its way to the relay's thread
        dialing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await dialing
    assert relay.server is not None
    async with asyncio.timeout(5):
        while relay.server.client_count:
            await asyncio.sleep(0.01)


async def test_a_closed_relay_refuses_an_in_process_client() -> None:
    server = RelayServer("127.0.0.1", 0, store=EventStore(None), admit=None, clock=time.time)
    await server.start()
    await server.close()
    with pytest.raises(ConnectionRefusedError, match="stopping"):
        await server.accept_local(asyncio.get_running_loop())
    assert server.client_count == 0
