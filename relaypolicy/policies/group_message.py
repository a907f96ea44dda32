"""Marmot group messages (445): admitted without registration, rate-limited per source IP.

Each 445 is signed by an ephemeral key derived from the MLS exporter secret, so there is no stable
author to register (v10: "a narrow carve-out, rate-limited per IP since CDX-013"). The per-IP token
bucket (default: a burst of 20 refilling at 1 per second) is what keeps the carve-out narrow.
"""

from __future__ import annotations

from relaypolicy.kinds import GROUP_MESSAGE_KIND
from relaypolicy.message import ACCEPT, Decision, PolicyInput
from relaypolicy.policies.base import RATE_LIMITED, PolicyContext
from relaypolicy.ratelimit import source_key

__all__ = ["group_message_rate"]

_LIMIT_NAME = "group-message"
_TOO_MANY = Decision.reject(RATE_LIMITED, "too many group messages from this address")


def group_message_rate(msg: PolicyInput, ctx: PolicyContext) -> Decision:
    """Rate-limit kind 445 per source IP (``group_message_per_ip``)."""
    limit = ctx.config.group_message_per_ip
    if limit is None or msg.kind != GROUP_MESSAGE_KIND:
        return ACCEPT
    key = source_key(msg.source_type, msg.source_info)
    if key is None or ctx.limits.take(_LIMIT_NAME, key, msg.received_at, limit):
        return ACCEPT
    return _TOO_MANY
