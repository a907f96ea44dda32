"""Can a phone reach the relays a pairing link names? If not, what ``pair`` tells the user.

Why here: with no relay configured the bridge serves its embedded relay on ``127.0.0.1:7777``,
so a first ``make run`` then ``pair`` prints a QR code whose only relay is on this machine. The
phone scans it and nothing happens, and nothing said why. ``doctor`` warns, but ``pair`` is
where the user looks, so ``pair`` says it on stderr (stdout keeps the QR code and the link).

A relay counts as unreachable when its host is a loopback address (``127.0.0.0/8``, ``::1``,
``localhost``) or the unspecified one (``0.0.0.0``, ``::``, which nobody can dial). The warning
is given only when *every* relay of the link is such a one: with one reachable relay the phone
pairs through it. Host names are not resolved (a name may mean something else on the phone's
network, and resolving would make ``pair`` wait on DNS); an IP address on the LAN or a public
name are taken as reachable, which they are from a phone on that network.

The advice names the fix that applies. When the unreachable relay is the embedded one: serve it
on every address (``--embedded-relay 0.0.0.0:PORT``) and open the firewall port; with the
machine's LAN address, the address phones will dial then. Otherwise (a relay configured on
``localhost``), or as the other way: a relay both can reach, with ``--relay`` or ``relays`` in
``config.toml``. Pure: the LAN address is an argument (the caller asks the kernel).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from urllib.parse import urlsplit

__all__ = ["is_local_only", "unreachable_relays_advice"]

_DEFAULT_PORT = 7777


def is_local_only(url: str) -> bool:
    """True when no other machine can dial `url` (loopback or unspecified host)."""
    host = urlsplit(url).hostname
    if host is None:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def unreachable_relays_advice(
    relays: Sequence[str], *, embedded_url: str | None, lan: str | None
) -> str | None:
    """The warning for a pairing link no phone can use, or None when a phone can.

    Args:
        relays: the link's relays.
        embedded_url: the URL the daemon announces for its embedded relay, when it serves one.
        lan: this machine's LAN address (``lan_address()``), None if it has none.

    Returns:
        Lines for stderr (no trailing newline), or None.
    """
    if not relays or not all(is_local_only(url) for url in relays):
        return None
    many = len(relays) > 1
    lines = [
        f"codedeck-bridge: warning: no phone can reach {', '.join(relays)}, the "
        f"{'relays' if many else 'only relay'} of this pairing link "
        f"({'they listen' if many else 'it listens'} on this machine only)."
    ]
    relay_fix = [
        "a relay both the phone and this machine can reach: --relay wss://… (repeatable) or",
        '  relays = ["wss://…"] in config.toml, then pair again.',
    ]
    if embedded_url is None or embedded_url not in relays:
        return "\n".join([*lines, f"  Use {relay_fix[0]}", relay_fix[1]])
    port = urlsplit(embedded_url).port or _DEFAULT_PORT
    scheme = urlsplit(embedded_url).scheme or "ws"
    flag = f"--embedded-relay 0.0.0.0:{port}"
    lines += [
        "  To pair a phone on your LAN, serve the embedded relay on every address: stop the bridge",
        "  and run",
        f'      make run ARGS="{flag}"',
        f'  (or: codedeck-bridge run {flag}; or embedded_relay = "0.0.0.0:{port}" in',
        f"  config.toml), let TCP {port} through the firewall (e.g. `sudo ufw allow {port}/tcp`)",
        "  and run `codedeck-bridge pair` again.",
        f"  This machine's LAN address is {lan}: phones will dial {scheme}://{lan}:{port}."
        if lan is not None
        else "  This machine has no LAN address now: connect it to the phone's network first.",
        f"  Or use {relay_fix[0]}",
        relay_fix[1],
    ]
    return "\n".join(lines)
