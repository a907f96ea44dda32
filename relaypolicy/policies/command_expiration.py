"""Commands and responses (4515, 4516) must expire, and within the hour.

v10 stamps both with ``["expiration", str(created_at + 3600)]``. Requiring the tag, and capping
it at ``receivedAt + max_command_expiry_seconds`` (plus ``clock_skew_seconds``, 120 by default,
for a sender whose clock runs ahead of the relay's), keeps the relay from holding encrypted
command traffic for longer than the protocol ever needs it (a key leaked later cannot read what
is gone).
An expiration at or before ``receivedAt`` is already expired (strfry and NIP-40: expired when
``now >= expiration``); strfry checks that too, but the in-process relay should not depend on it.
"""

from __future__ import annotations

from relaypolicy.kinds import EXPIRING_KINDS
from relaypolicy.message import ACCEPT, Decision, PolicyInput, first_tag_value
from relaypolicy.policies.base import INVALID, PolicyContext

__all__ = ["command_expiration"]

_EXPIRED = Decision.reject(INVALID, "event expired")
_MALFORMED = Decision.reject(INVALID, "malformed expiration tag")


def command_expiration(msg: PolicyInput, ctx: PolicyContext) -> Decision:
    """4515/4516 need a NIP-40 expiration in ``(receivedAt, receivedAt + max]``."""
    if msg.kind not in EXPIRING_KINDS:
        return ACCEPT
    raw = first_tag_value(msg, "expiration")
    if raw is None:
        return Decision.reject(INVALID, f"kind {msg.kind} needs a NIP-40 expiration tag")
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 20):
        return _MALFORMED
    expiration = int(raw)
    if expiration <= msg.received_at:
        return _EXPIRED
    limit = ctx.config.max_command_expiry_seconds
    if expiration - msg.received_at > limit + ctx.config.clock_skew_seconds:
        return Decision.reject(INVALID, f"expiration more than {limit} s ahead")
    return ACCEPT
