"""Who the daemon's embedded relay lets in, through the real daemon and a phone simulator.

Only the four CodeDeck kinds, only from the bridge and its paired phones, plus a new phone's
pair-request (4515 to the bridge) while a pairing window is open. A stranger who can reach the
port stores nothing: not the Marmot and gift-wrap kinds a deployed relay takes from anonymous
signers, not a 4515 to the bridge once the window has closed. An unpaired phone is refused
from its very next event.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection, connect

from bridge.nostr.event import expiration_tag, sign_event
from bridge.nostr.keys import Keypair
from tests.integration.conftest import pair_phone
from tests.integration.relay.test_embedded_relay_daemon import embedded_daemon
from tests.support.daemon import DaemonProcess

_subs = itertools.count()
NOT_REGISTERED = [False, "restricted: not a registered user"]


async def publish(ws: ClientConnection, event: dict[str, Any]) -> list[Any]:
    """Send ``event``; its ``OK`` frame's ``[accepted, message]``."""
    await ws.send(orjson.dumps(["EVENT", event]).decode())
    async with asyncio.timeout(10):
        while True:
            frame = orjson.loads(await ws.recv())
            if frame[0] == "OK" and frame[1] == event["id"]:
                return list(frame[2:])


async def stored_ids(ws: ClientConnection, **filter_: Any) -> set[str]:
    sub = f"s{next(_subs)}"
    await ws.send(orjson.dumps(["REQ", sub, filter_]).decode())
    found: set[str] = set()
    async with asyncio.timeout(10):
        while True:
            frame = orjson.loads(await ws.recv())
            if frame[:2] == ["EVENT", sub]:
                found.add(frame[2]["id"])
            elif frame[:2] == ["EOSE", sub]:
                await ws.send(orjson.dumps(["CLOSE", sub]).decode())
                return found


def command(author: Keypair, to: str, content: str = "opaque") -> dict[str, Any]:
    """A 4515 as a phone sends it (``p`` the bridge, expiring within the hour)."""
    now = int(time.time())
    tags = [["p", to], list(expiration_tag(now + 3600))]
    return sign_event(author, 4515, content, tags, created_at=now).to_dict()


async def test_only_the_bridge_and_its_paired_phones_write(tmp_path: Path, workspace: Path) -> None:
    daemon, url = embedded_daemon(tmp_path, workspace)
    stranger = Keypair.generate()
    async with daemon, connect(url) as ws:
        bridge = daemon.keypair().public_hex
        now = int(time.time())
        anonymous = [
            sign_event(Keypair.generate(), 445, "mls", [["h", "group"]], created_at=now),
            sign_event(Keypair.generate(), 1059, "wrap", [["p", bridge]], created_at=now - 3600),
            sign_event(stranger, 1, "hello", [], created_at=now),
        ]
        for event in anonymous:
            assert await publish(ws, event.to_dict()) == [
                False,
                f"blocked: kind {event.kind} is not accepted on this bridge's relay",
            ]
        early = command(stranger, bridge)
        assert await publish(ws, early) == NOT_REGISTERED  # no window open

        phone = await pair_phone(daemon, url)  # its pair-request rode the open window
        try:
            late = command(stranger, bridge)
            assert await publish(ws, late) == NOT_REGISTERED  # pairing closed the window
            assert await stored_ids(ws, kinds=[1, 445, 1059]) == set()
            assert await stored_ids(ws, ids=[e.id for e in anonymous] + [early["id"]]) == set()

            own = command(phone.keypair, bridge)
            assert await publish(ws, own) == [True, ""]
            await unpair(daemon, phone.npub)
            after = command(phone.keypair, bridge, "after unpairing")
            assert await publish(ws, after) == NOT_REGISTERED
        finally:
            await phone.close()


async def unpair(daemon: DaemonProcess, npub: str) -> None:
    """Unpair ``npub`` and wait until the daemon no longer lists it."""
    assert (await daemon.call("phones.unpair", npub=npub))["unpaired"] is True
    async with asyncio.timeout(10):
        while any(p["npub"] == npub for p in await daemon.call("phones.list")):
            await asyncio.sleep(0.05)
