"""A static site served on the relay's port: answers to plain HTTP GETs, sans-I/O.

The relay's port answers three kinds of request: a websocket upgrade (the relay), a NIP-11
request (``Accept: application/nostr+json``) and, with a :class:`StaticSite`, any other GET — a
file of a web app. The relay knows nothing of what the files are: whoever starts it hands it a
site built from a name → bytes mapping, and the relay asks :meth:`StaticSite.answer` for the
status, headers and body of each request.

Shaped for serving a single-page app to browsers that must not be talked into running anything
else:

* **Only the listed files.** A request path is looked up in the mapping as it is; it is never
  joined onto a folder, so ``/../`` or ``%2e%2e`` finds nothing and is answered 404.
* **Loaded once.** The bodies, their gzip forms (kept only when smaller) and their ETags are
  computed when the site is built; answering is lookups.
* **Strict headers on every answer**: a Content-Security-Policy that allows only the site's own
  scripts, styles, images, manifest and worker, and websockets to ``'self'`` and the relays it is
  given; ``nosniff``; no referrer; a browsing context of its own (COOP); no framing.
* **Revalidated, never stale.** ``Cache-Control: no-cache`` with a strong ETag per
  representation: a browser asks every time and gets ``304`` while the file is unchanged, so a
  new build is picked up at the next load and an unchanged one costs a round trip.
* **GET and HEAD only**; anything else is ``405``.
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from http import HTTPStatus
from urllib.parse import urlsplit

from bridge.records import record

__all__ = [
    "INDEX",
    "HttpAnswer",
    "StaticSite",
    "accepts_gzip",
    "content_security_policy",
    "content_type_of",
]

INDEX = "/index.html"
"""The file ``/`` answers with."""

_TYPES: Mapping[str, str] = {
    "html": "text/html; charset=utf-8",
    "js": "text/javascript; charset=utf-8",
    "mjs": "text/javascript; charset=utf-8",
    "css": "text/css; charset=utf-8",
    "json": "application/json",
    "webmanifest": "application/manifest+json",
    "map": "application/json",
    "txt": "text/plain; charset=utf-8",
    "svg": "image/svg+xml",
    "png": "image/png",
    "ico": "image/x-icon",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "webp": "image/webp",
    "gif": "image/gif",
    "woff2": "font/woff2",
    "wasm": "application/wasm",
}
"""Content types by file extension: a fixed table, so the answer does not depend on the
machine's ``mime.types``."""
_DEFAULT_TYPE = "application/octet-stream"
_COMPRESSIBLE = ("text/", "application/json", "application/manifest+json", "image/svg+xml")
_UNSAFE_IN_CSP = frozenset(" \t\r\n;,'\"")
_METHODS = ("GET", "HEAD")


def content_type_of(path: str) -> str:
    """The Content-Type for a file path, by its extension."""
    name = path.rsplit("/", 1)[-1]
    extension = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    return _TYPES.get(extension, _DEFAULT_TYPE)


def _csp_source(url: str) -> str | None:
    """A relay URL as a CSP source (scheme, host, port, path), or None if it cannot be one.

    A URL carrying a character that would end or split a directive (``;``, ``,``, a quote,
    white space) or a non-ASCII one is left out rather than trusted to be harmless.
    """
    if not url.isascii() or any(ch in _UNSAFE_IN_CSP or ord(ch) < 0x20 for ch in url):
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("ws", "wss", "http", "https") or not parts.netloc:
        return None
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


def content_security_policy(connect: Iterable[str]) -> str:
    """The site's CSP; ``connect`` are the relay URLs its page may open websockets to."""
    sources = ["'self'"]
    for url in connect:
        source = _csp_source(url)
        if source is not None and source not in sources:
            sources.append(source)
    return "; ".join(
        (
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self' data: blob:",
            f"connect-src {' '.join(sources)}",
            "manifest-src 'self'",
            "worker-src 'self'",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        )
    )


@record
class HttpAnswer:
    """What to send back to one request: status, headers in order, body."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or None."""
        lowered = name.lower()
        return next((value for key, value in self.headers if key.lower() == lowered), None)


@record
class _Representation:
    body: bytes
    etag: str


@record
class _File:
    content_type: str
    plain: _Representation
    gzipped: _Representation | None
    """Only when gzip makes the body smaller."""


def _etag(body: bytes, suffix: str = "") -> str:
    return f'"{hashlib.sha256(body).hexdigest()[:32]}{suffix}"'


def _build(path: str, body: bytes) -> _File:
    content_type = content_type_of(path)
    plain = _Representation(body, _etag(body))
    gzipped = None
    if content_type.startswith(_COMPRESSIBLE):
        packed = gzip.compress(body, compresslevel=9, mtime=0)
        if len(packed) < len(body):
            gzipped = _Representation(packed, _etag(body, "-gz"))
    return _File(content_type, plain, gzipped)


