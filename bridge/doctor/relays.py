"""Doctor checks over the network: each relay (connect, REQ, EOSE), the LAN relay, the clock.

A probe opens one websocket, sends one ``REQ`` for the ten newest events of any kind, waits for
``EOSE`` (or ``CLOSED``), sends ``CLOSE`` and hangs up. It publishes nothing and signs nothing.
It measures the connect time (TCP + TLS + websocket handshake) and the REQ→EOSE round trip.

Clock skew. NIP-40 expirations and the 300 s staleness rule compare our clock with the phone's
and the relay's, and the project's relay refuses a command or reply whose expiration is more
than 3600 s after *its* clock, so a bridge clock ahead of the relay's gets its replies refused.
The check reads the ``Date`` header of the relay's websocket handshake (HTTP, one-second
resolution; most relays and every reverse proxy send one): the skew is our clock at the middle of
the handshake minus that date, give or take half the handshake plus one second. Above
`SKEW_WARN` it warns, above `SKEW_FAIL` it fails. A relay that sends no ``Date`` (rust-nostr's
relay, the embedded one) gives only a hint: an event dated more than `FUTURE_HINT` seconds ahead
of our clock means ours is probably behind (relays accept events dated a little ahead, strfry up to
900 s, so this is a warning, never a failure).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import ipaddress
import os
import socket
import time
from collections.abc import Sequence
from typing import Final

from websockets.asyncio.client import connect
from websockets.exceptions import InvalidHandshake, InvalidStatus, InvalidURI, WebSocketException

from bridge.doctor.model import Check, Status
from bridge.nostr.event import InvalidEventError, check_event
from bridge.nostr.filters import Filter
from bridge.nostr.messages import (
    MAX_MESSAGE_SIZE,
    ClosedMessage,
    CloseMessage,
    EoseMessage,
    EventMessage,
    RelayMessageError,
    ReqMessage,
    parse_relay_message,
    serialize_client_message,
)
from bridge.records import record

__all__ = [
    "FUTURE_HINT",
    "SKEW_FAIL",
    "SKEW_WARN",
    "RelayProbe",
    "check_clock",
    "check_lan",
    "check_relay",
    "probe_relay",
]

SKEW_WARN: Final = 2.0
SKEW_FAIL: Final = 30.0
FUTURE_HINT: Final = 60.0
_PROBE_LIMIT: Final = 10


@record
class RelayProbe:
    """What one probe found.

    Attributes:
        url: the relay.
        error: why it failed (None when the relay answered the REQ).
        fix: what to do about `error`.
        connect_ms / eose_ms: handshake time and REQ→EOSE round trip, in milliseconds.
        closed: the relay's CLOSED message when it refused the REQ (e.g. ``auth-required: …``).
        skew: our clock minus the relay's ``Date``, in seconds (None without a Date header).
        skew_margin: the uncertainty of `skew` (half the handshake + 1 s of Date resolution).
        newest_ahead: how far the newest event's ``created_at`` is ahead of our clock, if known.
    """

    url: str
    error: str | None = None
    fix: str | None = None
    connect_ms: float | None = None
    eose_ms: float | None = None
    closed: str | None = None
    skew: float | None = None
    skew_margin: float | None = None
    newest_ahead: float | None = None


def _failure(url: str, exc: BaseException, timeout: float) -> RelayProbe:
    if isinstance(exc, TimeoutError):
        return RelayProbe(
            url,
            f"no answer within {timeout:g} s",
            "check that the relay is up and the URL right; a firewall may drop the traffic",
        )
    if isinstance(exc, InvalidURI):
        return RelayProbe(url, "not a valid websocket URL", "use ws://host:port or wss://host")
    if isinstance(exc, InvalidStatus):
        code = exc.response.status_code
        return RelayProbe(
            url,
            f"the server answered HTTP {code} instead of a websocket",
            "this URL is not a Nostr relay endpoint (check the path and the scheme)",
        )
    if isinstance(exc, ConnectionRefusedError):
        return RelayProbe(
            url, "connection refused", "the relay is not running on that host and port"
        )
    if isinstance(exc, socket.gaierror):
        return RelayProbe(
            url, f"cannot resolve the host ({exc.strerror})", "check the host name and your DNS"
        )
    if isinstance(exc, OSError) and "CERTIFICATE" in str(exc).upper():
        return RelayProbe(
            url,
            "TLS certificate not accepted",
            "the relay's certificate is invalid or self-signed; fix it or use another relay",
        )
    if isinstance(exc, OSError):
        return RelayProbe(
            url, f"cannot connect ({exc.strerror or exc})", "check the URL and your network"
        )
    if isinstance(exc, InvalidHandshake | WebSocketException):
        return RelayProbe(url, f"websocket handshake failed ({exc})", "check the URL")
    return RelayProbe(url, f"failed ({type(exc).__name__})", "check the URL and your network")


def _skew(date_header: str | None, local_before: float, local_after: float) -> tuple[float, float]:
    if not date_header:
        raise ValueError("no Date header")
    moment = email.utils.parsedate_to_datetime(date_header)
    middle = (local_before + local_after) / 2
    return middle - moment.timestamp(), (local_after - local_before) / 2 + 1.0


async def probe_relay(url: str, *, timeout: float = 5.0) -> RelayProbe:
    """Connect, REQ, wait for EOSE, close (see the module docstring). Never raises for the relay.

    Cancel-safe: the websocket is closed on the way out.
    """
    subscription = f"doctor-{os.urandom(4).hex()}"
    started = time.monotonic()
    wall_before = time.time()
    try:
        async with asyncio.timeout(timeout):
            ws = await connect(
                url,
                open_timeout=timeout,
                max_size=4 * MAX_MESSAGE_SIZE,
                ping_interval=None,
                user_agent_header=None,
                close_timeout=1.0,
            )
    except (TimeoutError, OSError, WebSocketException, ValueError) as exc:
        return _failure(url, exc, timeout)
    connected = time.monotonic()
    wall_after = time.time()
    skew: float | None = None
    margin: float | None = None
    date = ws.response.headers.get("Date") if ws.response is not None else None
    with contextlib.suppress(ValueError, TypeError, IndexError, OverflowError):
        skew, margin = _skew(date, wall_before, wall_after)
    closed: str | None = None
    newest: int | None = None
    try:
        async with asyncio.timeout(timeout):
            request = ReqMessage(subscription, (Filter(limit=_PROBE_LIMIT),))
            await ws.send(serialize_client_message(request))
            sent = time.monotonic()
            while True:
                frame = await ws.recv()
                try:
                    message = parse_relay_message(frame)
                except RelayMessageError:
                    continue  # not ours to judge here; a broken frame is the relay check's tail
                if isinstance(message, EventMessage) and message.subscription_id == subscription:
                    try:
                        event = check_event(message.event)
                    except InvalidEventError:
                        continue
                    newest = max(newest or 0, event.created_at)
                elif isinstance(message, EoseMessage) and message.subscription_id == subscription:
                    break
                elif isinstance(message, ClosedMessage) and message.subscription_id == subscription:
                    closed = message.message
                    break
            answered = time.monotonic()
            if closed is None:
                await ws.send(serialize_client_message(CloseMessage(subscription)))
    except TimeoutError:
        await ws.close()
        return RelayProbe(
            url,
            f"connected, but no EOSE within {timeout:g} s of the REQ",
            "the relay is overloaded or not a Nostr relay",
            connect_ms=(connected - started) * 1000,
            skew=skew,
            skew_margin=margin,
        )
    except (OSError, WebSocketException) as exc:
        await ws.close()
        return RelayProbe(
            url,
            f"the connection broke after the REQ ({type(exc).__name__})",
            "the relay dropped us; check its logs or try another relay",
            connect_ms=(connected - started) * 1000,
        )
    await ws.close()
    return RelayProbe(
        url,
        connect_ms=(connected - started) * 1000,
        eose_ms=(answered - sent) * 1000,
        closed=closed,
        skew=skew,
        skew_margin=margin,
        newest_ahead=None if newest is None else newest - time.time(),
    )


def check_relay(probe: RelayProbe, *, label: str = "relay") -> Check:
    """The report line of one probe."""
    details: dict[str, object] = {"url": probe.url}
    if probe.connect_ms is not None:
        details["connectMs"] = round(probe.connect_ms, 1)
    if probe.eose_ms is not None:
        details["eoseMs"] = round(probe.eose_ms, 1)
    if probe.error is not None:
        return Check(label, Status.FAIL, f"{probe.url}: {probe.error}", probe.fix, details)
    assert probe.connect_ms is not None and probe.eose_ms is not None
    timing = f"connect {probe.connect_ms:.0f} ms, REQ→EOSE {probe.eose_ms:.0f} ms"
    if probe.closed is not None:
        details["closed"] = probe.closed
        if probe.closed.startswith("auth-required:"):
            return Check(
                label,
                Status.PASS,
                f"{probe.url}: reachable ({timing}); reading needs NIP-42 AUTH, which the bridge "
                "answers with its key",
                details=details,
            )
        return Check(
            label,
            Status.WARN,
            f"{probe.url}: reachable ({timing}) but it refused the REQ: {probe.closed[:120]}",
            "the relay may not let this bridge read; check its policy or use another relay",
            details,
        )
    return Check(label, Status.PASS, f"{probe.url}: reachable ({timing})", details=details)


def check_clock(probes: Sequence[RelayProbe]) -> Check:
    """Our clock against the first relay that sent a ``Date`` header (or the event hint)."""
    dated = [p for p in probes if p.skew is not None and p.skew_margin is not None]
    if dated:
        probe = dated[0]
        assert probe.skew is not None and probe.skew_margin is not None
        skew, margin = probe.skew, probe.skew_margin
        details = {
            "relay": probe.url,
            "skewSeconds": round(skew, 1),
            "marginSeconds": round(margin, 1),
        }
        direction = "ahead of" if skew > 0 else "behind"
        beyond = abs(skew) - margin
        text = f"{abs(skew):.1f} s {direction} {probe.url} (±{margin:.1f} s, from its Date header)"
        fix = (
            "synchronise the clock (`timedatectl set-ntp true`, or install chrony/ntpd): commands "
            "and replies expire by the clock (NIP-40) and relays refuse what looks expired"
        )
        if beyond > SKEW_FAIL:
            return Check("clock", Status.FAIL, text, fix, details)
        if beyond > SKEW_WARN:
            return Check("clock", Status.WARN, text, fix, details)
        return Check(
            "clock", Status.PASS, f"in step with {probe.url} (±{margin:.1f} s)", None, details
        )
    ahead = [p for p in probes if p.newest_ahead is not None and p.newest_ahead > FUTURE_HINT]
    if ahead:
        probe = ahead[0]
        assert probe.newest_ahead is not None
        return Check(
            "clock",
            Status.WARN,
            f"{probe.url} holds an event dated {probe.newest_ahead:.0f} s after our clock: "
            "this clock is probably behind (the relay sent no Date header to compare with)",
            "check the clock (`timedatectl`); enable NTP if it is off",
            {"relay": probe.url, "newestAheadSeconds": round(probe.newest_ahead, 1)},
        )
    reachable = [p for p in probes if p.error is None]
    reason = (
        "no relay sent a Date header to compare with, and no event contradicts the clock"
        if reachable
        else "no relay was reachable to compare with"
    )
    return Check("clock", Status.SKIP, reason)


async def check_lan(
    host: str, port: int, *, daemon_running: bool, timeout: float = 3.0, scheme: str = "ws"
) -> Check:
    """Where the embedded relay listens, and whether the address phones dial accepts connections.

    Args:
        host: the bind address (``0.0.0.0`` means every address: phones dial the LAN address);
            for a running daemon, pass the host of the URL it announces, which is that address.
        port: the port.
        daemon_running: the relay runs inside the daemon; without it there is nothing to dial.
        scheme: ``wss`` when the relay speaks TLS (a certificate is configured), else ``ws``.
    """
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    bind = {"bind": f"{host}:{port}"}
    if host == "localhost" or (address is not None and address.is_loopback):
        return Check(
            "lan",
            Status.WARN,
            f"the embedded relay listens on {host}:{port}, this machine only: a phone cannot "
            "reach it",
            'to pair a phone on your LAN set embedded_relay = "0.0.0.0:7777" (config.toml or '
            "--embedded-relay), or configure relays",
            bind,
        )
    dial = host
    if address is not None and address.is_unspecified:
        # Imported here: the embedded relay module loads nostr-sdk, which every other command of
        # the CLI would otherwise pay for at start-up.
        from bridge.runtime.edges.embedded_relay import lan_address

        lan = lan_address()
        if lan is None:
            return Check(
                "lan",
                Status.FAIL,
                "the embedded relay listens on every address, but this machine has no LAN address",
                "connect the machine to the network the phone is on (or configure a public relay)",
                bind,
            )
        dial = lan
    details = {**bind, "lan": dial}
    if not daemon_running:
        return Check(
            "lan",
            Status.SKIP,
            f"phones will dial {scheme}://{dial}:{port}; the relay runs inside the daemon, which is not "
            "running (start it and run doctor again)",
            details=details,
        )
    try:
        async with asyncio.timeout(timeout):
            _, writer = await asyncio.open_connection(dial, port)
        writer.close()
        await writer.wait_closed()
    except (OSError, TimeoutError) as exc:
        return Check(
            "lan",
            Status.FAIL,
            f"{scheme}://{dial}:{port} does not accept connections ({type(exc).__name__})",
            f"check --embedded-relay and that nothing else holds port {port}",
            details,
        )
    return Check(
        "lan",
        Status.PASS,
        f"the embedded relay answers on {scheme}://{dial}:{port}, the address phones dial (a firewall "
        f"between the phone and this machine must let TCP {port} through, e.g. "
        f"`sudo ufw allow {port}/tcp`)",
        details=details,
    )
