"""Nostr keys: secp256k1 x-only keypairs and their NIP-19 ``npub``/``nsec`` forms.

Why in-house bech32: NIP-19 needs only the BIP-173 checksum plus three checks that generic
libraries leave to the caller (and that pynostr skips): the human-readable part must be the one
the caller expects (an ``nsec`` pasted where an ``npub`` belongs is an error, not a key), the
payload must be exactly 32 bytes, and mixed case is rejected. Doing it here keeps those checks
next to the error messages a user reads.

Secret keys are scalars with ``0 < s < n`` (the secp256k1 group order). They never appear in a
``repr`` or an exception message.

A :class:`Keypair` keeps libsecp256k1's parsed ``secp256k1_keypair`` beside the raw secret, so that
signing does not rebuild it on every call (coincurve's ``sign_schnorr`` does, which makes each
signature several times dearer).
"""

from __future__ import annotations

import functools
import hmac
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NewType

from coincurve import PublicKeyXOnly
from coincurve._libsecp256k1 import ffi, lib
from coincurve.context import GLOBAL_CONTEXT

__all__ = [
    "SECP256K1_ORDER",
    "Keypair",
    "NostrKeyError",
    "PubKeyHex",
    "hex_to_npub",
    "npub_to_hex",
    "nsec_to_secret",
    "parse_pubkey",
    "secret_to_nsec",
    "verify_schnorr",
]

PubKeyHex = NewType("PubKeyHex", str)
"""A public key as 64 lowercase hex characters (the x-only form NIP-01 uses)."""

SECP256K1_ORDER = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
"""The group order n; a valid secret key is an integer in ``1 .. n-1``."""

_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


class NostrKeyError(ValueError):
    """A key (hex, bech32 or raw bytes) is malformed or of the wrong kind.

    The message says what is wrong and never contains the key itself.
    """


# --- bech32 (BIP-173), the encoding NIP-19 uses -------------------------------------------------

_CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_CHARSET_INDEX = {c: i for i, c in enumerate(_CHARSET)}
_GENERATOR = (0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3)
_CHECKSUM_LEN = 6
# NIP-19 keys: "npub1"/"nsec1" + ceil(256 / 5) = 52 data characters + 6 checksum characters.
_KEY_BECH32_LEN = 63


def _polymod(values: list[int]) -> int:
    chk = 1
    for value in values:
        top = chk >> 25
        chk = (chk & 0x1FFFFFF) << 5 ^ value
        for i, gen in enumerate(_GENERATOR):
            if (top >> i) & 1:
                chk ^= gen
    return chk


def _hrp_expand(hrp: str) -> list[int]:
    return [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp]


def _convert_bits(data: bytes | list[int], from_bits: int, to_bits: int, *, pad: bool) -> list[int]:
    """Regroup bits; without ``pad`` the leftover bits must be fewer than ``from_bits`` and zero."""
    acc = 0
    bits = 0
    out: list[int] = []
    max_value = (1 << to_bits) - 1
    for value in data:
        acc = (acc << from_bits) | value
        bits += from_bits
        while bits >= to_bits:
            bits -= to_bits
            out.append((acc >> bits) & max_value)
    if pad:
        if bits:
            out.append((acc << (to_bits - bits)) & max_value)
    elif bits >= from_bits or (acc << (to_bits - bits)) & max_value:
        raise NostrKeyError("invalid bech32 padding")
    return out


def _bech32_encode(hrp: str, payload: bytes) -> str:
    data = _convert_bits(payload, 8, 5, pad=True)
    polymod = _polymod([*_hrp_expand(hrp), *data, 0, 0, 0, 0, 0, 0]) ^ 1
    checksum = [(polymod >> 5 * (5 - i)) & 31 for i in range(_CHECKSUM_LEN)]
    return hrp + "1" + "".join(_CHARSET[d] for d in data + checksum)


def _bech32_decode(value: str) -> tuple[str, bytes]:
    """Decode and checksum-verify a bech32 string; returns (hrp, payload bytes)."""
    if value.lower() != value and value.upper() != value:
        raise NostrKeyError("mixed-case bech32 string")
    value = value.lower()
    sep = value.rfind("1")
    if sep < 1:
        raise NostrKeyError("not a bech32 string (no human-readable part)")
    if len(value) - sep - 1 < _CHECKSUM_LEN:
        raise NostrKeyError("bech32 string too short")
    hrp = value[:sep]
    if any(not 33 <= ord(c) <= 126 for c in hrp):
        raise NostrKeyError("invalid character in the bech32 human-readable part")
    try:
        data = [_CHARSET_INDEX[c] for c in value[sep + 1 :]]
    except KeyError:
        raise NostrKeyError("invalid bech32 character") from None
    if _polymod(_hrp_expand(hrp) + data) != 1:
        raise NostrKeyError("bech32 checksum mismatch")
    return hrp, bytes(_convert_bits(data[:-_CHECKSUM_LEN], 5, 8, pad=False))


