"""The provider base-URL rule (PROTOCOL-v10-wire.md §4.6, CDX-062).

A custom provider profile points a session's Anthropic client at another backend and hands it the
profile's auth token, so a plain-http URL would send that token in clear text. The rule:

- ``https:`` is always fine;
- ``http:`` only for a loopback host spelled exactly ``localhost``, ``127.0.0.1`` or ``[::1]``
  (``0.0.0.0`` and ``*.localhost`` are rejected; ``[::1]`` may be written in any IPv6 spelling);
- any other scheme, or a value that does not parse as a URL, is rejected.

The reference parses with WHATWG ``new URL()``. This module follows it where it matters (scheme and
host are case-insensitive; leading/trailing spaces and C0 controls are ignored; tabs and newlines
inside are removed) and is stricter where WHATWG would rewrite the host: numeric shorthands such as
``http://0x7f.1`` or a trailing dot are simply refused, which can only turn a would-be-accepted
insecure URL into an error, never the reverse.

The rule applies on *write* (``set-provider-profile``, in both encode and decode). The read shape
(``ProviderProfileInfo``) does not check it, so a legacy insecure profile can still be listed and
fixed.
"""

from __future__ import annotations

import ipaddress
from typing import Final
from urllib.parse import urlsplit

__all__ = ["BASE_URL_ERROR", "base_url_allowed"]

BASE_URL_ERROR: Final = (
    "Base URL must be https:// (http:// is allowed only for localhost, 127.0.0.1 or [::1])"
)
"""The exact error text both sides use (PROTOCOL-v10-wire.md §4.6)."""

_LOOPBACK_HOSTS: Final = frozenset({"localhost", "127.0.0.1"})
_IPV6_LOOPBACK: Final = ipaddress.IPv6Address("::1")
# WHATWG "forbidden host code points" (plus space), for hosts that are not IPv6 literals.
_FORBIDDEN_HOST_CHARS: Final = frozenset(" #%/:<>?@[\\]^|")
_STRIPPED: Final = "".join(chr(code) for code in range(0x21))


def base_url_allowed(value: str) -> bool:
    """Tell whether ``value`` passes the base-URL rule.

    Args:
        value: The ``baseUrl`` of a profile write.

    Returns:
        True when the URL is https, or http to an allowed loopback host.
    """
    cleaned = value.strip(_STRIPPED).replace("\t", "").replace("\n", "").replace("\r", "")
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in cleaned):
        return False
    try:
        parts = urlsplit(cleaned)
        parts.port  # noqa: B018 - raises ValueError for a port that is not 0-65535
    except ValueError:
        return False
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http") or not cleaned[len(scheme) + 1 :].startswith("//"):
        return False
    host = parts.hostname
    if not host:
        return False
    # `hostname` is lower-cased and unbracketed; a ':' means an IPv6 literal.
    if ":" in host:
        try:
            address = ipaddress.IPv6Address(host)
        except ValueError:
            return False
        return scheme == "https" or address == _IPV6_LOOPBACK
    if any(char in _FORBIDDEN_HOST_CHARS for char in host):
        return False
    return scheme == "https" or host in _LOOPBACK_HOSTS
