"""What the engine knows of each session: one :class:`SessionState` per session, in a table.

Why one object per session. A session's facts are many (the registry record, its liveness, the
applied session-meta, the cost, the broker's cards and call history, …); kept in as many places, a
close would have to find each of them, and would forget one. Here everything that belongs to a
session hangs off its :class:`SessionState`, and :meth:`SessionTable.remove` drops all of it at
once. State keyed by something else stays where it is keyed: chunked uploads and syncs are per
(phone, session) and the close path aborts them explicitly; phone capabilities are per phone.

The table's rules (REFERENCE-BEHAVIOUR §1.9–1.11, the bug-B contract of PROTOCOL.md):

- A session is listed from ``session-ready`` until the phone closes it; a runner that died leaves
  the record listed (idle) so the phone can still read and resume it.
- A session being created (between ``session-pending`` and ``session-ready``) is kept as a
  *pending* record (state :data:`~bridge.engine.sessions.rules.PENDING_STATE`): persisted, so a crash
  does not orphan the phone's placeholder, but never listed in a heartbeat.
- Removing a listed session adds a tombstone; at most 100 tombstones, oldest first out, no
  duplicates. A pending one leaves no tombstone (the phone never listed it).

Pure: no clock, no I/O; the store mirrors the records through the engine's ``SaveSession``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from bridge.engine.effects import SessionRecord
from bridge.engine.sessions.broker import SessionCards
from bridge.engine.sessions.rules import PENDING_STATE

__all__ = ["MAX_TOMBSTONES", "Liveness", "SessionState", "SessionTable"]

MAX_TOMBSTONES = 100


class Liveness(enum.Enum):
    """Where the session's runner is, as the engine last heard."""

    STARTING = "starting"
    """Asked to start or resume, no ``AgentReady`` yet: inputs wait in the inbox."""
    ALIVE = "alive"
    """The runner reported ready."""
    ENDED = "ended"
    """The runner failed or ended for good (until a resume at the next boot)."""


@dataclass(slots=True, eq=False)
class SessionState:
    """One session: its record and everything the engine holds about it."""

    record: SessionRecord
    cards: SessionCards
    liveness: Liveness = Liveness.STARTING
    meta_applied: bool = False
    """The agent's first session-meta (topic, project) named the session already."""
    cost_usd: float | None = None
    """The cumulative ``total_cost_usd`` of the session's last result (for ``usage``)."""

    @property
    def session_id(self) -> str:
        return self.record.session_id

    @property
    def pending(self) -> bool:
        """Being created: not listed, takes no commands yet."""
        return self.record.state == PENDING_STATE


class SessionTable:
    """Every session of the bridge (listed and pending) and the tombstones of closed ones."""

    def __init__(self, records: Iterable[SessionRecord], tombstones: Sequence[str]) -> None:
        self._states: dict[str, SessionState] = {}
        for record in records:
            self.add(record)
        self.tombstones: list[str] = list(dict.fromkeys(tombstones))[-MAX_TOMBSTONES:]

    def __len__(self) -> int:
        return len(self._states)

    def get(self, session_id: str) -> SessionState | None:
        return self._states.get(session_id)

    def record(self, session_id: str) -> SessionRecord | None:
        state = self._states.get(session_id)
        return state.record if state is not None else None

    def active(self, session_id: str) -> SessionState | None:
        """The session if it exists and is not pending (commands about it may run)."""
        state = self._states.get(session_id)
        return state if state is not None and not state.pending else None

    def states(self) -> list[SessionState]:
        return list(self._states.values())

    def records(self) -> list[SessionRecord]:
        return [state.record for state in self._states.values()]

    def listed(self) -> list[SessionRecord]:
        """Records a heartbeat lists (pending ones excluded), oldest first."""
        return sorted(
            (s.record for s in self._states.values() if not s.pending),
            key=lambda r: (r.created_at, r.session_id),
        )

    def add(self, record: SessionRecord) -> SessionState:
        state = SessionState(record, SessionCards(record.session_id))
        self._states[record.session_id] = state
        return state

    def update(self, session: SessionState, /, **changes: Any) -> SessionRecord:
        """Replace fields of the session's record; the new record."""
        session.record = replace(session.record, **changes)
        return session.record

    def remove(self, session_id: str) -> SessionState | None:
        """Drop a session and all of its state; a listed one gets a tombstone."""
        state = self._states.pop(session_id, None)
        if state is not None and not state.pending:
            if session_id in self.tombstones:
                self.tombstones.remove(session_id)
            self.tombstones.append(session_id)
            del self.tombstones[:-MAX_TOMBSTONES]
        return state
