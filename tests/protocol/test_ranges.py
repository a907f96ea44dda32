"""Seq-range arithmetic (PROTOCOL.md §11): examples, then the algebra as properties."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.protocol.ranges import (
    Range,
    chunk_ranges,
    covers,
    missing,
    normalize,
    size,
    subtract,
    union,
)

NORMALIZE = [
    ([], []),
    ([(1, 3)], [(1, 3)]),
    ([(5, 6), (1, 3)], [(1, 3), (5, 6)]),
    ([(1, 3), (4, 6)], [(1, 6)]),  # adjacent ranges merge
    ([(1, 5), (2, 3)], [(1, 5)]),  # contained
    ([(1, 5), (3, 9)], [(1, 9)]),  # overlapping
    ([(9, 8), (1, 1)], [(1, 1)]),  # inverted ranges are dropped
    ([[0, 0], [1, 1]], [(0, 1)]),  # lists from JSON work too
]


@pytest.mark.parametrize(("ranges", "expected"), NORMALIZE)
def test_normalize(ranges: list[Range], expected: list[Range]) -> None:
    assert normalize(ranges) == expected


def test_missing() -> None:
    assert missing([], 1, 10) == [(1, 10)]
    assert missing([(2, 3), (7, 9)], 1, 10) == [(1, 1), (4, 6), (10, 10)]
    assert missing([(0, 100)], 1, 10) == []
    assert missing([(1, 5)], 1, 0) == []  # nothing stored yet
    assert missing([(5, 1)], 1, 3) == [(1, 3)]  # an inverted "have" covers nothing


def test_chunk_ranges() -> None:
    assert chunk_ranges([(1, 120)], 50) == [(1, 50), (51, 100), (101, 120)]
    assert chunk_ranges([(1, 3), (10, 10)], 2) == [(1, 2), (3, 3), (10, 10)]
    assert chunk_ranges([], 50) == []
    with pytest.raises(ValueError, match="positive"):
        chunk_ranges([(1, 2)], 0)


def test_union_subtract_size_covers() -> None:
    assert union([(1, 2)], [(3, 4)], [(10, 10)]) == [(1, 4), (10, 10)]
    assert subtract([(1, 10)], [(0, 2), (5, 5), (9, 20)]) == [(3, 4), (6, 8)]
    assert subtract([(1, 3), (5, 7)], [(3, 5)]) == [(1, 2), (6, 7)]
    assert size([(1, 3), (2, 5), (8, 7)]) == 5
    assert covers([(1, 5), (7, 9)], 4)
    assert not covers([(1, 5), (7, 9)], 6)
    assert covers([(1, 5), (6, 9)], (2, 8))  # adjacent ranges merge first
    assert not covers([(1, 5), (7, 9)], (2, 8))
    assert covers([], (5, 4))  # an inverted target is empty


bound = st.integers(min_value=0, max_value=300)
ranges_st = st.lists(st.tuples(bound, bound), max_size=8)


def seqs(ranges: list[Range]) -> set[int]:
    return {seq for low, high in ranges for seq in range(low, high + 1)}


def is_normal(ranges: list[Range]) -> bool:
    return all(low <= high for low, high in ranges) and all(
        previous[1] + 1 < current[0] for previous, current in itertools.pairwise(ranges)
    )


@given(ranges_st)
def test_normalize_is_idempotent_and_keeps_the_seqs(ranges: list[Range]) -> None:
    once = normalize(ranges)
    assert normalize(once) == once
    assert is_normal(once)
    assert seqs(once) == seqs(ranges)
    assert size(ranges) == len(seqs(ranges))


@given(ranges_st, bound, bound)
def test_missing_and_have_cover_the_span(have: list[Range], low: int, high: int) -> None:
    gaps = missing(have, low, high)
    assert is_normal(gaps)
    span = set(range(low, high + 1))
    assert seqs(gaps) == span - seqs(have)
    assert covers(union(gaps, have), (low, high))
    assert seqs(gaps).isdisjoint(seqs(have))


@given(ranges_st, ranges_st)
def test_subtract_and_union_agree(a: list[Range], b: list[Range]) -> None:
    difference = subtract(a, b)
    assert is_normal(difference)
    assert seqs(difference) == seqs(a) - seqs(b)
    assert union(difference, b) == union(a, b)
    assert subtract(union(a, b), b) == difference
    assert union(a, b) == union(b, a)
    assert size(union(a, b)) == size(a) + size(b) - len(seqs(a) & seqs(b))


@given(ranges_st, st.integers(min_value=1, max_value=60))
def test_chunks_partition_the_ranges(ranges: list[Range], chunk: int) -> None:
    pieces = chunk_ranges(ranges, chunk)
    assert all(1 <= high - low + 1 <= chunk for low, high in pieces)
    assert union(pieces) == normalize(ranges)
    assert sum(high - low + 1 for low, high in pieces) == size(ranges)
    assert pieces == sorted(pieces)


@given(ranges_st, bound)
def test_covers_matches_membership(ranges: list[Range], seq: int) -> None:
    assert covers(ranges, seq) == (seq in seqs(ranges))
