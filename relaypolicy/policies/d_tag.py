"""Addressable kinds that must name their ``d`` tag (Marmot KeyPackages, 30443).

strfry reads a missing ``d`` as ``d=""`` and rust-nostr's memory store refuses it; a KeyPackage
without its ``d`` would silently replace the author's other KeyPackages, so it is refused here on
every relay. An empty value is a valid ``d`` (NIP-01) and is allowed.
"""

from __future__ import annotations

from relaypolicy.kinds import ADDRESSABLE_NEEDS_D_TAG
from relaypolicy.message import ACCEPT, Decision, PolicyInput, first_tag_value
from relaypolicy.policies.base import INVALID, PolicyContext

__all__ = ["addressable_d_tag"]


def addressable_d_tag(msg: PolicyInput, ctx: PolicyContext) -> Decision:
    """Kinds in :data:`~relaypolicy.kinds.ADDRESSABLE_NEEDS_D_TAG` need a ``d`` tag."""
    if msg.kind in ADDRESSABLE_NEEDS_D_TAG and first_tag_value(msg, "d") is None:
        return Decision.reject(INVALID, f"kind {msg.kind} needs a d tag")
    return ACCEPT
