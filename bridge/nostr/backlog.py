"""A subscription's stored backlog: fetched whole despite relay caps, released oldest first.

Pure: no I/O, no clock, no logging of its own; :class:`~bridge.nostr.relay_session.RelaySession`
drives it and turns what :meth:`Backlog.take_warnings` reports into lines to log.

Why it exists. Relays answer a REQ with at most a few hundred stored events (strfry and
rust-nostr's relay: 500), so a daemon back from a long outage, or a phone back from a long
offline stretch, must ask again for the rest. Asking for "what lies before the oldest event
received" (``until``) is only right if the capped answer held the *newest* events, and not
every relay does that: rust-nostr's LMDB store answers a filter with both ``authors`` and a
tag with 500 events that are sorted but not the newest, leaving holes. So a capped answer is
trusted for nothing: its time window is split in two (bisected) and each half asked again,
until every answer is smaller than the cap. An answer smaller than the cap is complete, and
the cap is learnt as the largest answer seen (a relay's cap is a constant: any answer below
the largest seen was not cut). Filters with a ``limit`` are never paged: they asked for no more.

Why oldest first. Relays send stored events newest first. A phone that queued "do A", then
"now B" while the bridge was down must not see B run before A: the events of the backlog
(every page, and live events arriving while pages are fetched) are held and released at
the end, sorted by ``created_at`` (ties keep their arrival order), without duplicates.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import replace

from bridge.nostr.event import VerifiedEvent
from bridge.nostr.filters import Filter
from bridge.records import record

__all__ = ["PAGE_THRESHOLD", "Backlog", "Window"]

PAGE_THRESHOLD = 100
"""An answer this large may have been capped by the relay (smaller caps are not handled)."""
MAX_PAGES = 1_000
"""At most this many page REQs for one backlog: past it, what was fetched is released."""


@record
class Window:
    """A time window (inclusive bounds, unix seconds; None = unbounded) laid over filters."""

    since: int | None = None
    until: int | None = None


class Backlog:
    """The stored events of one subscription, gathered over as many page REQs as it takes.

    Args:
        filters: the subscription's filters (each page asks for them within a :class:`Window`).
        max_pages: see :data:`MAX_PAGES`.
    """

    def __init__(self, filters: tuple[Filter, ...], *, max_pages: int = MAX_PAGES) -> None:
        self.filters = filters
        self.pages = 0
        self._max_pages = max_pages
        self._todo: deque[Window] = deque()
        self._window = Window()
        self._held: dict[str, VerifiedEvent] = {}
        self._stored = 0
        self._oldest: int | None = None
        self._newest: int | None = None
        self.complete = False
        self._warnings: list[str] = []
        # A filter with a `limit` asked for that many events only: never page past it.
        self._pageable = all(f.limit is None for f in filters)

    def take_warnings(self) -> list[str]:
        """What went wrong since the last call (for the caller's log); then forgotten."""
        warnings, self._warnings = self._warnings, []
        return warnings

    @property
    def answer_size(self) -> int:
        """Stored events of the current REQ's answer so far."""
        return self._stored

    def hold(self, event: VerifiedEvent, *, stored: bool) -> None:
        """Keep an event of the backlog; `stored` ones (before EOSE) count toward the answer."""
        self._held.setdefault(event.id, event)
        if stored:
            self._stored += 1
            created = event.created_at
            if self._oldest is None or created < self._oldest:
                self._oldest = created
            if self._newest is None or created > self._newest:
                self._newest = created

    def answer_ended(self, cap: int, now: int) -> tuple[Filter, ...] | None:
        """The current REQ's stored answer ended (EOSE, or the REQ was refused: ``cap`` 0).

        Args:
            cap: answers at least this large are taken as cut by the relay.
            now: unix time, the upper bound of an open window.

        Returns:
            The filters of the next page REQ, or None: the backlog is complete; call
            :meth:`release`.
        """
        if cap > 0 and self._pageable and self._stored >= max(cap, PAGE_THRESHOLD):
            self._todo.extendleft(reversed(self._split(now)))
        self._stored, self._oldest, self._newest = 0, None, None
        while self._todo:
            if self.pages >= self._max_pages:
                self._warnings.append(
                    f"backlog still incomplete after {self.pages} pages; releasing what arrived"
                )
                break
            window = self._todo.popleft()
            filters = self._within(window)
            if filters:
                self._window = window
                self.pages += 1
                return filters
        self.complete = True
        return None

    def release(self) -> list[VerifiedEvent]:
        """Every held event, oldest first (stable for ties), once; the backlog is then empty."""
        events = sorted(self._held.values(), key=lambda event: event.created_at)
        self._held.clear()
        return events

    def _split(self, now: int) -> list[Window]:
        """Two windows covering the current one, older first (empty: cannot be split)."""
        window = self._window
        low = window.since if window.since is not None else self._filters_since()
        if low is None:
            # No lower bound at all: everything before the oldest event received, and the
            # window from it on (bisected in turn when it is full again).
            assert self._oldest is not None
            return [Window(None, self._oldest - 1), Window(self._oldest, window.until)]
        high = window.until if window.until is not None else self._filters_until()
        if high is None:
            high = max(now, self._newest if self._newest is not None else now)
        if low >= high:
            self._warnings.append(
                "more stored events in one second than the relay returns at once; "
                "the rest of that second is skipped"
            )
            return []
        middle = (low + high) // 2
        return [Window(low, middle), Window(middle + 1, window.until)]

    def _filters_since(self) -> int | None:
        """The earliest ``since`` of the filters; None if one of them has none."""
        bounds = [f.since for f in self.filters]
        if any(bound is None for bound in bounds):
            return None
        return min(bound for bound in bounds if bound is not None)

    def _filters_until(self) -> int | None:
        """The latest ``until`` of the filters; None if one of them has none."""
        bounds = [f.until for f in self.filters]
        if any(bound is None for bound in bounds):
            return None
        return max(bound for bound in bounds if bound is not None)

    def _within(self, window: Window) -> tuple[Filter, ...]:
        """The subscription's filters narrowed to `window` (filters left empty are dropped)."""
        narrowed = []
        for f in self.filters:
            since = _bound(max, f.since, window.since)
            until = _bound(min, f.until, window.until)
            if since is not None and until is not None and since > until:
                continue
            narrowed.append(replace(f, since=since, until=until))
        return tuple(narrowed)


def _bound(pick: Callable[[int, int], int], a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return pick(a, b)
