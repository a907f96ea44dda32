"""Sending one push to one subscription: encrypt, sign, POST, and read the push service's answer.

RFC 8030 §5: the bridge POSTs the encrypted body to the subscription's endpoint with ``TTL``,
``Urgency``, ``Topic``, ``Content-Encoding: aes128gcm`` and the VAPID ``Authorization``. A 2xx
answer means the push service took it. 404 and 410 mean the subscription is gone for good (the
browser unsubscribed, or the push service expired it): the caller forgets it. Anything else
(a refusal, a timeout, a network error) is logged and dropped; the next event tries again.

Only the endpoint's scheme and host are ever named in a result or log line: the rest of the URL
identifies the subscription, and the keys are secrets.
"""

from __future__ import annotations

import asyncio
import enum
from typing import Final
from urllib.parse import urlsplit

import aiohttp

from bridge.push.ece import PushKeyError, b64url_decode, encrypt
from bridge.push.notice import Notice
from bridge.push.vapid import VapidKey
from bridge.records import record

__all__ = ["SEND_TIMEOUT", "Outcome", "Sent", "endpoint_origin", "send_push"]

SEND_TIMEOUT: Final = 10.0
"""Seconds one push may take, connection included."""
_GONE: Final = frozenset({404, 410})


class Outcome(enum.Enum):
    DELIVERED = "delivered"
    GONE = "gone"
    """The push service says the subscription no longer exists: forget it."""
    FAILED = "failed"


@record
class Sent:
    """What became of one push: the outcome, the HTTP status (if any) and why (for the log)."""

    outcome: Outcome
    status: int | None = None
    detail: str = ""


def endpoint_origin(endpoint: str) -> str:
    """``scheme://host[:port]`` of an endpoint: the VAPID ``aud``, and all a log line names."""
    parts = urlsplit(endpoint)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    default = {"https": 443, "http": 80}.get(parts.scheme)
    port = f":{parts.port}" if parts.port is not None and parts.port != default else ""
    return f"{parts.scheme}://{host}{port}"


async def send_push(
    session: aiohttp.ClientSession,
    *,
    endpoint: str,
    p256dh: str,
    auth: str,
    notice: Notice,
    vapid: VapidKey,
    now: float,
    timeout: float = SEND_TIMEOUT,
) -> Sent:
    """Encrypt `notice` to the subscription and POST it; never raises for the network's sake."""
    try:
        body = encrypt(notice.payload, b64url_decode(p256dh), b64url_decode(auth))
    except PushKeyError as exc:
        return Sent(Outcome.GONE, None, f"unusable subscription keys ({exc})")
    headers = {
        "TTL": str(notice.ttl),
        "Urgency": notice.urgency,
        "Topic": notice.topic,
        "Content-Encoding": "aes128gcm",
        "Content-Type": "application/octet-stream",
        "Authorization": vapid.authorization(endpoint_origin(endpoint), now),
    }
    try:
        async with asyncio.timeout(timeout):
            # No redirect: the token names this push service; its answer's body is not read.
            async with session.post(
                endpoint, data=body, headers=headers, allow_redirects=False
            ) as response:
                status = response.status
    except TimeoutError:
        return Sent(Outcome.FAILED, None, f"no answer within {timeout:.0f} s")
    except aiohttp.ClientError as exc:
        return Sent(Outcome.FAILED, None, type(exc).__name__)
    if 200 <= status < 300:
        return Sent(Outcome.DELIVERED, status)
    if status in _GONE:
        return Sent(Outcome.GONE, status, "the subscription is gone")
    return Sent(Outcome.FAILED, status, "refused")
