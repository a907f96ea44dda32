"""What a real-CLI chaos run intended and did: the ledger the invariants are checked against.

Every input is recorded with its *intention* when it is sent, never after the fact: which
session, whether its prompt runs a Bash call that appends the input's id to a ledger file on
disk, whether that call needs a permission card and what the phone will answer (``allow``, or a
deliberate deny). Every kill is recorded with when it happened, which session it hit, whether it
could cut a turn short (a session host or a CLI died), and which inputs were in flight.

What happened is then read from outside the bridge (:mod:`.evidence`): the ledger files, Claude
Code's own session files, the store, the phone.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field

from tests.chaos.cli.plan import KillPoint

__all__ = ["CardAnswer", "InputRecord", "KillRecord", "Ledger", "Route"]


class Route(enum.Enum):
    """How an input's prompt runs."""

    REPLY = "reply"
    """A plain reply, no tool."""
    AUTO = "auto"
    """A Bash call the gate allows without asking (mode ``default``, inside the workspace)."""
    CARD = "card"
    """A Bash call that needs a card on the phone (``acceptEdits``, or a path outside the
    workspace)."""

    @property
    def runs_tool(self) -> bool:
        return self is not Route.REPLY


@dataclass(slots=True)
class InputRecord:
    """One input the run sent."""

    input_id: str
    session_id: str
    text: str
    route: Route
    allow: bool
    """What the phone answers to its card (only meaningful for :attr:`Route.CARD`)."""
    slow: float
    round: int
    sent_at: float
    """``time.monotonic()`` once a relay took it."""
    mode: str
    """The session's permission mode when it was sent (the phone switches only settled
    sessions, so its turn runs in this mode)."""
    note: str = ""
    held: bool = False
    """Its card is answered by the fault that holds it, not by the answerer."""

    @property
    def must_run(self) -> bool:
        """Its Bash call must leave its marker in the ledger (once)."""
        return self.route.runs_tool and (self.route is Route.AUTO or self.allow)

    @property
    def denied_on_purpose(self) -> bool:
        return self.route is Route.CARD and not self.allow

    def describe(self) -> str:
        extra = f", {self.note}" if self.note else ""
        intent = self.route.value + (
            "" if self.route is not Route.CARD else f"/{'allow' if self.allow else 'deny'}"
        )
        slow = f", slow {self.slow:g} s" if self.slow else ""
        return f"{self.input_id} (r{self.round}, {self.session_id[:8]}, {intent}{slow}{extra})"


@dataclass(slots=True)
class KillRecord:
    """One ``kill -9``."""

    point: KillPoint
    round: int
    at: float
    target: str
    """``daemon``, ``host`` or ``cli``."""
    session_id: str | None = None
    pid: int | None = None
    in_flight: tuple[str, ...] = ()
    """Inputs sent and not yet seen done on the phone when it happened."""
    detail: str = ""

    @property
    def cuts_turns(self) -> bool:
        """A host or a CLI died: the turn it ran may be reported interrupted."""
        return self.target in ("host", "cli")


@dataclass(frozen=True, slots=True)
class CardAnswer:
    """One answer the phone sent to a card."""

    tool_use_id: str
    input_id: str | None
    allow: bool
    at: float
    by: str
    """``answerer`` (as a user would), or the fault that held the card."""


@dataclass(frozen=True, slots=True)
class HeldCard:
    """A card pending on the phone at a kill (kill point ``daemon-card-pending``, or a host or
    CLI kill that found one)."""

    round: int
    point: KillPoint
    input_id: str
    tool_use_id: str
    answered_while_down: bool
    answered: bool


@dataclass
class Ledger:
    """Everything the run did, for the invariants and the report."""

    inputs: dict[str, InputRecord] = field(default_factory=dict)
    sessions: dict[str, str] = field(default_factory=dict)
    """Session id → its permission mode now (the phone switches it now and then)."""
    kills: list[KillRecord] = field(default_factory=list)
    answers: list[CardAnswer] = field(default_factory=list)
    held_cards: list[HeldCard] = field(default_factory=list)
    unexpected_cards: list[str] = field(default_factory=list)
    """Cards for inputs that should not have needed one (answered allow so the run goes on)."""
    orphans: list[str] = field(default_factory=list)
    """CLI processes that outlived their session host."""
    fault_log: list[str] = field(default_factory=list)
    incidents: list[str] = field(default_factory=list)
    """Things that went wrong while running (a wait that timed out, a publish that failed)."""
    observations: dict[KillPoint, Counter[str]] = field(default_factory=dict)
    """Per kill point: what the kills found (``hook pending``, ``card answered while down``…)."""
    mode_switches: int = 0
    daemon_starts: int = 0
    stall_syncs: int = 0
    """Sync requests the run sent because an input's outcome was late (a real phone re-syncs)."""
    rounds: int = 0

    def add_input(self, record: InputRecord) -> None:
        if record.input_id in self.inputs:
            raise ValueError(f"duplicate inputId {record.input_id}")
        self.inputs[record.input_id] = record

    def kill(self, record: KillRecord, detail: str) -> None:
        record.detail = detail
        self.kills.append(record)
        where = f" {record.session_id[:8]}" if record.session_id else ""
        pid = f" pid {record.pid}" if record.pid else ""
        self.fault_log.append(
            f"r{record.round} {record.point.value}: kill -9 {record.target}{where}{pid}: {detail}"
        )

    def observe(self, point: KillPoint, what: str) -> None:
        self.observations.setdefault(point, Counter())[what] += 1

    def log(self, round_no: int, text: str) -> None:
        self.fault_log.append(f"r{round_no}   {text}")

    def incident(self, round_no: int, text: str) -> None:
        self.incidents.append(f"r{round_no} {text}")

    def kills_by_point(self) -> Counter[KillPoint]:
        """Kill *rounds* by kill point (a round may kill more than one process)."""
        seen: dict[int, KillPoint] = {k.round: k.point for k in self.kills}
        return Counter(seen.values())

    def cutting_kills(self, session_id: str) -> list[KillRecord]:
        return [k for k in self.kills if k.cuts_turns and k.session_id == session_id]
