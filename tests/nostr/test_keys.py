"""NIP-19 keys: round trips, every error path and its message, and keypair hygiene."""

from __future__ import annotations

import copy
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.nostr import keys
from bridge.nostr.keys import (
    SECP256K1_ORDER,
    Keypair,
    NostrKeyError,
    hex_to_npub,
    npub_to_hex,
    nsec_to_secret,
    parse_pubkey,
    secret_to_nsec,
    verify_schnorr,
)

# NIP-19's own examples.
NIP19_NPUB = "npub10elfcs4fr0l0r8af98jlmgdh9c8tcxjvz9qkw038js35mp4dma8qzvjptg"
NIP19_PUB_HEX = "7e7e9c42a91bfef19fa929e5fda1b72e0ebc1a4c1141673e2794234d86addf4e"
NIP19_NSEC = "nsec1vl029mgpspedva04g90vltkh6fvh240zqtv9k0t9af8935ke9laqsnlfe5"
NIP19_SEC_HEX = "67dea2ed018072d675f5415ecfaed7d2597555e202d85b3d65ea4e58d2d92ffa"

N = SECP256K1_ORDER
valid_secrets = st.integers(min_value=1, max_value=N - 1).map(lambda i: i.to_bytes(32, "big"))


def _bech32_with_data(hrp: str, data: list[int]) -> str:
    """Bech32 with a correct checksum over arbitrary 5-bit groups (to reach padding errors)."""
    polymod = keys._polymod([*keys._hrp_expand(hrp), *data, 0, 0, 0, 0, 0, 0]) ^ 1
    checksum = [(polymod >> 5 * (5 - i)) & 31 for i in range(6)]
    return hrp + "1" + "".join(keys._CHARSET[d] for d in data + checksum)


# --- round trips and known values ---------------------------------------------------------------


def test_nip19_examples() -> None:
    assert npub_to_hex(NIP19_NPUB) == NIP19_PUB_HEX
    assert hex_to_npub(NIP19_PUB_HEX) == NIP19_NPUB
    assert nsec_to_secret(NIP19_NSEC).hex() == NIP19_SEC_HEX
    assert secret_to_nsec(bytes.fromhex(NIP19_SEC_HEX)) == NIP19_NSEC


def test_keypair_from_every_secret_form() -> None:
    forms: list[bytes | str] = [
        bytes.fromhex(NIP19_SEC_HEX),
        NIP19_SEC_HEX,
        NIP19_SEC_HEX.upper(),
        NIP19_NSEC,
        NIP19_NSEC.upper(),
        f"  {NIP19_NSEC}\n",
    ]
    pairs = [Keypair.from_secret(form) for form in forms]
    assert all(kp == pairs[0] for kp in pairs)
    kp = pairs[0]
    assert kp.secret_hex == NIP19_SEC_HEX
    assert kp.secret == bytes.fromhex(NIP19_SEC_HEX)
    assert kp.nsec == NIP19_NSEC
    assert len(kp.public_bytes) == 32
    assert kp.public_hex == kp.public_bytes.hex()
    assert kp.npub == hex_to_npub(kp.public_hex)


def test_parse_pubkey_accepts_npub_and_any_case_hex() -> None:
    assert parse_pubkey(NIP19_NPUB) == NIP19_PUB_HEX
    assert parse_pubkey(NIP19_NPUB.upper()) == NIP19_PUB_HEX
    assert parse_pubkey(NIP19_PUB_HEX.upper()) == NIP19_PUB_HEX
    assert parse_pubkey(f" {NIP19_PUB_HEX} ") == NIP19_PUB_HEX


@given(valid_secrets)
def test_secret_round_trips(secret: bytes) -> None:
    nsec = secret_to_nsec(secret)
    assert nsec.startswith("nsec1")
    assert len(nsec) == 63
    assert nsec_to_secret(nsec) == secret
    kp = Keypair.from_secret(nsec)
    assert npub_to_hex(kp.npub) == kp.public_hex
    assert parse_pubkey(kp.npub) == kp.public_hex


@given(valid_secrets, st.data())
def test_any_single_character_change_is_detected(secret: bytes, data: st.DataObject) -> None:
    npub = Keypair.from_secret(secret).npub
    position = data.draw(st.integers(min_value=5, max_value=len(npub) - 1))
    replacement = data.draw(st.sampled_from(keys._CHARSET).filter(lambda c: c != npub[position]))
    with pytest.raises(NostrKeyError):
        npub_to_hex(npub[:position] + replacement + npub[position + 1 :])


# --- error paths --------------------------------------------------------------------------------

