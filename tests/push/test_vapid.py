"""The VAPID key and its tokens, checked by the push-service stand-in's verifier."""

from __future__ import annotations

import json
import time

import pytest

from bridge.push import TOKEN_LIFETIME, TOKEN_RENEW_BEFORE, VapidKey, b64url_decode
from tests.support.push_service import unb64url, verify_vapid

AUDIENCE = "https://push.example.net"


def test_a_token_verifies_under_the_key_it_names() -> None:
    key = VapidKey.generate()
    now = time.time()
    header = key.authorization(AUDIENCE, now)
    claims, k = verify_vapid(header, AUDIENCE, now)
    assert k == key.public_key
    assert claims["aud"] == AUDIENCE
    assert claims["exp"] == int(now) + TOKEN_LIFETIME <= now + 24 * 3600
    assert claims["sub"].startswith(("mailto:", "https:"))
    head = json.loads(unb64url(header.split("t=")[1].split(".")[0]))
    assert head == {"typ": "JWT", "alg": "ES256"}


def test_the_public_key_is_the_uncompressed_point() -> None:
    key = VapidKey.generate()
    point = b64url_decode(key.public_key)
    assert len(point) == 65 and point[0] == 4
    assert "=" not in key.public_key


def test_another_audience_or_key_fails_verification() -> None:
    key, other = VapidKey.generate(), VapidKey.generate()
    now = time.time()
    with pytest.raises(ValueError, match="aud"):
        verify_vapid(key.authorization(AUDIENCE, now), "https://elsewhere.example", now)
    forged = key.authorization(AUDIENCE, now).replace(key.public_key, other.public_key)
    with pytest.raises(ValueError, match="signature"):
        verify_vapid(forged, AUDIENCE, now)


def test_a_token_is_reused_until_an_hour_before_it_expires() -> None:
    key = VapidKey.generate()
    now = 1_800_000_000.0
    first = key.authorization(AUDIENCE, now)
    assert key.authorization(AUDIENCE, now + 60) == first
    assert key.authorization("https://other.example", now) != first
    late = now + TOKEN_LIFETIME - TOKEN_RENEW_BEFORE + 1
    renewed = key.authorization(AUDIENCE, late)
    assert renewed != first
    assert verify_vapid(renewed, AUDIENCE, late)[0]["exp"] == int(late) + TOKEN_LIFETIME


def test_the_key_round_trips_through_its_stored_bytes_and_hides_them() -> None:
    key = VapidKey.generate()
    secret = key.private_bytes()
    again = VapidKey.from_private_bytes(secret)
    assert again.public_key == key.public_key
    assert secret.hex() not in repr(key) and key.public_key[:12] in repr(key)
    with pytest.raises(ValueError, match="32 bytes"):
        VapidKey.from_private_bytes(b"x")
    with pytest.raises(ValueError, match="not a valid"):
        VapidKey.from_private_bytes(b"\x00" * 32)
