"""The bridge's VAPID identity (RFC 8292): a P-256 key, and the signed claim each push carries.

A browser subscribes with the bridge's public key (the heartbeat's ``pushKey``); its push
service then accepts pushes for that subscription only with ``Authorization: vapid t=<JWT>,
k=<public key>``, where the JWT (ES256) names the push service's origin (``aud``), an expiry
within 24 hours (``exp``) and a contact (``sub``). The key is made once and kept in the bridge
database (0600, in the home every agent sandbox hides): a new key would orphan every
subscription.

A token is reused for its push service until an hour before it expires, so a burst of pushes
signs once. The private key never reaches a log line or repr.
"""

from __future__ import annotations

import json
from typing import Final

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from bridge.push.ece import b64url_encode, public_point

__all__ = [
    "DEFAULT_CONTACT",
    "TOKEN_LIFETIME",
    "TOKEN_RENEW_BEFORE",
    "VapidKey",
]

TOKEN_LIFETIME: Final = 12 * 3600
"""Seconds a token is valid (RFC 8292 §2: at most 24 hours)."""
TOKEN_RENEW_BEFORE: Final = 3600
"""A cached token is replaced this long before it expires (clocks of push services drift)."""
DEFAULT_CONTACT: Final = "mailto:codedeck-bridge@users.noreply.github.com"
"""The ``sub`` claim: push services ask for a contact; this bridge has no operator address."""


class VapidKey:
    """The bridge's VAPID key and its cached tokens.

    Args:
        private: the P-256 private key.
        contact: the ``sub`` claim (``mailto:`` or ``https:``).
    """

    def __init__(self, private: ec.EllipticCurvePrivateKey, contact: str = DEFAULT_CONTACT) -> None:
        self._private = private
        self._contact = contact
        self.public_bytes = public_point(private.public_key())
        self.public_key = b64url_encode(self.public_bytes)
        """The heartbeat's ``pushKey`` and the ``k`` of every Authorization header."""
        self._tokens: dict[str, tuple[str, int]] = {}

    def __repr__(self) -> str:
        return f"VapidKey({self.public_key[:12]}…)"

    @classmethod
    def generate(cls) -> VapidKey:
        return cls(ec.generate_private_key(ec.SECP256R1()))

    @classmethod
    def from_private_bytes(cls, secret: bytes, contact: str = DEFAULT_CONTACT) -> VapidKey:
        """The key from its 32-byte scalar (as stored).

        Raises:
            ValueError: not a valid P-256 scalar (the message does not quote it).
        """
        if len(secret) != 32:
            raise ValueError("a VAPID private key is 32 bytes")
        try:
            private = ec.derive_private_key(int.from_bytes(secret, "big"), ec.SECP256R1())
        except ValueError:
            raise ValueError("not a valid P-256 private key") from None
        return cls(private, contact)

    def private_bytes(self) -> bytes:
        """The 32-byte scalar, to store (never log it)."""
        return self._private.private_numbers().private_value.to_bytes(32, "big")

    def authorization(self, audience: str, now: float) -> str:
        """The ``Authorization`` header for a push service origin (``https://host[:port]``)."""
        cached = self._tokens.get(audience)
        if cached is not None and cached[1] - TOKEN_RENEW_BEFORE > now:
            token = cached[0]
        else:
            expires = int(now) + TOKEN_LIFETIME
            token = self._sign({"aud": audience, "exp": expires, "sub": self._contact})
            self._tokens[audience] = (token, expires)
        return f"vapid t={token}, k={self.public_key}"

    def _sign(self, claims: dict[str, object]) -> str:
        header = b64url_encode(json.dumps({"typ": "JWT", "alg": "ES256"}).encode())
        body = b64url_encode(json.dumps(claims, separators=(",", ":")).encode())
        signing_input = f"{header}.{body}".encode("ascii")
        der = self._private.sign(signing_input, ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
        return f"{header}.{body}.{b64url_encode(signature)}"
