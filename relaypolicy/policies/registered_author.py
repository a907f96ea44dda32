"""The app kinds, relay lists and KeyPackages are written only by registered pubkeys.

"restricted: not a registered user" is the message the reference relay gives, and clients match on
the ``restricted:`` prefix. The single exception is a 4515 into an open pairing window
(:func:`relaypolicy.policies.pairing.pairing_target`).
"""

from __future__ import annotations

from relaypolicy.kinds import REGISTERED_AUTHOR_KINDS
from relaypolicy.message import ACCEPT, Decision, PolicyInput
from relaypolicy.policies.base import RESTRICTED, PolicyContext
from relaypolicy.policies.pairing import pairing_target

__all__ = ["NOT_REGISTERED", "registered_author"]

NOT_REGISTERED = Decision.reject(RESTRICTED, "not a registered user")


def registered_author(msg: PolicyInput, ctx: PolicyContext) -> Decision:
    """Kinds in :data:`~relaypolicy.kinds.REGISTERED_AUTHOR_KINDS` need a registered author."""
    if msg.kind not in REGISTERED_AUTHOR_KINDS or ctx.registry.is_registered(msg.pubkey):
        return ACCEPT
    if pairing_target(msg, ctx) is not None:
        return ACCEPT
    return NOT_REGISTERED
