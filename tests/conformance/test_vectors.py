"""Official vectors, used exactly as published: NIP-44 v2, BIP-340, and signed NIP-01 events.

The files in ``tests/vectors/`` are byte-for-byte copies of their sources (see its README); the
first test pins their sha256 so an edited vector cannot pass silently.
"""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from coincurve._libsecp256k1 import ffi, lib
from coincurve.context import GLOBAL_CONTEXT

from bridge.nostr import nip44
from bridge.nostr.event import (
    InvalidEventError,
    VerifiedEvent,
    check_event,
    event_id,
    parse_event,
    verify_event,
)
from bridge.nostr.keys import Keypair, NostrKeyError, verify_schnorr

VECTORS = Path(__file__).resolve().parent.parent / "vectors"

SHA256 = {
    "nip44.vectors.json": "269ed0f69e4c192512cc779e78c555090cebc7c785b609e338a62afc3ce25040",
    "bip340_test_vectors.csv": "34c9d1d9c3a88d524bc80778540dc43f8306ec249a7485293063c376db851c2d",
    "nip01_events.vectors.json": "a9f6f8f5ed033485fde291f62bb1300a86adb1b292eecfe96b5b434b4429ac0d",
}


@pytest.mark.parametrize("name", sorted(SHA256))
def test_vector_file_is_unchanged(name: str) -> None:
    assert hashlib.sha256((VECTORS / name).read_bytes()).hexdigest() == SHA256[name]


# --- NIP-44 v2 ----------------------------------------------------------------------------------

NIP44 = json.loads((VECTORS / "nip44.vectors.json").read_text(encoding="utf-8"))["v2"]
VALID = NIP44["valid"]
INVALID = NIP44["invalid"]


def _ids(prefix: str, cases: list[Any]) -> list[str]:
    return [f"{prefix}{i}" for i in range(len(cases))]


@pytest.mark.parametrize(
    ("unpadded", "padded"), VALID["calc_padded_len"], ids=_ids("len", VALID["calc_padded_len"])
)
def test_nip44_calc_padded_len(unpadded: int, padded: int) -> None:
    assert nip44.calc_padded_len(unpadded) == padded


MESSAGE_KEYS = VALID["get_message_keys"]


@pytest.mark.parametrize("case", MESSAGE_KEYS["keys"], ids=_ids("keys", MESSAGE_KEYS["keys"]))
def test_nip44_message_keys(case: dict[str, str]) -> None:
    chacha_key, chacha_nonce, hmac_key = nip44.message_keys(
        bytes.fromhex(MESSAGE_KEYS["conversation_key"]), bytes.fromhex(case["nonce"])
    )
    assert chacha_key.hex() == case["chacha_key"]
    assert chacha_nonce.hex() == case["chacha_nonce"]
    assert hmac_key.hex() == case["hmac_key"]


@pytest.mark.parametrize(
    "case", VALID["get_conversation_key"], ids=_ids("ck", VALID["get_conversation_key"])
)
def test_nip44_conversation_key(case: dict[str, str]) -> None:
    key = nip44.conversation_key(bytes.fromhex(case["sec1"]), bytes.fromhex(case["pub2"]))
    assert key.hex() == case["conversation_key"]


@pytest.mark.parametrize("case", VALID["encrypt_decrypt"], ids=_ids("ed", VALID["encrypt_decrypt"]))
def test_nip44_encrypt_decrypt(case: dict[str, str]) -> None:
    kp1 = Keypair.from_secret(case["sec1"])
    kp2 = Keypair.from_secret(case["sec2"])
    # The conversation key is symmetric: both sides derive the published one.
    assert nip44.conversation_key(kp1.secret, kp2.public_bytes).hex() == case["conversation_key"]
    assert nip44.conversation_key(kp2.secret, kp1.public_bytes).hex() == case["conversation_key"]
    key = bytes.fromhex(case["conversation_key"])
    payload = nip44.encrypt(case["plaintext"], key, bytes.fromhex(case["nonce"]))
    assert payload == case["payload"]
    assert nip44.decrypt(payload, key) == case["plaintext"]


