"""Local HTTP(S) servers for the daemon's integration tests: a probe target and a Blossom server.

Both bind 127.0.0.1 on a free port, record every request, and answer what the test decides per
request (:class:`Reply`), including never answering (``hang``: the request waits until the server
stops, which is how a test exercises a client's timeout). :func:`make_tls` builds a throwaway CA
and a server certificate for 127.0.0.1/localhost, so a daemon started with
``SSL_CERT_FILE=<ca.pem>`` trusts the https server and nothing else changes in its TLS checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import ipaddress
import json
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "Handler",
    "LocalHttpServer",
    "RecordedRequest",
    "Reply",
    "TlsFiles",
    "make_tls",
]

_STREAM_PIECE = 1024 * 1024


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request as the server saw it (header names lower-cased)."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes = field(repr=False)

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True, slots=True)
class Reply:
    """What to answer.

    Attributes:
        status: the HTTP status.
        body: the body, sent with its ``Content-Length``.
        stream: when set, send this many bytes with chunked transfer encoding instead of `body`
            (no ``Content-Length``: the client learns the size only by reading).
        hang: never answer; the request is released (and answered 503) when the server stops.
    """

    status: int = 200
    body: bytes = field(default=b"", repr=False)
    stream: int | None = None
    hang: bool = False


Handler = Callable[[RecordedRequest], Reply]


def _default_handler(request: RecordedRequest) -> Reply:
    return Reply(404)


class LocalHttpServer:
    """An aiohttp server on 127.0.0.1 (https with `tls`).

    Args:
        handler: decides the reply of each request; can be replaced at any time.
        tls: the server's TLS context (None: plain http).
    """

    def __init__(
        self, handler: Handler = _default_handler, *, tls: ssl.SSLContext | None = None
    ) -> None:
        self.handler = handler
        self.requests: list[RecordedRequest] = []
        self._tls = tls
        self._release = asyncio.Event()
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def origin(self) -> str:
        scheme = "https" if self._tls is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def requests_to(self, path_prefix: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.startswith(path_prefix)]

    async def wait_for_requests(self, path_prefix: str, count: int, timeout: float = 10.0) -> None:
        """Wait until `count` requests to paths starting with `path_prefix` arrived."""
        async with asyncio.timeout(timeout):
            while len(self.requests_to(path_prefix)) < count:
                self._changed.clear()
                await self._changed.wait()

    async def start(self) -> None:
        app = web.Application(client_max_size=1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self._tls)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        self._release.set()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> LocalHttpServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        recorded = RecordedRequest(
            request.method,
            request.path_qs,
            {k.lower(): v for k, v in request.headers.items()},
            body,
        )
        self.requests.append(recorded)
        self._changed.set()
        reply = self.handler(recorded)
        if reply.hang:
            await self._release.wait()
            return web.Response(status=503)
        if reply.stream is None:
            return web.Response(status=reply.status, body=reply.body)
        response = web.StreamResponse(status=reply.status)
        response.enable_chunked_encoding()
        piece = b"\x5a" * _STREAM_PIECE
        with contextlib.suppress(ConnectionError, RuntimeError):
            await response.prepare(request)
            left = reply.stream
            while left > 0:
                await response.write(piece[: min(left, _STREAM_PIECE)])
                left -= _STREAM_PIECE
            await response.write_eof()
        return response


# --- TLS ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """A throwaway CA (trust it with ``SSL_CERT_FILE=ca_pem``) and a server context it signed."""

    ca_pem: Path
    server_context: ssl.SSLContext


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_tls(directory: Path) -> TlsFiles:
    """Generate a CA and a certificate for ``127.0.0.1`` / ``localhost`` under `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    now = _dt.datetime.now(_dt.UTC)
    validity = (now - _dt.timedelta(hours=1), now + _dt.timedelta(days=1))
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("codedeck test CA"))
        .issuer_name(_name("codedeck test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(validity[0])
        .not_valid_after(validity[1])
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("127.0.0.1"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(validity[0])
        .not_valid_after(validity[1])
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.IPv4Address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca_pem = directory / "ca.pem"
    ca_pem.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    cert_pem = directory / "server.pem"
    key_pem = directory / "server.key"
    cert_pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_pem.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_pem, key_pem)
    return TlsFiles(ca_pem, context)
