"""The seeded fault schedule of a chaos run: which fault, at which command, for how long.

Pure (no I/O, no clock): the same ``(seed, commands)`` always gives the same plan, so a run that
found a violation can be replayed exactly (``python -m tests.chaos --seed N``), and the plan is
unit-tested without starting anything.

A fault is either *instant* (done between two commands: a relay restart, a ``kill -9`` and restart
of the daemon...) or a *stretch* (something stays broken while commands keep flowing: a relay down,
the phone offline, its clock skewed). Positions are command indices: an action "at 120" runs once
120 commands were sent. Every kind is planned at least ``minimum`` times, so even a short run
exercises every fault; longer runs get one more every ``every`` commands.

Rules the plan keeps, so that a fault never becomes a different fault:

* relay outages alternate between relay A and B and never overlap: one of the two the phones use
  is always up (a relay *restart* is instant and never hits the relay that is out);
* phone-offline and clock-skew stretches do not overlap their own kind;
* nothing happens in the first ``warmup`` commands, and every stretch ends before the last
  ``cooldown`` commands, so the final checks run with everything healthy;
* the unpairing happens once, a quarter into the run.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = [
    "FAULT_RATES",
    "SKEW_SECONDS",
    "STRETCHES",
    "Action",
    "FaultKind",
    "Plan",
    "Rate",
    "make_plan",
]


class FaultKind(enum.Enum):
    """Every fault the runner injects (the report counts each)."""

    RELAY_RESTART = "relay-restart"
    """Stop and start one relay on the same port (connections cut)."""
    RELAY_OUTAGE = "relay-outage"
    """Relay A or B down for a long stretch."""
    SILENT_RELAY = "silent-relay"
    """Relay C keeps accepting writes but never answers OK, then is restarted."""
    DAEMON_KILL = "daemon-kill"
    """``kill -9`` of the daemon mid-stream, commands sent while it is down, then restart."""
    FRAGMENT_KILL = "fragment-kill"
    """``kill -9`` between the fragments of a chunked input."""
    PHONE_OFFLINE = "phone-offline"
    """The main phone offline for a stretch, then back with its stored ``since`` cursors."""
    PHONE_RESTART = "phone-restart"
    """The main phone restarted from its state file."""
    DUPLICATE = "duplicate-delivery"
    """One command through relay A, the very same event through relay B later."""
    REPLAY = "replay"
    """Old events (any kind, any age) published again through relay C."""
    EXPIRED = "expired-in-flight"
    """Commands that age out while the daemon is down: ``input-failed{expired}``, never run."""
    CLOCK_SKEW = "clock-skew"
    """The main phone's clock ±120 s off for a stretch."""
    UNPAIR = "unpair"
    """The third phone unpaired mid-run; none of its later commands may run."""
    FRAGMENT_FLOOD = "fragment-flood"
    """More incomplete fragment groups (lying ``n``) than the assembler holds, around a probe."""
    HOST_KILL = "host-kill"
    """``kill -9`` of a session's host mid-stream: the session resumes in a new host."""


STRETCHES = frozenset({FaultKind.RELAY_OUTAGE, FaultKind.PHONE_OFFLINE, FaultKind.CLOCK_SKEW})


@dataclass(frozen=True, slots=True)
class Rate:
    """How often a kind is planned: ``max(minimum, commands // every)`` times."""

    every: int
    minimum: int
    length: tuple[float, float] = (0.0, 0.0)
    """For stretches: its length as a fraction of the run, drawn uniformly in this range."""
    max_length: int = 0
    """For stretches: the longest stretch in commands (0: no cap)."""


