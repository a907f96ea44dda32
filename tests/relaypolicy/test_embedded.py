"""The in-process form (the daemon's embedded relay): the same decisions inside a real relay."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from websockets.asyncio.client import connect

from bridge.nostr.event import sign_event
from bridge.nostr.keys import Keypair
from relaypolicy import MemoryRegistry, RelayPolicy
from relaypolicy.embedded import EmbeddedPolicy
from relaypolicy.message import Decision, PolicyInput
from relaypolicy.policies import PolicyContext
from tests.relaypolicy.builders import NOW, PHONE, make_request
from tests.support.relay import LoopbackRelay


def test_admit_uses_the_clock_as_received_at() -> None:
    hook = EmbeddedPolicy(RelayPolicy(MemoryRegistry([PHONE])), clock=lambda: NOW + 0.9)
    event = make_request()["event"]  # expiration = NOW + 3600
    assert hook.admit(event, "127.0.0.1") == (True, "")
    late = EmbeddedPolicy(
        RelayPolicy(MemoryRegistry([PHONE])), clock=lambda: NOW - 121
    )  # beyond the 120 s clock slack
    assert late.admit(event, "127.0.0.1") == (False, "invalid: expiration more than 3600 s ahead")


def test_ipv6_sources_share_a_bucket_per_64() -> None:
    policy = RelayPolicy(MemoryRegistry())
    hook = EmbeddedPolicy(policy, clock=lambda: NOW)
    for i in range(20):
        assert hook.admit(make_request(kind=445)["event"], f"2001:db8::{i + 1}")[0]
    assert hook.admit(make_request(kind=445)["event"], "2001:db8::ff") == (
        False,
        "rate-limited: too many group messages from this address",
    )


def test_admit_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    def broken(msg: PolicyInput, ctx: PolicyContext) -> Decision:
        raise RuntimeError("boom")

    hook = EmbeddedPolicy(RelayPolicy(MemoryRegistry(), policies=[broken]))
    assert hook.admit(make_request()["event"], "127.0.0.1") == (False, "error: internal error")
    assert hook.admit({"id": 5}, "127.0.0.1") == (
        False,
        "invalid: event.id is not 64 lowercase hex characters",
    )
    assert "write policy failed" in caplog.text


@pytest.mark.integration
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
