"""A relay answers at most 500 stored events per REQ: the connection pages through the rest."""

from __future__ import annotations

import asyncio
import time

from bridge.nostr.event import sign_event
from bridge.nostr.filters import Filter
from bridge.nostr.keys import Keypair
from bridge.nostr.relay import RelayConnection, RelayEventReceived
from tests.support.relay import LoopbackRelay


async def test_a_backlog_larger_than_the_relay_cap_arrives_whole(relay: LoopbackRelay) -> None:
    author = Keypair.generate()
    now = int(time.time())
    publisher = RelayConnection(relay.url, author)
    await publisher.connect()
    total = 1234
    ids = set()
    try:
        for n in range(total):
            # Spread over ~20 minutes, several per second, as a queue of commands would be.
            event = sign_event(author, 1, f"n{n}", created_at=now - 1200 + n // 2)
            outcome = await publisher.publish(event)
            assert outcome.accepted, outcome
            ids.add(event.id)
    finally:
        await publisher.close()

    received: dict[str, str] = {}
    eose = asyncio.Event()

    def on_event(item: RelayEventReceived) -> None:
        received.setdefault(item.event.id, item.subscription_id)

    reader = RelayConnection(
        relay.url, Keypair.generate(), on_event=on_event, on_eose=lambda _sid: eose.set()
    )
    await reader.connect()
    try:
        await reader.subscribe("backlog", [Filter(authors=(author.public_hex,), since=now - 1300)])
        async with asyncio.timeout(30):
            while set(received) != ids:
                await asyncio.sleep(0.05)
    finally:
        await reader.close()
    assert eose.is_set()
    assert set(received.values()) == {"backlog"}  # pages are delivered under the parent's id