@pytest.mark.parametrize(
    "case", VALID["encrypt_decrypt_long_msg"], ids=_ids("long", VALID["encrypt_decrypt_long_msg"])
)
def test_nip44_long_messages(case: dict[str, Any]) -> None:
    plaintext = case["pattern"] * case["repeat"]
    assert hashlib.sha256(plaintext.encode()).hexdigest() == case["plaintext_sha256"]
    key = bytes.fromhex(case["conversation_key"])
    payload = nip44.encrypt(plaintext, key, bytes.fromhex(case["nonce"]))
    assert hashlib.sha256(payload.encode()).hexdigest() == case["payload_sha256"]
    assert nip44.decrypt(payload, key) == plaintext


@pytest.mark.parametrize("length", INVALID["encrypt_msg_lengths"])
def test_nip44_invalid_plaintext_lengths(length: int) -> None:
    with pytest.raises(nip44.Nip44Error, match=r"plaintext must be 1\.\.65535 bytes"):
        nip44.encrypt("a" * length, bytes(range(32)))


@pytest.mark.parametrize("case", INVALID["decrypt"], ids=[c["note"] for c in INVALID["decrypt"]])
def test_nip44_invalid_payloads(case: dict[str, str]) -> None:
    with pytest.raises(nip44.Nip44Error):
        nip44.decrypt(case["payload"], bytes.fromhex(case["conversation_key"]))


# Which check must fire for each invalid payload (the spec's decode order).
_EXPECTED_DECRYPT_ERROR = {
    "unknown encryption version": "unknown encryption version",
    "invalid base64": "invalid base64",
    "invalid MAC": "invalid MAC",
    "invalid padding": "invalid padding",
}


@pytest.mark.parametrize("case", INVALID["decrypt"], ids=[c["note"] for c in INVALID["decrypt"]])
def test_nip44_invalid_payloads_fail_at_the_right_check(case: dict[str, str]) -> None:
    note = case["note"]
    if note.startswith("invalid payload length"):
        expected = "unknown encryption version" if case["payload"] == "" else "invalid payload size"
    else:
        expected = next(v for k, v in _EXPECTED_DECRYPT_ERROR.items() if note.startswith(k))
    with pytest.raises(nip44.Nip44Error, match=expected):
        nip44.decrypt(case["payload"], bytes.fromhex(case["conversation_key"]))


@pytest.mark.parametrize(
    "case",
    INVALID["get_conversation_key"],
    ids=[c["note"] for c in INVALID["get_conversation_key"]],
)
def test_nip44_invalid_conversation_keys(case: dict[str, str]) -> None:
    with pytest.raises(nip44.Nip44Error):
        nip44.conversation_key(bytes.fromhex(case["sec1"]), bytes.fromhex(case["pub2"]))


@pytest.mark.parametrize(
    "case",
    INVALID["get_conversation_key"],
    ids=[c["note"] for c in INVALID["get_conversation_key"]],
)
def test_nip44_invalid_conversation_key_inputs_rejected_by_keys_too(case: dict[str, str]) -> None:
    # The same bad inputs must never become a Keypair or a cached peer key either.
    secret = bytes.fromhex(case["sec1"])
    if "sec1" in case["note"]:
        with pytest.raises(NostrKeyError):
            Keypair.from_secret(secret)
        with pytest.raises(nip44.Nip44Error):
            nip44.ConversationKeyCache(secret)
    else:
        cache = nip44.ConversationKeyCache(secret)
        with pytest.raises(nip44.Nip44Error):
            cache.get(case["pub2"])
        assert len(cache) == 0


# --- BIP-340 ------------------------------------------------------------------------------------

with (VECTORS / "bip340_test_vectors.csv").open(newline="", encoding="utf-8") as _f:
    BIP340 = list(csv.DictReader(_f))


