"""The daemon in this process, against a real relay: a failure while booting stops it loudly.

An effect of the boot (resuming sessions, the first heartbeat) that fails leaves the engine's
memory ahead of the store; the daemon must stop with a :class:`DaemonError` that names the cause,
release the home, and publish no farewell heartbeat built from that memory.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect

from bridge.config import load_settings
from bridge.engine.core import Engine
from bridge.nostr.keys import Keypair
from bridge.runtime.daemon import DaemonError, run_daemon
from store.bridge_state import save_phone
from store.db import open_bridge_db
from store.lock import acquire_lock
from tests.control.fake_handler import short_home
from tests.support.relay import LoopbackRelay

PHONE = Keypair.from_secret("5a" * 32)


async def test_a_failing_boot_stops_the_daemon_and_says_why(
    relay: LoopbackRelay, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_boot(self: Engine, now: float) -> list[object]:
        raise RuntimeError("boot broke")

    monkeypatch.setattr(Engine, "boot", broken_boot)
    seen: list[dict[str, Any]] = []
    async with connect(relay.url) as ws:
        # Live, not stored: heartbeats are ephemeral, so only an open subscription sees them.
        await ws.send(json.dumps(["REQ", "all", {}]))
        assert json.loads(await ws.recv())[0] == "EOSE"
        reader = asyncio.create_task(collect(ws, seen))
        with short_home() as home:
            workspace = tmp_path / "ws"
            workspace.mkdir()
            settings = load_settings(
                flags={"home": str(home), "relays": [relay.url], "workspaces": [str(workspace)]},
                env={"CODEDECK_AGENT": "scripted"},
            )
            await pair_a_phone(settings.home)
            with pytest.raises(DaemonError, match=r"the boot stopped .*boot broke"):
                await run_daemon(settings)
            acquire_lock(settings.home).release()  # the home is free again
        await asyncio.sleep(0.5)  # anything the shutdown sent has reached us by now
        reader.cancel()
    assert seen == []  # no heartbeat built from memory the store may not hold


async def pair_a_phone(home: Path) -> None:
    """A paired phone in the store: the heartbeats have someone to go to."""
    db = await open_bridge_db(home)
    try:
        async with db.transaction():
            await save_phone(db, PHONE.public_hex, PHONE.npub, "Pixel", "2026-01-01T00:00:00.000Z")
    finally:
        await db.close()


async def collect(ws: ClientConnection, into: list[dict[str, Any]]) -> None:
    async for frame in ws:
        message = json.loads(frame)
        if message[0] == "EVENT":
            into.append(message[2])