KEY_ERRORS = [
    ("nsec as npub", npub_to_hex, NIP19_NSEC, "expected an npub, got an nsec"),
    ("npub as nsec", nsec_to_secret, NIP19_NPUB, "expected an nsec, got an npub"),
    ("npub as secret", Keypair.from_secret, NIP19_NPUB, "expected an nsec, got an npub"),
    ("nsec as pubkey", parse_pubkey, NIP19_NSEC, "expected an npub, got an nsec"),
    ("mixed case", npub_to_hex, "nPub" + NIP19_NPUB[4:], "mixed-case"),
    ("short npub", npub_to_hex, NIP19_NPUB[:-1], "wrong length for an npub: 62 characters"),
    ("long nsec", nsec_to_secret, NIP19_NSEC + "q", "wrong length for an nsec: 64 characters"),
    ("not bech32", npub_to_hex, "hello", r"expected an npub \(63 characters\)"),
    ("bad checksum", npub_to_hex, NIP19_NPUB[:-1] + "q", "checksum mismatch"),
    ("bad character", npub_to_hex, NIP19_NPUB[:10] + "b" + NIP19_NPUB[11:], "invalid bech32 char"),
    ("other hrp", npub_to_hex, _bech32_with_data("note", [0] * 52), "got a bech32 'note' string"),
    ("no separator", npub_to_hex, "x" * 63, "no human-readable part"),
    ("too short data", npub_to_hex, "n" * 58 + "1abcd", "too short"),
    ("bad hrp char", npub_to_hex, "np\x7fb" + _bech32_with_data("npub", [0] * 52)[4:], "human"),
    ("padding bits", npub_to_hex, _bech32_with_data("npub", [0] * 51 + [1]), "padding"),
    ("not a string", npub_to_hex, 42, "expected an npub string, got int"),
    ("hex not on curve", parse_pubkey, "ff" * 32, "not a point on secp256k1"),
    ("npub not on curve", npub_to_hex, _bech32_with_data("npub", [31] * 51 + [0]), "not a point"),
    ("short hex", parse_pubkey, "ab" * 31, "expected an npub or 64 hex"),
    ("non-hex", parse_pubkey, "zz" * 32, "expected an npub or 64 hex"),
    ("pubkey not str", parse_pubkey, b"\x01" * 32, "expected a public key string, got bytes"),
    ("hex_to_npub bad", hex_to_npub, "00" * 31, "expected an npub or 64 hex"),
    ("secret short hex", Keypair.from_secret, "ab" * 31, "expected an nsec or 64 hex"),
    ("secret int", Keypair.from_secret, 7, "expected a secret key, got int"),
    ("secret 31 bytes", Keypair.from_secret, b"\x01" * 31, "a secret key is 32 bytes, got 31"),
    ("secret zero", Keypair.from_secret, bytes(32), r"out of range \(must be 0 < s < n\)"),
    ("secret n", Keypair.from_secret, N.to_bytes(32, "big"), "out of range"),
    ("secret > n", Keypair.from_secret, b"\xff" * 32, "out of range"),
    ("nsec of zero", nsec_to_secret, _bech32_with_data("nsec", [0] * 52), "out of range"),
    ("to nsec not bytes", secret_to_nsec, "ab" * 32, "a secret key is 32 bytes, got str"),
    ("to nsec zero", secret_to_nsec, bytes(32), "out of range"),
]


@pytest.mark.parametrize(
    ("func", "value", "message"), [c[1:] for c in KEY_ERRORS], ids=[c[0] for c in KEY_ERRORS]
)
def test_key_errors(func: object, value: object, message: str) -> None:
    with pytest.raises(NostrKeyError, match=message):
        func(value)  # type: ignore[operator]


def test_error_messages_never_contain_the_secret() -> None:
    secret_hex = "ff" * 32
    with pytest.raises(NostrKeyError) as info:
        Keypair.from_secret(secret_hex)
    assert secret_hex not in str(info.value)
    with pytest.raises(NostrKeyError) as info:
        npub_to_hex(NIP19_NSEC)
    assert NIP19_NSEC not in str(info.value)
    assert NIP19_NSEC[5:] not in str(info.value)


def test_secret_range_boundaries() -> None:
    assert Keypair.from_secret((1).to_bytes(32, "big")).secret == (1).to_bytes(32, "big")
    last = (N - 1).to_bytes(32, "big")
    assert Keypair.from_secret(last).secret == last
    # s and n - s share an x-only public key, but they are different keypairs.
    one = Keypair.from_secret((1).to_bytes(32, "big"))
    assert Keypair.from_secret(last).public_hex == one.public_hex
    assert Keypair.from_secret(last) != one


# --- keypair hygiene ----------------------------------------------------------------------------


def test_repr_and_str_never_show_the_secret() -> None:
    kp = Keypair.from_secret(NIP19_SEC_HEX)
    for text in (repr(kp), str(kp), f"{kp}", repr([kp])):
        assert NIP19_SEC_HEX not in text
        assert NIP19_NSEC not in text
        assert kp.npub in text


def test_keypair_cannot_be_pickled_but_copies_are_itself() -> None:
    kp = Keypair.from_secret(NIP19_SEC_HEX)
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(kp)
    assert copy.copy(kp) is kp
    assert copy.deepcopy(kp) is kp


