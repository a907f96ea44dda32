"""The phone's own state, pure: heartbeat merge (bug-B), pending sessions, transcripts.

No I/O and no clock: the simulator (:mod:`tests.support.phone`) feeds decoded messages in, with
the ``created_at`` of the event that carried them, and tests read the result.

Heartbeat merge (PROTOCOL-v10-wire.md §10, "session-list truthfulness"):

* a session listed in a heartbeat is inserted or replaced, and is no longer stale;
* a session *absent* from a heartbeat is marked stale, never deleted;
* ``removedSessions`` tombstones delete (applied after the listing, so a tombstone wins);
* ``machineOffline: true`` marks the machine offline and keeps every session;
* a heartbeat older than the last one applied is ignored: 30515 is replaceable, and a relay that
  lags must not roll the phone back (counted in :attr:`MachineView.ignored_heartbeats`).

Transcripts (§8): per session, insert-or-ignore by seq. A seq that arrives again with the same
content is a duplicate (normal: live output and sync overlap, chunks are resent); with different
content it is a *conflict*, a contract violation: the first copy is kept, the conflict recorded.
Besides the seqs it holds, the phone remembers the ranges covered by the ``sync-chunk``\\ s it
received: seqs the bridge pruned are absent from a chunk's entries but covered by its range, and
must count as "have" in the next ``haveRanges`` or every sync would ask for them again.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from bridge.protocol import ranges
from bridge.protocol.codec import decode_as, encode
from bridge.protocol.messages import (
    SessionFailedMessage,
    SessionPendingMessage,
    SessionReadyMessage,
    SessionsMessage,
)
from bridge.protocol.ranges import Range
from bridge.protocol.shared import OutputEntry, RemoteSessionInfo

__all__ = [
    "Conflict",
    "ContractViolation",
    "InsertResult",
    "InvalidPayload",
    "MachineView",
    "PendingSession",
    "Received",
    "SessionBook",
    "SessionView",
    "TranscriptBook",
]

MessageT = TypeVar("MessageT")


# --- records ------------------------------------------------------------------------------------


@dataclass(frozen=True)  # no slots: a slotted generic dataclass breaks Received[X](...)
class Received(Generic[MessageT]):
    """One decoded bridge → phone message with the metadata of the event(s) that carried it."""

    message: MessageT
    event_id: str
    """The event that completed the message (the last fragment when it was fragmented)."""
    event_ids: tuple[str, ...]
    """Every event of the message: one, or each fragment in arrival order."""
    kind: int
    created_at: int
    relay: str
    index: int
    """Position in the phone's received log."""
    restored: bool = False
    """Loaded from a saved state file rather than received by this process."""

    @property
    def fragments(self) -> int:
        return len(self.event_ids)


@dataclass(frozen=True, slots=True)
class InvalidPayload:
    """An event the phone could not use: recorded, never raised (wire spec §2.3)."""

    event_id: str
    kind: int
    created_at: int
    stage: Literal["decrypt", "decode"]
    error: str


@dataclass(frozen=True, slots=True)
class ContractViolation:
    """A decoded message that broke a transport rule (kind, tags, fragment consistency...).

    The phone still processes the message, as the real app does; tests assert this list is empty.
    """

    event_id: str
    kind: int
    message_type: str
    problem: str


@dataclass(frozen=True, slots=True)
class Conflict:
    """A seq that arrived twice with different content (§8): the first copy was kept."""

    session_id: str
    seq: int
    kept: OutputEntry
    rejected: OutputEntry
    source: str


class InsertResult(enum.Enum):
    INSERTED = "inserted"
    DUPLICATE = "duplicate"
    CONFLICT = "conflict"


# --- sessions and the machine -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SessionView:
    """A session as the phone shows it: the last info heard, and whether it went stale."""

    info: RemoteSessionInfo
    stale: bool = False

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def state(self) -> str | None:
        return self.info.state


@dataclass(slots=True)
class MachineView:
    """What the heartbeats said about the bridge's machine (``None``: never heard)."""

    name: str | None = None
    host: str | None = None
    online: bool | None = None
    protocol_version: int | None = None
    capabilities: tuple[str, ...] | None = None
    folders: tuple[str, ...] | None = None
    roots: tuple[str, ...] | None = None
    tombstones: list[str] = field(default_factory=list)
    """Every session id a heartbeat tombstoned, first time first."""
    heartbeats: int = 0
    ignored_heartbeats: int = 0
    last_heartbeat_at: int | None = None
    """``created_at`` of the last heartbeat applied."""


