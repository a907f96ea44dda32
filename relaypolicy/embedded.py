"""The write policy inside an in-process relay (the bridge daemon's embedded relay).

rust-nostr's LocalRelay calls a write policy with the event and the client's socket address. This
adapter turns that into the same decision the strfry plugin makes, with ``receivedAt`` taken from
the clock at the moment of the call, and never raises: an exception from a rule becomes strfry's
``error: internal error`` (an exception escaping into the relay's FFI would abort the process;
shared/notes/relays-and-policy.md §4, gotcha 2).

The returned message keeps its NIP-01 prefix. rust-nostr's FFI ``REJECT(msg)`` always prepends
``blocked: ``, so the FFI glue should strip our prefix first (as ``tests/support/relay.py`` does).

The daemon owns the :class:`~relaypolicy.pipeline.RelayPolicy` (and so the rate-limit state) and
passes a registry answering from its own state: the bridge and its paired phones are registered,
and the bridge has a pairing window while the daemon holds one open.

The embedded relay's rules (:data:`EMBEDDED_POLICIES`, built by :func:`embedded_policy`) are
narrower than the deployed relay's: it serves one bridge and the owner's phones, so it takes the
four bridge-protocol kinds only, from registered authors only, plus the one pairing carve-out (a
new phone's 4515 addressed to the bridge alone while its window is open, rate-limited per source
address). The deployed relay's carve-outs for anonymous signers (Marmot group messages, gift
wraps) would let anyone who can reach the port store events here; nothing of CodeDeck uses them.
No per-writer rate limit either: the only writers are this bridge and the owner's phones, and
throttling them only refuses a phone's burst of sync acks or the bridge's own live output.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Final

from relaypolicy.config import DEFAULT_CONFIG, PolicyConfig
from relaypolicy.pipeline import INTERNAL_ERROR, RelayPolicy
from relaypolicy.policies import (
    Policy,
    codedeck_kinds_only,
    command_expiration,
    pairing_rate,
    registered_author,
)
from relaypolicy.registry import PubkeyRegistry

__all__ = ["EMBEDDED_CONFIG", "EMBEDDED_POLICIES", "EmbeddedPolicy", "embedded_policy"]

#: The embedded relay's rules, in order: what (the four kinds; 4515/4516 expire within the
#: hour), who (registered, or a 4515 into the open pairing window), how often (the window's
#: strangers, per source address).
EMBEDDED_POLICIES: Final[tuple[Policy, ...]] = (
    codedeck_kinds_only,
    command_expiration,
    registered_author,
    pairing_rate,
)

#: The deployed relay's tunables without the per-writer limit (see the module docstring).
EMBEDDED_CONFIG: Final[PolicyConfig] = replace(DEFAULT_CONFIG, writer_per_pubkey=None)

logger = logging.getLogger(__name__)


class EmbeddedPolicy:
    """``admit_event(event_json, source_ip) -> (accepted, msg)`` over a :class:`RelayPolicy`.

    Args:
        policy: the decision function with its registry, config and rate-limit state.
        clock: unix seconds, used as ``receivedAt``.
    """

    def __init__(self, policy: RelayPolicy, *, clock: Callable[[], float] = time.time) -> None:
        self.policy = policy
        self._clock = clock

    def admit(self, event_json: Mapping[str, Any], source_ip: str) -> tuple[bool, str]:
        """Decide synchronously (decisions take microseconds)."""
        try:
            _, decision = self.policy.decide_event(
                event_json, source_ip=source_ip, received_at=int(self._clock())
            )
        except Exception:
            event_id = event_json.get("id") if isinstance(event_json, Mapping) else None
            logger.exception("write policy failed on event %s", str(event_id)[:8])
            return False, INTERNAL_ERROR.msg
        return decision.accepted, decision.msg

    async def admit_event(self, event_json: dict[str, Any], source_ip: str) -> tuple[bool, str]:
        """The asynchronous form relay adapters call (see ``tests/support/relay.py``)."""
        return self.admit(event_json, source_ip)


def embedded_policy(
    registry: PubkeyRegistry, *, clock: Callable[[], float] = time.time
) -> EmbeddedPolicy:
    """The write policy of a bridge's embedded relay over ``registry`` (see the module docstring)."""
    return EmbeddedPolicy(
        RelayPolicy(registry, EMBEDDED_CONFIG, policies=EMBEDDED_POLICIES), clock=clock
    )
