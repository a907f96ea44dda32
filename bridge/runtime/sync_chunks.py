"""Sync chunks from the stored transcript: read in batches, encoded by splicing, sealed, sent.

A full sync is many chunks at once (50,000 lines are 1,000 chunks of 50, emitted by the engine in
one go). A trip to the store's thread per chunk, and every line decoded into a model and encoded
again (validation both ways) before the chunk is encoded as a whole, would make a full sync the
larger part of the daemon's time. Here:

- the lines of the chunks the engine emitted together are read in a few trips
  (:func:`reading_batches`): a small first batch, so the first chunk leaves at once, then each
  batch read on the store's thread while the one before is sealed (:func:`start_reading`);
- a chunk's text is written around the stored lines as they are (:func:`chunk_text`): a line was
  validated against the wire schema when it was stored (``AppendTranscript``), and its stored
  text is the entry's JSON in wire key order, so the chunk is the text ``encode`` would produce;
- a stored line that is not a JSON object (a damaged row) is left out of its chunk and logged:
  the chunk's range still covers its seq, which the phone reads as a pruned line, instead of the
  whole sync (and the daemon, on the exception) failing on it.
"""

from __future__ import annotations

import itertools
import logging
import sqlite3
from collections.abc import Awaitable, Sequence

import orjson

from bridge.engine.effects import SendSyncChunk
from store.db import BridgeDatabase

__all__ = ["chunk_text", "read_ranges", "reading_batches", "start_reading"]

logger = logging.getLogger(__name__)

_RANGE_QUERY = (
    "SELECT seq, entry FROM transcripts WHERE session_id = ? AND seq BETWEEN ? AND ? ORDER BY seq"
)


async def read_ranges(
    db: BridgeDatabase, chunks: Sequence[SendSyncChunk]
) -> list[list[tuple[int, str]]]:
    """The stored lines of each chunk's range, in order, in one trip to the store."""
    return await start_reading(db, chunks)


def start_reading(
    db: BridgeDatabase, chunks: Sequence[SendSyncChunk]
) -> Awaitable[list[list[tuple[int, str]]]]:
    """:func:`read_ranges`, queued on the store's thread before this returns; await it."""
    ranges = [(chunk.session_id, *chunk.seq_range) for chunk in chunks]

    def job(conn: sqlite3.Connection) -> list[list[tuple[int, str]]]:
        return [
            [(int(seq), str(entry)) for seq, entry in conn.execute(_RANGE_QUERY, params)]
            for params in ranges
        ]

    return db.start_run(job)


def reading_batches(
    chunks: Sequence[SendSyncChunk], first: int, then: int
) -> list[Sequence[SendSyncChunk]]:
    """`chunks` cut into the batches read in one trip each: `first` chunks, then `then` each.

    One trip for a whole sync would read every line (50,000 for a large one) before the first
    chunk could leave; a small first batch gets the phone started at once, and each
    next batch is read while the one before is sealed.
    """
    cuts = [0, min(first, len(chunks))]
    while cuts[-1] < len(chunks):
        cuts.append(min(cuts[-1] + then, len(chunks)))
    return [chunks[low:high] for low, high in itertools.pairwise(cuts) if high > low]


def chunk_text(
    session_id: str, sync_id: str, seq_range: tuple[int, int], rows: Sequence[tuple[int, str]]
) -> str:
    """The wire text of a ``sync-chunk`` carrying stored lines (see the module docstring).

    The JSON ``encode(SyncChunkMessage(...))`` writes for the same lines, in the same wire key
    order (``type``, ``sessionId``, ``syncId``, ``range``, ``entries``; ``seq`` then ``entry``),
    each line as it is stored.
    """
    head = orjson.dumps(
        {
            "type": "sync-chunk",
            "sessionId": session_id,
            "syncId": sync_id,
            "range": [seq_range[0], seq_range[1]],
        }
    )
    entries = []
    for seq, text in rows:
        if not _is_json_object(text):
            logger.warning(
                "! transcript line %d of %s is damaged (not a JSON object); left out of its "
                "sync chunk",
                seq,
                session_id[:8],
            )
            continue
        entries.append(f'{{"seq":{seq},"entry":{text}}}')
    return head[:-1].decode() + ',"entries":[' + ",".join(entries) + "]}"


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(orjson.loads(text), dict)
    except orjson.JSONDecodeError:
        return False
