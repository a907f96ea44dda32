"""A Web Push service stand-in for the tests: the receiving side of RFC 8030/8291/8292.

It plays two parts a real deployment splits between a push service and a browser:

- the **browser** makes a subscription (:meth:`PushService.subscribe`): a fresh P-256 key and a
  16-byte auth secret, and an endpoint on this server, as ``PushManager.subscribe`` would;
- the **push service** (HTTP on 127.0.0.1, started and stopped by the test) takes each
  ``POST /push/<id>`` and checks what a real one checks — the VAPID ``Authorization: vapid
  t=<JWT>, k=<key>`` (an ES256 signature valid under ``k``, ``aud`` = this origin, ``exp`` in
  the future and at most 24 h away, ``sub`` a ``mailto:`` or ``https:`` contact), that ``k`` is
  the key the subscription was made with (the bridge's ``pushKey``), the ``TTL``, ``Urgency``
  and ``Topic`` headers — then decrypts the ``aes128gcm`` body with the subscription's private
  key and auth secret, as the browser would, records the push (headers, claims, decrypted
  JSON) and answers 201.

Anything wrong is answered 400/401/403 and recorded in :attr:`PushService.refused`, so a test
that expects no refusal fails on it. A subscription can be told to answer 410 Gone
(:meth:`PushService.drop`), as a push service does once the browser unsubscribed.

The decryption is written here from the RFCs with ``cryptography``'s primitives, not with the
bridge's code, so the two sides check each other.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes, hmac, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF, HKDFExpand

__all__ = ["BrowserSubscription", "PushService", "ReceivedPush", "b64url", "unb64url"]

_TOPIC = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
_URGENCIES = frozenset({"very-low", "low", "normal", "high"})
_DAY = 24 * 3600


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class BrowserSubscription:
    """A subscription as a browser holds it: the JSON it hands over, and its private key."""

    sub_id: str
    endpoint: str
    private_key: ec.EllipticCurvePrivateKey
    auth: bytes
    server_key: str | None
    """The ``applicationServerKey`` it was made with (the bridge's pushKey)."""

    @property
    def p256dh(self) -> str:
        point = self.private_key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        return b64url(point)

    def to_json(self) -> dict[str, Any]:
        """``PushSubscription.toJSON()``, ``expirationTime`` included as browsers write it."""
        return {
            "endpoint": self.endpoint,
            "expirationTime": None,
            "keys": {"p256dh": self.p256dh, "auth": b64url(self.auth)},
        }


@dataclass
class ReceivedPush:
    """One push the service accepted."""

    sub_id: str
    headers: dict[str, str]
    claims: dict[str, Any]
    body: bytes
    plaintext: bytes
    payload: dict[str, Any] = field(default_factory=dict)


def decrypt(body: bytes, private_key: ec.EllipticCurvePrivateKey, auth: bytes) -> bytes:
    """RFC 8291 + RFC 8188 (one record), as the browser does it.

    Raises:
        ValueError: the body is malformed or does not decrypt.
    """
    if len(body) < 21:
        raise ValueError("body shorter than the aes128gcm header")
    salt, (record_size, id_length) = body[:16], struct.unpack("!IB", body[16:21])
    key_id = body[21 : 21 + id_length]
    ciphertext = body[21 + id_length :]
    if id_length != 65 or record_size < 18:
        raise ValueError(f"keyid of {id_length} bytes / record size {record_size}")
    if len(ciphertext) > record_size:
        raise ValueError("more than one record")
    sender = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), key_id)
    ua_public = private_key.public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )
    shared = private_key.exchange(ec.ECDH(), sender)
    ikm = HKDF(
        algorithm=hashes.SHA256(),
        length=32,
        salt=auth,
        info=b"WebPush: info\x00" + ua_public + key_id,
    ).derive(shared)

    extract = hmac.HMAC(salt, hashes.SHA256())
    extract.update(ikm)
    prk = extract.finalize()

    def derive(info: bytes, length: int) -> bytes:
        return HKDFExpand(algorithm=hashes.SHA256(), length=length, info=info).derive(prk)

    cek = derive(b"Content-Encoding: aes128gcm\x00", 16)
    nonce = derive(b"Content-Encoding: nonce\x00", 12)
    try:
        padded = AESGCM(cek).decrypt(nonce, ciphertext, None)
    except InvalidTag:
        raise ValueError("the body does not decrypt with the subscription's keys") from None
    stripped = padded.rstrip(b"\x00")
    if not stripped or stripped[-1:] != b"\x02":
        raise ValueError("no last-record delimiter")
    return stripped[:-1]


