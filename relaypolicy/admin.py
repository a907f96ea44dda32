"""The registry's admin HTTP API (``codedeck-relaypolicy serve-admin``).

Compatible with the reference relay's registration contract (REFERENCE-BEHAVIOUR §3), so a bridge
written for that relay registers here unchanged:

* ``POST /api/register-agent`` ``{"pubkey": hex|npub, "label"?: str}`` → 201 ``registered`` /
  200 ``already_registered`` / 400 bad pubkey / 401 bad token;
* ``POST /api/unregister-agent`` ``{"pubkey": …}`` → 200 ``unregistered`` / 404 not registered;
* ``POST /api/pairing-window`` ``{"pubkey": <bridge>, "until": <unix s>}`` → 200 ``open`` (``until``
  at most 900 s ahead) or ``closed`` (``until`` not in the future) / 404 bridge not registered /
  400 bad ``until``;
* ``GET /api/health`` → 200 ``ok`` when the registry answers, else 503 (no token needed).

Every ``POST`` needs ``Authorization: Bearer <token>``; the token is compared in constant time (as
SHA-256 digests, so not even its length leaks) and checked before the body is read. Bodies are
JSON objects of at most :data:`MAX_BODY` bytes (413 beyond). Every answer, errors included, is a
JSON object: ``{"status": …}`` on success, ``{"error": …}`` otherwise.

The registry is a synchronous SQLite connection, so it lives on one worker thread and requests
reach it in turn (registrations are rare and take well under a millisecond).

The token comes from a file that must be private (mode 0600 or stricter): the API can let any key
write to the relay, so a token readable by other local users would be as good as no token.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import hmac
import logging
import os
import stat
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

import orjson
from aiohttp import web

from bridge.nostr.keys import NostrKeyError, parse_pubkey
from store.errors import StoreError
from store.registry import NotRegistered, RegistryError, RegistryStore

__all__ = [
    "MAX_BODY",
    "MAX_PAIRING_WINDOW_SECONDS",
    "MIN_TOKEN_CHARS",
    "AdminServer",
    "AdminToken",
    "TokenFileError",
    "load_token",
    "make_app",
    "parse_bind",
    "run_admin",
    "start_admin",
]

logger = logging.getLogger(__name__)

#: Largest request body accepted; a registration (a pubkey and a label) is far smaller.
MAX_BODY: Final = 4096
#: How far ahead a pairing window may end: the bridge's window (10 minutes, REFERENCE-BEHAVIOUR
#: §1.8) with room for clock skew, and short enough that a forgotten window closes itself.
MAX_PAIRING_WINDOW_SECONDS: Final = 900
#: Shortest token accepted from the token file.
MIN_TOKEN_CHARS: Final = 16

_T = TypeVar("_T")


class TokenFileError(Exception):
    """The token file is missing, unreadable, empty, too short, or readable by others."""


class AdminToken:
    """The admin bearer token. Its ``repr`` and ``str`` never show it."""

    __slots__ = ("_digest",)

    def __init__(self, value: str) -> None:
        self._digest = hashlib.sha256(value.encode()).digest()

    def __repr__(self) -> str:
        return "AdminToken(<redacted>)"

    __str__ = __repr__

    def matches(self, authorization: str | None) -> bool:
        """True when ``authorization`` is ``Bearer <this token>`` (constant time)."""
        if authorization is None:
            return False
        scheme, _, given = authorization.strip().partition(" ")
        candidate = hashlib.sha256(given.strip().encode("utf-8", "surrogateescape")).digest()
        # Always compare, whatever the scheme, so a wrong scheme costs the same as a wrong token.
        same = hmac.compare_digest(candidate, self._digest)
        return same and scheme.lower() == "bearer"


def load_token(path: str | Path) -> AdminToken:
    """Read the admin token from ``path``.

    Raises:
        TokenFileError: the file is missing, not a regular file, group/world accessible, empty,
            shorter than :data:`MIN_TOKEN_CHARS`, or contains whitespace inside the token. The
            message says how to fix it and never contains the token.
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise TokenFileError(
            f"token file {path} does not exist; create it with: "
            f"(umask 077; openssl rand -hex 32 > {path})"
        ) from None
    except OSError as exc:
        raise TokenFileError(f"cannot open token file {path}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise TokenFileError(f"token file {path} is not a regular file")
        if info.st_mode & 0o077:
            raise TokenFileError(
                f"token file {path} is accessible by group/others (mode "
                f"{stat.S_IMODE(info.st_mode):04o}); run: chmod 600 {path}"
            )
        raw = os.read(fd, 4097)
    finally:
        os.close(fd)
    if len(raw) > 4096:
        raise TokenFileError(f"token file {path} is larger than 4096 bytes; is it the right file?")
    try:
        value = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise TokenFileError(f"token file {path} is not UTF-8 text") from None
    if not value:
        raise TokenFileError(f"token file {path} is empty; put a token in it: openssl rand -hex 32")
    if any(ch.isspace() for ch in value):
        raise TokenFileError(f"token file {path} must hold one token without spaces or lines")
    if len(value) < MIN_TOKEN_CHARS:
        raise TokenFileError(
            f"the token in {path} is shorter than {MIN_TOKEN_CHARS} characters; "
            "generate one with: openssl rand -hex 32"
        )
    return AdminToken(value)


def parse_bind(value: str) -> tuple[str, int]:
    """``"127.0.0.1:8089"`` / ``"[::1]:8089"`` / ``"0.0.0.0:8089"`` → ``(host, port)``.

    Raises:
        ValueError: not ``HOST:PORT`` with a port in 0..65535.
    """
    host, sep, port_text = value.rpartition(":")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError(f"--bind must be HOST:PORT (e.g. 127.0.0.1:8089), got {value!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port_text)


class _RegistryWorker:
    """Runs registry calls on one thread that owns the (synchronous) SQLite connection."""

    def __init__(self, path: Path) -> None:
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="registry"
        )
        self._path = path
        self._store: RegistryStore | None = None

    def _store_or_open(self) -> RegistryStore:
        if self._store is None:
            self._store = RegistryStore.open(self._path)
        return self._store

    async def run(self, fn: Callable[[RegistryStore], _T]) -> _T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: fn(self._store_or_open()))

    async def close(self) -> None:
        def _close() -> None:
            if self._store is not None:
                self._store.close()
                self._store = None

        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, _close)
        self._executor.shutdown(wait=True)


