"""The seeded kill schedule of a real-CLI chaos run: which kill point each round hits.

Pure (no I/O, no clock): the same ``(seed, kills)`` always gives the same plan, so a run that
found a violation is replayed with ``python -m tests.chaos.cli --seed N --kills K`` (the timing
of a real CLI is not replayable; the choices are).

A run is a sequence of *rounds*; each round puts work in flight, kills one process at one of the
:class:`KillPoint`\\ s, restarts what must be restarted and waits until every input sent so far
has an outcome. Every kill point comes at least once (``kills`` must be at least the number of
kill points); the rest are drawn by :data:`WEIGHTS`, and the order is shuffled so that kinds mix.
"""

from __future__ import annotations

import enum
import random
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = ["DAEMON_KILLS", "TURN_CUTTERS", "WEIGHTS", "KillPoint", "Plan", "make_plan"]


class KillPoint(enum.Enum):
    """Where a round's ``kill -9`` lands (the report counts each)."""

    DAEMON_AT_RELAY = "daemon-at-relay"
    """(a) The daemon, right after a command reached the relay."""
    DAEMON_IN_TOOL = "daemon-in-tool"
    """(b) The daemon, 5-80 ms after the model asked for a Bash call: in the PreToolUse hook
    (the daemon's check), the tool call or its result."""
    DAEMON_MID_TURN = "daemon-mid-turn"
    """(c) The daemon while the model streams a slow reply."""
    DAEMON_CARD_PENDING = "daemon-card-pending"
    """(d) The daemon while a permission card waits on the phone (answered after the kill)."""
    DAEMON_IN_RESUME = "daemon-in-resume"
    """(e) The daemon again, right after a restart: while it adopts a host and replays its
    journal, or while the new host of a killed one starts."""
    HOST_KILL = "host-kill"
    """(f) A session host (its CLI dies with it)."""
    CLI_KILL = "cli-kill"
    """(g) The Claude Code CLI, the child of a session host."""


DAEMON_KILLS = frozenset(
    {
        KillPoint.DAEMON_AT_RELAY,
        KillPoint.DAEMON_IN_TOOL,
        KillPoint.DAEMON_MID_TURN,
        KillPoint.DAEMON_CARD_PENDING,
        KillPoint.DAEMON_IN_RESUME,
    }
)
TURN_CUTTERS = frozenset({KillPoint.HOST_KILL, KillPoint.CLI_KILL})
"""Kill points that may cut a turn short (the only ones after which an input may be reported
interrupted; ``daemon-in-resume`` may kill a host too, and records it when it does)."""

WEIGHTS: dict[KillPoint, int] = {
    KillPoint.DAEMON_AT_RELAY: 3,
    KillPoint.DAEMON_IN_TOOL: 4,
    KillPoint.DAEMON_MID_TURN: 3,
    KillPoint.DAEMON_CARD_PENDING: 3,
    KillPoint.DAEMON_IN_RESUME: 3,
    KillPoint.HOST_KILL: 2,
    KillPoint.CLI_KILL: 2,
}


@dataclass(frozen=True, slots=True)
class Plan:
    """The kill point of every round, in order."""

    seed: int
    rounds: tuple[KillPoint, ...]

    def count(self, point: KillPoint) -> int:
        return sum(1 for p in self.rounds if p is point)

    def counts(self) -> Counter[KillPoint]:
        return Counter(self.rounds)

    def __iter__(self) -> Iterator[KillPoint]:
        return iter(self.rounds)

    def __len__(self) -> int:
        return len(self.rounds)


def make_plan(seed: int, kills: int, points: Sequence[KillPoint] | None = None) -> Plan:
    """The kill points of a run of `kills` rounds (see the module docstring).

    Args:
        points: only these kill points (default: all of them), e.g. to chase one bug.

    Raises:
        ValueError: `kills` is below the number of kill points, or `points` is empty.
    """
    points = list(dict.fromkeys(points)) if points is not None else list(KillPoint)
    if not points:
        raise ValueError("no kill point to plan")
    if kills < len(points):
        raise ValueError(f"a real-CLI chaos run needs at least {len(points)} kills (one per point)")
    rng = random.Random(seed)
    rounds = list(points)
    weights = [WEIGHTS[p] for p in points]
    rounds += rng.choices(points, weights=weights, k=kills - len(points))
    rng.shuffle(rounds)
    return Plan(seed, tuple(rounds))
