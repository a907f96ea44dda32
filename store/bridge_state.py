"""Repositories over the daemon's tables (schema v2): plain values in, plain values out.

The store knows nothing of the engine's types: records travel as dicts / JSON text, entries as
JSON text. Each write exists twice, from one SQL text: ``*_statements`` builds it as
:class:`~store.db.Statement` values, and the async function of the same name runs them. The
runtime maps the engine's store operations onto the builders and runs a whole commit — or a
group of them — with one ``db.write`` (one transaction, one trip to the connection's thread),
which is what makes "processed" and the command's effects atomic.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from store.db import BridgeDatabase, Statement
from store.kv import kv_get, kv_set_statement

__all__ = [
    "CURSOR_KEY",
    "InboxRow",
    "LoadedState",
    "OutboxRow",
    "add_inbox",
    "add_inbox_statements",
    "add_outbox",
    "add_outbox_statements",
    "add_tombstone",
    "add_tombstone_statements",
    "append_transcript",
    "append_transcript_statements",
    "delete_outbox",
    "delete_outbox_statements",
    "delete_phone",
    "delete_phone_statements",
    "delete_session",
    "delete_session_statements",
    "delete_transcript",
    "delete_transcript_statements",
    "inbox_rows",
    "load_state",
    "mark_inbox_pending",
    "mark_inbox_sent",
    "mark_inbox_taken",
    "mark_inbox_taken_statements",
    "mark_processed",
    "mark_processed_statements",
    "outbox_rows",
    "prune_outbox",
    "prune_processed",
    "prune_processed_statements",
    "read_transcript",
    "record_outbox_acceptance",
    "remove_inbox",
    "remove_inbox_statements",
    "remove_sessions",
    "save_phone",
    "save_phone_statements",
    "save_session",
    "save_session_statements",
    "set_agent_cursor",
    "set_agent_cursor_statements",
    "set_cursor",
    "set_cursor_statements",
    "stored_sessions",
    "sweep_transcripts",
]

logger = logging.getLogger(__name__)

CURSOR_KEY = "ingest.lastSeen"
MAX_TOMBSTONES = 100


@dataclass(frozen=True, slots=True)
class LoadedState:
    """What the engine needs at boot."""

    phones: list[tuple[str, str, str, str]]  # pubkey, npub, label, paired_at
    last_seen: int
    processed: dict[str, int]
    sessions: list[dict[str, Any]]  # records, with "seq_high" from the transcript and "agent"
    tombstones: list[str]


@dataclass(frozen=True, slots=True)
class InboxRow:
    uid: str
    session_id: str
    text: str
    input_id: str | None
    state: str


@dataclass(frozen=True, slots=True)
class OutboxRow:
    event_id: str
    event: str
    expires_at: int | None
    accepted_by: frozenset[str] = frozenset()
    """Relay URLs that accepted the event so far."""


async def load_state(db: BridgeDatabase) -> LoadedState:
    """Everything the engine is built from.

    An unreadable session record is skipped, with a warning naming it: one bad row must not keep
    the bridge from starting, and it must not vanish unnoticed either.
    """
    phones = [
        (str(r[0]), str(r[1]), str(r[2]), str(r[3]))
        for r in await db.fetchall("SELECT pubkey, npub, label, paired_at FROM phones")
    ]
    cursor = await kv_get(db, CURSOR_KEY)
    processed = {
        str(r[0]): int(r[1])
        for r in await db.fetchall("SELECT event_id, created_at FROM processed")
    }
    highs = {
        str(r[0]): int(r[1])
        for r in await db.fetchall(
            "SELECT session_id, MAX(seq) FROM transcripts GROUP BY session_id"
        )
    }
    sessions = []
    for session_id, agent, text in await db.fetchall(
        "SELECT session_id, agent, record FROM sessions"
    ):
        try:
            record = json.loads(text)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            # Kept in the table (a later version may read it); the session is not resumed.
            logger.warning(
                "! session %s skipped at load: its stored record is not a JSON object "
                "(it stays in the database, but is not resumed or listed)",
                str(session_id)[:8],
            )
            continue
        record["session_id"] = session_id
        record["agent"] = str(agent)
        stored_high = record.get("seq_high") or 0
        if isinstance(stored_high, str) and stored_high.isdigit():
            stored_high = int(stored_high)
        if not isinstance(stored_high, int) or isinstance(stored_high, bool):
            # The transcript's own highest seq is the truth; a damaged field never renumbers.
            logger.warning(
                "! session %s: its stored seq_high %r is not an integer; using the "
                "transcript's highest seq instead",
                str(session_id)[:8],
                stored_high,
            )
            stored_high = 0
        record["seq_high"] = max(stored_high, highs.get(session_id, 0))
        sessions.append(record)
    tombstones = [
        str(r[0]) for r in await db.fetchall("SELECT session_id FROM tombstones ORDER BY position")
    ]
    return LoadedState(
        phones=phones,
        last_seen=int(cursor) if cursor and cursor.isdigit() else 0,
        processed=processed,
        sessions=sessions,
        tombstones=tombstones,
    )


# --- ingest ------------------------------------------------------------------------------------


def mark_processed_statements(event_id: str, created_at: int) -> list[Statement]:
    return [
        Statement(
            "INSERT OR IGNORE INTO processed (event_id, created_at) VALUES (?, ?)",
            (event_id, created_at),
        )
    ]


async def mark_processed(db: BridgeDatabase, event_id: str, created_at: int) -> None:
    await _run(db, mark_processed_statements(event_id, created_at))


def prune_processed_statements(before: int) -> list[Statement]:
    return [Statement("DELETE FROM processed WHERE created_at < ?", (before,))]


async def prune_processed(db: BridgeDatabase, before: int) -> int:
    return await _run(db, prune_processed_statements(before))


def set_cursor_statements(last_seen: int, now: int | None = None) -> list[Statement]:
    return [kv_set_statement(CURSOR_KEY, str(last_seen), now=now)]


async def set_cursor(db: BridgeDatabase, last_seen: int) -> None:
    await _run(db, set_cursor_statements(last_seen))


# --- phones ------------------------------------------------------------------------------------


def save_phone_statements(pubkey: str, npub: str, label: str, paired_at: str) -> list[Statement]:
    return [
        Statement(
            "INSERT INTO phones (pubkey, npub, label, paired_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (pubkey) DO UPDATE SET label = excluded.label",
            (pubkey, npub, label, paired_at),
        )
    ]


async def save_phone(
    db: BridgeDatabase, pubkey: str, npub: str, label: str, paired_at: str
) -> None:
    await _run(db, save_phone_statements(pubkey, npub, label, paired_at))


def delete_phone_statements(pubkey: str) -> list[Statement]:
    return [Statement("DELETE FROM phones WHERE pubkey = ?", (pubkey,))]


async def delete_phone(db: BridgeDatabase, pubkey: str) -> None:
    await _run(db, delete_phone_statements(pubkey))


# --- sessions ----------------------------------------------------------------------------------


def save_session_statements(
    session_id: str, record: dict[str, Any], *, agent: str = "claude"
) -> list[Statement]:
    """Insert or replace a session's record; `agent` goes to its own column (schema v8)."""
    return [
        Statement(
            "INSERT INTO sessions (session_id, agent, record) VALUES (?, ?, ?) "
            "ON CONFLICT (session_id) DO UPDATE SET record = excluded.record, "
            "agent = excluded.agent",
            (session_id, agent, json.dumps(record, separators=(",", ":"))),
        )
    ]


