"""The embedded relay's port on 127.0.0.1 serves the web app over HTTP and HTTPS beside its
websocket and NIP-11, and knows which phones are reading the bridge.

The app's files are a folder made by the test (the real build is the UI's business); they are
served through :func:`bridge.webclient.load_files`, as the daemon serves the built app.
"""

from __future__ import annotations

import asyncio
import gzip
import http.client
import ssl
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
from websockets.asyncio.client import ClientConnection, connect

from bridge.nostr.event import sign_event
from bridge.runtime.edges.embedded_relay import EmbeddedRelay, EmbeddedRelayError, TlsFiles
from bridge.webclient import load_files
from tests.integration.relay.conftest import BRIDGE, PHONE, STRANGER, Policy
from tests.support.tls import Certificate, make_certificate

INDEX = b"<!doctype html><title>CodeDeck Web</title><script type=module src=/app.js></script>"
APP = b"export const codedeck = 'web';\n" * 300


@pytest.fixture
def static(tmp_path: Path) -> Path:
    folder = tmp_path / "static"
    (folder / "icons").mkdir(parents=True)
    (folder / "index.html").write_bytes(INDEX)
    (folder / "app.js").write_bytes(APP)
    (folder / "icons" / "icon.png").write_bytes(bytes(range(256)))
    return folder


@asynccontextmanager
async def running(
    tmp_path: Path,
    web: Callable[[], dict[str, bytes]] | None,
    *,
    tls: Certificate | None = None,
    host: str = "127.0.0.1",
) -> AsyncIterator[EmbeddedRelay]:
    relay = EmbeddedRelay(
        host,
        0,
        admit=Policy(),
        database_dir=tmp_path / "relay",
        tls=TlsFiles(tls.cert, tls.key) if tls is not None else None,
        web=web,
        relays=["wss://relay.example.org"],
        bridge_pubkey=BRIDGE.public_hex,
    )
    await relay.start()
    try:
        yield relay
    finally:
        await relay.stop()


Reply = tuple[int, dict[str, str], bytes]


async def fetch(
    port: int,
    path: str,
    *,
    method: str = "GET",
    context: ssl.SSLContext | None = None,
    **headers: str,
) -> Reply:
    """One request, its path sent exactly as given."""

    def run() -> Reply:
        connection: http.client.HTTPConnection = (
            http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=context)
            if context is not None
            else http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        )
        try:
            connection.request(
                method, path, headers={k.replace("_", "-"): v for k, v in headers.items()}
            )
            response = connection.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            connection.close()

    return await asyncio.to_thread(run)


async def roundtrip(ws: ClientConnection) -> None:
    """The relay answers a REQ on this connection (EOSE)."""
    await ws.send(orjson.dumps(["REQ", "probe", {"kinds": [1], "limit": 1}]).decode())
    frame = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
    assert frame == ["EOSE", "probe"]


async def test_the_port_serves_the_app_nip11_and_the_websocket(
    tmp_path: Path, static: Path
) -> None:
    async with running(tmp_path, lambda: load_files(static)) as relay:
        port = relay.port
        status, headers, body = await fetch(port, "/")
        assert (status, body) == (200, INDEX)
        assert headers["Content-Type"] == "text/html; charset=utf-8"
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Referrer-Policy"] == "no-referrer"
        assert headers["Cross-Origin-Opener-Policy"] == "same-origin"
        assert headers["Cache-Control"] == "no-cache"
        csp = headers["Content-Security-Policy"]
        assert f"connect-src 'self' ws://127.0.0.1:{port} wss://relay.example.org;" in csp
        assert "script-src 'self';" in csp and "frame-ancestors 'none'" in csp

        status, headers, body = await fetch(port, "/app.js", accept_encoding="gzip")
        assert status == 200 and headers["Content-Encoding"] == "gzip"
        assert gzip.decompress(body) == APP
        status, _, body = await fetch(
            port, "/app.js", accept_encoding="gzip", if_none_match=headers["ETag"]
        )
        assert (status, body) == (304, b"")

        status, headers, body = await fetch(port, "/app.js", method="HEAD")
        assert (status, body, headers["Content-Length"]) == (200, b"", str(len(APP)))
        for path in ("/../relay/events.sqlite3", "/%2e%2e/static/index.html", "/nope"):
            assert (await fetch(port, path))[0] == 404, path
        assert (await fetch(port, "/", method="POST"))[0] == 405

        # NIP-11 as before, on the same path
        status, headers, body = await fetch(port, "/", accept="application/nostr+json")
        assert headers["Content-Type"] == "application/nostr+json"
        assert orjson.loads(body)["software"] == "codedeck-bridge"
        async with connect(relay.local_url) as ws:
            await roundtrip(ws)


async def test_files_are_read_once_when_the_relay_starts(tmp_path: Path, static: Path) -> None:
    reads = 0

    def counted() -> dict[str, bytes]:
        nonlocal reads
        reads += 1
        return load_files(static)

    async with running(tmp_path, counted) as relay:
        (static / "index.html").write_bytes(b"changed on disk")
        for _ in range(3):
            assert (await fetch(relay.port, "/"))[2] == INDEX
    assert reads == 1


async def test_an_unbuilt_app_says_how_to_build_it(tmp_path: Path) -> None:
    async with running(tmp_path, lambda: load_files(tmp_path / "no-such-folder")) as relay:
        status, headers, body = await fetch(relay.port, "/")
        assert status == 200
        assert headers["Content-Type"] == "text/plain; charset=utf-8"
        assert b"CodeDeck Web is not built" in body and b"npm run build" in body
        async with connect(relay.local_url) as ws:
            await roundtrip(ws)


