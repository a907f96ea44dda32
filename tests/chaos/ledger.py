"""What a chaos run sent and what it expects back: the ledger the invariants are checked against.

Every input carries a unique ``inputId`` and is recorded with its *expected outcome*, decided when
it is sent, never after the fact:

* ``ACK``: a paired phone sent it fresh to a live session; it must be acknowledged exactly once on
  every phone and reach the agent exactly once;
* ``EXPIRED`` / ``NO_SESSION``: it must be answered ``input-failed`` with that reason, exactly
  once, and never reach the agent;
* ``IGNORED``: sent by an unpaired key; no reply of any kind, and it never runs;
* ``EVICTED``: its fragment group was evicted by the assembler cap before its last fragment came
  (checked when it happened: :attr:`Ledger.evictions`). The fragments are not recorded as
  processed until their group completes, so a later replay of them by a relay may still
  complete it: it then runs once and is acknowledged once. At most once, never a failure.

A :class:`ReplyTracker` follows one phone's received log incrementally, so waiting for thousands
of acks costs one pass over the log, not one pass per check.
"""

from __future__ import annotations

import enum
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from bridge.nostr.event import VerifiedEvent
from tests.chaos.plan import FaultKind
from tests.support.phone import PhoneSimulator

__all__ = [
    "Expect",
    "InputRecord",
    "Ledger",
    "ReplyTracker",
    "SentEvent",
    "SessionTrack",
    "SilentProbe",
]


class Expect(enum.Enum):
    ACK = "ack"
    EXPIRED = "expired"
    NO_SESSION = "no-session"
    IGNORED = "ignored"
    EVICTED = "evicted"

    @property
    def reply(self) -> bool:
        """Whether the phones must hear about it (an ack or a failure)."""
        return self not in (Expect.IGNORED, Expect.EVICTED)


@dataclass(slots=True)
class InputRecord:
    """One ``input`` the run sent."""

    input_id: str
    session_id: str
    text: str
    phone: str
    index: int
    """The command counter when it was sent."""
    expect: Expect
    event_ids: tuple[str, ...]
    note: str = ""
    """How it travelled when that matters (``skew +120``, ``fragments across kill -9``...)."""


@dataclass(slots=True)
class SessionTrack:
    session_id: str
    created_index: int
    closed_index: int | None = None

    @property
    def live(self) -> bool:
        return self.closed_index is None


@dataclass(frozen=True, slots=True)
class SilentProbe:
    """One silent-relay stretch: how many inputs were acknowledged while relay C stayed silent."""

    index: int
    sent: int
    acked: int
    waited: float
    limit: float


@dataclass(slots=True)
class SentEvent:
    """A phone event kept for replays (fragments, stale and intruder events included)."""

    event: VerifiedEvent
    phone: str
    what: str


class ReplyTracker:
    """Acks and failures one phone received, by ``inputId`` (incremental over its log)."""

    def __init__(self, phone: PhoneSimulator) -> None:
        self.phone = phone
        self._position = 0
        self.acks: Counter[str] = Counter()
        self.failures: defaultdict[str, list[str]] = defaultdict(list)
        self.close_acks: Counter[str] = Counter()

    def update(self) -> None:
        received = self.phone.received
        for item in received[self._position :]:
            message = item.message
            kind = getattr(message, "type", "")
            if kind == "input-ack":
                self.acks[message.inputId] += 1
            elif kind == "input-failed" and message.inputId:
                self.failures[message.inputId].append(message.reason)
            elif kind == "close-session-ack":
                self.close_acks[message.sessionId] += 1
        self._position = len(received)

    def answered(self, input_id: str) -> bool:
        return input_id in self.acks or input_id in self.failures


@dataclass
class Ledger:
    """Everything the run did, for the invariants and the report."""

    inputs: dict[str, InputRecord] = field(default_factory=dict)
    sessions: dict[str, SessionTrack] = field(default_factory=dict)
    events: list[SentEvent] = field(default_factory=list)
    commands: int = 0
    by_type: Counter[str] = field(default_factory=Counter)
    faults: Counter[FaultKind] = field(default_factory=Counter)
    fault_log: list[str] = field(default_factory=list)
    incidents: list[str] = field(default_factory=list)
    """Things that went wrong while running (a liveness wait that timed out, a failed publish,
    a daemon that died by itself): each one is a violation of its own."""
    silent_probes: list[SilentProbe] = field(default_factory=list)
    evictions: dict[str, bool] = field(default_factory=dict)
    """Assembler-cap probe inputId → whether it was still unanswered once the input sent after
    it was acknowledged (True: its group was evicted, as it must be)."""
    unpaired_at: int | None = None
    intruder_creates: int = 0
    replayed: int = 0
    duplicates_sent: int = 0
    kills: int = 0
    graceful_stops: int = 0
    rss_samples: list[tuple[int, int]] = field(default_factory=list)
    """(command index, RSS in KiB) of the daemon."""
    daemon_cpu: dict[int, float] = field(default_factory=dict)
    """Daemon pid → CPU seconds it used (last sample before it ended)."""

    def count(self, what: str) -> None:
        """One more command of type `what`."""
        self.commands += 1
        self.by_type[what] += 1

    def fault(self, kind: FaultKind, detail: str) -> None:
        self.faults[kind] += 1
        self.fault_log.append(f"@{self.commands} {kind.value}: {detail}")

    def incident(self, text: str) -> None:
        self.incidents.append(f"@{self.commands} {text}")

    def add_input(self, record: InputRecord) -> None:
        if record.input_id in self.inputs:
            raise ValueError(f"duplicate inputId {record.input_id}")
        self.inputs[record.input_id] = record

    def live_sessions(self) -> list[str]:
        return [s.session_id for s in self.sessions.values() if s.live]

    def closed_sessions(self) -> list[str]:
        return [s.session_id for s in self.sessions.values() if not s.live]

    def expected_texts(self, session_id: str) -> Counter[str]:
        """What the agent of `session_id` must have received, text → times."""
        return Counter(
            r.text
            for r in self.inputs.values()
            if r.session_id == session_id and r.expect is Expect.ACK
        )

    def optional_texts(self, session_id: str) -> Counter[str]:
        """What the agent of `session_id` may have received at most once, text → times."""
        return Counter(
            r.text
            for r in self.inputs.values()
            if r.session_id == session_id and r.expect is Expect.EVICTED
        )

    def awaiting_reply(self) -> list[InputRecord]:
        return [r for r in self.inputs.values() if r.expect.reply]
