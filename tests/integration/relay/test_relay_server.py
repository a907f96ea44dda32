"""The embedded relay on 127.0.0.1, as the daemon runs it (its own thread, SQLite on disk).

Each of the four defects the previous embedded relay had is a test here: Nagle's delay (the
option is checked on the relay's own sockets), hang-ups on a burst, incomplete stored answers,
and a writer blocked after a burst.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest
from websockets.asyncio.client import ClientConnection, connect

from bridge.nostr.event import VerifiedEvent, expiration_tag, sign_event
from bridge.nostr.keys import Keypair
from bridge.relay.nip11 import RelayLimits
from bridge.relay.server import RelayServer
from bridge.relay.storage import EventStore
from bridge.runtime.edges.embedded_relay import EmbeddedRelay
from tests.integration.relay.conftest import BRIDGE, PHONE, STRANGER, Policy


def now() -> int:
    import time

    return int(time.time())


def reply(author: Keypair, text: str, *, kind: int = 4516, at: int | None = None) -> VerifiedEvent:
    tags = [["p", PHONE.public_hex], list(expiration_tag(now() + 3600))]
    return sign_event(author, kind, text, tags, created_at=now() if at is None else at)


async def send(ws: ClientConnection, *parts: object) -> None:
    await ws.send(orjson.dumps(list(parts)).decode())


async def receive(ws: ClientConnection, timeout: float = 5.0) -> list[Any]:
    frame = orjson.loads(await asyncio.wait_for(ws.recv(), timeout))
    assert isinstance(frame, list)
    return frame


async def publish(ws: ClientConnection, event: VerifiedEvent) -> list[Any]:
    await send(ws, "EVENT", event.to_dict())
    return await receive(ws)


async def stored(ws: ClientConnection, subscription: str, **filter_: Any) -> list[dict[str, Any]]:
    await send(ws, "REQ", subscription, filter_)
    events: list[dict[str, Any]] = []
    while True:
        frame = await receive(ws)
        if frame[0] == "EOSE":
            return events
        assert frame[:2] == ["EVENT", subscription], frame
        events.append(frame[2])


async def test_publish_store_query_and_live(relay: EmbeddedRelay) -> None:
    async with connect(relay.local_url) as bridge, connect(relay.local_url) as phone:
        before = reply(BRIDGE, "before")
        assert await publish(bridge, before) == ["OK", before.id, True, ""]
        got = await stored(phone, "r", authors=[BRIDGE.public_hex], **{"#p": [PHONE.public_hex]})
        assert [event["id"] for event in got] == [before.id]
        live = reply(BRIDGE, "live")
        assert (await publish(bridge, live))[2] is True
        assert (await receive(phone))[:3] == ["EVENT", "r", live.to_dict()]
        assert await publish(bridge, live) == [
            "OK",
            live.id,
            True,
            "duplicate: already have this event",
        ]
        await send(phone, "CLOSE", "r")
        ephemeral = reply(BRIDGE, "output", kind=24515)
        assert (await publish(bridge, ephemeral))[2] is True
        await send(phone, "REQ", "e", {"kinds": [24515]})
        assert (await receive(phone))[0] == "EOSE"  # never stored …
        await publish(bridge, reply(BRIDGE, "output 2", kind=24515))
        assert (await receive(phone))[:2] == ["EVENT", "e"]  # … but passed on live


async def test_refusals_carry_nip01_prefixes(relay: EmbeddedRelay, policy: Policy) -> None:
    async with connect(relay.local_url) as ws:
        assert (await publish(ws, reply(STRANGER, "hi")))[2:] == [
            False,
            "restricted: not a registered writer",
        ]
        assert (await publish(ws, reply(PHONE, "explode")))[2:] == [False, "error: internal error"]
        late = sign_event(PHONE, 4515, "x", [list(expiration_tag(now() - 1))], created_at=now())
        assert (await publish(ws, late))[3] == "invalid: event has expired"
        ahead = reply(PHONE, "x", at=now() + 3600)
        assert (await publish(ws, ahead))[3] == "invalid: created_at is too far in the future"
        forged = reply(PHONE, "x").to_dict() | {"content": "changed"}
        await send(ws, "EVENT", forged)
        assert (await receive(ws))[2:] == [False, "invalid: bad id or signature"]
        asked = policy.asked
        event = reply(PHONE, "once")
        await publish(ws, event)
        await publish(ws, event)
        assert policy.asked == asked + 1  # a re-send is answered without the policy


async def test_a_burst_is_neither_dropped_nor_blocked(relay: EmbeddedRelay) -> None:
    """10,000 events pipelined on one connection (LocalRelay hung up past ~6,000 a minute and
    blocked the key): every one is accepted and reaches a live subscriber."""
    count = 10_000
    events = [reply(PHONE, f"burst {i}") for i in range(count)]
    async with connect(relay.local_url) as writer, connect(relay.local_url) as reader:
        await send(reader, "REQ", "live", {"authors": [PHONE.public_hex], "limit": 0})
        assert (await receive(reader))[0] == "EOSE"

        async def oks() -> list[list[Any]]:
            return [await receive(writer, timeout=30) for _ in range(count)]

        async def seen() -> set[str]:
            return {(await receive(reader, timeout=30))[2]["id"] for _ in range(count)}

        async def publish_all() -> None:
            for event in events:
                await send(writer, "EVENT", event.to_dict())

        _, answers, delivered = await asyncio.gather(publish_all(), oks(), seen())
        assert all(frame[0] == "OK" and frame[2] is True for frame in answers)
        assert delivered == {event.id for event in events}
    assert relay.server is not None and relay.server.stats["dropped_clients"] == 0


async def test_a_phone_back_online_gets_every_stored_reply(relay: EmbeddedRelay) -> None:
    """700 replies stored while the phone was away come back in one answer, all of them."""
    replies = [reply(BRIDGE, f"reply {i}", at=now() - 700 + i) for i in range(700)]
    async with connect(relay.local_url) as bridge:
        for event in replies:
            await send(bridge, "EVENT", event.to_dict())
        for _ in replies:
            assert (await receive(bridge))[2] is True
    async with connect(relay.local_url) as phone:
        got = await stored(
            phone,
            "4516",
            kinds=[4516],
            authors=[BRIDGE.public_hex],
            since=now() - 3600,
            **{"#p": [PHONE.public_hex]},
        )
    assert [event["id"] for event in got] == [event.id for event in reversed(replies)]


async def test_events_survive_a_restart(tmp_path: Path, policy: Policy) -> None:
    first = EmbeddedRelay("127.0.0.1", 0, admit=policy, database_dir=tmp_path / "relay")
    await first.start()
    heartbeat = sign_event(BRIDGE, 30515, "{}", [["d", "laptop"]], created_at=now())
    async with connect(first.local_url) as ws:
        assert (await publish(ws, heartbeat))[2] is True
    await first.stop()
    second = EmbeddedRelay("127.0.0.1", 0, admit=policy, database_dir=tmp_path / "relay")
    await second.start()
    try:
        async with connect(second.local_url) as ws:
            got = await stored(ws, "hb", kinds=[30515], authors=[BRIDGE.public_hex])
        assert [event["id"] for event in got] == [heartbeat.id]
    finally:
        await second.stop()


async def test_nip11_information_document(relay: EmbeddedRelay) -> None:
    def fetch() -> tuple[str, dict[str, Any]]:
        url = relay.local_url.replace("ws://", "http://")
        request = urllib.request.Request(url, headers={"Accept": "application/nostr+json"})
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.headers["Content-Type"], orjson.loads(response.read())

    content_type, document = await asyncio.to_thread(fetch)
    assert content_type == "application/nostr+json"
    assert {1, 9, 11, 40} <= set(document["supported_nips"])
    assert document["limitation"]["max_limit"] == RelayLimits().max_limit
    assert document["limitation"]["restricted_writes"] is True


async def test_no_nagle_and_a_slow_reader_is_let_go() -> None:
    """TCP_NODELAY on every accepted socket; a client that stops reading is disconnected
    once it leaves more than the limit unread, and the others keep being served."""
    limits = RelayLimits(max_pending_bytes=4 * 1024 * 1024)
    server = RelayServer(
        "127.0.0.1", 0, store=EventStore(None), admit=None, clock=lambda: now(), limits=limits
    )
    await server.start()
    url = f"ws://127.0.0.1:{server.port}"
    try:
        async with (
            connect(url, max_queue=1) as stalled,
            connect(url) as writer,
            connect(url) as healthy,
        ):
            for connection in server.connections():
                sock = connection.transport.get_extra_info("socket")
                assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
            for ws in (stalled, healthy):
                await send(ws, "REQ", "all", {"kinds": [1]})
                assert (await receive(ws))[0] == "EOSE"
            payload = "y" * 60_000
            events = [sign_event(PHONE, 1, payload + str(i), created_at=now()) for i in range(400)]

            async def publish_all() -> bool:
                # One at a time, so that the healthy reader (on this loop) keeps up.
                accepted = [(await publish(writer, event))[2] for event in events]
                return all(accepted)  # 24 MB: more than the kernel buffers hold for `stalled`

            async def delivered() -> int:
                return len([await receive(healthy, timeout=30) for _ in events])

            done = await asyncio.gather(publish_all(), delivered())
            assert done == [True, len(events)]
            for _ in range(100):
                if server.stats["dropped_clients"]:
                    break
                await asyncio.sleep(0.05)
            assert server.stats["dropped_clients"] == 1
            assert server.client_count == 2
    finally:
        await server.close()
        server.store.close()


async def test_a_full_store_refuses_with_one_log_line_and_has_room_once_events_expire(
    tmp_path: Path, policy: Policy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "bridge.relay.server")
    clock = [float(now())]
    start = int(clock[0])

    def expiring(text: str, at: int) -> VerifiedEvent:
        tags = [["p", PHONE.public_hex], list(expiration_tag(at + 60))]
        return sign_event(BRIDGE, 4516, text + "." * 400, tags, created_at=at)

    first = expiring("kept 0", start)
    relay = EmbeddedRelay(
        "127.0.0.1",
        0,
        admit=policy,
        database_dir=tmp_path / "relay",
        clock=lambda: clock[0],
        max_stored_bytes=3 * len(first.to_json().encode()),
    )
    await relay.start()
    try:
        async with connect(relay.local_url) as ws:
            kept = [first, expiring("kept 1", start), expiring("kept 2", start)]
            for event in kept:
                assert (await publish(ws, event))[2:] == [True, ""]
            refused = [expiring(f"over {n}", start) for n in range(50)]
            for event in refused:
                assert (await publish(ws, event))[2:] == [False, "error: relay storage full"]
            heartbeat = sign_event(BRIDGE, 24515, "live", [], created_at=start)
            assert (await publish(ws, heartbeat))[2:] == [True, ""]  # ephemeral: never stored
            got = await stored(ws, "all", kinds=[4516])
            assert sorted(e["id"] for e in got) == sorted(e.id for e in kept)  # nothing lost
            await send(ws, "CLOSE", "all")
            clock[0] += 61  # the kept ones expire: the next event makes room by purging them
            later = expiring("kept 3", start + 61)
            assert (await publish(ws, later))[2:] == [True, ""]
            assert [e["id"] for e in await stored(ws, "after", kinds=[4516])] == [later.id]
        assert relay.server is not None and relay.server.stats["refused_full"] == 50
    finally:
        await relay.stop()
    lines = [r.getMessage() for r in caplog.records if r.name == "bridge.relay.server"]
    full = [line for line in lines if "storage is full" in line]
    cap = 3 * len(first.to_json().encode())
    assert full == [
        f"! relay storage is full ({cap} bytes of events, the cap is {cap} bytes): new events are "
        "refused until stored ones expire (embedded_relay_max_mb raises the cap)"
    ]
    assert not [line for line in lines if "still full" in line]
    assert [line for line in lines if "room again" in line] == [
        f"relay storage has room again ({len(later.to_json().encode())} bytes of events); "
        "50 event(s) were refused while it was full"
    ]