async def save_session(
    db: BridgeDatabase, session_id: str, record: dict[str, Any], *, agent: str = "claude"
) -> None:
    await _run(db, save_session_statements(session_id, record, agent=agent))


def delete_session_statements(session_id: str) -> list[Statement]:
    return [
        Statement("DELETE FROM sessions WHERE session_id = ?", (session_id,)),
        Statement("DELETE FROM inbox WHERE session_id = ?", (session_id,)),
        Statement("DELETE FROM host_answers WHERE session_id = ?", (session_id,)),
    ]


async def delete_session(db: BridgeDatabase, session_id: str) -> None:
    await _run(db, delete_session_statements(session_id))


def set_agent_cursor_statements(session_id: str, seq: int) -> list[Statement]:
    """The session host's journal is applied up to `seq` (the record's ``agent_seq``)."""
    return [
        Statement(
            "UPDATE sessions SET record = json_set(record, '$.agent_seq', ?) WHERE session_id = ?",
            (seq, session_id),
        )
    ]


async def set_agent_cursor(db: BridgeDatabase, session_id: str, seq: int) -> None:
    """The session host's journal is applied up to `seq` (the record's ``agent_seq``)."""
    await _run(db, set_agent_cursor_statements(session_id, seq))


def add_tombstone_statements(session_id: str) -> list[Statement]:
    return [
        Statement("DELETE FROM tombstones WHERE session_id = ?", (session_id,)),
        Statement("INSERT INTO tombstones (session_id) VALUES (?)", (session_id,)),
        Statement(
            "DELETE FROM tombstones WHERE position NOT IN "
            "(SELECT position FROM tombstones ORDER BY position DESC LIMIT ?)",
            (MAX_TOMBSTONES,),
        ),
    ]


async def add_tombstone(db: BridgeDatabase, session_id: str) -> None:
    await _run(db, add_tombstone_statements(session_id))


