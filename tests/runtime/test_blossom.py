"""Blossom downloads against a local https server (self-signed certificate the test trusts)."""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import ipaddress
import logging
import os
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.x509.oid import NameOID

from bridge.engine.sessions.uploads import MAX_IMAGE_BYTES
from bridge.protocol import UploadImageBlossomCommand
from bridge.runtime.errands.blossom import (
    BlossomError,
    decrypt_blob,
    fetch_blossom_image,
    make_http_fetcher,
)

KEY = bytes(range(32))
IV = bytes(range(100, 112))
IMAGE = b"\x89PNG\r\n\x1a\n" + os.urandom(3000)


def encrypt(plain: bytes, key: bytes = KEY, iv: bytes = IV) -> bytes:
    return AESGCM(key).encrypt(iv, plain, None)  # ciphertext || 16-byte tag


def self_signed(directory: Path) -> tuple[Path, Path, bytes]:
    """A certificate for 127.0.0.1, its key, and the PEM the client trusts."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.IPv4Address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM)
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(pem)
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path, pem


@dataclass
class BlobServer:
    """Routes: ``/blob/<name>`` (Content-Length), ``/stream/<name>`` (no length, close-
    delimited), ``/never``, ``/redirect?to=<url>``, anything else 404."""

    port: int = 0
    blobs: dict[str, bytes] = field(default_factory=dict)
    declared: dict[str, int] = field(default_factory=dict)  # a lying Content-Length
    paths: list[str] = field(default_factory=list)
    writers: set[asyncio.StreamWriter] = field(default_factory=set)

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.add(writer)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            path = head.split(b" ", 2)[1].decode()
            self.paths.append(path)
            if path == "/never":
                await asyncio.Event().wait()
            if path.startswith("/redirect?to="):
                target = path.removeprefix("/redirect?to=")
                writer.write(
                    f"HTTP/1.1 302 Found\r\nlocation: {target}\r\ncontent-length: 0\r\n"
                    "connection: close\r\n\r\n".encode()
                )
            elif path.startswith(("/blob/", "/stream/")):
                _, mode, name = path.split("/", 2)
                body = self.blobs.get(name)
                if body is None:
                    writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                else:
                    length = ""
                    if mode == "blob":
                        length = f"content-length: {self.declared.get(name, len(body))}\r\n"
                    writer.write(f"HTTP/1.1 200 OK\r\n{length}connection: close\r\n\r\n".encode())
                    for start in range(0, len(body), 1 << 20):
                        writer.write(body[start : start + (1 << 20)])
                        await writer.drain()
            else:
                writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()
            self.writers.discard(writer)


@pytest.fixture
async def https(tmp_path: Path) -> AsyncIterator[tuple[BlobServer, ssl.SSLContext]]:
    cert, key, pem = self_signed(tmp_path)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    client_ctx = ssl.create_default_context(cadata=pem.decode())
    stub = BlobServer()
    server = await asyncio.start_server(stub.handle, "127.0.0.1", 0, ssl=server_ctx)
    stub.port = server.sockets[0].getsockname()[1]
    try:
        yield stub, client_ctx
    finally:
        server.close()
        for writer in list(stub.writers):
            writer.close()
        await server.wait_closed()


def command(url: str, blob: bytes, **overrides: Any) -> UploadImageBlossomCommand:
    fields: dict[str, Any] = {
        "sessionId": "s1",
        "hash": hashlib.sha256(blob).hexdigest(),
        "url": url,
        "key": KEY.hex(),
        "iv": IV.hex(),
        "filename": "x.png",
        "mimeType": "image/png",
        "text": "",
        "sizeBytes": len(blob),
        **overrides,
    }
    return UploadImageBlossomCommand(**fields)


# --- real https --------------------------------------------------------------------------------


async def test_download_verify_decrypt(https: tuple[BlobServer, ssl.SSLContext]) -> None:
    server, trust = https
    blob = encrypt(IMAGE)
    server.blobs["a"] = blob
    fetch = make_http_fetcher(ssl_context=trust)
    assert await fetch_blossom_image(command(server.url("/blob/a"), blob), fetch=fetch) == IMAGE
    upper = command(server.url("/stream/a"), blob, hash=hashlib.sha256(blob).hexdigest().upper())
    assert await fetch_blossom_image(upper, fetch=fetch) == IMAGE


async def test_the_certificate_must_be_trusted(https: tuple[BlobServer, ssl.SSLContext]) -> None:
    server, _ = https
    server.blobs["a"] = blob = encrypt(IMAGE)
    with pytest.raises(BlossomError, match="the download failed"):
        await fetch_blossom_image(command(server.url("/blob/a"), blob), fetch=make_http_fetcher())


async def test_wrong_hash(https: tuple[BlobServer, ssl.SSLContext]) -> None:
    server, trust = https
    server.blobs["a"] = blob = encrypt(IMAGE)
    bad = command(server.url("/blob/a"), blob, hash="00" * 32)
    with pytest.raises(BlossomError, match="sha256 does not match"):
        await fetch_blossom_image(bad, fetch=make_http_fetcher(ssl_context=trust))


async def test_wrong_key(https: tuple[BlobServer, ssl.SSLContext]) -> None:
    server, trust = https
    server.blobs["a"] = blob = encrypt(IMAGE)
    wrong = command(server.url("/blob/a"), blob, key=bytes(32).hex())
    with pytest.raises(BlossomError, match="could not be decrypted") as raised:
        await fetch_blossom_image(wrong, fetch=make_http_fetcher(ssl_context=trust))
    assert KEY.hex() not in str(raised.value) and bytes(32).hex() not in str(raised.value)


async def test_tampered_blob_with_matching_hash_fails_the_tag(
    https: tuple[BlobServer, ssl.SSLContext],
) -> None:
    server, trust = https
    blob = bytearray(encrypt(IMAGE))
    blob[-1] ^= 1  # the tag is the last 16 bytes
    server.blobs["a"] = bytes(blob)
    with pytest.raises(BlossomError, match="could not be decrypted"):
        await fetch_blossom_image(
            command(server.url("/blob/a"), bytes(blob)), fetch=make_http_fetcher(ssl_context=trust)
        )


@pytest.mark.parametrize("mode", ["blob", "stream"], ids=["content-length", "close-delimited"])
async def test_oversized_body_with_a_lying_size(
    https: tuple[BlobServer, ssl.SSLContext], mode: str
) -> None:
    server, trust = https
    blob = os.urandom(MAX_IMAGE_BYTES + 1024)
    server.blobs["big"] = blob
    lying = command(server.url(f"/{mode}/big"), blob, sizeBytes=1000)
    expected = "too large" if mode == "blob" else "larger than the limit"
    with pytest.raises(BlossomError, match=expected):
        await fetch_blossom_image(lying, fetch=make_http_fetcher(ssl_context=trust))


async def test_a_lying_content_length_is_never_read_past(
    https: tuple[BlobServer, ssl.SSLContext],
) -> None:
    server, trust = https
    server.blobs["liar"] = blob = os.urandom(200_000)
    server.declared["liar"] = 10  # claims 10 bytes, sends 200 kB: the client stops at 10
    fetch = make_http_fetcher(ssl_context=trust)
    # aiohttp flags the extra bytes as a protocol error; either way the image is refused.
    with pytest.raises(BlossomError, match=r"download failed|sha256 does not match"):
        await fetch_blossom_image(command(server.url("/blob/liar"), blob), fetch=fetch)


async def test_size_bytes_over_the_cap_is_refused_before_any_request(
    https: tuple[BlobServer, ssl.SSLContext],
) -> None:
    server, trust = https
    big = command(server.url("/blob/a"), b"x", sizeBytes=MAX_IMAGE_BYTES + 1)
    with pytest.raises(BlossomError, match="too large"):
        await fetch_blossom_image(big, fetch=make_http_fetcher(ssl_context=trust))
    assert server.paths == []


async def test_http_url_is_refused_without_a_request(
    https: tuple[BlobServer, ssl.SSLContext],
) -> None:
    server, trust = https
    plain = command(f"http://127.0.0.1:{server.port}/blob/a", b"x")
    with pytest.raises(BlossomError, match="must be https"):
        await fetch_blossom_image(plain, fetch=make_http_fetcher(ssl_context=trust))
    assert server.paths == []


async def test_redirects_must_stay_https(https: tuple[BlobServer, ssl.SSLContext]) -> None:
    server, trust = https
    server.blobs["a"] = blob = encrypt(IMAGE)
    fetch = make_http_fetcher(ssl_context=trust)
    followed = command(server.url("/redirect?to=/blob/a"), blob)
    assert await fetch_blossom_image(followed, fetch=fetch) == IMAGE
    downgrade = command(server.url(f"/redirect?to=http://127.0.0.1:{server.port}/blob/a"), blob)
    with pytest.raises(BlossomError, match="must be https"):
        await fetch_blossom_image(downgrade, fetch=fetch)
    loop = command(server.url("/redirect?to=/redirect?to=/redirect?to=/redirect?to=/blob/a"), blob)
    with pytest.raises(BlossomError, match="too many redirects"):
        await fetch_blossom_image(loop, fetch=fetch)


async def test_not_found(https: tuple[BlobServer, ssl.SSLContext]) -> None:
    server, trust = https
    with pytest.raises(BlossomError, match="HTTP 404"):
        await fetch_blossom_image(
            command(server.url("/blob/none"), b"x"), fetch=make_http_fetcher(ssl_context=trust)
        )


async def test_timeout(https: tuple[BlobServer, ssl.SSLContext]) -> None:
    server, trust = https
    with pytest.raises(BlossomError, match=r"timed out after 0\.3 s"):
        await fetch_blossom_image(
            command(server.url("/never"), b"x"),
            fetch=make_http_fetcher(ssl_context=trust),
            timeout=0.3,
        )
    assert server.paths == ["/never"]


# --- injectable fetcher and pure parts ---------------------------------------------------------


async def test_injected_fetcher() -> None:
    blob = encrypt(IMAGE)
    seen: list[tuple[str, int]] = []

    async def fake(url: str, max_bytes: int) -> bytes:
        seen.append((url, max_bytes))
        return blob

    url = "https://blossom.example/abc"
    assert await fetch_blossom_image(command(url, blob), fetch=fake) == IMAGE
    assert seen == [(url, MAX_IMAGE_BYTES)]


async def test_a_fetcher_returning_too_much_is_refused() -> None:
    async def greedy(url: str, max_bytes: int) -> bytes:
        return bytes(max_bytes + 1)

    with pytest.raises(BlossomError, match="larger than the limit"):
        await fetch_blossom_image(command("https://b.example/x", b"x"), fetch=greedy, max_bytes=10)


async def test_a_fetcher_os_error_is_a_blossom_error() -> None:
    async def broken(url: str, max_bytes: int) -> bytes:
        raise ConnectionResetError("peer reset")

    with pytest.raises(BlossomError, match="ConnectionResetError"):
        await fetch_blossom_image(command("https://b.example/x", b"x"), fetch=broken)


@pytest.mark.parametrize(
    ("blob", "key", "iv", "expected"),
    [
        (b"x" * 32, "zz", IV.hex(), "must be hex"),
        (b"x" * 32, KEY.hex()[:32], IV.hex(), "32 bytes"),
        (b"x" * 32, KEY.hex(), "00" * 4, "8 to 128 bytes"),
        (b"x" * 15, KEY.hex(), IV.hex(), "too short"),
    ],
    ids=["not-hex", "short-key", "short-iv", "short-blob"],
)
def test_decrypt_blob_refusals(blob: bytes, key: str, iv: str, expected: str) -> None:
    with pytest.raises(BlossomError, match=expected):
        decrypt_blob(blob, key, iv)


async def test_keys_never_reach_a_log_line(
    https: tuple[BlobServer, ssl.SSLContext], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server, trust = https
    server.blobs["a"] = blob = encrypt(IMAGE)
    cmd = command(server.url("/blob/a"), blob)
    assert KEY.hex() not in repr(cmd)
    await fetch_blossom_image(cmd, fetch=make_http_fetcher(ssl_context=trust))
    for record in caplog.records:
        assert KEY.hex() not in record.getMessage() + repr(record.args)
