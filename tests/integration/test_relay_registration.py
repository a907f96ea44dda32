"""The bridge keeps a private relay's registry in step (relaypolicy's admin API on 127.0.0.1).

The second test runs the whole deployment path: the daemon drives the real admin API, and the
relay it talks to decides through the real policy plugin, spoken to over strfry's plugin
protocol (:class:`tests.support.strfry_plugin_policy.StrfryPluginPolicy`) with the registry the
admin API writes. What a stranger and an unpaired phone get from that relay is checked by
publishing to it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect

from bridge.nostr.event import expiration_tag, sign_event
from bridge.nostr.keys import Keypair
from relaypolicy.admin import AdminToken, start_admin
from store.registry import RegistryStore
from tests.integration.conftest import pair_phone
from tests.support.daemon import DaemonProcess
from tests.support.phone import PhoneSimulator
from tests.support.relay import LoopbackRelay
from tests.support.strfry_plugin_policy import StrfryPluginPolicy, plugin_command

TOKEN = "admin-token-for-tests-0123456789"


@pytest.fixture
async def admin(tmp_path: Path) -> AsyncIterator[tuple[str, Path]]:
    registry = tmp_path / "registry" / "registry.db"
    registry.parent.mkdir()
    RegistryStore.open(registry).close()
    server = await start_admin(registry, AdminToken(TOKEN), "127.0.0.1", 0)
    try:
        yield server.url, registry
    finally:
        await server.close()


async def wait_registered(registry: Path, pubkey: str, present: bool = True) -> None:
    async with asyncio.timeout(20):
        while True:
            store = RegistryStore.open(registry)
            try:
                if store.is_registered(pubkey) is present:
                    return
            finally:
                store.close()
            await asyncio.sleep(0.1)


async def wait_window(registry: Path, bridge: str, is_open: bool) -> None:
    async with asyncio.timeout(20):
        while True:
            with RegistryStore.open(registry) as store:
                windows = {r.pubkey: r.pairing_until for r in store.registrations()}
            if (windows.get(bridge) is not None) is is_open:
                return
            await asyncio.sleep(0.1)


async def test_bridge_and_phones_are_registered_and_unregistered(
    admin: tuple[str, Path], relay: LoopbackRelay, tmp_path: Path
) -> None:
    url, registry = admin
    token_file = tmp_path / "admin.token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = {"CODEDECK_REGISTER_URL": url, "CODEDECK_REGISTER_TOKEN_FILE": str(token_file)}
    async with DaemonProcess(tmp_path / "home", [relay.url], workspace, env=env) as daemon:
        bridge = daemon.keypair().public_hex
        await wait_registered(registry, bridge)
        await daemon.call("pair.open", duration=600)
        await wait_window(registry, bridge, True)  # pair.open opened the window on the relay too
        phone = await pair_phone(daemon, relay.url)
        try:
            await wait_registered(registry, phone.pubkey)
            await wait_window(registry, bridge, False)  # and pairing closed it there
            await daemon.call("phones.unpair", npub=phone.npub)
            await wait_registered(registry, phone.pubkey, present=False)
        finally:
            await phone.close()
        await daemon.call("pair.open", duration=600)
        await wait_window(registry, bridge, True)
        assert await daemon.stop() == 0
        with RegistryStore.open(registry) as store:  # the window closed with the daemon
            assert {r.pubkey: r.pairing_until for r in store.registrations()}[bridge] is None
        await daemon.start()
        await daemon.call("pair.open", duration=600)
        await wait_window(registry, bridge, True)
        daemon.kill()  # no chance to close it: the next start does
        await wait_window(registry, bridge, True)
        await daemon.start()
        await wait_window(registry, bridge, False)
        assert TOKEN not in daemon.log_text


async def publish(ws: ClientConnection, event: dict[str, Any]) -> list[Any]:
    await ws.send(json.dumps(["EVENT", event]))
    async with asyncio.timeout(10):
        while True:
            frame = json.loads(await ws.recv())
            if frame[0] == "OK" and frame[1] == event["id"]:
                return list(frame[2:])


def command(author: Keypair, bridge: str, content: str) -> dict[str, Any]:
    now = int(time.time())
    tags = [["p", bridge], list(expiration_tag(now + 3600))]
    return sign_event(author, 4515, content, tags, created_at=now).to_dict()


NOT_REGISTERED = [False, "blocked: not a registered user"]  # LocalRelay prefixes "blocked:"


async def test_through_the_relay_policy_only_the_window_and_the_paired_phone_write(
    admin: tuple[str, Path], tmp_path: Path
) -> None:
    url, registry = admin
    token_file = tmp_path / "admin.token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = {"CODEDECK_REGISTER_URL": url, "CODEDECK_REGISTER_TOKEN_FILE": str(token_file)}
    plugin = StrfryPluginPolicy(plugin_command(registry))
    relay = LoopbackRelay(policy=plugin, policy_timeout=30)
    await relay.start()
    stranger = Keypair.generate()
    try:
        async with (
            DaemonProcess(tmp_path / "home", [relay.url], workspace, env=env) as daemon,
            connect(relay.url) as ws,
        ):
            bridge = daemon.keypair().public_hex
            await wait_registered(registry, bridge)
            opened = await daemon.call("pair.open", duration=600)
            await wait_window(registry, bridge, True)
            # While the window is open a stranger's 4515 to the bridge is what pairing is.
            assert await publish(ws, command(stranger, bridge, "knock")) == [True, ""]
            phone = PhoneSimulator(relays=[relay.url], label="Pixel")
            try:
                ack = await phone.pair(opened["url"])
                assert ack.message.ok, ack.message
                await wait_registered(registry, phone.pubkey)
                await wait_window(registry, bridge, False)
                assert await publish(ws, command(stranger, bridge, "late")) == NOT_REGISTERED
                assert await publish(ws, command(phone.keypair, bridge, "mine")) == [True, ""]
                await daemon.call("phones.unpair", npub=phone.npub)
                await wait_registered(registry, phone.pubkey, present=False)
                after = command(phone.keypair, bridge, "after unpairing")
                assert await publish(ws, after) == NOT_REGISTERED
            finally:
                await phone.close()
    finally:
        await relay.stop()
        await plugin.close()
    assert plugin.failures == []
