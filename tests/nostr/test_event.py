"""NIP-01 events (id edge cases, shape errors, signing, verification) and NIP-40 helpers."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.nostr import event as event_module
from bridge.nostr.event import (
    CHECKED_SIGNATURES_KEPT,
    MAX_CREATED_AT,
    Event,
    InvalidEventError,
    VerifiedEvent,
    check_event,
    checked_signatures,
    event_id,
    expiration_of,
    expiration_tag,
    is_expired,
    parse_event,
    sign_event,
    verify_event,
)
from bridge.nostr.keys import Keypair

KP = Keypair.from_secret("67dea2ed018072d675f5415ecfaed7d2597555e202d85b3d65ea4e58d2d92ffa")
AUX = bytes(range(32))
NOW = 1_700_000_000


def make_event(**overrides: Any) -> dict[str, Any]:
    """A valid signed event as a JSON object, with fields overridden (not re-signed)."""
    event = sign_event(KP, 1, "hello", [["t", "x"]], created_at=NOW, aux=AUX).to_dict()
    event.update(overrides)
    return event


def reference_id(pubkey: str, created_at: int, kind: int, tags: Any, content: str) -> str:
    """NIP-01 with the stdlib: the serialization orjson must match byte for byte."""
    serialized = json.dumps(
        [0, pubkey, created_at, kind, tags, content], separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(serialized.encode("utf-8")).hexdigest()


# --- id serialization ---------------------------------------------------------------------------

ID_CASES = {
    "empty": "",
    "ascii": "hello world",
    "quotes and backslash": 'say "hi" \\ \\" \\\\',
    "short escapes": "\n\t\r\b\f",
    "all C0 controls": "".join(chr(c) for c in range(0x20)),
    "DEL": "\x7f",
    "U+2028 U+2029": "a\u2028b\u2029c",
    "BOM": "\ufeffx",
    "CJK": "漢字かなカナ",
    "non-BMP": "🦄😀𝄞",
    "script tag": "</script><!--",
    "slash": "a/b",
    "json in content": '{"type":"input","text":"x"}',
    "60 KB": "ab\u00e9\U0001f600" * 12_000,
}


@pytest.mark.parametrize("content", ID_CASES.values(), ids=ID_CASES.keys())
def test_event_id_matches_stdlib_serialization(content: str) -> None:
    tags = [["p", KP.public_hex], ["t", content[:50]], []]
    expected = reference_id(KP.public_hex, NOW, 4515, tags, content)
    assert event_id(KP.public_hex, NOW, 4515, tags, content) == expected
    as_tuples = tuple(tuple(t) for t in tags)
    assert event_id(KP.public_hex, NOW, 4515, as_tuples, content) == expected


def test_event_id_of_known_event() -> None:
    # rust-nostr's fixture (also in tests/vectors/nip01_events.vectors.json).
    assert (
        event_id(
            "f86c44a2de95d9149b51c6a29afeabba264c18e2fa7c49de93424a0c56947785",
            1640839235,
            4,
            [["p", "13adc511de7e1cfcf1c6b7f6365fb5a03442d7bcacf565ea57fa7770912c023d"]],
            "uRuvYr585B80L6rSJiHocw==?iv=oh6LVqdsYYol3JfFnXTbPA==",
        )
        == "2be17aa3031bdcb006f0fce80c146dea9c1c0268b0af2398bb673365c6444d45"
    )


@pytest.mark.parametrize("where", ["content", "tag"])
@pytest.mark.parametrize("surrogate", ["\ud800", "\udfff", "a\udc00b"])
def test_lone_surrogates_are_rejected(where: str, surrogate: str) -> None:
    content = surrogate if where == "content" else "ok"
    tags = [["t", surrogate]] if where == "tag" else []
    with pytest.raises(InvalidEventError, match="lone surrogate"):
        event_id(KP.public_hex, NOW, 1, tags, content)
    with pytest.raises(InvalidEventError, match="lone surrogate"):
        sign_event(KP, 1, content, tags, created_at=NOW)
    # json.loads lets "\ud800" through, so parse_event must catch it.
    raw = json.loads(json.dumps(make_event(content=content, tags=tags)))
    with pytest.raises(InvalidEventError, match=f"{where} contains a lone surrogate"):
        parse_event(raw)
    forged = replace(Event(**make_event()), content=content, tags=tuple(tuple(t) for t in tags))
    assert not verify_event(forged)
    with pytest.raises(InvalidEventError, match="lone surrogate"):
        check_event(forged)
    with pytest.raises(InvalidEventError, match="lone surrogate"):
        forged.to_json()


# --- parse_event shape errors -------------------------------------------------------------------

SHAPE_ERRORS: list[tuple[str, object, str]] = [
    ("not an object", ["EVENT"], "event must be a JSON object"),
    ("missing sig", {k: v for k, v in make_event().items() if k != "sig"}, "no 'sig' field"),
    ("missing tags", {k: v for k, v in make_event().items() if k != "tags"}, "no 'tags' field"),
    ("id uppercase", make_event(id="A" * 64), "id must be 64 lowercase hex"),
    ("id short", make_event(id="a" * 63), "id must be 64 lowercase hex"),
    ("id not str", make_event(id=1), "id must be 64 lowercase hex"),
    ("id newline", make_event(id="a" * 64 + "\n"), "id must be 64 lowercase hex"),
    ("pubkey uppercase", make_event(pubkey=KP.public_hex.upper()), "pubkey must be 64"),
    ("pubkey npub", make_event(pubkey=KP.npub), "pubkey must be 64"),
    ("sig short", make_event(sig="0" * 127), "sig must be 128 lowercase hex"),
    ("sig null", make_event(sig=None), "sig must be 128 lowercase hex"),
    ("created_at str", make_event(created_at="1700000000"), "created_at must be an integer"),
    ("created_at float", make_event(created_at=1.7e9), "created_at must be an integer"),
    ("created_at bool", make_event(created_at=True), "created_at must be an integer"),
    ("created_at negative", make_event(created_at=-1), r"created_at out of range \(0\.\."),
    ("created_at huge", make_event(created_at=2**64), "created_at out of range"),
    ("kind negative", make_event(kind=-1), r"kind out of range \(0\.\.65535\)"),
    ("kind 65536", make_event(kind=65536), "kind out of range"),
    ("kind str", make_event(kind="1"), "kind must be an integer"),
    ("content null", make_event(content=None), "content must be a string"),
    ("content list", make_event(content=["x"]), "content must be a string"),
    ("tags object", make_event(tags={"p": "x"}), "tags must be an array"),
    ("tags string", make_event(tags="p"), "tags must be an array"),
    ("tag string", make_event(tags=["p"]), "each tag must be an array of strings"),
    ("tag with int", make_event(tags=[["p", 1]]), "each tag must be an array of strings"),
    ("tag with null", make_event(tags=[["p", None]]), "each tag must be an array of strings"),
]


@pytest.mark.parametrize(
    ("obj", "message"), [c[1:] for c in SHAPE_ERRORS], ids=[c[0] for c in SHAPE_ERRORS]
)
def test_parse_event_shape_errors(obj: object, message: str) -> None:
    with pytest.raises(InvalidEventError, match=message):
        parse_event(obj)
    with pytest.raises(InvalidEventError, match=message):
        Event.from_dict(obj)


def test_parse_event_accepts_boundaries_and_ignores_extra_fields() -> None:
    for created_at in (0, MAX_CREATED_AT):
        for kind in (0, 65535):
            event = parse_event(make_event(created_at=created_at, kind=kind, extra="x"))
            assert (event.created_at, event.kind) == (created_at, kind)
    event = parse_event(make_event(tags=[[], ["e"], ["p", "a", "b", "c"]]))
    assert event.tags == ((), ("e",), ("p", "a", "b", "c"))
    assert type(event) is Event


def test_parse_event_does_not_check_authenticity() -> None:
    event = parse_event(make_event(content="tampered"))
    assert not verify_event(event)


def test_json_round_trip() -> None:
    signed = sign_event(KP, 4515, "ü 🦄 \u2028", [["p", KP.public_hex]], created_at=NOW)
    text = signed.to_json()
    assert text == json.dumps(signed.to_dict(), separators=(",", ":"), ensure_ascii=False)
    parsed = parse_event(orjson.loads(text))
    assert parsed == Event(**signed.to_dict() | {"tags": signed.tags})
    assert check_event(parsed) == signed


# --- signing and verification -------------------------------------------------------------------


def test_sign_event_builds_a_verified_event() -> None:
    event = sign_event(KP, 1, "hello", [["t", "x"]], created_at=NOW, aux=AUX)
    assert isinstance(event, VerifiedEvent)
    assert event.pubkey == KP.public_hex
    assert event.tags == (("t", "x"),)
    assert event.id == reference_id(KP.public_hex, NOW, 1, [["t", "x"]], "hello")
    assert verify_event(event)
    # An explicit aux makes the signature reproducible; the default draws fresh randomness.
    assert sign_event(KP, 1, "hello", [["t", "x"]], created_at=NOW, aux=AUX) == event
    fresh = sign_event(KP, 1, "hello", [["t", "x"]], created_at=NOW)
    assert fresh.id == event.id
    assert fresh.sig != event.sig
    assert verify_event(fresh)


SIGN_ERRORS: list[tuple[str, dict[str, Any], str]] = [
    ("kind negative", {"kind": -1}, "kind out of range"),
    ("kind too big", {"kind": 70000}, "kind out of range"),
    ("kind bool", {"kind": False}, "kind must be an integer"),
    ("created_at negative", {"created_at": -5}, "created_at out of range"),
    ("created_at float", {"created_at": 1.5}, "created_at must be an integer"),
    ("content bytes", {"content": b"x"}, "content must be a string"),
    ("flat tags", {"tags": ["p", "x"]}, "each tag must be an array of strings"),
    ("tags str", {"tags": "px"}, "tags must be an array"),
    ("int in tag", {"tags": [["p", 5]]}, "each tag must be an array of strings"),
]


@pytest.mark.parametrize(
    ("overrides", "message"), [c[1:] for c in SIGN_ERRORS], ids=[c[0] for c in SIGN_ERRORS]
)
def test_sign_event_input_errors(overrides: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"kind": 1, "content": "x", "tags": (), "created_at": NOW}
    args.update(overrides)
    with pytest.raises(InvalidEventError, match=message):
        sign_event(KP, **args)


def test_sign_event_rejects_bad_aux() -> None:
    with pytest.raises(ValueError, match="aux randomness must be 32 bytes"):
        sign_event(KP, 1, "x", created_at=NOW, aux=b"\x00")


OTHER = Keypair.from_secret("11" * 32)
TAMPERING: list[tuple[str, dict[str, Any], str]] = [
    ("content", {"content": "hellO"}, "id does not match"),
    ("tags", {"tags": (("t", "y"),)}, "id does not match"),
    ("kind", {"kind": 2}, "id does not match"),
    ("created_at", {"created_at": NOW + 1}, "id does not match"),
    ("pubkey", {"pubkey": OTHER.public_hex}, "id does not match"),
    ("sig", {"sig": "00" * 64}, "invalid signature"),
    ("id", {"id": "00" * 32}, "id does not match"),
    ("pubkey off curve", {"pubkey": "ff" * 32}, "id does not match"),
    ("uppercase id", {"id": "A" * 64}, "id must be 64 lowercase hex"),
    ("kind type", {"kind": "1"}, "kind must be an integer"),
    ("tags type", {"tags": "x"}, "tags must be an array"),
]


@pytest.mark.parametrize(
    ("changes", "message"), [c[1:] for c in TAMPERING], ids=[c[0] for c in TAMPERING]
)
def test_tampered_events_fail(changes: dict[str, Any], message: str) -> None:
    original = sign_event(KP, 1, "hello", [["t", "x"]], created_at=NOW, aux=AUX)
    tampered = replace(Event(**original.to_dict() | {"tags": original.tags}), **changes)
    assert not verify_event(tampered)
    with pytest.raises(InvalidEventError, match=message):
        check_event(tampered)


def claimed_by_another_key() -> Event:
    """An event claiming KP as its author, with the id right and OTHER's signature."""
    theirs = sign_event(OTHER, 1, "hello", created_at=NOW)
    return Event(
        id=event_id(KP.public_hex, NOW, 1, (), "hello"),
        pubkey=KP.public_hex,
        created_at=NOW,
        kind=1,
        tags=(),
        content="hello",
        sig=theirs.sig,
    )


