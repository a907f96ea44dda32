"""The README's first run, for real: ``run`` with the embedded relay, then ``pair``, then a phone.

On the default ``127.0.0.1`` the pairing link's relay is loopback and ``pair`` warns with the
fix; with ``--embedded-relay 0.0.0.0:PORT`` the link carries this machine's LAN address, ``pair``
stays quiet, and a phone that dials that address pairs. The daemon and ``pair`` run as the
processes a user starts; the phone dials the LAN address (the kernel delivers it locally).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from bridge.runtime.edges.embedded_relay import lan_address
from tests.support.daemon import REPO, DaemonProcess
from tests.support.phone import PhoneSimulator
from tests.support.phone_pairing import parse_pairing_url

pytestmark = pytest.mark.timeout(120)


async def pair_json(home: Path) -> tuple[dict[str, Any], str]:
    """``codedeck-bridge pair --json``: the window (stdout) and what it said on stderr."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("CODEDECK_HOME", None)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge", "pair", "--json", "--home", str(home),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env, cwd=REPO,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return json.loads(out), err.decode()


async def test_loopback_embedded_relay_pair_warns_with_the_fix(
    tmp_path: Path, workspace: Path
) -> None:
    daemon = DaemonProcess(
        tmp_path / "home", [], workspace, extra_args=["--embedded-relay", "127.0.0.1:0"]
    )
    async with daemon:
        window, err = await pair_json(daemon.home)
    [relay] = window["relays"]
    port = relay.rsplit(":", 1)[1]
    assert relay.startswith("ws://127.0.0.1:")
    assert err.startswith(f"codedeck-bridge: warning: no phone can reach {relay}, the only relay")
    assert f'make run ARGS="--embedded-relay 0.0.0.0:{port}"' in err
    assert f"sudo ufw allow {port}/tcp" in err


async def test_embedded_relay_on_every_address_pairs_a_phone_on_the_lan(
    tmp_path: Path, workspace: Path
) -> None:
    lan = lan_address()
    if lan is None:
        pytest.skip("this machine has no LAN address to serve phones on")
    daemon = DaemonProcess(
        tmp_path / "home", [], workspace, extra_args=["--embedded-relay", "0.0.0.0:0"]
    )
    async with daemon:
        window, err = await pair_json(daemon.home)
        [relay] = window["relays"]
        assert relay.startswith(f"ws://{lan}:")  # public_url: the LAN address, not 0.0.0.0
        assert parse_pairing_url(window["url"]).relays == (relay,)
        assert "warning" not in err  # a phone can reach it
        async with PhoneSimulator(relays=[relay], label="Pixel 8") as phone:
            ack = await phone.pair(window["url"])
            assert ack.message.ok, ack.message
            await phone.wait_for("sessions")
        phones = await daemon.call("phones.list")
    assert [p["label"] for p in phones] == ["Pixel 8"]
