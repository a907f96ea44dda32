"""The backlog's bisection and release order, without a relay (a model relay with a cap)."""

from __future__ import annotations

import random

import pytest

from bridge.nostr.backlog import PAGE_THRESHOLD, Backlog
from bridge.nostr.event import VerifiedEvent, sign_event
from bridge.nostr.filters import Filter, matches_any
from bridge.nostr.keys import Keypair

AUTHOR = Keypair.from_secret("55" * 32)
NOW = 1_800_000_000


def events_at(stamps: list[int]) -> list[VerifiedEvent]:
    return [sign_event(AUTHOR, 1, f"e{n}", created_at=t) for n, t in enumerate(stamps)]


def answer(
    stored: list[VerifiedEvent], filters: tuple[Filter, ...], cap: int, *, holes: bool
) -> list[VerifiedEvent]:
    """What a relay with this cap sends: the newest `cap` matches, or (holes) a random `cap`."""
    matching = [e for e in stored if matches_any(filters, e)]
    matching.sort(key=lambda e: e.created_at, reverse=True)
    if len(matching) <= cap:
        return matching
    if holes:
        picked = random.Random(len(matching)).sample(matching, cap)
        return sorted(picked, key=lambda e: e.created_at, reverse=True)
    return matching[:cap]


def gather(
    stored: list[VerifiedEvent],
    filters: tuple[Filter, ...],
    cap: int,
    *,
    holes: bool = False,
    warnings: list[str] | None = None,
) -> tuple[list[VerifiedEvent], int]:
    """Drive a backlog to completion against the model relay; (released events, pages)."""
    backlog = Backlog(filters)
    largest = 0
    current: tuple[Filter, ...] | None = filters
    while current is not None:
        for event in answer(stored, current, cap, holes=holes):
            backlog.hold(event, stored=True)
        largest = max(largest, backlog.answer_size)
        current = backlog.answer_ended(largest, NOW)
        if warnings is not None:
            warnings += backlog.take_warnings()
    assert backlog.complete
    return backlog.release(), backlog.pages


@pytest.mark.parametrize("holes", [False, True])
@pytest.mark.parametrize("cap", [100, 500, 1000])
def test_everything_arrives_once_oldest_first_whatever_the_cap(cap: int, holes: bool) -> None:
    stamps = [NOW - 3600 + (n * 7) % 3600 for n in range(2500)]
    stored = events_at(stamps)
    released, pages = gather(
        stored, (Filter(authors=(AUTHOR.public_hex,), since=NOW - 4000),), cap, holes=holes
    )
    assert sorted(e.id for e in released) == sorted(e.id for e in stored)
    assert [e.created_at for e in released] == sorted(stamps)
    assert pages < 200


def test_without_a_since_it_reaches_back_before_the_oldest_received() -> None:
    stored = events_at([NOW - 100_000 + n * 37 for n in range(1800)])
    released, _ = gather(stored, (Filter(authors=(AUTHOR.public_hex,)),), 500, holes=False)
    assert len(released) == 1800


def test_an_answer_below_the_threshold_is_complete_at_once() -> None:
    stored = events_at([NOW - n for n in range(PAGE_THRESHOLD - 1)])
    released, pages = gather(stored, (Filter(),), 500)
    assert len(released) == PAGE_THRESHOLD - 1 and pages == 0


def test_one_second_that_holds_more_than_the_cap_is_given_up_with_a_warning() -> None:
    stored = events_at([NOW - 10] * 700)
    warnings: list[str] = []
    released, _ = gather(stored, (Filter(since=NOW - 20),), 500, warnings=warnings)
    assert len(released) == 500
    assert any("more stored events in one second" in w for w in warnings)


def test_a_limit_is_never_paged_and_duplicates_are_released_once() -> None:
    stored = events_at([NOW - n for n in range(300)])
    backlog = Backlog((Filter(limit=200),))
    for event in stored[:200] + stored[:10]:
        backlog.hold(event, stored=True)
    assert backlog.answer_ended(200, NOW) is None
    assert len(backlog.release()) == 200


def test_pages_are_narrowed_filters_and_a_refused_page_is_skipped() -> None:
    backlog = Backlog((Filter(kinds=(1,), since=NOW - 1000, until=NOW - 10),), max_pages=3)
    for event in events_at([NOW - 500] * 150):
        backlog.hold(event, stored=True)
    older = backlog.answer_ended(150, NOW)
    assert older == (Filter(kinds=(1,), since=NOW - 1000, until=NOW - 505),)
    newer = backlog.answer_ended(0, NOW)  # the relay refused the older page
    assert newer == (Filter(kinds=(1,), since=NOW - 504, until=NOW - 10),)
    assert backlog.answer_ended(150, NOW) is None and backlog.complete