def _json(http_status: int, /, **body: Any) -> web.Response:
    return web.Response(
        status=http_status, body=orjson.dumps(body), content_type="application/json"
    )


class _ApiError(Exception):
    def __init__(self, status: int, error: str) -> None:
        super().__init__(error)
        self.status = status
        self.error = error


_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _errors_as_json(request: web.Request, handler: _Handler) -> web.StreamResponse:
    """Every answer is JSON: our own errors, aiohttp's (404, 405, 413) and unexpected ones."""
    try:
        return await handler(request)
    except _ApiError as exc:
        response = _json(exc.status, error=exc.error)
        if exc.status == 401:
            response.headers["WWW-Authenticate"] = 'Bearer realm="codedeck-relaypolicy"'
        return response
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return _json(exc.status, error=exc.reason.lower())
    except StoreError:
        logger.exception("registry failure on %s %s", request.method, request.path)
        return _json(503, error="registry unavailable")
    except Exception:
        logger.exception("internal error on %s %s", request.method, request.path)
        return _json(500, error="internal error")


class _Api:
    def __init__(
        self, worker: _RegistryWorker, token: AdminToken, clock: Callable[[], float]
    ) -> None:
        self._worker = worker
        self._token = token
        self._clock = clock

    async def _authorized_body(self, request: web.Request) -> dict[str, Any]:
        if not self._token.matches(request.headers.get("Authorization")):
            logger.warning("rejected a request with a bad token from %s", request.remote)
            raise _ApiError(401, "unauthorized")
        if request.content_length is not None and request.content_length > MAX_BODY:
            raise _ApiError(413, "request body too large")
        raw = await request.read()  # aiohttp stops at client_max_size (chunked bodies) with 413
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise _ApiError(400, "body must be a JSON object") from None
        if not isinstance(data, dict):
            raise _ApiError(400, "body must be a JSON object")
        return data

    @staticmethod
    def _pubkey(data: dict[str, Any]) -> str:
        value = data.get("pubkey")
        if not isinstance(value, str):
            raise _ApiError(400, "pubkey must be 64 hex characters or an npub")
        try:
            return str(parse_pubkey(value))
        except NostrKeyError as exc:
            raise _ApiError(400, f"invalid pubkey: {exc}") from None

    async def register(self, request: web.Request) -> web.Response:
        data = await self._authorized_body(request)
        pubkey = self._pubkey(data)
        label = data.get("label", "")
        if not isinstance(label, str):
            raise _ApiError(400, "label must be a string")
        now = int(self._clock())
        try:
            created = await self._worker.run(lambda s: s.register(pubkey, label=label, now=now))
        except RegistryError as exc:
            raise _ApiError(400, str(exc)) from None
        if created:
            logger.info("registered %s", pubkey[:8])
            return _json(201, status="registered", pubkey=pubkey)
        return _json(200, status="already_registered", pubkey=pubkey)

    async def unregister(self, request: web.Request) -> web.Response:
        data = await self._authorized_body(request)
        pubkey = self._pubkey(data)
        removed = await self._worker.run(lambda s: s.unregister(pubkey))
        if not removed:
            raise _ApiError(404, "not registered")
        logger.info("unregistered %s", pubkey[:8])
        return _json(200, status="unregistered", pubkey=pubkey)

    async def pairing_window(self, request: web.Request) -> web.Response:
        data = await self._authorized_body(request)
        pubkey = self._pubkey(data)
        until = data.get("until")
        if isinstance(until, bool) or not isinstance(until, int) or until < 0:
            raise _ApiError(400, "until must be a unix time in seconds (an integer)")
        now = int(self._clock())
        if until - now > MAX_PAIRING_WINDOW_SECONDS:
            raise _ApiError(
                400, f"until is more than {MAX_PAIRING_WINDOW_SECONDS} s ahead of the relay clock"
            )
        try:
            is_open = await self._worker.run(lambda s: s.set_pairing_window(pubkey, until, now=now))
        except NotRegistered:
            raise _ApiError(404, "not registered") from None
        if is_open:
            logger.info("pairing window of %s open for %d s", pubkey[:8], until - now)
            return _json(200, status="open", pubkey=pubkey, until=until)
        logger.info("pairing window of %s closed", pubkey[:8])
        return _json(200, status="closed", pubkey=pubkey)

    async def health(self, request: web.Request) -> web.Response:
        await self._worker.run(lambda s: s.count())
        return _json(200, status="ok")


