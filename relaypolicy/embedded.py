"""The write policy inside an in-process relay (the bridge daemon's embedded relay).

rust-nostr's LocalRelay calls a write policy with the event and the client's socket address. This
adapter turns that into the same decision the strfry plugin makes, with ``receivedAt`` taken from
the clock at the moment of the call, and never raises: an exception from a rule becomes strfry's
``error: internal error`` (an exception escaping into the relay's FFI would abort the process;
shared/notes/relays-and-policy.md §4, gotcha 2).

The returned message keeps its NIP-01 prefix. rust-nostr's FFI ``REJECT(msg)`` always prepends
``blocked: ``, so the FFI glue should strip our prefix first (as ``tests/support/relay.py`` does).

The daemon owns the :class:`~relaypolicy.pipeline.RelayPolicy` (and so the rate-limit state) and
passes a :class:`~relaypolicy.registry.MemoryRegistry` holding the bridge and its paired phones.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from relaypolicy.pipeline import INTERNAL_ERROR, RelayPolicy

__all__ = ["EmbeddedPolicy"]

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
