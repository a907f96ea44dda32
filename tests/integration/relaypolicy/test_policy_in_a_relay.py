"""The real plugin process behind a real relay, with real clients publishing signed events.

The relay is rust-nostr's LocalRelay on 127.0.0.1; its write policy is
:class:`tests.support.strfry_plugin_policy.StrfryPluginPolicy`, which spawns the command line of
``deploy/relay/strfry.conf`` and speaks strfry's plugin protocol to it. Clients are plain
websockets speaking NIP-01.

What a client sees: the LocalRelay FFI always prefixes rejections with ``blocked:`` and the support
code strips the plugin's own prefix first, so the plugin's ``restricted: not a registered user``
arrives here as ``blocked: not a registered user`` (strfry would pass the plugin's message as is).
Events the relay itself refuses before asking the policy (e.g. an expiration in the past:
``blocked: event is expired``) never reach the plugin, as in strfry.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from websockets.asyncio.client import ClientConnection, connect

from bridge.nostr.event import sign_event
from bridge.nostr.keys import Keypair
from relaypolicy.admin import AdminToken, start_admin
from store.registry import RegistryStore
from tests.support.relay import LoopbackRelay
from tests.support.strfry_plugin_policy import StrfryPluginPolicy, plugin_command

_sub_ids = itertools.count(1)

# The shipped config, but with (almost) no refill, so burst counts are exact on a slow machine.
TEST_CONFIG = """
[rate_limits.group_message_per_ip]
burst = 20
per_second = 0.0001

[rate_limits.pairing_per_ip]
burst = 3
per_second = 0.0001
"""


class Client:
    """A NIP-01 client on one websocket."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws

    async def publish(self, event: dict[str, Any]) -> tuple[bool, str]:
        await self.ws.send(json.dumps(["EVENT", event]))
        while True:
            frame = json.loads(await self.ws.recv(decode=True))
            if frame[0] == "OK" and frame[1] == event["id"]:
                return bool(frame[2]), str(frame[3])

    async def query(self, **filter_: Any) -> list[dict[str, Any]]:
        sub = f"q{next(_sub_ids)}"
        await self.ws.send(json.dumps(["REQ", sub, filter_]))
        events: list[dict[str, Any]] = []
        while True:
            frame = json.loads(await self.ws.recv(decode=True))
            if frame[0] == "EVENT" and frame[1] == sub:
                events.append(frame[2])
            elif frame[0] in ("EOSE", "CLOSED") and frame[1] == sub:
                await self.ws.send(json.dumps(["CLOSE", sub]))
                return events


@dataclass
class Setup:
    relay: LoopbackRelay
    plugin: StrfryPluginPolicy
    client: Client
    registry: Path
    bridge: Keypair
    phone: Keypair


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    registry = tmp_path / "registry.db"
    config = tmp_path / "relaypolicy.toml"
    config.write_text(TEST_CONFIG)
    bridge, phone = Keypair.generate(), Keypair.generate()
    with RegistryStore.open(registry) as store:
        store.register(bridge.public_hex, label="bridge", now=int(time.time()))
        store.register(phone.public_hex, label="phone", now=int(time.time()))
    plugin = StrfryPluginPolicy(plugin_command(registry, config))
    relay = LoopbackRelay(policy=plugin, policy_timeout=30)
    await relay.start()
    try:
        async with connect(relay.url) as ws:
            yield Setup(relay, plugin, Client(ws), registry, bridge, phone)
    finally:
        await relay.stop()
        status = await plugin.close()
    assert status == 0
    assert plugin.stray_lines == [], "the plugin wrote something other than answers"
    assert plugin.failures == []


def signed(
    author: Keypair, kind: int, tags: list[list[str]], *, created_at: int | None = None
) -> dict[str, Any]:
    now = int(time.time()) if created_at is None else created_at
    return sign_event(author, kind, "payload", tags, created_at=now).to_dict()


def app_tags(kind: int, recipient: Keypair) -> list[list[str]]:
    """Tags a well-behaved CodeDeck client puts on ``kind``."""
    tags = [["p", recipient.public_hex]]
    if kind in (4515, 4516):
        tags.append(["expiration", str(int(time.time()) + 3600)])
    if kind in (30515, 30443):
        tags.append(["d", "machine"])
    return tags


REGISTERED_KINDS = [30515, 24515, 4515, 4516, 10050, 10051, 30443]


async def test_registered_and_unregistered_authors_for_each_kind(setup: Setup) -> None:
    stranger = Keypair.generate()
    stored: list[str] = []
    for kind in REGISTERED_KINDS:
        good = signed(setup.phone, kind, app_tags(kind, setup.bridge))
        assert await setup.client.publish(good) == (True, ""), kind
        if kind != 24515:  # ephemeral: broadcast, never stored
            stored.append(good["id"])
        bad = signed(stranger, kind, app_tags(kind, setup.phone))
        assert await setup.client.publish(bad) == (False, "blocked: not a registered user"), kind
    for kind, message in [
        (1, "blocked: kind 1 is not accepted on this private relay"),
        (444, "blocked: kind 444 is only accepted inside a gift wrap (kind 1059)"),
    ]:
        event = signed(setup.bridge, kind, [])
        assert await setup.client.publish(event) == (False, message)
    found = await setup.client.query(kinds=[*REGISTERED_KINDS, 1, 444])
    assert sorted(e["id"] for e in found) == sorted(stored)
    assert all(e["pubkey"] == setup.phone.public_hex for e in found)


