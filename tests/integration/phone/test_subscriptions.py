"""The phone's three subscriptions, read off the wire (the bug-A contract, wire spec §1.4).

A scripted relay records every REQ the phone sends, answers EOSE and OK, pushes the events the
test gives it, and drops the connection on demand, so the filters of the first connect and of a
reconnect can be compared with the contract exactly.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection

from bridge.protocol.messages import InputAckMessage, OutputMessage
from tests.phone.builders import make_entry, make_heartbeat
from tests.support.fake_bridge import FakeBridge
from tests.support.phone import PhoneSimulator
from tests.support.relay import ScriptedRelay

pytestmark = pytest.mark.timeout(60)


async def _answer(relay: ScriptedRelay, connection: ServerConnection, text: str) -> None:
    frame = json.loads(text)
    if frame[0] == "REQ":
        await connection.send(json.dumps(["EOSE", frame[1]]))
    elif frame[0] == "EVENT":
        await connection.send(json.dumps(["OK", frame[1]["id"], True, ""]))


async def _next_reqs(relay: ScriptedRelay) -> dict[str, list[dict[str, Any]]]:
    reqs: dict[str, list[dict[str, Any]]] = {}
    while len(reqs) < 3:
        frame = await relay.next_frame("REQ")
        reqs[frame[1]] = frame[2:]
    return reqs


async def test_three_subscriptions_and_the_stored_cursor() -> None:
    async with ScriptedRelay(_answer) as relay:
        bridge = FakeBridge([relay.url])  # used to build and sign events only
        phone = PhoneSimulator(bridge=bridge.npub, relays=[relay.url])
        await phone.go_online()
        b, p = bridge.pubkey, phone.pubkey

        first = await _next_reqs(relay)

        base = {"authors": [b], "#p": [p]}
        assert first == {
            "phone-sessions": [{**base, "kinds": [30515]}],
            "phone-responses": [{**base, "kinds": [4516]}],  # lastStoredSeen is 0: no since
            "phone-live": [{**base, "kinds": [24515]}],
        }

        # Stored, live and heartbeat events; only the stored one may move the cursor.
        [ack] = bridge.build(InputAckMessage(sessionId="s", inputId="i"), p, created_at=10_000)
        [live] = bridge.build(
            OutputMessage(sessionId="s", seq=1, entry=make_entry("x")), p, created_at=20_000
        )
        [beat] = bridge.build(make_heartbeat("s"), p, created_at=30_000)
        for sub, event in (
            ("phone-responses", ack),
            ("phone-live", live),
            ("phone-sessions", beat),
        ):
            await relay.send(["EVENT", sub, event.to_dict()])
        await phone.wait_for_count(None, 3)
        assert phone.last_stored_seen == 10_000

        for connection in list(relay.connections):
            await connection.close()  # the pool reconnects and replays the subscriptions
        second = await _next_reqs(relay)

        assert second == {
            "phone-sessions": [{**base, "kinds": [30515]}],
            "phone-responses": [{**base, "kinds": [4516], "since": 10_000 - 60}],
            "phone-live": [{**base, "kinds": [24515]}],
        }
        assert phone.subscription_filters()["phone-responses"][0].since == 9_940
        await phone.close()