def _decode_key(value: object, expected_hrp: str) -> bytes:
    if not isinstance(value, str):
        raise NostrKeyError(f"expected an {expected_hrp} string, got {type(value).__name__}")
    value = value.strip()
    if len(value) != _KEY_BECH32_LEN:
        prefix = value[:5].lower()
        if prefix in ("npub1", "nsec1"):
            raise NostrKeyError(
                f"wrong length for an {prefix[:4]}: {len(value)} characters, "
                f"expected {_KEY_BECH32_LEN}"
            )
        raise NostrKeyError(f"expected an {expected_hrp} ({_KEY_BECH32_LEN} characters)")
    hrp, payload = _bech32_decode(value)
    if hrp != expected_hrp:
        got = f"an {hrp}" if hrp in ("npub", "nsec") else f"a bech32 {hrp!r} string"
        raise NostrKeyError(f"expected an {expected_hrp}, got {got}")
    # 63 characters with a 4-letter hrp leave 52 data groups: 260 bits, exactly 32 bytes.
    return payload


# --- validation helpers -------------------------------------------------------------------------


def _check_secret(secret: bytes) -> bytes:
    if len(secret) != 32:
        raise NostrKeyError(f"a secret key is 32 bytes, got {len(secret)}")
    if not 0 < int.from_bytes(secret, "big") < SECP256K1_ORDER:
        raise NostrKeyError("secret key out of range (must be 0 < s < n)")
    return secret


def _is_hex64(value: str) -> bool:
    return len(value) == 64 and all(c in _HEX_DIGITS for c in value)


def _check_point(x: bytes) -> None:
    try:
        PublicKeyXOnly(x)
    except ValueError:
        raise NostrKeyError("public key is not a point on secp256k1") from None


# --- public conversions -------------------------------------------------------------------------


def npub_to_hex(npub: str) -> PubKeyHex:
    """Decode an ``npub1…`` into the 64-hex public key.

    Raises:
        NostrKeyError: not bech32, bad checksum, wrong prefix (e.g. an nsec), wrong length, or
            not a curve point.
    """
    payload = _decode_key(npub, "npub")
    _check_point(payload)
    return PubKeyHex(payload.hex())


def hex_to_npub(hex_key: str) -> str:
    """Encode a 64-hex public key (any case) as an ``npub1…``."""
    return _bech32_encode("npub", bytes.fromhex(parse_pubkey(hex_key)))


def nsec_to_secret(nsec: str) -> bytes:
    """Decode an ``nsec1…`` into the 32-byte secret key (range-checked)."""
    return _check_secret(_decode_key(nsec, "nsec"))


def secret_to_nsec(secret: bytes) -> str:
    """Encode a 32-byte secret key as an ``nsec1…`` (range-checked)."""
    if not isinstance(secret, bytes):
        raise NostrKeyError(f"a secret key is 32 bytes, got {type(secret).__name__}")
    return _bech32_encode("nsec", _check_secret(secret))


def parse_pubkey(value: str) -> PubKeyHex:
    """Accept a public key as an ``npub1…`` or 64 hex characters (any case).

    Returns the lowercase hex form, after checking the key is a point on the curve (a key that
    is not can never sign, and NIP-44 could not encrypt to it).
    """
    if not isinstance(value, str):
        raise NostrKeyError(f"expected a public key string, got {type(value).__name__}")
    value = value.strip()
    if value[:5].lower() in ("npub1", "nsec1"):
        return npub_to_hex(value)
    if not _is_hex64(value):
        raise NostrKeyError("expected an npub or 64 hex characters")
    lowered = value.lower()
    _check_point(bytes.fromhex(lowered))
    return PubKeyHex(lowered)


@functools.lru_cache(maxsize=1024)
def _parsed_xonly(pubkey_x: bytes) -> Any:
    # Parsing an x-only key costs a square root (a fair part of a verification); the bridge sees few
    # distinct authors, so parsed keys are kept in a small bounded cache.
    return PublicKeyXOnly(pubkey_x).public_key


def verify_schnorr(pubkey_x: bytes, message: bytes, signature: bytes) -> bool:
    """BIP-340-verify ``signature`` (64 bytes) over ``message`` (any length) by ``pubkey_x``.

    Returns False for any malformed input (wrong sizes, x not on the curve); never raises.
    """
    if not (
        isinstance(pubkey_x, bytes)
        and isinstance(message, bytes)
        and isinstance(signature, bytes)
        and len(pubkey_x) == 32
        and len(signature) == 64
    ):
        return False
    try:
        parsed = _parsed_xonly(pubkey_x)
    except ValueError:
        return False
    ctx = GLOBAL_CONTEXT.ctx
    result: int = lib.secp256k1_schnorrsig_verify(ctx, signature, message, len(message), parsed)
    return result == 1