def _sign_any_length(secret: bytes, message: bytes, aux: bytes) -> bytes:
    """libsecp256k1's variable-length signing (rows 15-18); Nostr only ever signs 32 bytes."""
    keypair = ffi.new("secp256k1_keypair *")
    assert lib.secp256k1_keypair_create(GLOBAL_CONTEXT.ctx, keypair, secret) == 1
    params = ffi.new("secp256k1_schnorrsig_extraparams *")
    params.magic = bytes([0xDA, 0x6F, 0xB3, 0x8C])
    params.noncefp = ffi.NULL
    aux_buf = ffi.new("unsigned char[32]", aux)
    params.ndata = aux_buf
    sig = ffi.new("unsigned char[64]")
    ok = lib.secp256k1_schnorrsig_sign_custom(
        GLOBAL_CONTEXT.ctx, sig, message, len(message), keypair, params
    )
    assert ok == 1
    return bytes(ffi.buffer(sig, 64))


SIGNING_ROWS = [row for row in BIP340 if row["secret key"]]


def test_bip340_has_all_rows() -> None:
    assert [int(row["index"]) for row in BIP340] == list(range(19))
    assert len(SIGNING_ROWS) == 8


@pytest.mark.parametrize("row", SIGNING_ROWS, ids=[f"sign{r['index']}" for r in SIGNING_ROWS])
def test_bip340_sign(row: dict[str, str]) -> None:
    keypair = Keypair.from_secret(row["secret key"])
    assert keypair.public_hex == row["public key"].lower()
    message = bytes.fromhex(row["message"])
    aux = bytes.fromhex(row["aux_rand"])
    if len(message) == 32:
        sig = keypair.sign_schnorr(message, aux)
    else:
        with pytest.raises(ValueError, match="32 bytes"):
            keypair.sign_schnorr(message, aux)
        sig = _sign_any_length(keypair.secret, message, aux)
    assert sig.hex() == row["signature"].lower()


@pytest.mark.parametrize("row", BIP340, ids=[f"verify{r['index']}" for r in BIP340])
def test_bip340_verify(row: dict[str, str]) -> None:
    expected = row["verification result"] == "TRUE"
    result = verify_schnorr(
        bytes.fromhex(row["public key"]),
        bytes.fromhex(row["message"]),
        bytes.fromhex(row["signature"]),
    )
    assert result is expected


# --- NIP-01 signed events -----------------------------------------------------------------------

NIP01 = json.loads((VECTORS / "nip01_events.vectors.json").read_text(encoding="utf-8"))


def test_nip01_vector_counts() -> None:
    assert (len(NIP01["valid"]), len(NIP01["invalid"])) == (29, 8)


@pytest.mark.parametrize("case", NIP01["valid"], ids=_ids("valid", NIP01["valid"]))
def test_nip01_valid_events(case: dict[str, Any]) -> None:
    raw = case["event"]
    event = parse_event(raw)
    assert (
        event_id(event.pubkey, event.created_at, event.kind, event.tags, event.content) == raw["id"]
    )
    assert verify_event(event)
    verified = check_event(event)
    assert isinstance(verified, VerifiedEvent)
    assert verified.to_dict() == {k: raw[k] for k in verified.to_dict()}


@pytest.mark.parametrize("case", NIP01["invalid"], ids=_ids("invalid", NIP01["invalid"]))
def test_nip01_invalid_events(case: dict[str, Any]) -> None:
    event = parse_event(case["event"])  # the shape is fine; authenticity is not
    assert not verify_event(event)
    checks = case["checks"]
    expected = "id does not match" if not checks["id_ok"] else "invalid signature"
    with pytest.raises(InvalidEventError, match=expected):
        check_event(event)


def test_nip01_invalid_includes_valid_signature_over_wrong_id() -> None:
    """Two vectors sign their stated id correctly; only the id recompute rejects them."""
    tricky = [
        c for c in NIP01["invalid"] if not c["checks"]["id_ok"] and c["checks"]["coincurve_sig"]
    ]
    assert len(tricky) == 2
    for case in tricky:
        raw = case["event"]
        assert verify_schnorr(
            bytes.fromhex(raw["pubkey"]), bytes.fromhex(raw["id"]), bytes.fromhex(raw["sig"])
        )
        assert not verify_event(parse_event(raw))
