"""A real daemon's embedded relay serves CodeDeck Web and its pairing link, over http and https.

The daemon and ``pair --json`` run as the processes a user starts; with a certificate made in
the test, the page is fetched over https and a phone pairs over wss by a client that trusts it.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import ssl
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest

from bridge.runtime.edges.embedded_relay import lan_address
from bridge.webclient import load_files
from tests.support.daemon import REPO, DaemonProcess
from tests.support.phone import PhoneSimulator
from tests.support.phone_pairing import parse_pairing_url
from tests.support.tls import make_certificate

pytestmark = pytest.mark.timeout(120)


async def pair_json(home: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("CODEDECK_HOME", None)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge", "pair", "--json", "--home", str(home),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env, cwd=REPO,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    window: dict[str, Any] = json.loads(out)
    return window


async def get(url: str, context: ssl.SSLContext | None = None) -> tuple[int, dict[str, str], bytes]:
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None

    def run() -> tuple[int, dict[str, str], bytes]:
        connection: http.client.HTTPConnection = (
            http.client.HTTPSConnection(parts.hostname, parts.port, timeout=10, context=context)
            if parts.scheme == "https"
            else http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
        )
        try:
            connection.request("GET", parts.path or "/")
            response = connection.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            connection.close()

    return await asyncio.to_thread(run)


def fragment(web_url: str) -> dict[str, str]:
    """The page's view of its pairing link: the fragment read as URLSearchParams would."""
    parsed = parse_qs(urlsplit(web_url).fragment, keep_blank_values=True, strict_parsing=True)
    return {key: values[0] for key, values in parsed.items()}


def expected_root() -> bytes:
    """What ``/`` answers: the built app's index, or the note saying how to build it."""
    index = load_files().get("/index.html")
    return index if index is not None else b"CodeDeck Web is not built"


async def test_plain_http_link_and_page(tmp_path: Path, workspace: Path) -> None:
    daemon = DaemonProcess(
        tmp_path / "home", [], workspace, extra_args=["--embedded-relay", "127.0.0.1:0"]
    )
    async with daemon:
        window = await pair_json(daemon.home)
        [relay] = window["relays"]
        port = urlsplit(relay).port
        web_url = window["webUrl"]
        assert web_url.startswith(f"http://127.0.0.1:{port}/#pair={window['npub']}&relays=")
        assert fragment(web_url) == {
            "pair": window["npub"],
            "relays": relay,
            "machine": "testbox",
            "token": window["token"],
        }
        assert f"relays={quote(relay, safe='')}&" in web_url
        status, headers, body = await get(web_url.split("#", 1)[0])
        assert status == 200
        assert body.startswith(expected_root())
        assert f"connect-src 'self' ws://127.0.0.1:{port};" in headers["Content-Security-Policy"]


async def test_tls_link_page_and_a_phone_pairing_over_wss(
    tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    certificate = make_certificate(tmp_path / "tls")
    daemon = DaemonProcess(
        tmp_path / "home",
        [],
        workspace,
        extra_args=["--embedded-relay", "127.0.0.1:0"],
        env={
            "CODEDECK_EMBEDDED_RELAY_CERT": str(certificate.cert),
            "CODEDECK_EMBEDDED_RELAY_KEY": str(certificate.key),
        },
    )
    async with daemon:
        window = await pair_json(daemon.home)
        [relay] = window["relays"]
        port = urlsplit(relay).port
        assert relay == f"wss://127.0.0.1:{port}"
        assert parse_pairing_url(window["url"]).relays == (relay,)
        web_url = window["webUrl"]
        assert web_url.startswith(f"https://127.0.0.1:{port}/#pair=")
        assert fragment(web_url)["relays"] == relay
        status, headers, body = await get(
            web_url.split("#", 1)[0], context=certificate.client_context()
        )
        assert status == 200 and body.startswith(expected_root())
        assert f"wss://127.0.0.1:{port}" in headers["Content-Security-Policy"]
        status_report = await daemon.call("status")
        assert status_report["embeddedRelay"] == relay

        # A phone that trusts the certificate pairs over wss:// with the link's parameters.
        monkeypatch.setenv("SSL_CERT_FILE", str(certificate.cert))
        async with PhoneSimulator(relays=[relay], label="Browser") as phone:
            ack = await phone.pair(window["url"])
            assert ack.message.ok, ack.message
            await phone.wait_for("sessions")
        phones = await daemon.call("phones.list")
    assert [p["label"] for p in phones] == ["Browser"]


async def test_on_every_address_the_link_and_the_page_use_the_lan_address(
    tmp_path: Path, workspace: Path
) -> None:
    lan = lan_address()
    if lan is None:
        pytest.skip("this machine has no LAN address to serve phones on")
    daemon = DaemonProcess(
        tmp_path / "home", [], workspace, extra_args=["--embedded-relay", "0.0.0.0:0"]
    )
    async with daemon:
        window = await pair_json(daemon.home)
        [relay] = window["relays"]
        port = urlsplit(relay).port
        assert relay == f"ws://{lan}:{port}"
        web_url = window["webUrl"]
        assert web_url.startswith(f"http://{lan}:{port}/#pair=")
        status, headers, body = await get(web_url.split("#", 1)[0])
        assert status == 200 and body.startswith(expected_root())
        csp = headers["Content-Security-Policy"]
        assert f"ws://{lan}:{port}" in csp and f"ws://127.0.0.1:{port}" in csp