# --- keypair ------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Keypair:
    """A secret key with its x-only public key and libsecp256k1's parsed keypair.

    Build it with :meth:`generate` or :meth:`from_secret`. ``repr()`` shows only the npub.
    Equality compares secrets in constant time.
    """

    _secret: bytes = field(repr=False)
    _public: bytes = field(init=False, repr=False)
    _native: Any = field(init=False, repr=False)  # secp256k1_keypair *
    _xonly: Any = field(init=False, repr=False)  # coincurve PublicKeyXOnly

    def __post_init__(self) -> None:
        if not isinstance(self._secret, bytes):
            raise NostrKeyError("a secret key is 32 bytes")
        _check_secret(self._secret)
        native = ffi.new("secp256k1_keypair *")
        if lib.secp256k1_keypair_create(GLOBAL_CONTEXT.ctx, native, self._secret) != 1:
            raise NostrKeyError("secret key rejected by libsecp256k1")
        xonly_native = ffi.new("secp256k1_xonly_pubkey *")
        lib.secp256k1_keypair_xonly_pub(GLOBAL_CONTEXT.ctx, xonly_native, ffi.NULL, native)
        xonly = PublicKeyXOnly(xonly_native)
        object.__setattr__(self, "_native", native)
        object.__setattr__(self, "_xonly", xonly)
        object.__setattr__(self, "_public", xonly.format())

    @classmethod
    def generate(cls, randbytes: Callable[[int], bytes] = os.urandom) -> Keypair:
        """Draw a new secret key from ``randbytes`` (a CSPRNG; injectable for tests).

        Out-of-range draws (probability ~2^-128) are redrawn; a source that keeps failing is an
        error rather than an endless loop.
        """
        for _ in range(64):
            candidate = randbytes(32)
            if not isinstance(candidate, bytes) or len(candidate) != 32:
                raise NostrKeyError("random source must return 32 bytes")
            if 0 < int.from_bytes(candidate, "big") < SECP256K1_ORDER:
                return cls(candidate)
        raise NostrKeyError("random source produced no valid secret key")

    @classmethod
    def from_secret(cls, value: bytes | str) -> Keypair:
        """Load a secret key given as 32 raw bytes, 64 hex characters, or an ``nsec1…``."""
        if isinstance(value, bytes):
            return cls(value)
        if not isinstance(value, str):
            raise NostrKeyError(f"expected a secret key, got {type(value).__name__}")
        text = value.strip()
        if text[:5].lower() in ("nsec1", "npub1"):
            return cls(nsec_to_secret(text))
        if not _is_hex64(text):
            raise NostrKeyError("expected an nsec or 64 hex characters")
        return cls(bytes.fromhex(text))

    @property
    def secret(self) -> bytes:
        """The 32-byte secret key. Handle with care: never log it."""
        return self._secret

    @property
    def secret_hex(self) -> str:
        return self._secret.hex()

    @property
    def public_bytes(self) -> bytes:
        """The 32-byte x-only public key."""
        return self._public

    @property
    def public_hex(self) -> PubKeyHex:
        return PubKeyHex(self._public.hex())

    @property
    def npub(self) -> str:
        return _bech32_encode("npub", self._public)

    @property
    def nsec(self) -> str:
        return _bech32_encode("nsec", self._secret)

    def sign_schnorr(self, message: bytes, aux: bytes | None = None) -> bytes:
        """BIP-340-sign a 32-byte message (a Nostr event id) and return the 64-byte signature.

        Args:
            message: exactly 32 bytes.
            aux: 32 bytes of auxiliary randomness; ``None`` draws fresh ``os.urandom(32)``.
                BIP-340 recommends fresh aux randomness (it hardens against side channels and
                fault attacks); explicit values exist for the official test vectors.

        Raises:
            ValueError: wrong message/aux length, or the produced signature did not verify.
        """
        if len(message) != 32:
            raise ValueError("the message to sign must be 32 bytes")
        if aux is None:
            aux = os.urandom(32)
        elif len(aux) != 32:
            raise ValueError("aux randomness must be 32 bytes")
        sig = ffi.new("unsigned char[64]")
        ctx = GLOBAL_CONTEXT.ctx
        if lib.secp256k1_schnorrsig_sign32(ctx, sig, message, self._native, aux) != 1:
            raise ValueError("signing failed")
        # BIP-340's default signing algorithm ends with "if Verify(...) fails, abort": a faulty
        # computation must never leave the signer. It costs one verification, most of a signature's
        # time (docs/BENCHMARKS.md has the sign rate).
        if lib.secp256k1_schnorrsig_verify(ctx, sig, message, 32, self._xonly.public_key) != 1:
            raise ValueError("produced signature does not verify")
        return bytes(ffi.buffer(sig, 64))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Keypair):
            return NotImplemented
        return hmac.compare_digest(self._secret, other._secret)

    def __hash__(self) -> int:
        return hash(self._public)

    def __repr__(self) -> str:
        return f"Keypair(npub={self.npub!r})"

    def __copy__(self) -> Keypair:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Keypair:
        return self

    def __reduce__(self) -> Any:
        # Pickling would write the secret to wherever the pickle goes; refuse it explicitly.
        raise TypeError("Keypair cannot be pickled")
