"""What a push says and how it travels: payload fields only, TTL, Urgency, Topic."""

from __future__ import annotations

import json
import re

from bridge.protocol import PUSH_REASONS
from bridge.push import CARD_TTL, NEWS_TTL, notice_for, topic_for

BRIDGE = "ab" * 32


def test_the_payload_holds_exactly_the_five_fields() -> None:
    notice = notice_for(BRIDGE, "devbox", "approval", 3)
    assert json.loads(notice.payload) == {
        "v": 1,
        "bridge": BRIDGE,
        "machine": "devbox",
        "reason": "approval",
        "count": 3,
    }
    assert notice.payload == (
        b'{"v":1,"bridge":"'
        + BRIDGE.encode()
        + b'","machine":"devbox","reason":"approval","count":3}'
    )


def test_cards_are_urgent_and_live_an_hour_news_is_normal_and_shorter() -> None:
    for reason in PUSH_REASONS:
        notice = notice_for(BRIDGE, "m", reason, 1)
        card = reason in ("approval", "plan", "question")
        assert notice.urgency == ("high" if card else "normal")
        assert notice.ttl == (CARD_TTL if card else NEWS_TTL)
    assert CARD_TTL == 3600


def test_the_topic_is_32_base64url_characters_per_bridge_and_reason() -> None:
    topics = {topic_for(BRIDGE, reason) for reason in PUSH_REASONS}
    assert len(topics) == len(PUSH_REASONS)
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{32}", topic) for topic in topics)
    assert topic_for("cd" * 32, "approval") != topic_for(BRIDGE, "approval")
    assert topic_for(BRIDGE, "approval") == notice_for(BRIDGE, "x", "approval", 9).topic
    assert BRIDGE[:8] not in topic_for(BRIDGE, "approval")
