"""A private relay: only the kinds CodeDeck and its DM/Marmot companions use are written.

Kind 444 (a Marmot welcome rumor) gets its own message: it is a known kind that must only ever
travel inside a gift wrap, so a bare one is a client bug worth naming.

A bridge's embedded relay is narrower still (:func:`codedeck_kinds_only`): it serves one bridge
and its phones, which speak only the four bridge-protocol kinds, so the DM and Marmot kinds (whose
anonymous signers are what the deployed relay's rate limits are for) have no business there.
"""

from __future__ import annotations

from relaypolicy.kinds import ACCEPTED_KINDS, CODEDECK_KINDS, WELCOME_KIND
from relaypolicy.message import ACCEPT, Decision, PolicyInput
from relaypolicy.policies.base import BLOCKED, PolicyContext

__all__ = ["allowed_kinds", "codedeck_kinds_only"]

_BARE_WELCOME = Decision.reject(BLOCKED, "kind 444 is only accepted inside a gift wrap (kind 1059)")


def allowed_kinds(msg: PolicyInput, ctx: PolicyContext) -> Decision:
    """Reject every kind this relay does not serve, and bare Marmot welcomes."""
    if msg.kind in ACCEPTED_KINDS:
        return ACCEPT
    if msg.kind == WELCOME_KIND:
        return _BARE_WELCOME
    return Decision.reject(BLOCKED, f"kind {msg.kind} is not accepted on this private relay")


def codedeck_kinds_only(msg: PolicyInput, ctx: PolicyContext) -> Decision:
    """Reject every kind but the four of the bridge protocol (the embedded relay's rule)."""
    if msg.kind in CODEDECK_KINDS:
        return ACCEPT
    return Decision.reject(BLOCKED, f"kind {msg.kind} is not accepted on this bridge's relay")
