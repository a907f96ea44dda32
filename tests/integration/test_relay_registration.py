"""The bridge keeps a private relay's registry in step (relaypolicy's admin API on 127.0.0.1)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from relaypolicy.admin import AdminToken, start_admin
from store.registry import RegistryStore
from tests.integration.conftest import pair_phone
from tests.support.daemon import DaemonProcess
from tests.support.relay import LoopbackRelay

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
        phone = await pair_phone(daemon, relay.url)
        try:
            await wait_registered(registry, phone.pubkey)
            store = RegistryStore.open(registry)
            try:
                windows = {r.pubkey: r.pairing_until for r in store.registrations()}
            finally:
                store.close()
            assert windows.get(bridge) is not None  # pair.open opened the window on the relay too
            await daemon.call("phones.unpair", npub=phone.npub)
            await wait_registered(registry, phone.pubkey, present=False)
        finally:
            await phone.close()
        assert TOKEN not in daemon.log_text
