"""Sync chunks spliced from stored lines: the same JSON as encoding the message, one read."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import orjson
import pytest

from bridge.engine.effects import SendSyncChunk
from bridge.engine.inputs import SyncChunkSent
from bridge.protocol import SyncChunkEntry, SyncChunkMessage, encode
from bridge.protocol.shared import DiffData, DiffLine, OutputEntry
from bridge.runtime.engine_loop import CHUNKS_PER_STEP, SYNC_READ_BATCH
from bridge.runtime.sync_chunks import chunk_text, read_ranges, reading_batches
from store import bridge_state
from store.db import BridgeDatabase
from tests.runtime.support import PHONE, make_stack, opened, sent

ENTRIES = [
    OutputEntry(entryType="text", content="plain", timestamp="t1"),
    OutputEntry(
        entryType="text",
        content='quotes " and \\ and ünïcode ✓ and \u2028',
        timestamp="t2",
        metadata={"role": "assistant", "nested": {"list": [1, 2.5, None, True]}},
    ),
    OutputEntry(
        entryType="diff",
        content="",
        timestamp="t3",
        diff=DiffData(path="a.py", lines=[DiffLine(type="add", text="x = 1")], truncated=True),
    ),
]


def stored(entry: OutputEntry) -> str:
    """A line as the commit stores it."""
    return entry.model_dump_json(exclude_none=True)


def test_a_spliced_chunk_is_what_encoding_the_message_writes() -> None:
    rows = [(seq, stored(entry)) for seq, entry in enumerate(ENTRIES, 1)]
    text = chunk_text("s-1", "sync-1", (1, 4), rows)
    message = SyncChunkMessage(
        sessionId="s-1",
        syncId="sync-1",
        range=[1, 4],
        entries=[SyncChunkEntry(seq=seq, entry=entry) for seq, entry in enumerate(ENTRIES, 1)],
    )
    assert orjson.loads(text) == orjson.loads(encode(message))
    assert text.startswith(
        '{"type":"sync-chunk","sessionId":"s-1","syncId":"sync-1","range":[1,4],'
    )
    assert chunk_text("s-1", "sync-1", (5, 9), []) == encode(
        SyncChunkMessage(sessionId="s-1", syncId="sync-1", range=[5, 9], entries=[])
    )


def test_a_damaged_line_is_left_out_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    rows = [(1, stored(ENTRIES[0])), (2, '{"entryType": "te'), (3, "[1, 2]")]
    text = chunk_text("s-1", "sync-1", (1, 3), rows)
    assert [item["seq"] for item in orjson.loads(text)["entries"]] == [1]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2 and "transcript line 2 of s-1 is damaged" in warnings[0]


def count_reads(db: BridgeDatabase, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The jobs handed to the store's thread by ``start_run`` from now on (they still run)."""
    trips: list[Any] = []
    start_run = db.start_run

    def counted(job: Any) -> Any:
        trips.append(job)
        return start_run(job)

    monkeypatch.setattr(db, "start_run", counted)
    return trips


async def test_the_lines_of_many_chunks_are_read_in_one_trip(
    db: BridgeDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    for seq in range(1, 8):
        await bridge_state.append_transcript(db, "s-1", seq, stored(ENTRIES[seq % 3]))
    trips = count_reads(db, monkeypatch)
    chunks = [
        SendSyncChunk(PHONE.public_hex, "s-1", "sync-1", (1, 3)),
        SendSyncChunk(PHONE.public_hex, "s-1", "sync-1", (4, 6)),
        SendSyncChunk(PHONE.public_hex, "s-1", "sync-1", (7, 9)),
        SendSyncChunk(PHONE.public_hex, "s-2", "sync-2", (1, 9)),
    ]
    lines = await read_ranges(db, chunks)
    assert len(trips) == 1
    assert [[seq for seq, _ in chunk] for chunk in lines] == [[1, 2, 3], [4, 5, 6], [7], []]


async def test_a_sync_sends_each_chunk_and_hears_when_each_left(
    db: BridgeDatabase, tmp_path: Path
) -> None:
    async with make_stack(db, tmp_path / "ws") as stack:
        for seq in range(1, 101):
            await bridge_state.append_transcript(db, "s-1", seq, stored(ENTRIES[seq % 3]))
        chunks = [
            SendSyncChunk(PHONE.public_hex, "s-1", "sync-1", (low, low + 49)) for low in (1, 51)
        ]
        await stack.effects.perform(list(chunks))
        await sent(stack.outbound)
        assert stack.fed == [SyncChunkSent(PHONE.public_hex, "sync-1")] * 2
        messages = [opened(event) for event in stack.pool.events()]
        ranges = [tuple(m.range) for m in messages]  # type: ignore[union-attr]
        assert ranges == [(1, 50), (51, 100)]
        assert [e.entry for e in messages[1].entries[:3]] == [  # type: ignore[union-attr]
            ENTRIES[51 % 3],
            ENTRIES[52 % 3],
            ENTRIES[53 % 3],
        ]


def test_a_sync_is_read_in_a_small_first_batch_then_larger_ones() -> None:
    chunks = [SendSyncChunk(PHONE.public_hex, "s-1", "x", (n, n)) for n in range(1, 151)]
    batches = reading_batches(chunks, 8, 64)
    assert [len(batch) for batch in batches] == [8, 64, 64, 14]
    assert [c for batch in batches for c in batch] == chunks
    assert [len(b) for b in reading_batches(chunks[:3], 8, 64)] == [3]
    assert [len(b) for b in reading_batches(chunks[:72], 8, 64)] == [8, 64]


async def test_a_long_sync_reads_batch_after_batch_and_sends_every_chunk_in_order(
    db: BridgeDatabase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    count = CHUNKS_PER_STEP + SYNC_READ_BATCH + 5
    async with make_stack(db, tmp_path / "ws") as stack:
        for seq in range(1, count + 1):
            await bridge_state.append_transcript(db, "s-1", seq, stored(ENTRIES[seq % 3]))
        trips = count_reads(db, monkeypatch)
        chunks = [
            SendSyncChunk(PHONE.public_hex, "s-1", "sync-1", (n, n)) for n in range(1, count + 1)
        ]
        await stack.effects.perform(list(chunks))
        await sent(stack.outbound)
        assert len(trips) == 3  # 8 chunks, then 64, then the last 5
        assert stack.fed == [SyncChunkSent(PHONE.public_hex, "sync-1")] * count
        messages = [opened(event) for event in stack.pool.events()]
        assert [tuple(m.range) for m in messages] == [(n, n) for n in range(1, count + 1)]  # type: ignore[union-attr]
        assert all(len(m.entries) == 1 for m in messages)  # type: ignore[union-attr]