FAULT_RATES: dict[FaultKind, Rate] = {
    FaultKind.RELAY_RESTART: Rate(every=400, minimum=3),
    FaultKind.RELAY_OUTAGE: Rate(every=2500, minimum=1, length=(0.06, 0.10), max_length=600),
    FaultKind.SILENT_RELAY: Rate(every=2500, minimum=1),
    FaultKind.DAEMON_KILL: Rate(every=800, minimum=2),
    FaultKind.FRAGMENT_KILL: Rate(every=2500, minimum=1),
    FaultKind.PHONE_OFFLINE: Rate(every=1000, minimum=2, length=(0.03, 0.06), max_length=300),
    FaultKind.PHONE_RESTART: Rate(every=2000, minimum=1),
    FaultKind.DUPLICATE: Rate(every=100, minimum=3),
    FaultKind.REPLAY: Rate(every=100, minimum=3),
    FaultKind.EXPIRED: Rate(every=2500, minimum=1),
    FaultKind.CLOCK_SKEW: Rate(every=1000, minimum=2, length=(0.03, 0.06), max_length=200),
    FaultKind.UNPAIR: Rate(every=0, minimum=1),
    FaultKind.FRAGMENT_FLOOD: Rate(every=3000, minimum=1),
    FaultKind.HOST_KILL: Rate(every=1000, minimum=1),
}

SKEW_SECONDS = 120


@dataclass(frozen=True, slots=True, order=True)
class Action:
    """One step of the plan: ``begin`` / ``end`` of a stretch, or an instant fault (``begin``)."""

    at: int
    order: int
    """Tie-break at one index: stretch ends (0) before instants (1) before stretch begins (2)."""
    kind: FaultKind = field(compare=False)
    phase: str = field(compare=False, default="begin")
    target: str = field(compare=False, default="")
    """The relay (``A``/``B``/``C``), or the skew in seconds (``+120``), when it matters."""


@dataclass(frozen=True, slots=True)
class Plan:
    """The ordered actions of a run."""

    seed: int
    commands: int
    actions: tuple[Action, ...]

    def count(self, kind: FaultKind) -> int:
        """How many faults of `kind` the plan injects (a stretch counts once)."""
        return sum(1 for a in self.actions if a.kind is kind and a.phase == "begin")

    def __iter__(self) -> Iterator[Action]:
        return iter(self.actions)


def _times(kind: FaultKind, commands: int) -> int:
    rate = FAULT_RATES[kind]
    if rate.every <= 0:
        return rate.minimum
    return max(rate.minimum, commands // rate.every)


def _stretches(
    rng: random.Random, kind: FaultKind, count: int, low: int, high: int, commands: int
) -> list[tuple[int, int]]:
    """`count` non-overlapping (start, end) pairs inside [low, high], one slot per stretch."""
    rate = FAULT_RATES[kind]
    slot = (high - low) // count
    spans: list[tuple[int, int]] = []
    for n in range(count):
        length = max(5, int(commands * rng.uniform(*rate.length)))
        if rate.max_length:
            length = min(length, rate.max_length)
        length = min(length, max(1, slot - 2))
        start = low + n * slot + rng.randrange(0, max(1, slot - length))
        spans.append((start, start + length))
    return spans


def make_plan(seed: int, commands: int) -> Plan:
    """The fault schedule of a run of `commands` commands (see the module docstring).

    Raises:
        ValueError: `commands` is too small to fit every fault kind (below 100).
    """
    if commands < 100:
        raise ValueError("a chaos run needs at least 100 commands to fit every fault kind")
    rng = random.Random(seed)
    warmup = min(40, commands // 10)
    cooldown = max(20, commands // 25)
    low, high = warmup, commands - cooldown
    actions: list[Action] = []
    for kind in FaultKind:
        times = _times(kind, commands)
        if kind is FaultKind.UNPAIR:
            actions.append(Action(commands // 4, 1, kind))
        elif kind in STRETCHES:
            for n, (start, end) in enumerate(_stretches(rng, kind, times, low, high, commands)):
                target = ""
                if kind is FaultKind.RELAY_OUTAGE:
                    target = "AB"[n % 2]
                elif kind is FaultKind.CLOCK_SKEW:
                    target = f"{'+' if n % 2 == 0 else '-'}{SKEW_SECONDS}"
                actions.append(Action(start, 2, kind, "begin", target))
                actions.append(Action(end, 0, kind, "end", target))
        else:
            for _ in range(times):
                target = rng.choice("ABC") if kind is FaultKind.RELAY_RESTART else ""
                actions.append(Action(rng.randrange(low, high), 1, kind, "begin", target))
    actions.sort()
    return Plan(seed, commands, tuple(actions))
