"""The bridge daemon's side of the admin API: register, unregister, open a pairing window.

Split the sans-I/O way: :func:`build_request` says what to send, :func:`interpret_response` says
what an answer means (done, retry, or a failure to report), :func:`backoff_delays` says how long to
wait between attempts, and :class:`AdminClient` only performs them with ``aiohttp``. The daemon
calls it fire-and-forget style after a phone pairs (as the reference bridge does); a failure is
logged by the caller, never fatal to the daemon.

Rules carried over from the reference client: the endpoint must be ``https`` (plain ``http`` only
to a loopback address), the pubkey is validated before anything is sent, and every attempt has a
timeout (10 s). Retried: connection errors, timeouts, 408, 429 and 5xx, with exponential backoff
and full jitter. Not retried: 400, 401, 404, 413 and any other 4xx — the same request would fail
the same way. The token never appears in an exception, a log line or a repr.
"""

from __future__ import annotations

import asyncio
import enum
import ipaddress
import logging
import random
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

import orjson

from bridge.nostr.keys import NostrKeyError, parse_pubkey

if TYPE_CHECKING:
    # aiohttp is imported where a call is made: the daemon imports this module at every start
    # and calls it only when it registers with a deployed relay (otherwise its import time and
    # memory are saved).
    import aiohttp

__all__ = [
    "AdminApiError",
    "AdminClient",
    "AdminRequest",
    "Outcome",
    "Retry",
    "backoff_delays",
    "build_request",
    "check_endpoint",
    "interpret_response",
]

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT: Final = 10.0
DEFAULT_ATTEMPTS: Final = 4
_RETRYABLE_STATUS: Final = frozenset({408, 425, 429})
_MAX_RETRY_AFTER: Final = 60.0


class Outcome(enum.StrEnum):
    """What the admin API did."""

    REGISTERED = "registered"
    ALREADY_REGISTERED = "already_registered"
    UNREGISTERED = "unregistered"
    NOT_REGISTERED = "not_registered"
    WINDOW_OPEN = "open"
    WINDOW_CLOSED = "closed"


class AdminApiError(Exception):
    """The request failed for good (or every attempt failed).

    Attributes:
        status: the HTTP status of the last answer, or None when no answer came.
        retryable: True when the failure was transient and the attempts ran out.
    """

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False):
        super().__init__(message)
        self.status = status
        self.retryable = retryable


@dataclass(frozen=True, slots=True)
class AdminRequest:
    """One call to make: ``POST <base>/<path>`` with ``body`` as JSON."""

    operation: str
    path: str
    body: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Retry:
    """The answer was transient; try again (after ``after`` seconds when the server said so)."""

    reason: str
    after: float | None = None
    status: int | None = None


def check_endpoint(base_url: str) -> str:
    """Validate the admin API base URL; return it without a trailing slash.

    Raises:
        ValueError: not ``https://…``, or ``http://`` to a host that is not loopback (the token
            would cross the network in clear).
    """
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    if parts.scheme == "https" and host:
        return base_url.rstrip("/")
    if parts.scheme == "http" and host:
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = host == "localhost"
        if loopback:
            return base_url.rstrip("/")
        raise ValueError(f"the admin API must use https (plain http only to loopback): {host}")
    raise ValueError("the admin API URL must look like https://relay.example.com")


def build_request(
    operation: str, pubkey: str, *, label: str = "", until: int | None = None
) -> AdminRequest:
    """The request for ``operation`` (``register``, ``unregister`` or ``pairing-window``).

    Raises:
        ValueError: an unknown operation, a bad pubkey, or a pairing window without ``until``.
    """
    try:
        hex_key = str(parse_pubkey(pubkey))
    except NostrKeyError as exc:
        raise ValueError(f"invalid pubkey: {exc}") from None
    if operation == "register":
        body: dict[str, Any] = {"pubkey": hex_key}
        if label:
            body["label"] = label
        return AdminRequest(operation, "/api/register-agent", body)
    if operation == "unregister":
        return AdminRequest(operation, "/api/unregister-agent", {"pubkey": hex_key})
    if operation == "pairing-window":
        if until is None or isinstance(until, bool) or not isinstance(until, int):
            raise ValueError("a pairing window needs until (unix seconds)")
        return AdminRequest(operation, "/api/pairing-window", {"pubkey": hex_key, "until": until})
    raise ValueError(f"unknown admin operation {operation!r}")


def _retry_after(value: str | None) -> float | None:
    if value is None or not value.strip().isdigit():
        return None
    return min(float(value.strip()), _MAX_RETRY_AFTER)