def accepts_gzip(accept_encoding: str) -> bool:
    """Whether an ``Accept-Encoding`` value allows gzip (named, or ``*``, with a q above 0)."""
    star: bool | None = None
    for item in accept_encoding.split(","):
        coding, *params = (part.strip() for part in item.split(";"))
        quality = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        coding = coding.lower()
        if coding in ("gzip", "x-gzip"):
            return quality > 0
        if coding == "*":
            star = quality > 0
    return bool(star)


def _matches(if_none_match: str, etag: str) -> bool:
    """RFC 9110 §13.1.2: weak comparison of ``If-None-Match`` against ``etag``."""
    if if_none_match.strip() == "*":
        return True
    return any(tag.strip().removeprefix("W/") == etag for tag in if_none_match.split(","))


class StaticSite:
    """A fixed set of files, each answered with the site's security and caching headers.

    Args:
        files: request path (``/app.js``) → body. ``/`` answers with :data:`INDEX` when it is
            one of them.
        connect: the relay URLs the page may connect to (``connect-src`` beside ``'self'``).
        missing: the plain text ``/`` answers with when there is no :data:`INDEX` (how to get
            the files), so an unbuilt site says why it is empty rather than 404.
    """

    def __init__(
        self, files: Mapping[str, bytes], *, connect: Sequence[str] = (), missing: str = ""
    ) -> None:
        for path in files:
            if not path.startswith("/") or "\\" in path or "/../" in f"{path}/":
                raise ValueError(f"not a site path: {path!r}")
        self._files = {path: _build(path, body) for path, body in files.items()}
        self._missing = missing.encode()
        self._security: tuple[tuple[str, str], ...] = ()
        self.csp = ""
        self.connect_to(connect)

    @property
    def paths(self) -> frozenset[str]:
        return frozenset(self._files)

    def connect_to(self, connect: Sequence[str]) -> None:
        """Set the relays of ``connect-src`` (once the relay knows its port, say).

        The headers are replaced in one assignment, so an answer being built on another thread
        sees either set whole.
        """
        self.csp = content_security_policy(connect)
        self._security = (
            ("Content-Security-Policy", self.csp),
            ("X-Content-Type-Options", "nosniff"),
            ("Referrer-Policy", "no-referrer"),
            ("Cross-Origin-Opener-Policy", "same-origin"),
        )

    def answer(self, method: str, target: str, headers: Mapping[str, str]) -> HttpAnswer:
        """The answer to ``method`` ``target`` with request ``headers`` (names lower-cased)."""
        security = self._security
        if method not in _METHODS:
            return _text(
                security,
                HTTPStatus.METHOD_NOT_ALLOWED,
                b"Only GET and HEAD.\n",
                (("Allow", "GET, HEAD"),),
            )
        path = target.split("?", 1)[0].split("#", 1)[0]
        if path == "/":
            path = INDEX
            if path not in self._files and self._missing:
                return _text(security, HTTPStatus.OK, self._missing, head=method == "HEAD")
        found = self._files.get(path)
        if found is None:
            return _text(security, HTTPStatus.NOT_FOUND, b"Not found.\n", head=method == "HEAD")
        chosen = found.plain
        if found.gzipped is not None and accepts_gzip(headers.get("accept-encoding", "")):
            chosen = found.gzipped
        common = (
            *security,
            ("Cache-Control", "no-cache"),
            ("ETag", chosen.etag),
            *((("Vary", "Accept-Encoding"),) if found.gzipped is not None else ()),
        )
        if _matches(headers.get("if-none-match", ""), chosen.etag):
            return HttpAnswer(HTTPStatus.NOT_MODIFIED, common, b"")
        encoding = (("Content-Encoding", "gzip"),) if chosen is found.gzipped else ()
        return HttpAnswer(
            HTTPStatus.OK,
            (
                *common,
                ("Content-Type", found.content_type),
                *encoding,
                ("Content-Length", str(len(chosen.body))),
            ),
            b"" if method == "HEAD" else chosen.body,
        )


def _text(
    security: tuple[tuple[str, str], ...],
    status: HTTPStatus,
    text: bytes,
    extra: tuple[tuple[str, str], ...] = (),
    *,
    head: bool = False,
) -> HttpAnswer:
    """A plain-text answer (an error, or the missing-site note), with the security headers."""
    return HttpAnswer(
        status,
        (
            *security,
            *extra,
            ("Cache-Control", "no-cache"),
            ("Content-Type", "text/plain; charset=utf-8"),
            ("Content-Length", str(len(text))),
        ),
        b"" if head else text,
    )
