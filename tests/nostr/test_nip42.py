"""NIP-42 AUTH event building and the auth-required prefix."""

from __future__ import annotations

import pytest

from bridge.nostr.event import verify_event
from bridge.nostr.keys import Keypair
from bridge.nostr.nip42 import AUTH_KIND, build_auth_event, is_auth_required

KEYS = Keypair.from_secret(bytes([3]) * 32)


def test_auth_event_shape_and_signature() -> None:
    event = build_auth_event(KEYS, "ws://127.0.0.1:7777", "chal-1", created_at=1_700_000_000)
    assert event.kind == AUTH_KIND == 22242
    assert event.content == ""
    assert event.tags == (("relay", "ws://127.0.0.1:7777"), ("challenge", "chal-1"))
    assert event.pubkey == KEYS.public_hex
    assert event.created_at == 1_700_000_000
    assert verify_event(event)


@pytest.mark.parametrize(
    ("url", "challenge", "message"),
    [("", "c", "relay url is empty"), ("ws://x", "", "challenge is empty")],
)
def test_auth_event_refuses_empty_inputs(url: str, challenge: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_auth_event(KEYS, url, challenge, created_at=1)


CASES = [
    ("auth-required: you must auth", True),
    ("auth-required: received invalid challenge", True),
    ("blocked: auth-required: no", False),
    ("restricted: not allowed", False),
    ("auth-required", False),
    ("", False),
]


@pytest.mark.parametrize(("message", "expected"), CASES, ids=[c[0] or "empty" for c in CASES])
def test_is_auth_required(message: str, expected: bool) -> None:
    assert is_auth_required(message) is expected
