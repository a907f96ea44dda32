"""``pair`` prints the CodeDeck Web link beside the codedeck:// one: its QR code, the link, and
what a page on plain http from a LAN address cannot do; ``--json`` carries it as ``webUrl``.

The command runs as ``main([...])`` against a real control socket served by a fake handler whose
pairing window carries the web link each case needs. The link's own form (the daemon's side) is
checked against the function the daemon builds it with.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import segno

from bridge.cli.main import main
from bridge.cli.render import WEB_ELSEWHERE
from bridge.control import ControlServer, control_socket_path
from bridge.control.methods import PairOpenResult
from bridge.runtime.edges.control_handler import web_pair_url
from tests.control.fake_handler import BRIDGE, TOKEN, FakeHandler

LAN_LINK = web_pair_url(
    "ws://192.168.1.20:7777", BRIDGE.npub, ["ws://192.168.1.20:7777"], "test", TOKEN
)
NOT_SECURE = "Plain http:// on a LAN address is not a secure context"


class WebHandler(FakeHandler):
    """The fake daemon, with ``web_url`` as its pairing window's web link."""

    def __init__(self, web_url: str | None) -> None:
        super().__init__()
        self.web_url = web_url

    async def pair_open(self, duration: float) -> PairOpenResult:
        opened = await super().pair_open(duration)
        opened["webUrl"] = self.web_url
        return opened


@pytest.fixture(autouse=True)
def lan(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("bridge.runtime.edges.embedded_relay.lan_address", lambda: "192.168.1.20")


async def cli(*argv: str) -> int:
    return await asyncio.to_thread(main, list(argv))


@asynccontextmanager
async def serve(home: Path, handler: FakeHandler) -> AsyncIterator[None]:
    server = ControlServer(control_socket_path(home), handler)
    await server.start()
    try:
        yield
    finally:
        await server.close()


async def pair_output(home: Path, handler: FakeHandler, capsys: pytest.CaptureFixture[str]) -> str:
    async with serve(home, handler):
        command = asyncio.create_task(cli("pair", "--timeout", "60", "--home", str(home)))
        await asyncio.wait_for(handler.waiting.wait(), 30)
        handler.end_window("expired")
        assert await command == 1
    return capsys.readouterr().out


def qr_text(url: str) -> str:
    buffer = io.StringIO()
    segno.make(url, error="L", micro=False).terminal(out=buffer, compact=True)
    return buffer.getvalue()


def test_the_web_link_carries_the_pairing_in_its_fragment() -> None:
    url = web_pair_url(
        "wss://bridge.example.org:7777",
        BRIDGE.npub,
        ["wss://bridge.example.org:7777", "wss://relay.example/a b"],
        "Jo's box & more",
        "t+k/n=",
    )
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path, parts.query) == (
        "https",
        "bridge.example.org:7777",
        "/",
        "",
    )
    assert parts.fragment.startswith(f"pair={BRIDGE.npub}&relays=wss%3A%2F%2Fbridge.example.org")
    fields = {k: v[0] for k, v in parse_qs(parts.fragment, strict_parsing=True).items()}
    assert fields == {
        "pair": BRIDGE.npub,
        "relays": "wss://bridge.example.org:7777,wss://relay.example/a b",
        "machine": "Jo's box & more",
        "token": "t+k/n=",
    }
    assert web_pair_url("ws://127.0.0.1:7777", BRIDGE.npub, [], "m", "t").startswith(
        "http://127.0.0.1:7777/#pair="
    )


async def test_pair_draws_the_web_links_qr_code_and_says_plain_lan_http_gets_no_push(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = await pair_output(home, WebHandler(LAN_LINK), capsys)
    codedeck = out.index("codedeck://pair?")
    web = out.index("Or, without the app: point the phone's camera at this QR code")
    assert codedeck < web
    assert qr_text(LAN_LINK) in out[web:]  # the web link's own QR code
    assert f"\n{LAN_LINK}\n" in out
    assert out.count(NOT_SECURE) == 1
    assert "push notifications" in out and "deploy/web/README.md" in out
    assert WEB_ELSEWHERE not in out


@pytest.mark.parametrize(
    "embedded",
    ["wss://bridge.example.org:7777", "ws://127.0.0.1:7777", "ws://localhost:7777"],
)
async def test_a_secure_context_link_gets_no_such_line(
    embedded: str, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    link = web_pair_url(embedded, BRIDGE.npub, [embedded], "test", TOKEN)
    out = await pair_output(home, WebHandler(link), capsys)
    assert f"\n{link}\n" in out
    assert qr_text(link) in out
    assert NOT_SECURE not in out


async def test_without_an_embedded_relay_pair_points_at_static_hosting(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = await pair_output(home, WebHandler(None), capsys)
    assert WEB_ELSEWHERE + "\n" in out
    assert "deploy/web/README.md" in WEB_ELSEWHERE
    assert "#pair=" not in out


async def test_pair_json_has_the_web_url(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    async with serve(home, WebHandler(LAN_LINK)):
        assert await cli("pair", "--json", "--home", str(home)) == 0
    window = json.loads(capsys.readouterr().out)
    assert window["webUrl"] == LAN_LINK
    assert list(window)[-1] == "webUrl"


async def test_a_hostile_web_url_cannot_write_escapes_to_the_terminal(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = await pair_output(home, WebHandler("http://x/#pair=\x1b]0;owned\x07\u202e"), capsys)
    assert "\x1b]0;owned" not in out and "\u202e" not in out
