"""Transcript lines: the one place that numbers a line, stores it and publishes it live.

Rules (ARCHITECTURE §4, "Transcript"; PROTOCOL-v10-wire.md §7):

- Every ``OutputEntry`` gets its seq when it is appended: the session's ``seqHigh`` + 1. Seqs are
  never reused or renumbered; at boot ``seqHigh`` is the larger of the stored record's and the
  transcript's highest seq, so a record saved before its line cannot make a seq come twice.
- The line is written durably (``AppendTranscript`` inside the caller's ``Commit``), and only then
  published live on 24515 (the ``Publish`` goes after that commit). A phone that missed the live
  copy recovers the line by sync, which reads the store.

Callers put :attr:`Appended.ops` into their commit and :attr:`Appended.live` after it.

Pure: the seq comes from the session's state; timestamps are in the entries.
"""

from __future__ import annotations

from collections.abc import Sequence

from bridge.engine.effects import AppendTranscript, Publish, SaveSession, StoreOp
from bridge.engine.phones.paired import PhoneBook
from bridge.engine.state import SessionState, SessionTable
from bridge.protocol import OutputEntry, OutputMessage
from bridge.records import record

__all__ = ["Appended", "Transcript"]


@record
class Appended:
    """What appending produced: store operations for the commit, live copies for after it."""

    ops: tuple[StoreOp, ...]
    live: tuple[Publish, ...]


class Transcript:
    """Appends lines to the sessions' transcripts."""

    def __init__(self, sessions: SessionTable, phones: PhoneBook) -> None:
        self._sessions = sessions
        self._phones = phones

    def append(
        self,
        session: SessionState,
        entries: Sequence[OutputEntry],
        /,
        *,
        save: bool = False,
        **changes: object,
    ) -> Appended:
        """Number and append `entries`, in order; apply `changes` to the record.

        Args:
            session: the session.
            entries: the lines, in transcript order (each takes the next seq).
            save: also persist the record (``SaveSession`` after the lines); needed when
                `changes` hold anything a restart must keep (``seqHigh`` itself is recovered
                from the transcript).
            changes: record fields to update with the lines (``last_activity``, ``title``, …).
        """
        session_id = session.session_id
        ops: list[StoreOp] = []
        live: list[Publish] = []
        audience = self._phones.audience()
        seq = session.record.seq_high
        for entry in entries:
            seq += 1
            ops.append(AppendTranscript(session_id, seq, entry))
            live.append(
                Publish(OutputMessage(sessionId=session_id, seq=seq, entry=entry), audience)
            )
        record = self._sessions.update(session, seq_high=seq, **changes)
        if save:
            ops.append(SaveSession(record))
        return Appended(tuple(ops), tuple(live))
