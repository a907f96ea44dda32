"""Token buckets for the rate-limit rules, with the clock passed in (khatru's model).

The rules never read a clock: strfry's ``receivedAt`` is the time. The buckets live in a
:class:`TokenBuckets` object that the *caller* owns (the plugin loop, or the daemon's embedded
relay) and hands to every decision, so tests drive time by choosing ``receivedAt``.

Memory is bounded: buckets are kept in least-recently-used order and the oldest is forgotten once
``max_keys`` is exceeded. Forgetting is safe by construction: the least recently touched bucket is
the one that has had the longest to refill, so it is the one most likely full already.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import ipaddress

from relaypolicy.config import RateLimit
from relaypolicy.message import SourceType

__all__ = ["TokenBuckets", "source_key"]

# An IPv6 user typically gets a whole /64; keying by the full address would let one host rotate
# through 2**64 fresh buckets.
_IPV6_PREFIX = 64


class TokenBuckets:
    """Token-bucket counters keyed by ``(limit name, key)``.

    Not thread-safe: one decision at a time, as strfry sends them.
    """

    __slots__ = ("_buckets", "max_keys")

    def __init__(self, max_keys: int = 65536) -> None:
        if max_keys < 1:
            raise ValueError("max_keys must be >= 1")
        self.max_keys = max_keys
        # (name, key) -> (tokens, last refill time). Dict order is recency order.
        self._buckets: dict[tuple[str, str], tuple[float, float]] = {}

    def __len__(self) -> int:
        return len(self._buckets)

    def take(self, name: str, key: str, now: float, limit: RateLimit) -> bool:
        """Spend one token from the bucket ``(name, key)`` at time ``now``.

        A clock that goes backwards refills nothing (it never adds or removes tokens).

        Returns:
            True when a token was available (the event is admitted), False when the bucket is empty.
        """
        slot = (name, key)
        previous = self._buckets.pop(slot, None)
        if previous is None:
            tokens, last = float(limit.burst), now
        else:
            tokens, last = previous
            if now > last:
                tokens = min(float(limit.burst), tokens + (now - last) * limit.per_second)
                last = now
        admitted = tokens >= 1.0
        if admitted:
            tokens -= 1.0
        self._buckets[slot] = (tokens, last)
        if len(self._buckets) > self.max_keys:
            del self._buckets[next(iter(self._buckets))]
        return admitted

    def clear(self) -> None:
        """Forget every bucket (everyone starts with a full burst again)."""
        self._buckets.clear()


def source_key(source_type: SourceType | None, source_info: str) -> str | None:
    """The rate-limit key of an event's source, or None when it has no client address.

    IPv4 addresses are used as they are; IPv6 addresses are grouped by their /64 network. Imports,
    syncs and streams (operator-initiated) have no client address and are not limited per IP.
    """
    if source_type is SourceType.IP4:
        return source_info
    if source_type is SourceType.IP6:
        try:
            address = ipaddress.IPv6Address(source_info.strip("[]"))
        except ValueError:
            return source_info
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        network = ipaddress.IPv6Network((address, _IPV6_PREFIX), strict=False)
        return str(network)
    return None
