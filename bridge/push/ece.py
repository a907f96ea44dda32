"""Message encryption for Web Push: RFC 8291 over the ``aes128gcm`` content coding of RFC 8188.

Only the push subscription's browser can read a push: the body is encrypted to the P-256 key of
the subscription (``p256dh``) with its 16-byte ``auth`` secret, under a fresh ephemeral key and
salt per message. The push service sees the ciphertext only. A push is one record (the payload
is a few dozen bytes), so this module writes exactly one record of at most
:data:`RECORD_SIZE` bytes; the RFC's test vector pins the bytes (tests/push).

Steps (RFC 8291 §3.4, RFC 8188 §2):

- ``ecdh_secret = ECDH(as_private, ua_public)``;
- ``IKM = HKDF(salt=auth_secret, ikm=ecdh_secret, info="WebPush: info" 0x00 ua_public as_public,
  L=32)``;
- ``PRK = HMAC-SHA-256(salt, IKM)``; ``CEK = HKDF-Expand(PRK, "Content-Encoding: aes128gcm" 0x00,
  16)``; ``NONCE = HKDF-Expand(PRK, "Content-Encoding: nonce" 0x00, 12)``;
- body = ``salt(16) || rs(4, big-endian) || idlen(1) || as_public(65) || AES-128-GCM(CEK, NONCE,
  plaintext || 0x02)`` (0x02: the last record's delimiter, no padding).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import struct
from typing import Final

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

__all__ = [
    "AUTH_SECRET_LENGTH",
    "RECORD_SIZE",
    "PushKeyError",
    "b64url_decode",
    "b64url_encode",
    "encrypt",
    "public_point",
]

RECORD_SIZE: Final = 4096
AUTH_SECRET_LENGTH: Final = 16
_SALT_LENGTH: Final = 16
_POINT_LENGTH: Final = 65
_TAG_LENGTH: Final = 16
_LAST_RECORD: Final = b"\x02"


class PushKeyError(ValueError):
    """A subscription's key or auth secret is not usable (the message never quotes it)."""


def b64url_encode(data: bytes) -> str:
    """base64url without padding, as browsers and VAPID write keys."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """base64url with or without padding (browsers differ); standard base64 is accepted too.

    Raises:
        PushKeyError: not base64.
    """
    cleaned = text.strip().replace("+", "-").replace("/", "_").rstrip("=")
    try:
        return base64.urlsafe_b64decode(cleaned + "=" * (-len(cleaned) % 4))
    except (ValueError, TypeError):
        raise PushKeyError("not base64url") from None


def public_point(key: ec.EllipticCurvePublicKey) -> bytes:
    """The 65-byte uncompressed point of a P-256 public key."""
    return key.public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )


def _hkdf(salt: bytes, ikm: bytes, info: bytes, length: int) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt, info=info).derive(ikm)


def _expand(prk: bytes, info: bytes, length: int) -> bytes:
    """HKDF-Expand for one block (every output here is at most 32 bytes)."""
    return hmac.new(prk, info + b"\x01", hashlib.sha256).digest()[:length]


def encrypt(
    plaintext: bytes,
    ua_public: bytes,
    auth_secret: bytes,
    *,
    salt: bytes | None = None,
    as_private: ec.EllipticCurvePrivateKey | None = None,
) -> bytes:
    """The ``aes128gcm`` body of one push to a subscription.

    Args:
        plaintext: the payload (at most ``RECORD_SIZE - 103`` bytes, one record).
        ua_public: the subscription's ``p256dh`` (65-byte uncompressed P-256 point).
        auth_secret: the subscription's ``auth`` (16 bytes).
        salt: a fixed salt (tests: the RFC's vector); random by default.
        as_private: a fixed ephemeral key (tests); a fresh one by default.

    Raises:
        PushKeyError: a key or the secret has the wrong shape, or the point is not on P-256.
        ValueError: the plaintext does not fit one record.
    """
    if len(ua_public) != _POINT_LENGTH or ua_public[:1] != b"\x04":
        raise PushKeyError("p256dh is not an uncompressed P-256 point")
    if len(auth_secret) != AUTH_SECRET_LENGTH:
        raise PushKeyError(f"auth must be {AUTH_SECRET_LENGTH} bytes")
    header_length = _SALT_LENGTH + 4 + 1 + _POINT_LENGTH
    if len(plaintext) + len(_LAST_RECORD) + _TAG_LENGTH > RECORD_SIZE - header_length:
        raise ValueError("a push payload must fit one record")
    try:
        peer = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), ua_public)
    except ValueError:
        raise PushKeyError("p256dh is not a point on P-256") from None
    private = as_private if as_private is not None else ec.generate_private_key(ec.SECP256R1())
    as_public = public_point(private.public_key())
    salt = salt if salt is not None else os.urandom(_SALT_LENGTH)
    if len(salt) != _SALT_LENGTH:
        raise ValueError(f"the salt must be {_SALT_LENGTH} bytes")

    ecdh_secret = private.exchange(ec.ECDH(), peer)
    key_info = b"WebPush: info\x00" + ua_public + as_public
    ikm = _hkdf(auth_secret, ecdh_secret, key_info, 32)
    prk = hmac.new(salt, ikm, hashlib.sha256).digest()
    cek = _expand(prk, b"Content-Encoding: aes128gcm\x00", 16)
    nonce = _expand(prk, b"Content-Encoding: nonce\x00", 12)
    ciphertext = AESGCM(cek).encrypt(nonce, plaintext + _LAST_RECORD, None)
    header = salt + struct.pack("!IB", RECORD_SIZE, _POINT_LENGTH) + as_public
    return header + ciphertext