async def stored_sessions(db: BridgeDatabase) -> list[tuple[str, str | None]]:
    """``(session_id, state)`` of every stored session (state None when the record is unreadable).

    For ``codedeck-bridge sessions close`` while no daemon runs; the daemon itself uses
    `load_state`.
    """
    out: list[tuple[str, str | None]] = []
    for session_id, text in await db.fetchall(
        "SELECT session_id, record FROM sessions ORDER BY session_id"
    ):
        try:
            record = json.loads(text)
        except (TypeError, ValueError):
            record = None
        state = record.get("state") if isinstance(record, dict) else None
        out.append((str(session_id), state if isinstance(state, str) else None))
    return out


async def remove_sessions(db: BridgeDatabase, sessions: Sequence[tuple[str, bool]]) -> None:
    """Remove ``(session_id, tombstone)`` sessions in one transaction, as a close commits them.

    The same rows go as with the engine's close: the session, its inbox and host answers
    (`delete_session`), its transcript, plus a tombstone when `tombstone` is true (a session the
    phones listed; a pending one leaves none).
    """
    async with db.transaction():
        for session_id, tombstone in sessions:
            await delete_session(db, session_id)
            await delete_transcript(db, session_id)
            if tombstone:
                await add_tombstone(db, session_id)


# --- transcripts -------------------------------------------------------------------------------


def append_transcript_statements(session_id: str, seq: int, entry_json: str) -> list[Statement]:
    """Insert one line; a seq already stored is a bug upstream and raises (never overwrites)."""
    return [
        Statement(
            "INSERT INTO transcripts (session_id, seq, entry) VALUES (?, ?, ?)",
            (session_id, seq, entry_json),
        )
    ]


async def append_transcript(db: BridgeDatabase, session_id: str, seq: int, entry_json: str) -> None:
    """Insert one line; a seq already stored is a bug upstream and raises (never overwrites)."""
    await _run(db, append_transcript_statements(session_id, seq, entry_json))


def delete_transcript_statements(session_id: str) -> list[Statement]:
    return [Statement("DELETE FROM transcripts WHERE session_id = ?", (session_id,))]


async def delete_transcript(db: BridgeDatabase, session_id: str) -> None:
    await _run(db, delete_transcript_statements(session_id))


async def read_transcript(
    db: BridgeDatabase, session_id: str, low: int, high: int
) -> list[tuple[int, str]]:
    """Lines with ``low <= seq <= high`` in order; pruned seqs are simply absent."""
    rows = await db.fetchall(
        "SELECT seq, entry FROM transcripts WHERE session_id = ? AND seq BETWEEN ? AND ? "
        "ORDER BY seq",
        (session_id, low, high),
    )
    return [(int(seq), str(entry)) for seq, entry in rows]


async def sweep_transcripts(
    db: BridgeDatabase, keep_last: int, live_sessions: Sequence[str]
) -> int:
    """Retention: keep the last `keep_last` lines per session (0 keeps all); drop orphans."""
    removed = 0
    async with db.transaction():
        if live_sessions:
            marks = ",".join("?" * len(live_sessions))
            removed += await db.execute(
                f"DELETE FROM transcripts WHERE session_id NOT IN ({marks})",
                tuple(live_sessions),
            )
        else:
            removed += await db.execute("DELETE FROM transcripts")
        if keep_last > 0:
            for session_id, high in await db.fetchall(
                "SELECT session_id, MAX(seq) FROM transcripts GROUP BY session_id"
            ):
                removed += await db.execute(
                    "DELETE FROM transcripts WHERE session_id = ? AND seq <= ?",
                    (session_id, int(high) - keep_last),
                )
    return removed


# --- inbox -------------------------------------------------------------------------------------


def add_inbox_statements(
    uid: str, session_id: str, text: str, input_id: str | None, now: int
) -> list[Statement]:
    return [
        Statement(
            "INSERT INTO inbox (uid, session_id, text, input_id, state, created_at) "
            "VALUES (?, ?, ?, ?, 'pending', ?)",
            (uid, session_id, text, input_id, now),
        )
    ]


async def add_inbox(
    db: BridgeDatabase, uid: str, session_id: str, text: str, input_id: str | None, now: int
) -> None:
    await _run(db, add_inbox_statements(uid, session_id, text, input_id, now))


async def inbox_rows(
    db: BridgeDatabase, *, session_id: str | None = None, state: str | None = None
) -> list[InboxRow]:
    sql = "SELECT uid, session_id, text, input_id, state FROM inbox"
    clauses, params = [], []
    if session_id is not None:
        clauses.append("session_id = ?")
        params.append(session_id)
    if state is not None:
        clauses.append("state = ?")
        params.append(state)
    if clauses:
        sql += " WHERE " + " AND ".join(clauses)
    rows = await db.fetchall(sql + " ORDER BY rowid", tuple(params))
    return [
        InboxRow(str(a), str(b), str(c), d if d is None else str(d), str(e))
        for a, b, c, d, e in rows
    ]


