"""The embedded policy inside a real LocalRelay: the bridge writes, a stranger does not until paired."""

from __future__ import annotations

import json
import time
from typing import Any

from websockets.asyncio.client import connect

from bridge.nostr.event import sign_event
from bridge.nostr.keys import Keypair
from relaypolicy import MemoryRegistry, RelayPolicy
from relaypolicy.embedded import EmbeddedPolicy
from tests.support.relay import LoopbackRelay


async def test_inside_a_real_relay() -> None:
    bridge, stranger = Keypair.generate(), Keypair.generate()
    registry = MemoryRegistry([bridge.public_hex])
    hook = EmbeddedPolicy(RelayPolicy(registry))
    now = int(time.time())

    def event(author: Keypair, kind: int, tags: list[list[str]]) -> dict[str, Any]:
        return sign_event(author, kind, "x", tags, created_at=now).to_dict()

    async def publish(ws: Any, ev: dict[str, Any]) -> tuple[bool, str]:
        await ws.send(json.dumps(["EVENT", ev]))
        while True:
            frame = json.loads(await ws.recv())
            if frame[0] == "OK" and frame[1] == ev["id"]:
                return frame[2], frame[3]

    async with LoopbackRelay(policy=hook) as relay, connect(relay.url) as ws:
        assert await publish(ws, event(bridge, 24515, [])) == (True, "")
        assert await publish(ws, event(stranger, 24515, [])) == (
            False,
            "blocked: not a registered user",
        )
        registry.register(stranger.public_hex)  # the daemon pairs a phone: no restart needed
        assert await publish(ws, event(stranger, 24515, [])) == (True, "")