def make_app(
    registry_path: str | Path,
    token: AdminToken,
    *,
    clock: Callable[[], float] = time.time,
) -> web.Application:
    """The admin API as an aiohttp application (the registry is opened on first use).

    Args:
        registry_path: the registry database.
        token: the bearer token every ``POST`` must carry.
        clock: unix seconds (registration times, pairing-window bounds).
    """
    worker = _RegistryWorker(Path(registry_path))
    api = _Api(worker, token, clock)
    app = web.Application(client_max_size=MAX_BODY, middlewares=[_errors_as_json])
    app.router.add_post("/api/register-agent", api.register)
    app.router.add_post("/api/unregister-agent", api.unregister)
    app.router.add_post("/api/pairing-window", api.pairing_window)
    app.router.add_get("/api/health", api.health)

    async def _close_worker(_: web.Application) -> None:
        await worker.close()

    app.on_cleanup.append(_close_worker)
    return app


@dataclass
class AdminServer:
    """A running admin API (see :func:`start_admin`)."""

    runner: web.AppRunner
    host: str
    port: int

    @property
    def url(self) -> str:
        """The base URL, e.g. ``http://127.0.0.1:8089``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def close(self) -> None:
        """Stop listening, finish in-flight requests, close the registry (idempotent)."""
        await self.runner.cleanup()


async def start_admin(
    registry_path: str | Path,
    token: AdminToken,
    host: str = "127.0.0.1",
    port: int = 8089,
    *,
    clock: Callable[[], float] = time.time,
) -> AdminServer:
    """Open the registry (so a broken one fails now, not on the first request) and listen.

    ``port=0`` picks a free port (see :attr:`AdminServer.port`).

    Raises:
        StoreError: the registry cannot be opened.
        OSError: the address cannot be bound.
    """
    RegistryStore.open(registry_path).close()
    app = make_app(registry_path, token, clock=clock)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=5.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    bound = runner.addresses[0]
    return AdminServer(runner, host, int(bound[1]))


async def _serve_until_signalled(registry_path: Path, token: AdminToken, bind: str) -> None:
    import signal

    host, port = parse_bind(bind)
    server = await start_admin(registry_path, token, host, port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    logger.info("admin API listening on %s (registry %s)", server.url, registry_path)
    try:
        await stop.wait()
    finally:
        logger.info("shutting down")
        await server.close()


def run_admin(registry_path: Path, token_file: Path, bind: str) -> None:
    """The ``serve-admin`` subcommand (blocks until SIGINT/SIGTERM).

    Raises:
        TokenFileError, StoreError, ValueError (bad ``bind``), OSError (cannot bind).
    """
    token = load_token(token_file)
    parse_bind(bind)
    asyncio.run(_serve_until_signalled(registry_path, token, bind))
