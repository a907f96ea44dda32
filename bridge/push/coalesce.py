"""Coalescing: the events of one phone within a few seconds become one push.

A turn that asks for two permissions and then ends is three events in as many seconds; the
user wants one buzz that says the most urgent of them, not three. So the first event of a phone
opens a window of :data:`WINDOW` seconds; every event of that phone until it closes joins it;
when it closes, one push goes out naming the most urgent reason of its events (the order of
:data:`~bridge.protocol.PUSH_REASONS`: approval, plan, question, turn-ended, session-died) and
how many there were.

A card answered before the window closes (from another phone, or by the editor) needs no push:
when the window closes, the events of cards that are no longer open are left out, and a window
left empty sends nothing. Whether the phone is connected by then is the sender's question
(:mod:`bridge.runtime.edges.push`).

Pure: the time comes in as ``now`` (monotonic seconds).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from bridge.protocol import PUSH_REASONS, PushReason
from bridge.records import record

__all__ = ["WINDOW", "Batch", "Coalescer", "Wake", "summarize"]

WINDOW: Final = 5.0
"""Seconds from a phone's first event to its push."""

_RANK: Final = {reason: rank for rank, reason in enumerate(PUSH_REASONS)}


@record
class Wake:
    """One event that may wake a phone.

    Attributes:
        phone: the phone's pubkey (hex).
        reason: why.
        card: ``(session id, request id)`` of the card the event is about; None for news.
    """

    phone: str
    reason: PushReason
    card: tuple[str, str] | None = None


@dataclass(slots=True)
class Batch:
    """A phone's window: its events, and when it closes."""

    phone: str
    due_at: float
    events: list[Wake] = field(default_factory=list)


class Coalescer:
    """The open windows, one per phone."""

    def __init__(self, window: float = WINDOW) -> None:
        self._window = window
        self._open: dict[str, Batch] = {}

    def __len__(self) -> int:
        return len(self._open)

    def add(self, wake: Wake, now: float) -> None:
        """Put an event in its phone's window (opening one at `now` if none is open)."""
        batch = self._open.get(wake.phone)
        if batch is None:
            batch = self._open[wake.phone] = Batch(wake.phone, now + self._window)
        batch.events.append(wake)

    def next_deadline(self) -> float | None:
        return min((b.due_at for b in self._open.values()), default=None)

    def due(self, now: float) -> list[Batch]:
        """The windows closed by `now`, taken out (oldest first)."""
        closed = sorted((b for b in self._open.values() if b.due_at <= now), key=lambda b: b.due_at)
        for batch in closed:
            del self._open[batch.phone]
        return closed


def summarize(
    events: Sequence[Wake], card_open: Callable[[str, str], bool]
) -> tuple[PushReason, int] | None:
    """The push a closed window sends: its most urgent reason and its count, or None.

    Args:
        events: the window's events, in order.
        card_open: whether the card ``(session id, request id)`` still waits for an answer.
    """
    kept = [e for e in events if e.card is None or card_open(*e.card)]
    if not kept:
        return None
    return min((e.reason for e in kept), key=_RANK.__getitem__), len(kept)
