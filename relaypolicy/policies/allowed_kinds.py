"""A private relay: only the kinds CodeDeck and its DM/Marmot companions use are written.

Kind 444 (a Marmot welcome rumor) gets its own message: it is a known kind that must only ever
travel inside a gift wrap, so a bare one is a client bug worth naming.
"""

from __future__ import annotations

from relaypolicy.kinds import ACCEPTED_KINDS, WELCOME_KIND
from relaypolicy.message import ACCEPT, Decision, PolicyInput
from relaypolicy.policies.base import BLOCKED, PolicyContext

__all__ = ["allowed_kinds"]

_BARE_WELCOME = Decision.reject(BLOCKED, "kind 444 is only accepted inside a gift wrap (kind 1059)")


def allowed_kinds(msg: PolicyInput, ctx: PolicyContext) -> Decision:
    """Reject every kind this relay does not serve, and bare Marmot welcomes."""
    if msg.kind in ACCEPTED_KINDS:
        return ACCEPT
    if msg.kind == WELCOME_KIND:
        return _BARE_WELCOME
    return Decision.reject(BLOCKED, f"kind {msg.kind} is not accepted on this private relay")
