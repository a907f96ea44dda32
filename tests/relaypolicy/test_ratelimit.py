"""Token buckets with the clock passed in, and the per-source keys."""

from __future__ import annotations

import pytest

from relaypolicy.config import RateLimit
from relaypolicy.message import SourceType
from relaypolicy.ratelimit import TokenBuckets, source_key


def test_burst_then_refill_exact_boundaries() -> None:
    buckets = TokenBuckets()
    limit = RateLimit(burst=3, per_second=0.5)
    assert [buckets.take("n", "k", 100, limit) for _ in range(4)] == [True, True, True, False]
    assert not buckets.take("n", "k", 101, limit)  # half a token
    assert buckets.take("n", "k", 102, limit)  # 0.5 + 0.5 (the failed take kept its half)
    assert not buckets.take("n", "k", 102, limit)
    assert [buckets.take("n", "k", 1000, limit) for _ in range(4)] == [True, True, True, False]


def test_fractional_times() -> None:
    buckets = TokenBuckets()
    limit = RateLimit(burst=1, per_second=1.0)
    assert buckets.take("n", "k", 10.0, limit)
    assert not buckets.take("n", "k", 10.9, limit)
    assert buckets.take("n", "k", 11.0, limit)


def test_clock_going_backwards_adds_nothing() -> None:
    buckets = TokenBuckets()
    limit = RateLimit(burst=2, per_second=1.0)
    assert buckets.take("n", "k", 100, limit)
    assert buckets.take("n", "k", 100, limit)
    assert not buckets.take("n", "k", 50, limit)
    assert not buckets.take("n", "k", 100, limit)  # no credit for the jump back and forth
    assert buckets.take("n", "k", 101, limit)


def test_names_and_keys_are_separate_buckets() -> None:
    buckets = TokenBuckets()
    limit = RateLimit(burst=1, per_second=0.0)
    assert buckets.take("a", "k", 0, limit)
    assert buckets.take("b", "k", 0, limit)
    assert buckets.take("a", "j", 0, limit)
    assert not buckets.take("a", "k", 0, limit)
    assert len(buckets) == 3
    buckets.clear()
    assert len(buckets) == 0
    assert buckets.take("a", "k", 0, limit)


def test_least_recently_used_bucket_is_forgotten() -> None:
    buckets = TokenBuckets(max_keys=2)
    limit = RateLimit(burst=1, per_second=0.0)
    assert buckets.take("n", "old", 0, limit)
    assert buckets.take("n", "mid", 1, limit)
    assert not buckets.take("n", "old", 2, limit)  # touching "old" makes "mid" the oldest
    assert buckets.take("n", "new", 3, limit)  # evicts "mid"
    assert len(buckets) == 2
    assert not buckets.take("n", "old", 4, limit)  # still remembered
    assert buckets.take("n", "mid", 5, limit)  # forgotten: a fresh bucket


def test_max_keys_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_keys"):
        TokenBuckets(0)


@pytest.mark.parametrize(
    ("source_type", "info", "expected"),
    [
        (SourceType.IP4, "203.0.113.7", "203.0.113.7"),
        (SourceType.IP6, "2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        (SourceType.IP6, "[2001:db8:1:2::9]", "2001:db8:1:2::/64"),
        (SourceType.IP6, "::ffff:198.51.100.4", "198.51.100.4"),
        (SourceType.IP6, "not-an-ip", "not-an-ip"),
        (SourceType.IMPORT, "", None),
        (SourceType.STREAM, "wss://relay.example", None),
        (SourceType.SYNC, "wss://relay.example", None),
        (SourceType.STORED, "", None),
        (None, "203.0.113.7", None),
    ],
)
def test_source_key(source_type: SourceType | None, info: str, expected: str | None) -> None:
    assert source_key(source_type, info) == expected
