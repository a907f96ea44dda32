"""Seq-range arithmetic for transcript sync (PROTOCOL-v10-wire.md §8).

A range is an inclusive ``(from, to)`` pair of transcript seqs. Lists of ranges arrive from phones
in any order, overlapping, even inverted (the schema does not forbid ``from > to``), so every helper
normalizes first: drop inverted ranges, sort, merge overlapping *and adjacent* ones (``[1,3]`` and
``[4,6]`` become ``[1,6]``). The result of every helper is normalized, so helpers compose.

The sync server uses them so:
``missing(have, 1, seq_high)`` → what to send (``sync-begin.ranges``); ``chunk_ranges(missing, 50)``
→ the ``sync-chunk`` ranges; ``union(acked)`` → ``sync-end.deliveredRanges``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeAlias

__all__ = [
    "Range",
    "chunk_ranges",
    "covers",
    "missing",
    "normalize",
    "size",
    "subtract",
    "union",
]

Range: TypeAlias = tuple[int, int]
RangesIn: TypeAlias = Iterable[Sequence[int]]


def normalize(ranges: RangesIn) -> list[Range]:
    """Drop inverted ranges, sort, and merge overlapping or adjacent ones."""
    ordered = sorted((low, high) for low, high in ranges if low <= high)
    merged: list[Range] = []
    for low, high in ordered:
        if merged and low <= merged[-1][1] + 1:
            if high > merged[-1][1]:
                merged[-1] = (merged[-1][0], high)
        else:
            merged.append((low, high))
    return merged


def missing(have: RangesIn, low: int, high: int) -> list[Range]:
    """The parts of ``[low, high]`` that ``have`` does not cover (empty when ``low > high``)."""
    return subtract([(low, high)], have)


def union(*range_lists: RangesIn) -> list[Range]:
    """Everything covered by any of the given lists."""
    return normalize(pair for ranges in range_lists for pair in ranges)


def subtract(ranges: RangesIn, remove: RangesIn) -> list[Range]:
    """The parts of ``ranges`` not covered by ``remove``."""
    cuts = normalize(remove)
    result: list[Range] = []
    index = 0
    for low, high in normalize(ranges):
        # Skip cuts that end before this range; they cannot affect later ranges either.
        while index < len(cuts) and cuts[index][1] < low:
            index += 1
        cursor = low
        scan = index
        while scan < len(cuts) and cuts[scan][0] <= high:
            cut_low, cut_high = cuts[scan]
            if cut_low > cursor:
                result.append((cursor, cut_low - 1))
            cursor = max(cursor, cut_high + 1)
            if cursor > high:
                break
            scan += 1
        if cursor <= high:
            result.append((cursor, high))
    return result


def chunk_ranges(ranges: RangesIn, chunk_size: int) -> list[Range]:
    """Cut the (normalized) ranges into pieces of at most ``chunk_size`` seqs, in order.

    Raises:
        ValueError: ``chunk_size`` is not positive.
    """
    if chunk_size < 1:
        raise ValueError("chunk_size must be positive")
    pieces: list[Range] = []
    for low, high in normalize(ranges):
        for start in range(low, high + 1, chunk_size):
            pieces.append((start, min(start + chunk_size - 1, high)))
    return pieces


def size(ranges: RangesIn) -> int:
    """How many distinct seqs the ranges cover."""
    return sum(high - low + 1 for low, high in normalize(ranges))


def covers(ranges: RangesIn, target: int | Sequence[int]) -> bool:
    """Whether every seq of ``target`` (one seq, or an inclusive range) is covered.

    An inverted target range is empty and therefore covered.
    """
    if isinstance(target, int):
        low = high = target
    else:
        low, high = target
    if low > high:
        return True
    return any(start <= low and high <= end for start, end in normalize(ranges))
