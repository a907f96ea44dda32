"""What one push says, and the headers that tell the push service how to carry it.

The payload is the JSON of :class:`~bridge.protocol.PushPayload`: the bridge, the machine, the
reason in one word and the number of events it stands for. Nothing else, by construction: the
payload is built from those four values only, so no transcript text, title, folder, tool name
or session id can reach a push service.

Headers (RFC 8030 §5):

- ``TTL``: how long the push service keeps an undelivered push. A card is denied after an hour
  (the broker's expiry), so its push lives as long (:data:`CARD_TTL`); news that a turn ended or
  a session stopped is stale sooner (:data:`NEWS_TTL`).
- ``Urgency``: ``high`` for a card (someone waits for the user), ``normal`` otherwise.
- ``Topic``: one per bridge and reason, so a push service that still holds an undelivered push
  of this bridge for this reason replaces it instead of queueing another (§5.4: at most 32
  characters of the base64url alphabet; a hash, so it names neither the bridge nor the reason
  to the push service).
"""

from __future__ import annotations

import hashlib
import json
from typing import Final

from bridge.protocol import PUSH_PAYLOAD_VERSION, PushPayload, PushReason
from bridge.push.ece import b64url_encode
from bridge.records import record

__all__ = ["CARD_REASONS", "CARD_TTL", "NEWS_TTL", "Notice", "notice_for", "topic_for"]

CARD_REASONS: Final[frozenset[PushReason]] = frozenset({"approval", "plan", "question"})
CARD_TTL: Final = 3600
NEWS_TTL: Final = 900
TOPIC_LENGTH: Final = 32


@record
class Notice:
    """One push as it leaves the bridge, before encryption: payload and headers."""

    payload: bytes
    ttl: int
    urgency: str
    topic: str


def topic_for(bridge: str, reason: PushReason) -> str:
    """The ``Topic`` of this bridge's pushes for `reason` (32 base64url characters)."""
    digest = hashlib.sha256(f"codedeck-push:{bridge}:{reason}".encode()).digest()
    return b64url_encode(digest)[:TOPIC_LENGTH]


def notice_for(bridge: str, machine: str, reason: PushReason, count: int) -> Notice:
    """The push for `count` events of which the most urgent is `reason`."""
    payload = PushPayload(
        v=PUSH_PAYLOAD_VERSION, bridge=bridge, machine=machine, reason=reason, count=count
    )
    text = json.dumps(payload.model_dump(), separators=(",", ":"), ensure_ascii=False)
    card = reason in CARD_REASONS
    return Notice(
        payload=text.encode("utf-8"),
        ttl=CARD_TTL if card else NEWS_TTL,
        urgency="high" if card else "normal",
        topic=topic_for(bridge, reason),
    )
