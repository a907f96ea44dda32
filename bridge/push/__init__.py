"""Web Push from the bridge itself (RFC 8030, 8291, 8292): the wake-ups of phones that are away.

- ``ece``: the ``aes128gcm`` encryption of a push to a browser's subscription (RFC 8291);
- ``vapid``: the bridge's P-256 VAPID key and the signed claim each push carries (RFC 8292);
- ``notice``: what a push says (the payload) and how it travels (TTL, Urgency, Topic);
- ``coalesce``: the events of one phone within a few seconds become one push;
- ``sender``: one POST to one push service, and what its answer means.

When to push and to whom is the runtime's edge (:mod:`bridge.runtime.edges.push`); what counts
as an event is the engine's (:mod:`bridge.engine.phones.push`). Built on ``cryptography`` and
``aiohttp``, which the bridge depends on already.
"""

from bridge.push.coalesce import WINDOW, Batch, Coalescer, Wake, summarize
from bridge.push.ece import (
    AUTH_SECRET_LENGTH,
    RECORD_SIZE,
    PushKeyError,
    b64url_decode,
    b64url_encode,
    encrypt,
    public_point,
)
from bridge.push.notice import CARD_REASONS, CARD_TTL, NEWS_TTL, Notice, notice_for, topic_for
from bridge.push.sender import SEND_TIMEOUT, Outcome, Sent, endpoint_origin, send_push
from bridge.push.vapid import DEFAULT_CONTACT, TOKEN_LIFETIME, TOKEN_RENEW_BEFORE, VapidKey

__all__ = [
    "AUTH_SECRET_LENGTH",
    "CARD_REASONS",
    "CARD_TTL",
    "DEFAULT_CONTACT",
    "NEWS_TTL",
    "RECORD_SIZE",
    "SEND_TIMEOUT",
    "TOKEN_LIFETIME",
    "TOKEN_RENEW_BEFORE",
    "WINDOW",
    "Batch",
    "Coalescer",
    "Notice",
    "Outcome",
    "PushKeyError",
    "Sent",
    "VapidKey",
    "Wake",
    "b64url_decode",
    "b64url_encode",
    "encrypt",
    "endpoint_origin",
    "notice_for",
    "public_point",
    "send_push",
    "summarize",
    "topic_for",
]