async def test_gift_wraps_need_a_registered_recipient(setup: Setup) -> None:
    one_off = Keypair.generate()  # wraps are signed by throwaway keys
    hour_ago = int(time.time()) - 3600  # NIP-59 randomises created_at into the past
    to_phone = signed(one_off, 1059, [["p", setup.phone.public_hex]], created_at=hour_ago)
    to_nobody = signed(one_off, 1059, [["p", Keypair.generate().public_hex]])
    untagged = signed(Keypair.generate(), 1059, [])
    assert await setup.client.publish(to_phone) == (True, "")
    assert await setup.client.publish(to_nobody) == (False, "blocked: no registered recipient")
    # rust-nostr refuses a wrap without exactly one p tag itself ("GiftWrap must contain exactly
    # one recipient public key"); strfry would ask the plugin, which refuses it too.
    assert (await setup.client.publish(untagged))[0] is False
    found = await setup.client.query(kinds=[1059])
    assert [e["id"] for e in found] == [to_phone["id"]]


async def test_group_message_burst_from_one_address(setup: Setup) -> None:
    results: dict[str, bool] = {}
    for _ in range(26):
        event = signed(Keypair.generate(), 445, [["h", "group-1"]])
        ok, message = await setup.client.publish(event)
        results[event["id"]] = ok
        if not ok:
            assert message == "blocked: too many group messages from this address"
    admitted = {event_id for event_id, ok in results.items() if ok}
    assert len(admitted) == 20
    found = await setup.client.query(kinds=[445], limit=100)
    assert {e["id"] for e in found} == admitted


async def test_command_expiry_rules(setup: Setup) -> None:
    now = int(time.time())
    p = ["p", setup.bridge.public_hex]
    expired = signed(setup.phone, 4515, [p, ["expiration", str(now - 10)]])
    too_far = signed(setup.phone, 4515, [p, ["expiration", str(now + 7200)]])
    none = signed(setup.phone, 4515, [p])
    fine = signed(setup.phone, 4515, [p, ["expiration", str(now + 3500)]])
    # The relay refuses an expired event itself, before the policy is asked (as strfry does).
    assert await setup.client.publish(expired) == (False, "blocked: event is expired")
    ok, message = await setup.client.publish(too_far)
    assert not ok
    assert message.startswith("blocked: expiration more than 3600 s ahead")
    assert await setup.client.publish(none) == (
        False,
        "blocked: kind 4515 needs a NIP-40 expiration tag",
    )
    assert await setup.client.publish(fine) == (True, "")
    found = await setup.client.query(kinds=[4515])
    assert [e["id"] for e in found] == [fine["id"]]
    asked = {answer["id"] for answer in setup.plugin.answers}
    assert expired["id"] not in asked and too_far["id"] in asked


async def test_registration_and_pairing_window_while_running(setup: Setup, tmp_path: Path) -> None:
    """The admin API changes the registry; the running plugin applies it to the next event."""
    token_value = "t" * 40
    server = await start_admin(setup.registry, AdminToken(token_value), "127.0.0.1", 0)
    headers = {"Authorization": f"Bearer {token_value}"}
    new_phone = Keypair.generate()
    try:
        async with aiohttp.ClientSession(base_url=server.url, headers=headers) as http:
            # Pairing: a new phone sends its pair-request to the bridge while a window is open.
            pair = signed(new_phone, 4515, app_tags(4515, setup.bridge))
            assert await setup.client.publish(pair) == (False, "blocked: not a registered user")
            body = {"pubkey": setup.bridge.public_hex, "until": int(time.time()) + 600}
            async with http.post("/api/pairing-window", json=body) as response:
                assert response.status == 200
            pair = signed(new_phone, 4515, app_tags(4515, setup.bridge))
            assert await setup.client.publish(pair) == (True, "")
            # ...but only to that bridge, and only 4515.
            elsewhere = signed(new_phone, 4515, app_tags(4515, setup.phone))
            assert await setup.client.publish(elsewhere) == (
                False,
                "blocked: not a registered user",
            )
            live = signed(new_phone, 24515, app_tags(24515, setup.bridge))
            assert await setup.client.publish(live) == (False, "blocked: not a registered user")
            # The bridge registers the phone after pairing: all its kinds now pass.
            async with http.post(
                "/api/register-agent", json={"pubkey": new_phone.public_hex}
            ) as response:
                assert response.status == 201
            assert await setup.client.publish(live) == (True, "")
            # Closing the window and unregistering take effect at once, too.
            body = {"pubkey": setup.bridge.public_hex, "until": 0}
            async with http.post("/api/pairing-window", json=body) as response:
                assert (await response.json())["status"] == "closed"
            async with http.post(
                "/api/unregister-agent", json={"pubkey": new_phone.public_hex}
            ) as response:
                assert response.status == 200
            again = signed(new_phone, 4515, app_tags(4515, setup.bridge))
            assert await setup.client.publish(again) == (False, "blocked: not a registered user")
    finally:
        await server.close()
    assert setup.plugin.spawns == 1


async def test_pairing_requests_are_rate_limited_per_address(setup: Setup) -> None:
    with RegistryStore.open(setup.registry) as store:
        store.set_pairing_window(setup.bridge.public_hex, int(time.time()) + 600, now=0)
    outcomes = []
    for _ in range(5):
        event = signed(Keypair.generate(), 4515, app_tags(4515, setup.bridge))
        outcomes.append(await setup.client.publish(event))
    assert (
        outcomes
        == [(True, "")] * 3 + [(False, "blocked: too many pairing requests from this address")] * 2
    )
