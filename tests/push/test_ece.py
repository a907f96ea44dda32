"""RFC 8291 encryption: the RFC's own example, byte for byte, and the browser's side reading it."""

from __future__ import annotations

import os

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from bridge.push import PushKeyError, b64url_decode, b64url_encode, encrypt, public_point
from tests.support.push_service import decrypt

# RFC 8291 Appendix A (line breaks removed).
PLAINTEXT = b"When I grow up, I want to be a watermelon"
AS_PRIVATE = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
AS_PUBLIC = (
    "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
)
UA_PRIVATE = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
UA_PUBLIC = (
    "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
)
SALT = "DGv6ra1nlYgDCS1FRnbzlw"
AUTH = "BTBZMqHH6r4Tts7J_aSIgg"
BODY = (
    "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6T"
    "lzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4"
    "a-fN"
)


def _private(text: str) -> ec.EllipticCurvePrivateKey:
    return ec.derive_private_key(int.from_bytes(b64url_decode(text), "big"), ec.SECP256R1())


def test_the_rfc_8291_example_encrypts_to_its_exact_bytes() -> None:
    sender = _private(AS_PRIVATE)
    assert b64url_encode(public_point(sender.public_key())) == AS_PUBLIC
    body = encrypt(
        PLAINTEXT,
        b64url_decode(UA_PUBLIC),
        b64url_decode(AUTH),
        salt=b64url_decode(SALT),
        as_private=sender,
    )
    assert b64url_encode(body) == BODY


def test_the_rfc_example_decrypts_with_the_user_agents_key() -> None:
    assert decrypt(b64url_decode(BODY), _private(UA_PRIVATE), b64url_decode(AUTH)) == PLAINTEXT


def test_a_fresh_push_decrypts_and_never_repeats_its_salt_or_key() -> None:
    browser = ec.generate_private_key(ec.SECP256R1())
    auth = os.urandom(16)
    point = public_point(browser.public_key())
    one, two = encrypt(b'{"v":1}', point, auth), encrypt(b'{"v":1}', point, auth)
    assert decrypt(one, browser, auth) == decrypt(two, browser, auth) == b'{"v":1}'
    assert one[:16] != two[:16] and one[21:86] != two[21:86]  # salt, ephemeral key
    assert b'"v"' not in one


def test_another_auth_secret_cannot_read_it() -> None:
    browser = ec.generate_private_key(ec.SECP256R1())
    body = encrypt(b"x", public_point(browser.public_key()), os.urandom(16))
    with pytest.raises(ValueError, match="does not decrypt"):
        decrypt(body, browser, os.urandom(16))


@pytest.mark.parametrize(
    ("point", "auth", "message"),
    [
        (b"\x04" + b"\x00" * 64, b"\x07" * 16, "not a point on P-256"),
        (b"\x02" + b"\x01" * 32, b"\x07" * 16, "not an uncompressed P-256 point"),
        (b64url_decode(UA_PUBLIC), b"short", "auth must be 16 bytes"),
    ],
)
def test_unusable_keys_are_refused_without_quoting_them(
    point: bytes, auth: bytes, message: str
) -> None:
    with pytest.raises(PushKeyError, match=message) as caught:
        encrypt(b"x", point, auth)
    assert point.hex() not in str(caught.value)
    assert auth.hex() not in str(caught.value)


def test_a_payload_must_fit_one_record() -> None:
    point = b64url_decode(UA_PUBLIC)
    encrypt(b"x" * (4096 - 103 - 17), point, os.urandom(16))
    with pytest.raises(ValueError, match="one record"):
        encrypt(b"x" * 4096, point, os.urandom(16))


def test_base64url_accepts_what_browsers_write() -> None:
    raw = bytes(range(40))
    for text in (b64url_encode(raw), b64url_encode(raw) + "==", "  " + b64url_encode(raw)):
        assert b64url_decode(text) == raw
    with pytest.raises(PushKeyError):
        b64url_decode("a")
