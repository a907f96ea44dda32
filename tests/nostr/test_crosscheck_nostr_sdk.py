"""Cross-checks against rust-nostr (``nostr_sdk`` 0.45.1), an independent implementation.

Events we sign must verify there and its events must verify here (same id bytes, same BIP-340),
NIP-44 payloads must decrypt in both directions, and NIP-19 strings must agree.
"""

from __future__ import annotations

import dataclasses

import nostr_sdk
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.nostr import nip44
from bridge.nostr.event import check_event, parse_event, sign_event, verify_event
from bridge.nostr.keys import Keypair, hex_to_npub, npub_to_hex, nsec_to_secret, parse_pubkey

OURS = Keypair.from_secret("5c" * 32)
THEIRS = nostr_sdk.Keys.parse("7f" * 32)
NOW = 1_700_000_000

TRICKY = [
    "",
    "plain",
    "".join(chr(c) for c in range(0x20)) + "\x7f",
    'quotes " and \\ backslash',
    "line\u2028para\u2029bom\ufeff",
    "🦄 𝄞 漢字 </script>",
    '{"type":"input","text":"héllo"}',
    "ü\U0001f600" * 5000,
]
TRICKY_IDS = ["empty", "plain", "controls", "quotes", "separators", "non-BMP", "json", "long"]


def _their_event(kind: int, content: str, tags: list[list[str]]) -> nostr_sdk.Event:
    builder = (
        nostr_sdk.EventBuilder(nostr_sdk.Kind(kind), content)
        .tags([nostr_sdk.Tag.parse(tag) for tag in tags])
        .custom_created_at(nostr_sdk.Timestamp.from_secs(NOW))
    )
    return builder.finalize(THEIRS)


@pytest.mark.parametrize("content", TRICKY, ids=TRICKY_IDS)
def test_our_events_verify_in_nostr_sdk(content: str) -> None:
    tags = [["p", THEIRS.public_key().to_hex()], ["t", content[:40] or "x"], ["expiration", "9"]]
    ours = sign_event(OURS, 4515, content, tags, created_at=NOW)
    theirs = nostr_sdk.Event.from_json(ours.to_json())
    assert theirs.verify()
    assert theirs.id().to_hex() == ours.id
    assert theirs.author().to_hex() == ours.pubkey


def test_nostr_sdk_rejects_our_tampered_event() -> None:
    # Guards the test above: nostr_sdk's verify() can fail.
    ours = sign_event(OURS, 1, "original", created_at=NOW)
    tampered = dataclasses.replace(ours, content="changed")
    assert not nostr_sdk.Event.from_json(tampered.to_json()).verify()


@pytest.mark.parametrize("content", TRICKY, ids=TRICKY_IDS)
def test_nostr_sdk_events_verify_with_ours(content: str) -> None:
    tags = [["p", OURS.public_hex], ["d", content[:40] or "x"]]
    theirs = _their_event(30515, content, tags)
    event = parse_event(orjson.loads(theirs.as_json()))
    assert verify_event(event)
    verified = check_event(event)
    assert verified.id == theirs.id().to_hex()
    assert verified.content == content
    assert [list(tag) for tag in verified.tags] == tags


@settings(max_examples=25, deadline=None)
@given(
    content=st.text(max_size=200),
    tags=st.lists(
        st.lists(st.text(max_size=12), min_size=1, max_size=3),
        max_size=3,
    ),
)
def test_sign_verify_agree_on_any_text(content: str, tags: list[list[str]]) -> None:
    ours = sign_event(OURS, 1, content, tags, created_at=NOW)
    assert nostr_sdk.Event.from_json(ours.to_json()).verify()


@pytest.mark.parametrize(
    "plaintext", ["a", "héllo 🦄", "x" * 1000, "é" * 30_000], ids=["1", "short", "1k", "60k"]
)
def test_nip44_decrypts_both_ways(plaintext: str) -> None:
    their_pub = bytes.fromhex(THEIRS.public_key().to_hex())
    key = nip44.conversation_key(OURS.secret, their_pub)
    our_pub_for_them = nostr_sdk.PublicKey.parse(OURS.public_hex)

    payload = nip44.encrypt(plaintext, key)
    assert nostr_sdk.nip44_decrypt(THEIRS.secret_key(), our_pub_for_them, payload) == plaintext

    their_payload = nostr_sdk.nip44_encrypt(
        THEIRS.secret_key(), our_pub_for_them, plaintext, nostr_sdk.Nip44Version.V2
    )
    assert nip44.decrypt(their_payload, key) == plaintext


def test_nip44_conversation_cache_matches_nostr_sdk() -> None:
    cache = nip44.ConversationKeyCache(OURS.secret)
    their_payload = nostr_sdk.nip44_encrypt(
        THEIRS.secret_key(),
        nostr_sdk.PublicKey.parse(OURS.public_hex),
        "via cache",
        nostr_sdk.Nip44Version.V2,
    )
    assert nip44.decrypt(their_payload, cache.get(THEIRS.public_key().to_hex())) == "via cache"


@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=1, max_value=2**255).map(lambda i: i.to_bytes(32, "big")))
def test_nip19_agrees(secret: bytes) -> None:
    ours = Keypair.from_secret(secret)
    theirs = nostr_sdk.Keys.parse(secret.hex())
    assert ours.public_hex == theirs.public_key().to_hex()
    assert ours.npub == theirs.public_key().to_bech32()
    assert ours.nsec == theirs.secret_key().to_bech32()
    assert npub_to_hex(theirs.public_key().to_bech32()) == ours.public_hex
    assert nsec_to_secret(theirs.secret_key().to_bech32()) == secret
    assert hex_to_npub(theirs.public_key().to_hex()) == theirs.public_key().to_bech32()
    assert nostr_sdk.PublicKey.parse(ours.npub).to_hex() == parse_pubkey(ours.npub)
    assert nostr_sdk.SecretKey.parse(ours.nsec).to_hex() == ours.secret_hex
