"""What every policy receives besides the request, and the shape of a policy.

A policy is ``(msg, ctx) -> Decision``: it returns :data:`~relaypolicy.message.ACCEPT` when it has
no objection, or a rejection with a standard OK prefix. It reads the registry and configuration
from ``ctx`` and may spend rate-limit tokens from ``ctx.limits`` (state owned by the caller); it
never reads a clock, a file or the environment (``msg.received_at`` is the time).

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeAlias

from relaypolicy.config import PolicyConfig
from relaypolicy.message import Decision, PolicyInput
from relaypolicy.ratelimit import TokenBuckets
from relaypolicy.registry import PubkeyRegistry

__all__ = [
    "BLOCKED",
    "INVALID",
    "RATE_LIMITED",
    "RESTRICTED",
    "Policy",
    "PolicyContext",
]

# NIP-01 machine-readable OK prefixes.
#: The relay does not take this kind of event at all.
BLOCKED: Final = "blocked"
#: The author (or recipient) is not allowed to write here.
RESTRICTED: Final = "restricted"
#: Too many events from this source or author; try later.
RATE_LIMITED: Final = "rate-limited"
#: The event breaks a structural rule (tags, expiry).
INVALID: Final = "invalid"


@dataclass(frozen=True, slots=True)
class PolicyContext:
    """The environment of one decision.

    Attributes:
        registry: who is registered, and who has a pairing window open.
        config: the tunables.
        limits: the rate-limit buckets; mutated by the rate-limit policies.
    """

    registry: PubkeyRegistry
    config: PolicyConfig
    limits: TokenBuckets


Policy: TypeAlias = Callable[[PolicyInput, PolicyContext], Decision]