async def test_without_an_app_the_port_says_it_is_a_relay(tmp_path: Path) -> None:
    async with running(tmp_path, None) as relay:
        status, _, body = await fetch(relay.port, "/")
        assert (status, body) == (
            200,
            b"A Nostr relay (codedeck-bridge): connect with a websocket.\n",
        )


async def test_tls_serves_https_and_wss_on_the_same_port(tmp_path: Path, static: Path) -> None:
    certificate = make_certificate(tmp_path / "tls")
    trust = certificate.client_context()
    async with running(tmp_path, lambda: load_files(static), tls=certificate) as relay:
        assert relay.local_url == f"wss://127.0.0.1:{relay.port}"
        assert relay.public_url() == relay.local_url
        status, headers, body = await fetch(relay.port, "/", context=trust)
        assert (status, body) == (200, INDEX)
        assert (
            f"connect-src 'self' wss://127.0.0.1:{relay.port} "
            in (headers["Content-Security-Policy"])
        )
        _, headers, body = await fetch(
            relay.port, "/", context=trust, accept="application/nostr+json"
        )
        assert orjson.loads(body)["software"] == "codedeck-bridge"
        async with connect(relay.local_url, ssl=trust) as ws:
            await roundtrip(ws)
        # a client that does not trust the certificate is refused, and plain http gets no page
        with pytest.raises(ssl.SSLCertVerificationError):
            await fetch(relay.port, "/", context=ssl.create_default_context())
        with pytest.raises((http.client.HTTPException, ConnectionError)):
            await fetch(relay.port, "/")


async def test_tls_on_every_address_announces_the_certificates_name(tmp_path: Path) -> None:
    certificate = make_certificate(tmp_path / "tls", names=("bridge.example.test",))
    async with running(tmp_path, None, tls=certificate, host="0.0.0.0") as relay:
        assert relay.public_url() == f"wss://bridge.example.test:{relay.port}"
        assert relay.local_url == f"wss://127.0.0.1:{relay.port}"


async def subscribe(ws: ClientConnection, subscription: str, **filter_: Any) -> None:
    await ws.send(orjson.dumps(["REQ", subscription, filter_]).decode())
    while True:
        frame = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
        if frame[0] == "EOSE":
            return


async def until(check: Callable[[], bool]) -> None:
    for _ in range(200):
        if check():
            return
        await asyncio.sleep(0.02)
    assert check()


async def test_connected_phones_are_the_readers_of_the_bridges_replies(tmp_path: Path) -> None:
    async with running(tmp_path, None) as relay:
        assert relay.connected_phones() == frozenset()
        replies = {"kinds": [4516], "authors": [BRIDGE.public_hex], "#p": [PHONE.public_hex]}
        async with connect(relay.local_url) as phone, connect(relay.local_url) as other:
            # filters that do not name both the bridge as author and a #p do not count
            await subscribe(other, "a", kinds=[4516], **{"#p": [STRANGER.public_hex]})
            await subscribe(other, "b", authors=[BRIDGE.public_hex])
            await subscribe(other, "c", authors=[STRANGER.public_hex], **{"#p": [PHONE.public_hex]})
            assert relay.connected_phones() == frozenset()
            await subscribe(phone, "replies", **replies)
            assert relay.connected_phones() == {PHONE.public_hex}
            await phone.send(orjson.dumps(["CLOSE", "replies"]).decode())
            await until(lambda: relay.connected_phones() == frozenset())
            await subscribe(phone, "replies", **replies)
            # the daemon's own in-process connection, subscribed the same way, does not count
            local = await relay.dial()
            try:
                await local.send(orjson.dumps(["REQ", "own", replies]).decode())
                assert orjson.loads(await asyncio.wait_for(local.recv(), 10)) == ["EOSE", "own"]
                assert relay.connected_phones() == {PHONE.public_hex}
            finally:
                local.abort()
        # the phone's page closed
        await until(lambda: relay.connected_phones() == frozenset())


async def test_a_tracked_reader_still_gets_its_events(tmp_path: Path) -> None:
    async with running(tmp_path, None) as relay:
        filter_ = {"authors": [BRIDGE.public_hex], "#p": [PHONE.public_hex]}
        async with connect(relay.local_url) as reader, connect(relay.local_url) as writer:
            await subscribe(reader, "r", **filter_)
            event = sign_event(
                BRIDGE, 4516, "x", [["p", PHONE.public_hex]], created_at=int(time.time())
            )
            await writer.send(orjson.dumps(["EVENT", event.to_dict()]).decode())
            frame = orjson.loads(await asyncio.wait_for(reader.recv(), 10))
            assert frame[0] == "EVENT" and frame[2]["id"] == event.id
            assert relay.connected_phones() == {PHONE.public_hex}


async def test_a_certificate_that_cannot_be_used_stops_the_start_with_the_fix(
    tmp_path: Path,
) -> None:
    one = make_certificate(tmp_path / "one")
    other = make_certificate(tmp_path / "other")
    relay = EmbeddedRelay("127.0.0.1", 0, tls=TlsFiles(one.cert, other.key))
    with pytest.raises(EmbeddedRelayError) as info:
        await relay.start()
    assert str(info.value).startswith(
        f"the embedded relay cannot use the certificate {one.cert} with the key {other.key} ("
    )
    assert str(info.value).endswith("check embedded_relay_cert and embedded_relay_key")
    assert not relay.running
