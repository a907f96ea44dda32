"""What the phone has seen, by input: acks, cards, ``done`` texts, restart notes.

:class:`PhoneWatch` follows the phone's received log incrementally (one pass over the log for
the whole run, however often the run asks), reading live ``output`` entries and the entries of
``sync-chunk``\\ s alike, each ``(session, seq)`` once.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from bridge.protocol import OutputEntry
from tests.chaos.cli.model import input_ids_in, parse_done
from tests.support.phone import PhoneSimulator

__all__ = ["Card", "PhoneWatch", "RestartNote", "card_of", "restart_of"]


@dataclass(frozen=True, slots=True)
class Card:
    """A permission card the phone holds."""

    session_id: str
    seq: int
    tool_use_id: str
    input_id: str | None
    """The input whose Bash command it is about (None: a card for something else)."""
    seen_at: float


@dataclass(frozen=True, slots=True)
class RestartNote:
    """A ``session_restart`` system entry."""

    session_id: str
    seq: int
    reason: str
    interrupted: tuple[str, ...]
    fresh_conversation: bool
    """The driver's note that the conversation could not be resumed (a new one was started)."""
    seen_at: float


def card_of(session_id: str, seq: int, entry: OutputEntry, now: float) -> Card | None:
    metadata = entry.metadata or {}
    if metadata.get("special") != "permission_request":
        return None
    tool_input = metadata.get("tool_input")
    command = str(tool_input.get("command", "")) if isinstance(tool_input, dict) else ""
    ids = input_ids_in(command)
    return Card(session_id, seq, str(metadata.get("tool_use_id")), ids[0] if ids else None, now)


def restart_of(session_id: str, seq: int, entry: OutputEntry, now: float) -> RestartNote | None:
    metadata = entry.metadata or {}
    if entry.entryType != "system" or metadata.get("special") != "session_restart":
        return None
    raw = metadata.get("interrupted")
    interrupted = tuple(str(i) for i in raw) if isinstance(raw, list) else ()
    fresh = "previous_sdk_session_id" in metadata
    return RestartNote(session_id, seq, str(metadata.get("reason", "")), interrupted, fresh, now)


@dataclass
class PhoneWatch:
    """Acks, cards, ``done`` texts and restart notes the phone received (see the docstring)."""

    phone: PhoneSimulator
    acks: Counter[str] = field(default_factory=Counter)
    failures: defaultdict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    cards: dict[str, Card] = field(default_factory=dict)
    """tool_use_id → the card (the first copy seen)."""
    done_at: dict[str, float] = field(default_factory=dict)
    """input id → when its ``done`` text arrived first."""
    done_seq: dict[str, tuple[str, int]] = field(default_factory=dict)
    """input id → (session, seq) of its first ``done`` text."""
    last_end: dict[str, int] = field(default_factory=dict)
    """session id → the highest seq of a turn's end (``stream_end``) seen."""
    restarts: list[RestartNote] = field(default_factory=list)
    interrupted_at: dict[str, float] = field(default_factory=dict)
    _position: int = 0
    _seen: set[tuple[str, int]] = field(default_factory=set)

    def update(self) -> None:
        received = self.phone.received
        now = time.monotonic()
        for item in received[self._position :]:
            message: Any = item.message
            kind = getattr(message, "type", "")
            if kind == "input-ack":
                self.acks[message.inputId] += 1
            elif kind == "input-failed" and message.inputId:
                self.failures[message.inputId].append(message.reason)
            elif kind == "output":
                self._entry(message.sessionId, message.seq, message.entry, now)
            elif kind == "sync-chunk":
                for chunk_entry in message.entries:
                    self._entry(message.sessionId, chunk_entry.seq, chunk_entry.entry, now)
        self._position = len(received)

    def _entry(self, session_id: str, seq: int, entry: OutputEntry, now: float) -> None:
        if (session_id, seq) in self._seen:
            return
        self._seen.add((session_id, seq))
        if (entry.metadata or {}).get("stream_end") is True:
            self.last_end[session_id] = max(seq, self.last_end.get(session_id, 0))
            return
        if entry.entryType == "text":
            input_id = parse_done(entry.content)
            if input_id is not None:
                self.done_at.setdefault(input_id, now)
                self.done_seq.setdefault(input_id, (session_id, seq))
            return
        card = card_of(session_id, seq, entry, now)
        if card is not None:
            self.cards.setdefault(card.tool_use_id, card)
            return
        note = restart_of(session_id, seq, entry, now)
        if note is not None:
            self.restarts.append(note)
            for input_id in note.interrupted:
                self.interrupted_at.setdefault(input_id, now)

    def turn_ended(self, input_id: str) -> bool:
        """Its ``done`` text was seen, and the end of a turn after it (a ``done`` text alone
        does not end the turn: Claude Code may go on with a prompt folded into it)."""
        done = self.done_seq.get(input_id)
        return done is not None and self.last_end.get(done[0], 0) > done[1]

    def settled(self, input_id: str) -> bool:
        """Failed (an outcome too: the invariants judge it), or acknowledged and its turn seen
        ended or reported interrupted."""
        if input_id in self.failures:
            return True
        return input_id in self.acks and (
            self.turn_ended(input_id) or input_id in self.interrupted_at
        )

    def card_for(self, input_id: str) -> Card | None:
        return next((c for c in self.cards.values() if c.input_id == input_id), None)

    def restarts_of(self, session_id: str) -> list[RestartNote]:
        return [n for n in self.restarts if n.session_id == session_id]