def test_keypair_equality_and_hash() -> None:
    a = Keypair.from_secret(NIP19_SEC_HEX)
    b = Keypair.from_secret(NIP19_NSEC)
    c = Keypair.generate()
    assert a == b
    assert hash(a) == hash(b)
    assert a != c
    assert a != NIP19_SEC_HEX
    assert len({a, b, c}) == 2


def test_keypair_is_frozen() -> None:
    kp = Keypair.generate()
    with pytest.raises(AttributeError):
        kp._secret = bytes(32)  # type: ignore[misc]


def test_generate_uses_the_given_source_and_redraws_out_of_range() -> None:
    draws = iter([bytes(32), b"\xff" * 32, (5).to_bytes(32, "big")])
    kp = Keypair.generate(lambda n: next(draws))
    assert kp.secret == (5).to_bytes(32, "big")


def test_generate_rejects_broken_sources() -> None:
    with pytest.raises(NostrKeyError, match="must return 32 bytes"):
        Keypair.generate(lambda n: b"\x01" * 16)
    with pytest.raises(NostrKeyError, match="produced no valid secret key"):
        Keypair.generate(lambda n: bytes(32))


def test_generate_default_source_gives_distinct_keys() -> None:
    assert len({Keypair.generate().public_hex for _ in range(8)}) == 8


# --- schnorr ------------------------------------------------------------------------------------


@given(valid_secrets, st.binary(min_size=32, max_size=32), st.binary(min_size=32, max_size=32))
def test_sign_then_verify(secret: bytes, message: bytes, aux: bytes) -> None:
    kp = Keypair.from_secret(secret)
    sig = kp.sign_schnorr(message, aux)
    assert sig == kp.sign_schnorr(message, aux)  # deterministic for a given aux
    assert verify_schnorr(kp.public_bytes, message, sig)
    flipped = bytes([message[0] ^ 1]) + message[1:]
    assert not verify_schnorr(kp.public_bytes, flipped, sig)


def test_default_aux_is_random() -> None:
    kp = Keypair.generate()
    message = bytes(32)
    first, second = kp.sign_schnorr(message), kp.sign_schnorr(message)
    assert first != second
    assert verify_schnorr(kp.public_bytes, message, first)
    assert verify_schnorr(kp.public_bytes, message, second)


def test_sign_schnorr_input_checks() -> None:
    kp = Keypair.generate()
    with pytest.raises(ValueError, match="message to sign must be 32 bytes"):
        kp.sign_schnorr(b"short")
    with pytest.raises(ValueError, match="aux randomness must be 32 bytes"):
        kp.sign_schnorr(bytes(32), b"\x00" * 31)


def test_verify_schnorr_rejects_malformed_input_without_raising() -> None:
    kp = Keypair.generate()
    sig = kp.sign_schnorr(bytes(32), bytes(32))
    assert verify_schnorr(kp.public_bytes, bytes(32), sig)
    assert not verify_schnorr(kp.public_bytes[:31], bytes(32), sig)
    assert not verify_schnorr(kp.public_bytes, bytes(32), sig[:63])
    assert not verify_schnorr(b"\xff" * 32, bytes(32), sig)  # x >= p: not a key
    assert not verify_schnorr(kp.public_hex, bytes(32), sig)  # type: ignore[arg-type]
    assert not verify_schnorr(kp.public_bytes, "x" * 32, sig)  # type: ignore[arg-type]


class _FailingLib:
    """libsecp256k1 with one function forced to fail (simulates a fault or a library bug)."""

    def __init__(self, real: object, failing: str) -> None:
        self._real = real
        self._failing = failing

    def __getattr__(self, name: str) -> object:
        if name == self._failing:
            return lambda *args: 0
        return getattr(self._real, name)


@pytest.mark.parametrize(
    ("failing", "message"),
    [
        ("secp256k1_schnorrsig_sign32", "signing failed"),
        ("secp256k1_schnorrsig_verify", "produced signature does not verify"),
    ],
)
def test_signing_faults_never_return_a_signature(
    monkeypatch: pytest.MonkeyPatch, failing: str, message: str
) -> None:
    kp = Keypair.generate()
    monkeypatch.setattr(keys, "lib", _FailingLib(keys.lib, failing))
    with pytest.raises(ValueError, match=message):
        kp.sign_schnorr(bytes(32))


def test_keypair_creation_fault_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keys, "lib", _FailingLib(keys.lib, "secp256k1_keypair_create"))
    with pytest.raises(NostrKeyError, match="rejected by libsecp256k1"):
        Keypair.generate()


def test_keypair_constructor_requires_bytes() -> None:
    with pytest.raises(NostrKeyError, match="a secret key is 32 bytes"):
        Keypair("11" * 32)  # type: ignore[arg-type]
