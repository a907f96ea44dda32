"""The pool's memory of recent event ids: a relay pool hears the same event from every relay
and again after a reconnect's replay, and hands it on once (see :mod:`bridge.nostr.pool`)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator

__all__ = ["SeenIds"]


class SeenIds:
    """LRU set of event ids: membership refreshes an id, the oldest falls out past capacity."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("seen_capacity must be >= 1")
        self._capacity = capacity
        self._ids: OrderedDict[str, None] = OrderedDict()

    def add(self, event_id: str) -> bool:
        """Remember ``event_id``; False if it was already known."""
        if event_id in self._ids:
            self._ids.move_to_end(event_id)
            return False
        self._ids[event_id] = None
        if len(self._ids) > self._capacity:
            self._ids.popitem(last=False)
        return True

    def __contains__(self, event_id: object) -> bool:
        return event_id in self._ids

    def __len__(self) -> int:
        return len(self._ids)

    def __iter__(self) -> Iterator[str]:
        """The ids, oldest first."""
        return iter(self._ids)
