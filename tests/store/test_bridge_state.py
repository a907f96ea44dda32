"""The daemon's tables: round trips, retention that keeps seqs, tombstone cap, outbox expiry."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from store import BRIDGE_MIGRATIONS
from store import bridge_state as bs
from store.db import BridgeDatabase, open_bridge_db
from store.errors import StoreError
from store.migrations import migrate


@pytest.fixture
async def db(tmp_path: Path) -> BridgeDatabase:
    database = await open_bridge_db(tmp_path / "home")
    yield database  # type: ignore[misc]
    await database.close()


async def test_load_state_round_trip(db: BridgeDatabase) -> None:
    async with db.transaction():
        await bs.save_phone(db, "a" * 64, "npub1a", "Pixel", "2026-01-01T00:00:00.000Z")
        await bs.mark_processed(db, "e" * 64, 100)
        await bs.set_cursor(db, 100)
        await bs.save_session(db, "s1", {"cwd": "/ws", "seq_high": 1})
        await bs.append_transcript(db, "s1", 1, '{"a":1}')
        await bs.append_transcript(db, "s1", 2, '{"a":2}')
        await bs.add_tombstone(db, "gone")
    state = await bs.load_state(db)
    assert state.phones == [("a" * 64, "npub1a", "Pixel", "2026-01-01T00:00:00.000Z")]
    assert state.processed == {"e" * 64: 100} and state.last_seen == 100
    assert state.sessions == [  # seq_high: the max of both
        {"cwd": "/ws", "seq_high": 2, "session_id": "s1", "agent": "claude"}
    ]
    assert state.tombstones == ["gone"]


async def test_a_damaged_seq_high_falls_back_to_the_transcript(
    db: BridgeDatabase, caplog: pytest.LogCaptureFixture
) -> None:
    async with db.transaction():
        await bs.save_session(db, "s1", {"cwd": "/ws", "seq_high": "many"})
        await bs.append_transcript(db, "s1", 7, "{}")
    state = await bs.load_state(db)
    assert state.sessions == [{"cwd": "/ws", "seq_high": 7, "session_id": "s1", "agent": "claude"}]
    assert "not an integer" in caplog.text


async def test_the_agent_of_a_session_has_its_own_column(db: BridgeDatabase) -> None:
    await bs.save_session(db, "s1", {"cwd": "/ws"}, agent="opencode")
    await bs.save_session(db, "s2", {"cwd": "/ws"})
    assert await db.fetchall("SELECT session_id, agent FROM sessions ORDER BY session_id") == [
        ("s1", "opencode"),
        ("s2", "claude"),
    ]
    await bs.save_session(db, "s1", {"cwd": "/other"}, agent="gemini")  # an upsert moves both
    by_id = {r["session_id"]: r for r in (await bs.load_state(db)).sessions}
    assert by_id["s1"] == {"cwd": "/other", "session_id": "s1", "agent": "gemini", "seq_high": 0}
    assert by_id["s2"]["agent"] == "claude"


async def test_schema_v8_gives_sessions_stored_before_it_claude(tmp_path: Path) -> None:
    """A v7 database (sessions from before agents existed) opens with every session on Claude."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, BRIDGE_MIGRATIONS[:7], path=path)
    conn.execute("INSERT INTO sessions (session_id, record) VALUES ('old', '{\"cwd\": \"/ws\"}')")
    assert migrate(conn, BRIDGE_MIGRATIONS, path=path) == len(BRIDGE_MIGRATIONS)
    assert conn.execute("SELECT agent, record FROM sessions").fetchall() == [
        ("claude", '{"cwd": "/ws"}')
    ]
    with pytest.raises(sqlite3.IntegrityError):  # an empty agent is never stored
        conn.execute("UPDATE sessions SET agent = ''")
    conn.close()


async def test_a_seq_is_never_overwritten(db: BridgeDatabase) -> None:
    await bs.append_transcript(db, "s1", 1, "{}")
    with pytest.raises(StoreError):
        await bs.append_transcript(db, "s1", 1, '{"other":true}')
    assert await bs.read_transcript(db, "s1", 1, 1) == [(1, "{}")]


async def test_retention_keeps_the_newest_lines_with_their_seqs(db: BridgeDatabase) -> None:
    async with db.transaction():
        for seq in range(1, 11):
            await bs.append_transcript(db, "keep", seq, f'{{"n":{seq}}}')
            await bs.append_transcript(db, "orphan", seq, "{}")
    removed = await bs.sweep_transcripts(db, 3, ["keep"])
    assert removed == 7 + 10
    assert [seq for seq, _ in await bs.read_transcript(db, "keep", 1, 100)] == [8, 9, 10]
    assert await bs.read_transcript(db, "orphan", 1, 100) == []
    assert await bs.sweep_transcripts(db, 0, ["keep"]) == 0  # 0 keeps everything


async def test_tombstones_are_capped_at_100_without_duplicates(db: BridgeDatabase) -> None:
    for n in range(105):
        await bs.add_tombstone(db, f"s{n}")
    await bs.add_tombstone(db, "s104")
    tombstones = (await bs.load_state(db)).tombstones
    assert len(tombstones) == 100 and tombstones[0] == "s5" and tombstones[-1] == "s104"


async def test_outbox_rows_expire_and_inbox_states(db: BridgeDatabase) -> None:
    await bs.add_outbox(db, "e1", '{"id":"e1"}', 200, 100)
    await bs.add_outbox(db, "e2", '{"id":"e2"}', 150, 101)
    assert [r.event_id for r in await bs.outbox_rows(db, 120)] == ["e1", "e2"]
    assert [r.event_id for r in await bs.outbox_rows(db, 120, queued_before=101)] == ["e1"]
    assert await bs.prune_outbox(db, 160) == 1
    assert [r.event_id for r in await bs.outbox_rows(db, 160)] == ["e1"]
    assert (await bs.outbox_rows(db, 160))[0].accepted_by == frozenset()
    every = ["wss://a", "wss://b", "wss://c"]
    assert not await bs.record_outbox_acceptance(db, "e1", ["wss://b"], every)
    assert not await bs.record_outbox_acceptance(db, "e1", ["wss://a", "wss://a"], every)
    assert (await bs.outbox_rows(db, 160))[0].accepted_by == {"wss://a", "wss://b"}
    assert await bs.record_outbox_acceptance(db, "e1", ["wss://c"], every)  # all: row gone
    assert await bs.outbox_rows(db, 160) == []
    assert await bs.record_outbox_acceptance(db, "e1", ["wss://c"], every)  # already gone
    await bs.add_inbox(db, "u1", "s1", "hi", "in-1", 100)
    await bs.add_inbox(db, "u2", "s1", "there", None, 101)
    await bs.mark_inbox_sent(db, "u1")
    assert [r.uid for r in await bs.inbox_rows(db, session_id="s1", state="pending")] == ["u2"]
    assert [r.uid for r in await bs.inbox_rows(db, state="sent")] == ["u1"]
    await bs.delete_session(db, "s1")  # its inbox goes with it
    assert await bs.inbox_rows(db) == []