def verify_vapid(header: str, audience: str, now: float) -> tuple[dict[str, Any], str]:
    """Check ``vapid t=…, k=…``: the claims and the key, or ValueError saying what is wrong."""
    if not header.startswith("vapid "):
        raise ValueError(f"Authorization is not vapid: {header[:12]!r}")
    params = dict(
        part.strip().split("=", 1) for part in header[len("vapid ") :].split(",") if "=" in part
    )
    token, key = params.get("t", ""), params.get("k", "")
    pieces = token.split(".")
    if len(pieces) != 3:
        raise ValueError("t is not a JWT")
    head = json.loads(unb64url(pieces[0]))
    if head.get("alg") != "ES256":
        raise ValueError(f"JWT alg {head.get('alg')!r}")
    signature = unb64url(pieces[2])
    if len(signature) != 64:
        raise ValueError("ES256 signature is not 64 bytes")
    der = encode_dss_signature(
        int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")
    )
    public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64url(key))
    try:
        public.verify(der, f"{pieces[0]}.{pieces[1]}".encode(), ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise ValueError("the JWT signature does not verify with k") from None
    claims: dict[str, Any] = json.loads(unb64url(pieces[1]))
    if claims.get("aud") != audience:
        raise ValueError(f"aud {claims.get('aud')!r} is not {audience!r}")
    exp = claims.get("exp")
    if not isinstance(exp, int) or not now < exp <= now + _DAY:
        raise ValueError(f"exp {exp!r} is not within 24 h")
    sub = claims.get("sub")
    if not isinstance(sub, str) or not sub.startswith(("mailto:", "https:")):
        raise ValueError(f"sub {sub!r} is not a contact")
    return claims, key


class PushService:
    """The stand-in; ``async with PushService() as service`` starts and stops it."""

    def __init__(self) -> None:
        self.received: list[ReceivedPush] = []
        self.refused: list[str] = []
        self.gone: set[str] = set()
        self.gone_answers: list[str] = []
        """The subscriptions a push was answered 410 for, once per request."""
        self._subscriptions: dict[str, BrowserSubscription] = {}
        self._runner: web.AppRunner | None = None
        self._changed = asyncio.Event()
        self.port = 0

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> PushService:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.stop()

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/push/{sub_id}", self._push)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None and server.sockets
        self.port = server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def subscribe(self, server_key: str | None) -> BrowserSubscription:
        """A new subscription, made as a browser makes one for `server_key`."""
        sub_id = b64url(os.urandom(12))
        subscription = BrowserSubscription(
            sub_id=sub_id,
            endpoint=f"{self.origin}/push/{sub_id}",
            private_key=ec.generate_private_key(ec.SECP256R1()),
            auth=os.urandom(16),
            server_key=server_key,
        )
        self._subscriptions[sub_id] = subscription
        return subscription

    def drop(self, subscription: BrowserSubscription) -> None:
        """From now on, pushes to `subscription` are answered 410 Gone."""
        self.gone.add(subscription.sub_id)

    def pushes_to(self, subscription: BrowserSubscription) -> list[ReceivedPush]:
        return [p for p in self.received if p.sub_id == subscription.sub_id]

    async def wait_for(self, count: int, timeout: float = 10.0) -> list[ReceivedPush]:
        """Wait until `count` pushes were accepted (or refused: a refusal ends the wait)."""
        deadline = time.monotonic() + timeout
        while len(self.received) < count and not self.refused:
            self._changed.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except TimeoutError:
                break
        assert not self.refused, self.refused
        assert len(self.received) >= count, f"{len(self.received)} push(es) of {count}"
        return self.received

    async def _push(self, request: web.Request) -> web.Response:
        try:
            return await self._take(request)
        finally:
            self._changed.set()

    async def _take(self, request: web.Request) -> web.Response:
        sub_id = request.match_info["sub_id"]
        subscription = self._subscriptions.get(sub_id)
        if subscription is None:
            return self._refuse(404, f"no subscription {sub_id}")
        if sub_id in self.gone:
            self.gone_answers.append(sub_id)
            return web.Response(status=410)
        try:
            claims, key = verify_vapid(
                request.headers.get("Authorization", ""), self.origin, time.time()
            )
        except ValueError as exc:
            return self._refuse(401, f"VAPID: {exc}")
        if subscription.server_key is not None and key != subscription.server_key:
            return self._refuse(403, "k is not the key the subscription was made with")
        headers = dict(request.headers)
        problem = _header_problem(headers)
        if problem is not None:
            return self._refuse(400, problem)
        body = await request.read()
        try:
            plaintext = decrypt(body, subscription.private_key, subscription.auth)
        except ValueError as exc:
            return self._refuse(400, f"decrypt: {exc}")
        push = ReceivedPush(sub_id, headers, claims, body, plaintext)
        try:
            push.payload = json.loads(plaintext)
        except ValueError:
            return self._refuse(400, "the payload is not JSON")
        self.received.append(push)
        return web.Response(status=201)

    def _refuse(self, status: int, reason: str) -> web.Response:
        self.refused.append(reason)
        return web.Response(status=status, text=reason)


def _header_problem(headers: dict[str, str]) -> str | None:
    if headers.get("Content-Encoding") != "aes128gcm":
        return f"Content-Encoding {headers.get('Content-Encoding')!r}"
    ttl = headers.get("TTL", "")
    if not ttl.isdigit():
        return f"TTL {ttl!r}"
    if headers.get("Urgency", "normal") not in _URGENCIES:
        return f"Urgency {headers.get('Urgency')!r}"
    topic = headers.get("Topic")
    if topic is not None and not _TOPIC.match(topic):
        return f"Topic {topic!r}"
    return None
