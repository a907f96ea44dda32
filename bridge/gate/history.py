"""Loop detection: the same exact call, three times in a row.

An agent that repeats a call it was refused, or that keeps running the same failing command, is
stuck; a card lets the user break the loop. "The same" means the tool name and the input as
data: key order is ignored at every depth (the CLI does not promise an order), everything else
counts — a changed timeout or description makes it a different call.

The history is a tiny mutable object the runner keeps per session (the gate itself stays a pure
function of its arguments): ``count = history.record(name, input)`` before ``evaluate(...,
repeat_count=count)``. Every call that reaches the gate is recorded, blocked ones included —
retrying a blocked call is the loop this exists to catch.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

__all__ = ["LOOP_THRESHOLD", "CallHistory", "call_key"]

LOOP_THRESHOLD = 3
"""A call seen this many times in a row is flagged ``loop_detected``."""


def call_key(tool_name: str, tool_input: Mapping[str, object]) -> str:
    """A digest of the call that ignores key order (SHA-256 of canonical JSON, hex)."""
    canonical = json.dumps(
        [tool_name, _canonical(tool_input)],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def _canonical(value: object) -> object:
    """JSON-able data with string keys, so ``sort_keys`` can order every mapping."""
    if isinstance(value, Mapping):
        return {str(key): _canonical(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(item) for item in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)


class CallHistory:
    """Counts how many times in a row the same call reached the gate in one session."""

    __slots__ = ("_count", "_last")

    def __init__(self) -> None:
        self._last: str | None = None
        self._count = 0

    def record(self, tool_name: str, tool_input: Mapping[str, object]) -> int:
        """Record a call; return how many times in a row it has now been seen (1 for a new one)."""
        key = call_key(tool_name, tool_input)
        self._count = self._count + 1 if key == self._last else 1
        self._last = key
        return self._count

    @property
    def repeat_count(self) -> int:
        """The count the last :meth:`record` returned (0 before any call)."""
        return self._count

    def reset(self) -> None:
        """Forget the history (e.g. after the user answered the loop card)."""
        self._last = None
        self._count = 0
