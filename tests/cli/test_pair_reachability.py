"""``pair`` says on stderr when no phone can reach the link's relays, and names the fix.

The command runs as ``main([...])`` in a worker thread against a real control socket served by
a fake handler whose pairing window names the relays each case needs. The LAN address the
command offers comes from the kernel; it is pinned here so the expected text is exact.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import quote

import pytest

from bridge.cli.main import main
from bridge.control import ControlServer, control_socket_path
from bridge.control.methods import PairOpenResult, StatusResult
from tests.control.fake_handler import BRIDGE, TOKEN, FakeHandler

LAN = "192.168.1.20"

EMBEDDED_WARNING = f"""\
codedeck-bridge: warning: no phone can reach ws://127.0.0.1:7777, the only relay of this \
pairing link (it listens on this machine only).
  To pair a phone on your LAN, serve the embedded relay on every address: stop the bridge
  and run
      make run ARGS="--embedded-relay 0.0.0.0:7777"
  (or: codedeck-bridge run --embedded-relay 0.0.0.0:7777; or embedded_relay = "0.0.0.0:7777" in
  config.toml), let TCP 7777 through the firewall (e.g. `sudo ufw allow 7777/tcp`)
  and run `codedeck-bridge pair` again.
  This machine's LAN address is {LAN}: phones will dial ws://{LAN}:7777.
  Or use a relay both the phone and this machine can reach: --relay wss://… (repeatable) or
  relays = ["wss://…"] in config.toml, then pair again.
"""


class RelaysHandler(FakeHandler):
    """The fake daemon, announcing `relays` in its pairing link and `embedded` in its status."""

    def __init__(self, relays: list[str], embedded: str | None) -> None:
        super().__init__()
        self.relays = relays
        self.embedded = embedded

    async def pair_open(self, duration: float) -> PairOpenResult:
        opened = await super().pair_open(duration)
        joined = ",".join(quote(r, safe="") for r in self.relays)
        opened["url"] = f"codedeck://pair?npub={BRIDGE.npub}&relays={joined}&token={TOKEN}"
        opened["relays"] = list(self.relays)
        return opened

    async def status(self) -> StatusResult:
        status = await super().status()
        status["embeddedRelay"] = self.embedded
        return status


@pytest.fixture(autouse=True)
def lan(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("bridge.runtime.edges.embedded_relay.lan_address", lambda: LAN)


async def cli(*argv: str) -> int:
    return await asyncio.to_thread(main, list(argv))


@asynccontextmanager
async def serve(home: Path, handler: FakeHandler) -> AsyncIterator[ControlServer]:
    server = ControlServer(control_socket_path(home), handler)
    await server.start()
    try:
        yield server
    finally:
        await server.close()


async def pair_until_expired(home: Path, handler: FakeHandler) -> int:
    """`pair` with a window the fake then ends: the whole output, with no phone."""
    command = asyncio.create_task(cli("pair", "--timeout", "60", "--home", str(home)))
    await asyncio.wait_for(handler.waiting.wait(), 30)
    handler.end_window("expired")
    return await command


WINDOW_ENDED = (
    "codedeck-bridge: the pairing window ended (expired) before a phone paired; "
    "run `codedeck-bridge pair` again\n"
)


async def test_the_embedded_relay_on_loopback_warns_with_the_fix_and_the_lan_address(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    handler = RelaysHandler(["ws://127.0.0.1:7777"], embedded="ws://127.0.0.1:7777")
    async with serve(home, handler):
        assert await pair_until_expired(home, handler) == 1
    captured = capsys.readouterr()
    assert captured.err == EMBEDDED_WARNING + WINDOW_ENDED
    # stdout still has the QR code and the link, and none of the warning
    assert "▀" in captured.out and "█" in captured.out
    assert "codedeck://pair?npub=" in captured.out and "relays=ws%3A%2F%2F127.0.0.1" in captured.out
    assert "warning" not in captured.out


async def test_a_configured_relay_on_localhost_warns_to_use_a_reachable_relay(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    handler = RelaysHandler(["ws://localhost:7000"], embedded=None)
    async with serve(home, handler):
        assert await pair_until_expired(home, handler) == 1
    err = capsys.readouterr().err
    assert err == (
        "codedeck-bridge: warning: no phone can reach ws://localhost:7000, the only relay of "
        "this pairing link (it listens on this machine only).\n"
        "  Use a relay both the phone and this machine can reach: --relay wss://… (repeatable) "
        "or\n"
        '  relays = ["wss://…"] in config.toml, then pair again.\n' + WINDOW_ENDED
    )


NO_WARNING = [
    ("the embedded relay on the LAN", [f"ws://{LAN}:7777"], f"ws://{LAN}:7777"),
    ("a public relay", ["wss://relay.example.org"], None),
    ("loopback beside a public relay", ["ws://127.0.0.1:7000", "wss://nos.lol"], None),
]


@pytest.mark.parametrize(("name", "relays", "embedded"), NO_WARNING, ids=[c[0] for c in NO_WARNING])
async def test_a_relay_a_phone_can_reach_gives_no_warning(
    name: str,
    relays: list[str],
    embedded: str | None,
    home: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    handler = RelaysHandler(relays, embedded=embedded)
    async with serve(home, handler):
        assert await pair_until_expired(home, handler) == 1
    captured = capsys.readouterr()
    assert captured.err == WINDOW_ENDED
    assert f"relays={quote(relays[0], safe='')}" in captured.out
    assert "status" not in [call for call, _ in handler.calls]  # not even asked


async def test_pair_json_keeps_stdout_json_and_warns_on_stderr(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    handler = RelaysHandler(["ws://127.0.0.1:7777"], embedded="ws://127.0.0.1:7777")
    async with serve(home, handler):
        assert await cli("pair", "--json", "--home", str(home)) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["relays"] == ["ws://127.0.0.1:7777"]
    assert captured.err == EMBEDDED_WARNING