def test_signature_by_another_key_fails() -> None:
    with pytest.raises(InvalidEventError, match="invalid signature"):
        check_event(claimed_by_another_key())


def test_pubkey_not_on_curve_is_reported() -> None:
    pubkey = "ff" * 32
    forged = Event(
        id=event_id(pubkey, NOW, 1, (), "x"),
        pubkey=pubkey,
        created_at=NOW,
        kind=1,
        tags=(),
        content="x",
        sig="00" * 64,
    )
    with pytest.raises(InvalidEventError, match="pubkey is not a point on secp256k1"):
        check_event(forged)


@pytest.mark.parametrize(
    "garbage",
    [None, 42, "event", make_event(), Event(None, None, None, None, None, None, None)],  # type: ignore[arg-type]
    ids=["none", "int", "str", "dict", "all-none"],
)
def test_verify_event_never_raises(garbage: Any) -> None:
    assert verify_event(garbage) is False
    with pytest.raises(InvalidEventError):
        check_event(garbage)


def test_verify_event_answers_false_even_if_a_check_raises(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: object) -> bool:
        raise RuntimeError("unexpected")

    signed = sign_event(KP, 1, "x", created_at=NOW)
    checked_signatures.clear()  # signing remembered the pair: make this a first check
    monkeypatch.setattr(event_module, "verify_schnorr", broken)
    assert verify_event(signed) is False


