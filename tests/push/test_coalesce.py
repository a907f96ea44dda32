"""Coalescing: one push per phone per window, the most urgent reason, answered cards left out."""

from __future__ import annotations

from bridge.push import Coalescer, Wake, summarize

A, B = "a" * 64, "b" * 64


def never_answered(session: str, request: str) -> bool:
    return True


def test_a_phones_events_within_the_window_become_one_batch() -> None:
    coalescer = Coalescer(5.0)
    coalescer.add(Wake(A, "turn-ended"), 100.0)
    coalescer.add(Wake(A, "approval", ("s", "r1")), 103.0)
    coalescer.add(Wake(B, "question", ("s", "r2")), 104.0)
    assert coalescer.next_deadline() == 105.0
    assert coalescer.due(104.9) == []
    [batch] = coalescer.due(105.0)
    assert batch.phone == A and len(batch.events) == 2
    assert summarize(batch.events, never_answered) == ("approval", 2)
    assert coalescer.next_deadline() == 109.0
    [other] = coalescer.due(200.0)
    assert summarize(other.events, never_answered) == ("question", 1)
    assert coalescer.next_deadline() is None and len(coalescer) == 0


def test_an_event_after_the_window_opens_the_next_one() -> None:
    coalescer = Coalescer(5.0)
    coalescer.add(Wake(A, "turn-ended"), 0.0)
    [first] = coalescer.due(5.0)
    coalescer.add(Wake(A, "turn-ended"), 6.0)
    assert coalescer.next_deadline() == 11.0
    assert [len(first.events)] == [1]


def test_the_reason_is_the_most_urgent_of_the_window() -> None:
    order = ["approval", "plan", "question", "turn-ended", "session-died"]
    for index, reason in enumerate(order):
        events = [Wake(A, r) for r in reversed(order[index:])]  # type: ignore[arg-type]
        assert summarize(events, never_answered) == (reason, len(events))


def test_a_card_answered_before_the_window_closed_is_left_out() -> None:
    events = [Wake(A, "approval", ("s", "r1")), Wake(A, "turn-ended")]
    answered = {("s", "r1")}
    assert summarize(events, lambda s, r: (s, r) not in answered) == ("turn-ended", 1)
    only_card = [Wake(A, "plan", ("s", "r1"))]
    assert summarize(only_card, lambda s, r: (s, r) not in answered) is None
