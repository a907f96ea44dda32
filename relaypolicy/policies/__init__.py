"""The rules of the private CodeDeck relay, one per module (strfry-policies' layout).

Each rule is a :data:`~relaypolicy.policies.base.Policy`; :mod:`relaypolicy.pipeline` composes
them in order and the first that does not accept decides.
"""

from __future__ import annotations

from relaypolicy.policies.allowed_kinds import allowed_kinds, codedeck_kinds_only
from relaypolicy.policies.base import (
    BLOCKED,
    INVALID,
    RATE_LIMITED,
    RESTRICTED,
    Policy,
    PolicyContext,
)
from relaypolicy.policies.command_expiration import command_expiration
from relaypolicy.policies.d_tag import addressable_d_tag
from relaypolicy.policies.gift_wrap import gift_wrap_rate, gift_wrap_recipient
from relaypolicy.policies.group_message import group_message_rate
from relaypolicy.policies.pairing import pairing_rate, pairing_target
from relaypolicy.policies.registered_author import NOT_REGISTERED, registered_author
from relaypolicy.policies.writer_rate import writer_rate

__all__ = [
    "BLOCKED",
    "INVALID",
    "NOT_REGISTERED",
    "RATE_LIMITED",
    "RESTRICTED",
    "Policy",
    "PolicyContext",
    "addressable_d_tag",
    "allowed_kinds",
    "codedeck_kinds_only",
    "command_expiration",
    "gift_wrap_rate",
    "gift_wrap_recipient",
    "group_message_rate",
    "pairing_rate",
    "pairing_target",
    "registered_author",
    "writer_rate",
]