# --- the memo of checked signatures -------------------------------------------------------------


def _counting_verifier(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Patch the BIP-340 check to count its calls (it still checks); the list of messages."""
    calls: list[bytes] = []
    real = event_module.verify_schnorr

    def counting(pubkey: bytes, message: bytes, signature: bytes) -> bool:
        calls.append(message)
        return real(pubkey, message, signature)

    monkeypatch.setattr(event_module, "verify_schnorr", counting)
    return calls


def test_an_event_signed_here_is_not_verified_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting_verifier(monkeypatch)
    signed = sign_event(KP, 1, "mine", created_at=NOW)
    assert check_event(parse_event(signed.to_dict())) == signed
    assert calls == []


def test_a_foreign_event_is_verified_once(monkeypatch: pytest.MonkeyPatch) -> None:
    foreign = sign_event(OTHER, 4515, "from a phone", created_at=NOW).to_dict()
    checked_signatures.clear()  # as if it had been signed in another process
    calls = _counting_verifier(monkeypatch)
    assert verify_event(parse_event(foreign))
    assert verify_event(parse_event(foreign))
    assert len(calls) == 1


def test_a_remembered_pair_does_not_vouch_for_other_content() -> None:
    signed = sign_event(KP, 1, "original", created_at=NOW)
    for changes in ({"content": "forged"}, {"kind": 2}, {"pubkey": OTHER.public_hex}):
        forged = replace(Event(**signed.to_dict()), **changes)
        with pytest.raises(InvalidEventError, match="id does not match"):
            check_event(forged)


def test_a_failed_check_is_not_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    claimed = claimed_by_another_key()
    calls = _counting_verifier(monkeypatch)
    assert not verify_event(claimed)
    assert not verify_event(claimed)
    assert len(calls) == 2


def test_the_memo_forgets_the_oldest_pairs(monkeypatch: pytest.MonkeyPatch) -> None:
    checked_signatures.clear()
    first = sign_event(KP, 1, "first", created_at=NOW)
    for n in range(CHECKED_SIGNATURES_KEPT):
        checked_signatures.add((f"{n:064x}", "00" * 64))
    assert (first.id, first.sig) not in checked_signatures
    calls = _counting_verifier(monkeypatch)
    assert verify_event(first)
    assert len(calls) == 1


def test_check_event_returns_verified_event() -> None:
    signed = sign_event(KP, 1, "x", [["a", "b"]], created_at=NOW)
    assert check_event(signed) is signed
    as_lists = Event(**signed.to_dict())  # tags as lists, as built from raw JSON by hand
    verified = check_event(as_lists)
    assert type(verified) is VerifiedEvent
    assert verified == signed
    assert verified.tags == (("a", "b"),)
    hash(verified)  # fully immutable, so usable as a key


@given(
    content=st.text(max_size=300),
    tags=st.lists(st.lists(st.text(max_size=20), max_size=4), max_size=4),
    kind=st.integers(min_value=0, max_value=65535),
    created_at=st.integers(min_value=0, max_value=MAX_CREATED_AT),
)
def test_sign_verify_round_trip(
    content: str, tags: list[list[str]], kind: int, created_at: int
) -> None:
    event = sign_event(KP, kind, content, tags, created_at=created_at)
    assert event.id == reference_id(KP.public_hex, created_at, kind, tags, content)
    parsed = parse_event(json.loads(event.to_json()))
    assert verify_event(parsed)
    assert check_event(parsed) == event


# --- NIP-40 -------------------------------------------------------------------------------------


def _with_tags(*tags: tuple[str, ...]) -> Event:
    return Event(**make_event() | {"tags": tags})


EXPIRATIONS: list[tuple[str, tuple[tuple[str, ...], ...], int | None]] = [
    ("none", (), None),
    ("plain", (("expiration", "1700000100"),), 1_700_000_100),
    ("zero", (("expiration", "0"),), 0),
    ("first wins", (("expiration", "5"), ("expiration", "9")), 5),
    ("after other tags", (("p", "x"), ("expiration", "7", "extra")), 7),
    ("tag without value", (("expiration",),), None),
    ("malformed", (("expiration", "soon"),), None),
    ("negative", (("expiration", "-5"),), None),
    ("float", (("expiration", "1.5"),), None),
    ("spaces", (("expiration", " 5"),), None),
    ("unicode digits", (("expiration", "١٢٣"),), None),
    ("too big", (("expiration", str(2**64)),), None),
    ("malformed first", (("expiration", "x"), ("expiration", "5")), None),
    ("other name", (("Expiration", "5"),), None),
]


@pytest.mark.parametrize(
    ("tags", "expected"), [c[1:] for c in EXPIRATIONS], ids=[c[0] for c in EXPIRATIONS]
)
def test_expiration_of(tags: tuple[tuple[str, ...], ...], expected: int | None) -> None:
    assert expiration_of(_with_tags(*tags)) == expected


def test_is_expired_boundaries() -> None:
    event = _with_tags(("expiration", "1000"))
    assert not is_expired(event, 999)
    assert is_expired(event, 1000)  # NIP-40: expired from the expiration second on
    assert is_expired(event, 1001)
    assert not is_expired(_with_tags(), 2**40)
    assert not is_expired(_with_tags(("expiration", "junk")), 2**40)


def test_expiration_tag() -> None:
    assert expiration_tag(1_700_000_300) == ("expiration", "1700000300")
    event = sign_event(KP, 24515, "x", [expiration_tag(NOW + 60)], created_at=NOW)
    assert expiration_of(event) == NOW + 60
    with pytest.raises(InvalidEventError, match="expiration out of range"):
        expiration_tag(-1)
    with pytest.raises(InvalidEventError, match="expiration must be an integer"):
        expiration_tag("5")  # type: ignore[arg-type]
