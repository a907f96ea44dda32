"""Text the CLI prints from the daemon's answers: status, phones, the pairing QR code.

Empty lists read as one line (``sessions: none; …``) rather than a heading with nothing under it.
``status`` also shows each session's host (``host pid N`` or ``no host running``) and how many
session hosts run under the home, when the daemon reports them (control protocol 1.1).

Everything shown here came from the daemon, and parts of it from phones (a phone chooses its
own label). Terminal text is an attack surface — an escape sequence in a label could rewrite the
screen or the title bar, a bidi override could disguise an npub — so every string goes through
`safe_text`, which replaces control and bidi-formatting characters. Results are read tolerantly
(a missing or mistyped field prints as ``?``), because a newer daemon may add or change fields
and ``status`` must still print what it can.
"""

from __future__ import annotations

import io
import ipaddress
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final, TextIO
from urllib.parse import urlsplit

from bridge.control.methods import parse_timestamp
from bridge.control.terminal_text import safe_text

__all__ = [
    "format_duration",
    "format_moment",
    "render_phones",
    "render_qr",
    "render_status",
    "render_web_pair",
    "safe_text",
]

_BLOCKS: Final = "█▀▄"


def format_duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``3 h 05 min``, ``2 d 4 h`` (for ages and uptimes)."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes:02d} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h"


def format_moment(value: object, *, now: float | None = None) -> str:
    """A result timestamp as local time with its age, e.g. ``2025-01-31 12:00:00 (5 min ago)``."""
    moment = parse_timestamp(value)
    if moment is None:
        return "never" if value is None else "?"
    now = time.time() if now is None else now
    local = datetime.fromtimestamp(moment).strftime("%Y-%m-%d %H:%M:%S")
    age = now - moment
    return f"{local} ({format_duration(age)} ago)" if age >= 0 else local


def _items(value: Any) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def render_phones(phones: Sequence[Any]) -> list[str]:
    """One line per paired phone: label, npub, when it was paired."""
    lines = []
    for phone in _items(list(phones)):
        label = safe_text(phone.get("label") or "Phone", limit=40)
        paired = format_moment(phone.get("pairedAt")) if phone.get("pairedAt") else "?"
        lines.append(f"{label}  {safe_text(phone.get('npub'))}  paired {paired}")
    return lines


def _host_text(host: Any) -> str:
    """``  host pid 4242`` / ``  no host running``; nothing from a daemon that does not say."""
    if not isinstance(host, Mapping):
        return ""
    if host.get("alive") is True:
        return f"  host pid {safe_text(host.get('pid'))}"
    return "  no host running"


def render_status(status: Mapping[str, Any], *, now: float | None = None) -> list[str]:
    """The human-readable ``status`` report of a running daemon."""
    now = time.time() if now is None else now
    started = parse_timestamp(status.get("startedAt"))
    uptime = f", up {format_duration(now - started)}" if started is not None else ""
    lines = [
        f"codedeck-bridge {safe_text(status.get('version'))} is running "
        f"(pid {safe_text(status.get('pid'))}{uptime})",
        f"  home:     {safe_text(status.get('home'), limit=400)}",
        f"  npub:     {safe_text(status.get('npub'))}",
        f"  machine:  {safe_text(status.get('machine'))}",
    ]
    if status.get("embeddedRelay"):
        lines.append(f"  embedded relay: {safe_text(status.get('embeddedRelay'))}")
    relays = _items(status.get("relays"))
    lines.append(f"  relays ({len(relays)}):" if relays else "  relays: none")
    for relay in relays:
        line = f"    {safe_text(relay.get('url'))}  {safe_text(relay.get('state'))}"
        if relay.get("lastEventAt"):
            line += f", last event {format_moment(relay.get('lastEventAt'), now=now)}"
        if relay.get("lastError"):
            line += f", last error: {safe_text(relay.get('lastError'))}"
        lines.append(line)
    phones = _items(status.get("phones"))
    if phones:
        lines.append(f"  paired phones ({len(phones)}):")
        lines.extend(f"    {line}" for line in render_phones(phones))
    else:
        lines.append("  paired phones: none; run `codedeck-bridge pair` to pair one")
    sessions = _items(status.get("sessions"))
    lines.append(
        f"  sessions ({len(sessions)}):"
        if sessions
        else "  sessions: none; start one from the CodeDeck app"
    )
    for session in sessions:
        line = f"    {safe_text(session.get('sessionId'))}  {safe_text(session.get('state'))}"
        if session.get("title"):
            line += f"  {safe_text(session.get('title'), limit=80)}"
        if session.get("cwd"):
            line += f"  in {safe_text(session.get('cwd'), limit=200)}"
        line += _host_text(session.get("host"))
        lines.append(line)
    hosts = status.get("hosts")
    if isinstance(hosts, Mapping):
        lines.append(f"  session hosts: {safe_text(hosts.get('running'))} running")
    if status.get("sandbox"):
        lines.append(f"  sandbox: {safe_text(status.get('sandbox'), limit=400)}")
    lines.append(f"  last command: {format_moment(status.get('lastCommandAt'), now=now)}")
    return lines


def render_qr(url: str, out: TextIO) -> str:
    """The terminal QR code of ``url`` (error level L: the smallest code, shown on a screen).

    Half-block characters draw two module rows per text line, so the code stays small enough to
    fit a terminal; when the output encoding cannot carry them, segno's ANSI-colour form is used.

    Raises:
        ValueError: the URL is too long for any QR code.
    """
    import segno  # only for `pair`: the daemon imports this package at every start

    try:
        code = segno.make(url, error="L", micro=False)
    except segno.DataOverflowError:
        raise ValueError("the pairing link is too long for a QR code; paste the link") from None
    encoding = getattr(out, "encoding", None) or "utf-8"
    try:
        _BLOCKS.encode(encoding)
        compact = True
    except (LookupError, UnicodeEncodeError):
        compact = False
    buffer = io.StringIO()
    code.terminal(out=buffer, compact=compact)
    return buffer.getvalue()


WEB_ELSEWHERE: Final = (
    "CodeDeck Web (for phones without the app): this bridge uses the relays configured for it "
    "and serves no page of its own; host the web client over HTTPS to use it with them and set "
    "web_client_url to its address (deploy/web/README.md)."
)


def _secure_context(url: str) -> bool:
    """Whether a browser treats a page at ``url`` as a secure context: https://, or a loopback
    host (service worker, push and camera work only in one)."""
    parts = urlsplit(url)
    if parts.scheme == "https":
        return True
    host = parts.hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def render_web_pair(web_url: str | None, out: TextIO) -> str:
    """The CodeDeck Web part of ``pair``'s output: the link's QR code (a phone's camera app opens
    it), the link, and on a plain-http LAN link the one line saying what the page cannot do
    there. Without a link, where the web client can live instead."""
    if not web_url:
        return WEB_ELSEWHERE + "\n"
    url = safe_text(web_url, limit=4000)
    parts = [
        "Or, without the app: point the phone's camera at this QR code to open CodeDeck Web in "
        "its browser (or open the link):\n\n"
    ]
    try:
        parts.append(render_qr(url, out))
    except ValueError as exc:
        parts.append(f"({exc})\n")
    parts.append(f"\n{url}\n")
    if not _secure_context(url):
        parts.append(
            "Plain http:// on a LAN address is not a secure context: the page works while it is "
            "open, but cannot get push notifications (embedded_relay_cert/embedded_relay_key "
            "give https://; deploy/web/README.md hosts it over HTTPS).\n"
        )
    parts.append("\n")
    return "".join(parts)