async def mark_inbox_sent(db: BridgeDatabase, uid: str) -> None:
    await db.execute("UPDATE inbox SET state = 'sent' WHERE uid = ?", (uid,))


def mark_inbox_taken_statements(uid: str) -> list[Statement]:
    """The agent took the input (a restart never hands it over again)."""
    return [Statement("UPDATE inbox SET state = 'taken' WHERE uid = ?", (uid,))]


async def mark_inbox_taken(db: BridgeDatabase, uid: str) -> None:
    """The agent took the input (a restart never hands it over again)."""
    await _run(db, mark_inbox_taken_statements(uid))


async def mark_inbox_pending(db: BridgeDatabase, uids: Iterable[str]) -> None:
    """Rows marked sent that the agent never received go back to pending (crash recovery)."""
    for uid in uids:
        await db.execute("UPDATE inbox SET state = 'pending' WHERE uid = ?", (uid,))


def remove_inbox_statements(uids: Iterable[str]) -> list[Statement]:
    return [Statement("DELETE FROM inbox WHERE uid = ?", (uid,)) for uid in uids]


async def remove_inbox(db: BridgeDatabase, uids: Iterable[str]) -> None:
    await db.executemany("DELETE FROM inbox WHERE uid = ?", [(uid,) for uid in uids])


# --- outbox ------------------------------------------------------------------------------------


def add_outbox_statements(
    event_id: str, event_json: str, expires_at: int | None, now: int
) -> list[Statement]:
    return [
        Statement(
            "INSERT OR IGNORE INTO outbox (event_id, event, expires_at, queued_at) "
            "VALUES (?, ?, ?, ?)",
            (event_id, event_json, expires_at, now),
        )
    ]


async def add_outbox(
    db: BridgeDatabase, event_id: str, event_json: str, expires_at: int | None, now: int
) -> None:
    await _run(db, add_outbox_statements(event_id, event_json, expires_at, now))


async def outbox_rows(
    db: BridgeDatabase, now: int, *, queued_before: int | None = None
) -> list[OutboxRow]:
    """Queued events still worth sending (not expired; queued before the bound), oldest first."""
    rows = await db.fetchall(
        "SELECT event_id, event, expires_at, accepted_by FROM outbox "
        "WHERE (expires_at IS NULL OR expires_at > ?) AND queued_at < ? "
        "ORDER BY queued_at, rowid",
        (now, now + 1 if queued_before is None else queued_before),
    )
    return [
        OutboxRow(str(a), str(b), None if c is None else int(c), frozenset(str(d).split()))
        for a, b, c, d in rows
    ]


async def record_outbox_acceptance(
    db: BridgeDatabase, event_id: str, relays: Iterable[str], every_relay: Iterable[str]
) -> bool:
    """Add `relays` to those holding an outbox event; drop the row once all of `every_relay` do.

    A read-merge-write in one transaction: two sends of the same event (a live one and a
    reconnect retry) settle in any order, and neither may erase what the other learnt.
    Returns True when the row is gone (or was already).
    """
    holders = set(relays)
    if holders >= set(every_relay):
        # The usual case, every relay took it at once: final whatever else is in flight.
        await db.execute("DELETE FROM outbox WHERE event_id = ?", (event_id,))
        return True
    async with db.transaction():
        row = await db.fetchone("SELECT accepted_by FROM outbox WHERE event_id = ?", (event_id,))
        if row is None:
            return True
        holders |= set(str(row[0]).split())
        if holders >= set(every_relay):
            await db.execute("DELETE FROM outbox WHERE event_id = ?", (event_id,))
            return True
        await db.execute(
            "UPDATE outbox SET accepted_by = ? WHERE event_id = ?",
            (" ".join(sorted(holders)), event_id),
        )
        return False


def delete_outbox_statements(event_ids: Iterable[str]) -> list[Statement]:
    return [
        Statement("DELETE FROM outbox WHERE event_id = ?", (event_id,)) for event_id in event_ids
    ]


async def delete_outbox(db: BridgeDatabase, event_id: str) -> None:
    await _run(db, delete_outbox_statements([event_id]))


async def prune_outbox(db: BridgeDatabase, now: int) -> int:
    return await db.execute(
        "DELETE FROM outbox WHERE expires_at IS NOT NULL AND expires_at <= ?", (now,)
    )


async def _run(db: BridgeDatabase, statements: list[Statement]) -> int:
    """Run built statements on their own (or in the caller's transaction); rows changed.

    One statement is one ``execute`` (the rows it changed are returned); several go as one
    ``write``, atomic on their own.
    """
    if len(statements) == 1:
        return await db.execute(*statements[0])
    await db.write(statements)
    return 0
