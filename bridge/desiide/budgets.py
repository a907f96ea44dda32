"""A Desiide task's budgets: the four limits and the meters that spend them.

Seed (COR-2): "Defaults: read-only tools + propose_edit, budget 8 iterations / 40 tool calls /
200k tokens / 10 min", and a task that runs out fails with ``budget:maxIterations``,
``budget:maxToolCalls``, ``budget:maxTokens`` or ``budget:wallClockMs``. What each meter counts,
and why:

- **Iterations** are the turns the orchestrator starts: the first prompt, then each "the checks
  failed" follow-up of a ``fix`` task. The seed's ``budget:maxIterations`` is "checks were still
  failing after the last verify→fix attempt", so an iteration is one verify→fix round, not one
  model call (the CLI's ``num_turns`` counts model calls; 8 of those would not cover 40 tool
  calls).
- **Tool calls** are the agent's ``tool_use`` entries of editor tools, blocked ones included: the
  daemon's gate counts the same way and blocks the call after the limit, and a model that keeps
  calling a refused tool is spending the budget as surely as one whose calls run.
- **Tokens** are input plus output, where input is the fresh input and the cache writes, and
  cache reads are left out: every model call of a turn re-reads the whole conversation from the
  cache, so counting reads would make the budget a measure of conversation length × calls, and
  200k would end ordinary tasks after a dozen calls. The ``usage`` event reports the same
  numbers (cache reads as an extra field), so that the header and the budget agree. Per-call
  usage entries are counted as they arrive (a run-away turn is stopped mid-turn); the turn's
  ``result`` then replaces them with its exact total.
- **Wall clock** runs while the task is planning, running or verifying, and pauses while it
  waits on the user (``awaiting_approval``) — COR-2: "The wall-clock budget is paused while the
  task waits." Queued time does not count either: the task has not started.

Pure: time is the caller's ``now`` (seconds), nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from bridge.records import record

__all__ = [
    "DEFAULT_BUDGET",
    "Budget",
    "TokenCounts",
    "TokenMeter",
    "WallClock",
    "token_counts",
]

_FIELDS: Final = {
    "maxIterations": "max_iterations",
    "maxToolCalls": "max_tool_calls",
    "maxTokens": "max_tokens",
    "wallClockMs": "wall_clock_ms",
}


@record
class Budget:
    """The limits of one task (the seed's defaults unless the editor set them)."""

    max_iterations: int = 8
    max_tool_calls: int = 40
    max_tokens: int = 200_000
    wall_clock_ms: int = 600_000

    def __post_init__(self) -> None:
        for name in _FIELDS.values():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"budget {name} must be a positive integer, not {value!r}")

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Budget:
        """A budget from the wire's camelCase object; a missing field keeps its default.

        Raises:
            ValueError: a field is not a positive integer, or is not one of the four.
        """
        if not data:
            return cls()
        unknown = set(data) - _FIELDS.keys()
        if unknown:
            raise ValueError(f"unknown budget fields: {sorted(unknown)!r}")
        return cls(**{_FIELDS[key]: value for key, value in data.items() if value is not None})

    def as_json(self) -> dict[str, int]:
        """The wire's camelCase object."""
        return {key: getattr(self, name) for key, name in _FIELDS.items()}


DEFAULT_BUDGET: Final = Budget()


@record
class TokenCounts:
    """One usage report, split the way the budget counts it (see the module docstring)."""

    input: int
    """Fresh input tokens plus cache writes."""
    output: int
    cache_read: int

    @property
    def billed(self) -> int:
        """What the ``maxTokens`` budget spends: input plus output, cache reads left out."""
        return self.input + self.output


def _count(usage: Mapping[str, Any], key: str) -> int:
    value = usage.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def token_counts(usage: object) -> TokenCounts | None:
    """The counts of an Anthropic ``usage`` object (``input_tokens``, ``output_tokens``,
    ``cache_creation_input_tokens``, ``cache_read_input_tokens``); None when it is not one."""
    if not isinstance(usage, Mapping):
        return None
    return TokenCounts(
        input=_count(usage, "input_tokens") + _count(usage, "cache_creation_input_tokens"),
        output=_count(usage, "output_tokens"),
        cache_read=_count(usage, "cache_read_input_tokens"),
    )


class TokenMeter:
    """Tokens spent by a task: finished turns exactly, the current turn provisionally."""

    __slots__ = ("_committed", "_provisional")

    def __init__(self) -> None:
        self._committed = 0
        self._provisional = 0

    @property
    def total(self) -> int:
        return self._committed + self._provisional

    def add_call(self, counts: TokenCounts) -> None:
        """One model call of the running turn (its usage entry)."""
        self._provisional += counts.billed

    def end_turn(self, counts: TokenCounts | None) -> None:
        """The turn's ``result``: its total replaces the calls counted so far (kept when the
        result carries no usage)."""
        self._committed += counts.billed if counts is not None else self._provisional
        self._provisional = 0


class WallClock:
    """Milliseconds a task has been active, paused while it waits on the user."""

    __slots__ = ("_since", "_spent", "limit_ms")

    def __init__(self, limit_ms: int) -> None:
        self.limit_ms = limit_ms
        self._spent = 0.0
        self._since: float | None = None

    @property
    def running(self) -> bool:
        return self._since is not None

    def start(self, now: float) -> None:
        """Count from `now` (no effect when already counting)."""
        if self._since is None:
            self._since = now

    def pause(self, now: float) -> None:
        """Stop counting at `now`, keeping what was spent (no effect when paused)."""
        if self._since is not None:
            self._spent += max(0.0, now - self._since)
            self._since = None

    def spent_ms(self, now: float) -> float:
        running = max(0.0, now - self._since) if self._since is not None else 0.0
        return (self._spent + running) * 1000.0

    def deadline(self) -> float | None:
        """When the budget runs out if nothing pauses it; None while paused."""
        if self._since is None:
            return None
        return self._since + self.limit_ms / 1000.0 - self._spent

    def expired(self, now: float) -> bool:
        return self.spent_ms(now) >= self.limit_ms