@dataclass(frozen=True, slots=True)
class PendingSession:
    """A two-phase session creation as the phone tracks it (``pendingId == sessionId``)."""

    pending_id: str
    state: Literal["pending", "ready", "failed"]
    reason: str | None = None


def _tuple_or_none(values: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if values is None else tuple(values)


class SessionBook:
    """The merged session list and machine presence (bug-B), plus pending creations."""

    def __init__(self) -> None:
        self.machine = MachineView()
        self._sessions: dict[str, SessionView] = {}
        self._pending: dict[str, PendingSession] = {}

    @property
    def sessions(self) -> dict[str, SessionView]:
        """A snapshot of the merged view, by session id."""
        return dict(self._sessions)

    @property
    def pending(self) -> dict[str, PendingSession]:
        return dict(self._pending)

    def apply_heartbeat(self, message: SessionsMessage, created_at: int) -> bool:
        """Merge one heartbeat; False when it was older than the last one and ignored."""
        machine = self.machine
        if machine.last_heartbeat_at is not None and created_at < machine.last_heartbeat_at:
            machine.ignored_heartbeats += 1
            return False
        machine.heartbeats += 1
        machine.last_heartbeat_at = created_at
        machine.name = message.machine
        machine.host = message.host
        machine.online = not message.machineOffline
        machine.protocol_version = message.protocolVersion
        machine.capabilities = _tuple_or_none(message.capabilities)
        machine.folders = _tuple_or_none(message.folders)
        machine.roots = _tuple_or_none(message.roots)
        listed = {info.id for info in message.sessions}
        for session_id, view in list(self._sessions.items()):
            if session_id not in listed and not view.stale:
                self._sessions[session_id] = SessionView(view.info, stale=True)
        for info in message.sessions:
            self._sessions[info.id] = SessionView(info)
            if info.id in self._pending:  # a heartbeat listing the id resolves a placeholder
                self._pending[info.id] = PendingSession(info.id, "ready")
        for session_id in message.removedSessions or ():
            self._sessions.pop(session_id, None)
            if session_id not in machine.tombstones:
                machine.tombstones.append(session_id)
        return True

    def apply_pending(self, message: SessionPendingMessage) -> None:
        if message.pendingId not in self._pending:
            self._pending[message.pendingId] = PendingSession(message.pendingId, "pending")

    def apply_ready(self, message: SessionReadyMessage) -> None:
        self._pending[message.pendingId] = PendingSession(message.pendingId, "ready")
        info = message.session
        # Kinds travel on separate subscriptions: a tombstone may already have arrived.
        if info.id not in self.machine.tombstones:
            self._sessions[info.id] = SessionView(info)

    def apply_failed(self, message: SessionFailedMessage) -> None:
        self._pending[message.pendingId] = PendingSession(
            message.pendingId, "failed", message.reason
        )

    def forget(self, session_id: str) -> bool:
        """A user delete on the phone (the only other way a session leaves the list)."""
        return self._sessions.pop(session_id, None) is not None

    # --- persistence ----------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        machine = self.machine
        return {
            "machine": {
                "name": machine.name,
                "host": machine.host,
                "online": machine.online,
                "protocolVersion": machine.protocol_version,
                "capabilities": machine.capabilities,
                "folders": machine.folders,
                "roots": machine.roots,
                "tombstones": machine.tombstones,
                "heartbeats": machine.heartbeats,
                "ignoredHeartbeats": machine.ignored_heartbeats,
                "lastHeartbeatAt": machine.last_heartbeat_at,
            },
            "sessions": [
                {"info": encode(view.info), "stale": view.stale} for view in self._sessions.values()
            ],
            "pending": [
                {"id": item.pending_id, "state": item.state, "reason": item.reason}
                for item in self._pending.values()
            ],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SessionBook:
        book = cls()
        machine = data["machine"]
        book.machine = MachineView(
            name=machine["name"],
            host=machine["host"],
            online=machine["online"],
            protocol_version=machine["protocolVersion"],
            capabilities=_tuple_or_none(machine["capabilities"]),
            folders=_tuple_or_none(machine["folders"]),
            roots=_tuple_or_none(machine["roots"]),
            tombstones=list(machine["tombstones"]),
            heartbeats=machine["heartbeats"],
            ignored_heartbeats=machine["ignoredHeartbeats"],
            last_heartbeat_at=machine["lastHeartbeatAt"],
        )
        for item in data["sessions"]:
            info = decode_as(RemoteSessionInfo, item["info"])
            book._sessions[info.id] = SessionView(info, stale=bool(item["stale"]))
        for item in data["pending"]:
            book._pending[item["id"]] = PendingSession(item["id"], item["state"], item["reason"])
        return book


# --- transcripts --------------------------------------------------------------------------------


class TranscriptBook:
    """Every session's transcript as the phone holds it: seq → entry, insert-or-ignore."""

    def __init__(self) -> None:
        self._entries: dict[str, dict[int, OutputEntry]] = {}
        self._canonical: dict[str, dict[int, str]] = {}
        self._covered: dict[str, list[Range]] = {}
        self.conflicts: list[Conflict] = []
        self.duplicates = 0

    def insert(self, session_id: str, seq: int, entry: OutputEntry, source: str) -> InsertResult:
        """Store ``entry`` under ``seq`` unless the seq is already held.

        Args:
            source: where it came from (``"live"``, ``"sync"``), kept in a conflict record.
        """
        canonical = encode(entry)  # compare wire forms: the content is what must not change
        held = self._canonical.setdefault(session_id, {})
        existing = held.get(seq)
        if existing is None:
            held[seq] = canonical
            self._entries.setdefault(session_id, {})[seq] = entry
            return InsertResult.INSERTED
        if existing == canonical:
            self.duplicates += 1
            return InsertResult.DUPLICATE
        self.conflicts.append(
            Conflict(session_id, seq, self._entries[session_id][seq], entry, source)
        )
        return InsertResult.CONFLICT

    def cover(self, session_id: str, seq_range: Range) -> None:
        """Remember that a sync chunk covered ``seq_range`` (including seqs it had no entry for)."""
        self._covered[session_id] = ranges.union(self._covered.get(session_id, ()), [seq_range])

    def entries(self, session_id: str) -> dict[int, OutputEntry]:
        """A copy of one transcript, seq → entry, in seq order."""
        held = self._entries.get(session_id, {})
        return {seq: held[seq] for seq in sorted(held)}

    def have_ranges(self, session_id: str) -> list[Range]:
        """What to put in ``sync-request.haveRanges``: held seqs plus chunk-covered ranges."""
        seqs = sorted(self._entries.get(session_id, {}))
        held: list[Range] = []
        for seq in seqs:
            if held and seq == held[-1][1] + 1:
                held[-1] = (held[-1][0], seq)
            else:
                held.append((seq, seq))
        return ranges.union(held, self._covered.get(session_id, ()))

    def seq_high(self, session_id: str) -> int:
        """The highest seq held (0 when none)."""
        return max(self._entries.get(session_id, {}), default=0)

    def session_ids(self) -> list[str]:
        return sorted(set(self._entries) | set(self._covered))

    # --- persistence ----------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "entries": {
                session_id: {str(seq): text for seq, text in held.items()}
                for session_id, held in self._canonical.items()
            },
            "covered": {sid: [list(pair) for pair in cov] for sid, cov in self._covered.items()},
            "conflicts": [
                {
                    "sessionId": conflict.session_id,
                    "seq": conflict.seq,
                    "kept": encode(conflict.kept),
                    "rejected": encode(conflict.rejected),
                    "source": conflict.source,
                }
                for conflict in self.conflicts
            ],
            "duplicates": self.duplicates,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TranscriptBook:
        book = cls()
        for session_id, held in data["entries"].items():
            for seq_text, text in held.items():
                book.insert(session_id, int(seq_text), decode_as(OutputEntry, text), "restored")
        for session_id, covered in data["covered"].items():
            book._covered[session_id] = ranges.normalize(covered)
        for item in data["conflicts"]:
            book.conflicts.append(
                Conflict(
                    item["sessionId"],
                    item["seq"],
                    decode_as(OutputEntry, item["kept"]),
                    decode_as(OutputEntry, item["rejected"]),
                    item["source"],
                )
            )
        book.duplicates = data["duplicates"]
        return book
