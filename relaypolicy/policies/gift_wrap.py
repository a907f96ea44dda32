"""NIP-17 gift wraps (1059) are admitted for registered recipients, whoever signed them.

A wrap is signed by a one-off key by design, so its author says nothing; the ``p`` tag names the
recipient. At least one ``p`` must be registered, so the relay only carries mail for its users. The
signers being anonymous, the wraps are also rate-limited per source IP.
"""

from __future__ import annotations

from relaypolicy.kinds import GIFT_WRAP_KIND
from relaypolicy.message import ACCEPT, Decision, PolicyInput, tag_values
from relaypolicy.policies.base import RATE_LIMITED, RESTRICTED, PolicyContext
from relaypolicy.ratelimit import source_key

__all__ = ["gift_wrap_rate", "gift_wrap_recipient"]

_LIMIT_NAME = "gift-wrap"
_NO_RECIPIENT = Decision.reject(RESTRICTED, "no registered recipient")
_TOO_MANY = Decision.reject(RATE_LIMITED, "too many gift wraps from this address")


def gift_wrap_recipient(msg: PolicyInput, ctx: PolicyContext) -> Decision:
    """A 1059 needs at least one ``p`` tag naming a registered pubkey."""
    if msg.kind != GIFT_WRAP_KIND:
        return ACCEPT
    is_registered = ctx.registry.is_registered
    if any(is_registered(pubkey) for pubkey in tag_values(msg, "p")):
        return ACCEPT
    return _NO_RECIPIENT


def gift_wrap_rate(msg: PolicyInput, ctx: PolicyContext) -> Decision:
    """Rate-limit gift wraps per source IP (``gift_wrap_per_ip``)."""
    limit = ctx.config.gift_wrap_per_ip
    if limit is None or msg.kind != GIFT_WRAP_KIND:
        return ACCEPT
    key = source_key(msg.source_type, msg.source_info)
    if key is None or ctx.limits.take(_LIMIT_NAME, key, msg.received_at, limit):
        return ACCEPT
    return _TOO_MANY
