"""A per-pubkey rate limit on registered writers, so one leaked phone key cannot flood the relay.

It applies to every event whose author is registered, from any source with a client address
(imports and syncs started by the operator are not limited). It runs last in the pipeline, so a
token is only spent on an event that every other rule admitted.
"""

from __future__ import annotations

from relaypolicy.message import ACCEPT, Decision, PolicyInput, SourceType
from relaypolicy.policies.base import RATE_LIMITED, PolicyContext

__all__ = ["writer_rate"]

_LIMIT_NAME = "writer"
_TOO_MANY = Decision.reject(RATE_LIMITED, "too many events from this pubkey")
# Operator-initiated sources: ``strfry import``, ``stream``, ``sync`` and router "up" traffic.
_OPERATOR_SOURCES = frozenset(
    {SourceType.IMPORT, SourceType.STREAM, SourceType.SYNC, SourceType.STORED}
)


def writer_rate(msg: PolicyInput, ctx: PolicyContext) -> Decision:
    """Rate-limit registered authors per pubkey (``writer_per_pubkey``)."""
    limit = ctx.config.writer_per_pubkey
    if (
        limit is None
        or msg.source_type in _OPERATOR_SOURCES
        or not ctx.registry.is_registered(msg.pubkey)
    ):
        return ACCEPT
    if ctx.limits.take(_LIMIT_NAME, msg.pubkey, msg.received_at, limit):
        return ACCEPT
    return _TOO_MANY
