"""Pairing through the private relay: a new phone may send 4515s into an open pairing window.

A fresh phone key is not registered yet, so without this carve-out pairing needs a public relay.
While a registered bridge has a window open (set through the admin API, with an end time), a 4515
from an unregistered key is admitted when **every** ``p`` tag names that bridge, so the carve-out
cannot be used to reach anyone else. Those events are rate-limited per source IP, because the author
is by definition unknown.
"""

from __future__ import annotations

from relaypolicy.kinds import COMMAND_KIND
from relaypolicy.message import ACCEPT, Decision, PolicyInput, tag_values
from relaypolicy.policies.base import RATE_LIMITED, PolicyContext
from relaypolicy.ratelimit import source_key

__all__ = ["pairing_rate", "pairing_target"]

_LIMIT_NAME = "pairing"
_TOO_MANY = Decision.reject(RATE_LIMITED, "too many pairing requests from this address")


def pairing_target(msg: PolicyInput, ctx: PolicyContext) -> str | None:
    """The bridge this event pairs with, if it is a 4515 into an open pairing window.

    Returns:
        The bridge pubkey when ``msg`` is a 4515 whose ``p`` tags all name one bridge whose window
        is open at ``msg.received_at``; else None. Registration of the author is not checked here.
    """
    if msg.kind != COMMAND_KIND:
        return None
    recipients = tag_values(msg, "p")
    if not recipients:
        return None
    bridge = recipients[0]
    if any(other != bridge for other in recipients):
        return None
    until = ctx.registry.pairing_window_until(bridge)
    if until is None or msg.received_at >= until or not ctx.registry.is_registered(bridge):
        return None
    return bridge


def pairing_rate(msg: PolicyInput, ctx: PolicyContext) -> Decision:
    """Rate-limit per source IP the 4515s that only the pairing carve-out admitted."""
    limit = ctx.config.pairing_per_ip
    if limit is None or msg.kind != COMMAND_KIND or ctx.registry.is_registered(msg.pubkey):
        return ACCEPT
    key = source_key(msg.source_type, msg.source_info)
    if key is None or ctx.limits.take(_LIMIT_NAME, key, msg.received_at, limit):
        return ACCEPT
    return _TOO_MANY
