"""NIP-44 v2 encryption (the payload format CodeDeck uses for every message).

Exactly the NIP-44 spec, checked against all of its official vectors:

- conversation key = HKDF-extract(salt="nip44-v2", IKM=shared x) where the shared x is the
  *unhashed* x coordinate of ECDH. It comes from libsecp256k1's ``secp256k1_ecdh`` (constant time,
  ``ecmult_const``) with a hash callback that copies x out. ``PrivateKey.ecdh`` would hash the
  point (wrong for NIP-44) and ``PublicKey.multiply`` is variable time on the secret.
- per message: HKDF-expand(conversation key, info=nonce, 76) = chacha key (32) ‖ chacha nonce
  (12) ‖ hmac key (32); ChaCha20 with counter 0; HMAC-SHA256 over nonce ‖ ciphertext.
- payload = base64(0x02 ‖ nonce(32) ‖ ciphertext ‖ mac(32)), plaintext padded to
  :func:`calc_padded_len` behind a big-endian u16 length.

Decoding follows the spec's order (``#`` → payload length → strict base64 → data length →
version → MAC in constant time → padding), so a bad payload is rejected before any key work.
Every bad payload or key raises :class:`Nip44Error`; messages never include key material.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from collections import OrderedDict
from typing import Any

from coincurve import PublicKey
from coincurve._libsecp256k1 import ffi, lib
from coincurve.context import GLOBAL_CONTEXT
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from bridge.nostr.keys import SECP256K1_ORDER

__all__ = [
    "MAX_PLAINTEXT_BYTES",
    "MIN_PLAINTEXT_BYTES",
    "ConversationKeyCache",
    "Nip44Error",
    "calc_padded_len",
    "conversation_key",
    "decrypt",
    "encrypt",
    "message_keys",
]

VERSION = 2
MIN_PLAINTEXT_BYTES = 1
MAX_PLAINTEXT_BYTES = 65535
_SALT = b"nip44-v2"
_MIN_PAYLOAD_CHARS = 132
_MAX_PAYLOAD_CHARS = 87472
_MIN_DATA_BYTES = 99
_MAX_DATA_BYTES = 65603
_COUNTER_ZERO = bytes(4)
_IPAD = bytes(byte ^ 0x36 for byte in range(256))
_OPAD = bytes(byte ^ 0x5C for byte in range(256))
_KEY_FILL = bytes(32)


class Nip44Error(ValueError):
    """An invalid NIP-44 payload, key, nonce or plaintext."""


def _copy_x(output: Any, x32: Any, _y32: Any, _data: Any) -> int:
    ffi.memmove(output, x32, 32)
    return 1


# The C side holds only a raw pointer to this closure: the module-level name keeps it alive.
_COPY_X_CALLBACK = ffi.callback(
    "int (unsigned char *, const unsigned char *, const unsigned char *, void *)", _copy_x
)


def _shared_x(secret: bytes, peer_pubkey_x: bytes) -> bytes:
    if not isinstance(secret, bytes) or len(secret) != 32:
        raise Nip44Error("secret key must be 32 bytes")
    if not 0 < int.from_bytes(secret, "big") < SECP256K1_ORDER:
        raise Nip44Error("secret key out of range")
    if not isinstance(peer_pubkey_x, bytes) or len(peer_pubkey_x) != 32:
        raise Nip44Error("public key must be 32 bytes (x-only)")
    try:
        # NIP-44 lifts x to the point with even y; parsing fails if x is not on the curve
        # (including x >= p and points on the twist).
        point = PublicKey(b"\x02" + peer_pubkey_x)
    except ValueError:
        raise Nip44Error("public key is not a point on secp256k1") from None
    out = ffi.new("unsigned char[32]")
    ok = lib.secp256k1_ecdh(
        GLOBAL_CONTEXT.ctx, out, point.public_key, secret, _COPY_X_CALLBACK, ffi.NULL
    )
    if ok != 1:
        raise Nip44Error("ECDH failed")
    return bytes(ffi.buffer(out, 32))


def conversation_key(secret: bytes, peer_pubkey_x: bytes) -> bytes:
    """The 32-byte conversation key shared by ``secret``'s owner and the peer (symmetric).

    Raises:
        Nip44Error: the secret is not in ``1..n-1`` or the public key is not a curve point.
    """
    return hmac.digest(_SALT, _shared_x(secret, peer_pubkey_x), "sha256")


def _hmac_sha256(key: bytes, message: bytes) -> bytes:
    """RFC 2104 HMAC-SHA256 for a 32-byte key (every NIP-44 key is): ``hmac.digest``'s result.

    Written out because each message needs four of them (three for the keys, one for the MAC) and
    ``hmac.digest`` looks the hash up by name on every call, which more than doubles its cost. A key
    of 32 bytes is shorter than SHA-256's 64-byte block, so it is zero-filled to 64 and XORed with
    the pads (``bytes.translate``), never hashed.
    """
    block = key + _KEY_FILL
    inner = hashlib.sha256(block.translate(_IPAD) + message).digest()
    return hashlib.sha256(block.translate(_OPAD) + inner).digest()


def message_keys(conversation_key: bytes, nonce: bytes) -> tuple[bytes, bytes, bytes]:
    """HKDF-expand to (chacha key 32, chacha nonce 12, hmac key 32)."""
    if not isinstance(conversation_key, bytes) or len(conversation_key) != 32:
        raise Nip44Error("conversation key must be 32 bytes")
    if not isinstance(nonce, bytes) or len(nonce) != 32:
        raise Nip44Error("nonce must be 32 bytes")
    # RFC 5869 expand with L = 76: three HMAC blocks, T(i) = HMAC(PRK, T(i-1) ‖ info ‖ i).
    t1 = _hmac_sha256(conversation_key, nonce + b"\x01")
    t2 = _hmac_sha256(conversation_key, t1 + nonce + b"\x02")
    t3 = _hmac_sha256(conversation_key, t2 + nonce + b"\x03")
    okm = t1 + t2 + t3
    return okm[:32], okm[32:44], okm[44:76]


def calc_padded_len(unpadded_len: int) -> int:
    """NIP-44 padding: 32 bytes minimum, then chunks of 32 or next_power/8 bytes."""
    if unpadded_len < 1:
        raise Nip44Error("plaintext length must be at least 1")
    if unpadded_len <= 32:
        return 32
    next_power = 1 << (unpadded_len - 1).bit_length()
    chunk = 32 if next_power <= 256 else next_power // 8
    return chunk * ((unpadded_len - 1) // chunk + 1)


def _chacha20(key: bytes, nonce12: bytes, data: bytes) -> bytes:
    # cryptography's ChaCha20 takes a 16-byte nonce: 4-byte little-endian counter ‖ 12-byte nonce.
    cipher = Cipher(algorithms.ChaCha20(key, _COUNTER_ZERO + nonce12), mode=None)
    return cipher.encryptor().update(data)


def encrypt(plaintext: str, conversation_key: bytes, nonce: bytes | None = None) -> str:
    """Encrypt ``plaintext`` (1..65535 UTF-8 bytes) into a base64 NIP-44 v2 payload.

    Args:
        plaintext: the message.
        conversation_key: from :func:`conversation_key` or :class:`ConversationKeyCache`.
        nonce: 32 bytes; ``None`` (the default) draws fresh ``os.urandom(32)``. Pass one only for
            test vectors: reusing a nonce with the same key breaks confidentiality.

    Raises:
        Nip44Error: the plaintext is empty, too long or not encodable; bad key or nonce size.
    """
    if not isinstance(plaintext, str):
        raise Nip44Error("plaintext must be a string")
    try:
        data = plaintext.encode("utf-8")
    except UnicodeEncodeError:
        raise Nip44Error("plaintext is not valid Unicode (lone surrogate)") from None
    size = len(data)
    if not MIN_PLAINTEXT_BYTES <= size <= MAX_PLAINTEXT_BYTES:
        raise Nip44Error(
            f"plaintext must be {MIN_PLAINTEXT_BYTES}..{MAX_PLAINTEXT_BYTES} bytes, got {size}"
        )
    if nonce is None:
        nonce = os.urandom(32)
    chacha_key, chacha_nonce, hmac_key = message_keys(conversation_key, nonce)
    padding = bytes(calc_padded_len(size) - size)
    padded = size.to_bytes(2, "big") + data + padding
    ciphertext = _chacha20(chacha_key, chacha_nonce, padded)
    mac = _hmac_sha256(hmac_key, nonce + ciphertext)
    return base64.b64encode(b"\x02" + nonce + ciphertext + mac).decode("ascii")


def decrypt(payload: str, conversation_key: bytes) -> str:
    """Decrypt a NIP-44 v2 payload.

    Raises:
        Nip44Error: unknown version, bad size, bad base64, bad MAC, bad padding, or non-UTF-8
            plaintext.
    """
    if not isinstance(payload, str):
        raise Nip44Error("payload must be a string")
    size = len(payload)
    # NIP-44: "#" is reserved to flag a future non-base64 encoding.
    if size == 0 or payload[0] == "#":
        raise Nip44Error("unknown encryption version")
    if not _MIN_PAYLOAD_CHARS <= size <= _MAX_PAYLOAD_CHARS:
        raise Nip44Error(f"invalid payload size: {size}")
    try:
        # validate=True: without it, non-alphabet characters are silently skipped.
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise Nip44Error("invalid base64") from None
    if not _MIN_DATA_BYTES <= len(data) <= _MAX_DATA_BYTES:
        raise Nip44Error(f"invalid data size: {len(data)}")
    if data[0] != VERSION:
        raise Nip44Error(f"unknown encryption version {data[0]}")
    nonce = data[1:33]
    ciphertext = data[33:-32]
    mac = data[-32:]
    chacha_key, chacha_nonce, hmac_key = message_keys(conversation_key, nonce)
    expected = _hmac_sha256(hmac_key, nonce + ciphertext)
    if not hmac.compare_digest(expected, mac):
        raise Nip44Error("invalid MAC")
    padded = _chacha20(chacha_key, chacha_nonce, ciphertext)
    length = int.from_bytes(padded[:2], "big")
    if length < MIN_PLAINTEXT_BYTES or len(padded) != 2 + calc_padded_len(length):
        raise Nip44Error("invalid padding")
    try:
        return padded[2 : 2 + length].decode("utf-8")
    except UnicodeDecodeError:
        raise Nip44Error("plaintext is not valid UTF-8") from None


class ConversationKeyCache:
    """Conversation keys of one local secret key, per peer, in a bounded LRU.

    ECDH costs more than the rest of a message's encryption; a cached key makes the per-message
    cost only the symmetric part. The cache holds derived keys only for peers that were asked for,
    up to ``max_entries``.
    """

    __slots__ = ("_entries", "_max_entries", "_secret")

    def __init__(self, secret: bytes, max_entries: int = 1024) -> None:
        if not isinstance(secret, bytes) or len(secret) != 32:
            raise Nip44Error("secret key must be 32 bytes")
        if not 0 < int.from_bytes(secret, "big") < SECP256K1_ORDER:
            raise Nip44Error("secret key out of range")
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._secret = secret
        self._max_entries = max_entries
        self._entries: OrderedDict[str, bytes] = OrderedDict()

    def get(self, peer_pubkey_hex: str) -> bytes:
        """The conversation key with the peer (64 hex, any case).

        Raises:
            Nip44Error: the peer key is not 64 hex characters or not a curve point.
        """
        if not isinstance(peer_pubkey_hex, str):
            raise Nip44Error("peer public key must be 64 hex characters")
        key = self._entries.get(peer_pubkey_hex)
        if key is not None:
            self._entries.move_to_end(peer_pubkey_hex)
            return key
        if len(peer_pubkey_hex) != 64 or not peer_pubkey_hex.isascii():
            raise Nip44Error("peer public key must be 64 hex characters")
        try:
            peer = bytes.fromhex(peer_pubkey_hex)
        except ValueError:
            raise Nip44Error("peer public key must be 64 hex characters") from None
        key = conversation_key(self._secret, peer)
        self._entries[peer_pubkey_hex] = key
        if len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)
        return key

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Forget every cached key (e.g. when a phone is unpaired)."""
        self._entries.clear()

    def __repr__(self) -> str:
        return f"ConversationKeyCache(entries={len(self._entries)}, max={self._max_entries})"
