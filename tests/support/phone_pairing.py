"""The CodeDeck pairing URL, as the phone reads it from the bridge's QR code (wire spec §1.5).

``codedeck://pair?npub=<bridge npub>&relays=<r1>,<r2>,…&machine=<name>&token=<token>``
``[&netid=<id>&meshadmin=<npub>]``

Each relay URL is ``encodeURIComponent``-encoded and the results are joined by a *literal* ``,``
(an encoded relay URL never contains a raw comma, since ``encodeURIComponent`` writes ``%2C``), so
the phone splits on ``,`` first and decodes each piece afterwards. ``machine`` and ``token`` are
encoded the same way; the ``npub`` is inserted raw. Unknown parameters are ignored (a newer bridge
may add some); a parameter given twice is an error, since there is no way to know which one the
bridge meant.

The token is a secret for the length of the pairing window: it never appears in a ``repr`` or in
an error message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import quote, unquote, urlsplit

from bridge.nostr.keys import NostrKeyError, PubKeyHex, npub_to_hex

__all__ = [
    "PAIRING_SCHEME",
    "PairingInfo",
    "PairingUrlError",
    "build_pairing_url",
    "parse_pairing_url",
]

PAIRING_SCHEME = "codedeck"
_PAIRING_HOST = "pair"
# encodeURIComponent leaves A-Z a-z 0-9 - _ . ! ~ * ' ( ) as they are; quote() always keeps the
# first seven, so these are the extra ones.
_URI_COMPONENT_SAFE = "!~*'()"


class PairingUrlError(ValueError):
    """A pairing URL that the phone cannot use. The message never contains the token."""


@dataclass(frozen=True, slots=True)
class PairingInfo:
    """What a pairing URL tells the phone."""

    npub: str
    bridge_pubkey: PubKeyHex
    relays: tuple[str, ...]
    machine: str
    token: str = field(repr=False)
    netid: str | None = None
    meshadmin: str | None = None


def _encode(value: str) -> str:
    return quote(value, safe=_URI_COMPONENT_SAFE)


def build_pairing_url(
    npub: str,
    relays: Sequence[str],
    machine: str,
    token: str,
    *,
    netid: str | None = None,
    meshadmin: str | None = None,
) -> str:
    """Write a pairing URL exactly as the bridge does (for tests and the fake bridge).

    Raises:
        PairingUrlError: no relay given.
    """
    if not relays:
        raise PairingUrlError("a pairing URL needs at least one relay")
    url = (
        f"{PAIRING_SCHEME}://{_PAIRING_HOST}?npub={npub}"
        f"&relays={','.join(_encode(relay) for relay in relays)}"
        f"&machine={_encode(machine)}&token={_encode(token)}"
    )
    if netid is not None:
        url += f"&netid={_encode(netid)}"
    if meshadmin is not None:
        url += f"&meshadmin={meshadmin}"
    return url


def _query_params(query: str) -> dict[str, str]:
    """Split ``a=1&b=2`` into raw (still encoded) values; a repeated name is an error."""
    params: dict[str, str] = {}
    for item in query.split("&"):
        if not item:
            continue
        name, sep, value = item.partition("=")
        if not sep:
            raise PairingUrlError(f"parameter {name[:32]!r} has no value")
        if name in params:
            raise PairingUrlError(f"parameter {name[:32]!r} is given twice")
        params[name] = value
    return params


def _relay_list(raw: str) -> tuple[str, ...]:
    relays: list[str] = []
    for piece in raw.split(","):
        relay = unquote(piece).strip()
        if not relay:
            raise PairingUrlError("the relays list has an empty entry")
        parts = urlsplit(relay)
        if parts.scheme not in ("ws", "wss") or not parts.netloc:
            raise PairingUrlError(f"relay {relay[:80]!r} is not a ws:// or wss:// URL")
        if relay not in relays:
            relays.append(relay)
    return tuple(relays)


def parse_pairing_url(url: str) -> PairingInfo:
    """Read a ``codedeck://pair?…`` URL.

    Raises:
        PairingUrlError: wrong scheme or host, a missing or empty parameter, an invalid npub
            (e.g. an nsec), or a relay that is not a websocket URL. The token is never quoted.
    """
    if not isinstance(url, str):
        raise PairingUrlError(f"expected a pairing URL string, got {type(url).__name__}")
    parts = urlsplit(url.strip())
    if (
        parts.scheme != PAIRING_SCHEME
        or parts.netloc != _PAIRING_HOST
        or parts.path not in ("", "/")
    ):
        raise PairingUrlError(f"not a pairing URL: expected {PAIRING_SCHEME}://{_PAIRING_HOST}?…")
    params = _query_params(parts.query)
    for name in ("npub", "relays", "machine", "token"):
        if not params.get(name):
            raise PairingUrlError(f"the pairing URL has no {name}")
    npub = unquote(params["npub"]).strip()
    try:
        bridge_pubkey = npub_to_hex(npub)
    except NostrKeyError as exc:
        raise PairingUrlError(f"the pairing URL's npub is invalid: {exc}") from None
    machine = unquote(params["machine"])
    token = unquote(params["token"])
    if not machine.strip():
        raise PairingUrlError("the pairing URL has no machine")
    if not token.strip():
        raise PairingUrlError("the pairing URL has no token")
    netid = params.get("netid")
    meshadmin = params.get("meshadmin")
    return PairingInfo(
        npub=npub,
        bridge_pubkey=bridge_pubkey,
        relays=_relay_list(params["relays"]),
        machine=machine,
        token=token,
        netid=unquote(netid) if netid is not None else None,
        meshadmin=unquote(meshadmin) if meshadmin is not None else None,
    )