def interpret_response(
    request: AdminRequest, status: int, body: bytes, retry_after: str | None = None
) -> Outcome | Retry:
    """What one HTTP answer means.

    Returns:
        The :class:`Outcome` on success, or :class:`Retry` for a transient failure.

    Raises:
        AdminApiError: a failure that retrying would not fix.
    """
    if status in _RETRYABLE_STATUS or status >= 500:
        return Retry(f"HTTP {status}", _retry_after(retry_after), status)
    try:
        data = orjson.loads(body) if body else {}
    except orjson.JSONDecodeError:
        data = {}
    detail = data.get("error") if isinstance(data, dict) else None
    detail_text = f": {str(detail)[:200]}" if detail else ""
    op = request.operation
    if op == "register" and status == 201:
        return Outcome.REGISTERED
    if op == "register" and status == 200:
        return Outcome.ALREADY_REGISTERED
    if op == "unregister" and status == 200:
        return Outcome.UNREGISTERED
    if op == "unregister" and status == 404:
        return Outcome.NOT_REGISTERED
    if op == "pairing-window" and status == 200:
        state = data.get("status") if isinstance(data, dict) else None
        return Outcome.WINDOW_CLOSED if state == "closed" else Outcome.WINDOW_OPEN
    if status == 401:
        raise AdminApiError("the admin API refused the token (HTTP 401)", status=401)
    raise AdminApiError(f"{op} failed with HTTP {status}{detail_text}", status=status)


def backoff_delays(
    attempts: int,
    *,
    base: float = 0.5,
    cap: float = 8.0,
    rng: Callable[[], float] = random.random,
) -> Iterator[float]:
    """The waits between ``attempts`` tries: exponential, capped, with full jitter.

    Yields ``attempts - 1`` delays: ``rng() * min(cap, base * 2**n)`` for n = 0, 1, …
    """
    for n in range(max(0, attempts - 1)):
        yield rng() * min(cap, base * 2**n)


class AdminClient:
    """Calls the admin API with retries (see the module docstring for the rules).

    Args:
        base_url: e.g. ``https://relay.example.com`` (the ``/api/...`` paths are appended).
        token: the admin bearer token.
        timeout: seconds per attempt.
        attempts: tries per call, at least 1.
        session: an ``aiohttp.ClientSession`` to reuse; one is made per call otherwise.
        sleep: how to wait between attempts (tests pass a fake).
        rng: jitter source in [0, 1).
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        attempts: int = DEFAULT_ATTEMPTS,
        session: aiohttp.ClientSession | None = None,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        rng: Callable[[], float] = random.random,
    ) -> None:
        if attempts < 1:
            raise ValueError("attempts must be at least 1")
        if not token or any(ch.isspace() for ch in token):
            raise ValueError("the admin token must be a non-empty string without spaces")
        self._base = check_endpoint(base_url)
        self._token = token
        self._timeout = timeout
        self._attempts = attempts
        self._session = session
        self._sleep = sleep
        self._rng = rng

    def __repr__(self) -> str:
        return f"AdminClient({self._base!r}, token=<redacted>)"

    async def register(self, pubkey: str, *, label: str = "") -> Outcome:
        """Register ``pubkey`` (hex or npub): REGISTERED or ALREADY_REGISTERED."""
        return await self.call(build_request("register", pubkey, label=label))

    async def unregister(self, pubkey: str) -> Outcome:
        """Unregister ``pubkey``: UNREGISTERED or NOT_REGISTERED."""
        return await self.call(build_request("unregister", pubkey))

    async def open_pairing_window(self, bridge_pubkey: str, until: int) -> Outcome:
        """Let unregistered keys send 4515s to ``bridge_pubkey`` until ``until`` (unix s).

        ``until`` in the past closes the window. Returns WINDOW_OPEN or WINDOW_CLOSED.
        """
        return await self.call(build_request("pairing-window", bridge_pubkey, until=until))

    async def call(self, request: AdminRequest) -> Outcome:
        """Perform ``request`` with retries.

        Raises:
            AdminApiError: a permanent failure, or the last transient one when attempts ran out.
        """
        import aiohttp

        delays = backoff_delays(self._attempts, rng=self._rng)
        attempt = 0
        while True:
            attempt += 1
            try:
                result = await self._attempt(request)
            except (aiohttp.ClientError, TimeoutError) as exc:
                result = Retry(type(exc).__name__)
            if not isinstance(result, Retry):
                return result
            delay = next(delays, None)
            if delay is None:
                raise AdminApiError(
                    f"{request.operation} failed after {attempt} attempt(s): {result.reason}",
                    status=result.status,
                    retryable=True,
                )
            if result.after is not None:
                delay = max(delay, result.after)
            logger.info(
                "%s: attempt %d failed (%s); retrying in %.1f s",
                request.operation,
                attempt,
                result.reason,
                delay,
            )
            await self._sleep(delay)

    async def _attempt(self, request: AdminRequest) -> Outcome | Retry:
        import aiohttp

        headers = {
            "Authorization": f"Bearer {self._token}",
            "Content-Type": "application/json",
        }
        timeout = aiohttp.ClientTimeout(total=self._timeout)
        data = orjson.dumps(request.body)
        url = self._base + request.path
        if self._session is not None:
            return await self._post(self._session, url, data, headers, timeout, request)
        async with aiohttp.ClientSession() as session:
            return await self._post(session, url, data, headers, timeout, request)

    @staticmethod
    async def _post(
        session: aiohttp.ClientSession,
        url: str,
        data: bytes,
        headers: dict[str, str],
        timeout: aiohttp.ClientTimeout,
        request: AdminRequest,
    ) -> Outcome | Retry:
        async with session.post(
            url, data=data, headers=headers, timeout=timeout, allow_redirects=False
        ) as response:
            body = await response.content.read(64 * 1024)
            return interpret_response(
                request, response.status, body, response.headers.get("Retry-After")
            )
