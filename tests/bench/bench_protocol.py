"""Wire codec throughput: validated decode + encode against plain orjson on the same payloads.

The baseline (``orjson.loads`` + ``orjson.dumps``, no validation) does the JSON work only, so the
ratio is the cost of the schema: strict decoding, the free-form metadata check, and egress
validation before writing. Cases:

- a typical ~2 KB ``output`` message (a ``tool_use`` entry with its metadata);
- a ~40 KB ``sync-chunk`` (50 entries, the size at which chunk fragmentation starts);
- ``split`` + reassembly of a 200 KB message into ``chunk`` envelopes (baseline: the same bytes
  through one orjson round trip), so a regression in the slicing search shows up.
"""

from __future__ import annotations

import orjson

from bridge.protocol import (
    Assembler,
    OutputEntry,
    OutputMessage,
    SyncChunkEntry,
    SyncChunkMessage,
    decode_bridge_to_phone,
    encode,
    split,
)
from tests.bench.common import Row, measure_many

__all__ = ["run"]

SESSION = "3f1c2a9e-8b7d-4c6e-9f0a-1b2c3d4e5f60"
TIMESTAMP = "2026-03-01T12:00:00.000Z"


def typical_output() -> OutputMessage:
    """A tool_use entry of about 2 KB, shaped like what the Claude Code adapter emits."""
    command = "npm test -- --watch=false --reporter=dot " + "src/components/" * 40
    metadata = {
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "tool_name": "Bash",
        "tool_use_id": "toolu_01ABCDEFGHIJKLMNOPQRSTUV",
        "tool_input": {"command": command, "description": "Run the unit tests", "timeout": 120000},
        "display_hint": "collapse",
    }
    content = "Bash: " + command + "\n" + "output line of the test runner\n" * 18
    entry = OutputEntry(
        entryType="tool_use", content=content, timestamp=TIMESTAMP, metadata=metadata
    )
    return OutputMessage(sessionId=SESSION, seq=1234, entry=entry)


def sync_chunk() -> SyncChunkMessage:
    """Fifty mixed entries, about 40 KB encoded."""
    entries = []
    for seq in range(1, 51):
        if seq % 3 == 0:
            entry = OutputEntry(
                entryType="tool_result",
                content="PASS src/app.test.ts (12 tests)\n" * 20,
                timestamp=TIMESTAMP,
                metadata={"tool_use_id": f"toolu_{seq:04d}"},
            )
        else:
            entry = OutputEntry(
                entryType="text",
                content="Here is what I changed and why — " + "the parser now keeps offsets. " * 19,
                timestamp=TIMESTAMP,
                metadata={
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "display_hint": "show",
                },
            )
        entries.append(SyncChunkEntry(seq=seq, entry=entry))
    return SyncChunkMessage(sessionId=SESSION, syncId="sync-0001", range=(1, 50), entries=entries)


def run() -> list[Row]:
    output = typical_output()
    chunk = sync_chunk()
    output_text = encode(output)
    chunk_text = encode(chunk)
    big_text = encode(
        SyncChunkMessage(
            sessionId=SESSION, syncId="sync-0002", range=(1, 250), entries=[*chunk.entries] * 5
        )
    )
    cid = "0123456789abcdef0123456789abcdef"

    def fragment_round_trip() -> None:
        assembler = Assembler()
        for fragment in split(big_text, cid=cid):
            assembler.feed(fragment, 0.0)

    results = measure_many(
        {
            "output ours": lambda: encode(decode_bridge_to_phone(output_text)),
            "output base": lambda: orjson.dumps(orjson.loads(output_text)),
            "chunk ours": lambda: encode(decode_bridge_to_phone(chunk_text)),
            "chunk base": lambda: orjson.dumps(orjson.loads(chunk_text)),
            "split ours": fragment_round_trip,
            "split base": lambda: orjson.dumps(orjson.loads(big_text)),
        }
    )
    baseline = "orjson loads+dumps, no validation"
    return [
        Row(
            "protocol",
            f"decode+encode output ({len(output_text.encode()) / 1024:.1f} KB)",
            results["output ours"],
            results["output base"],
            baseline,
        ),
        Row(
            "protocol",
            f"decode+encode sync-chunk ({len(chunk_text.encode()) / 1024:.1f} KB)",
            results["chunk ours"],
            results["chunk base"],
            baseline,
        ),
        Row(
            "protocol",
            f"split+reassemble ({len(big_text.encode()) / 1024:.0f} KB)",
            results["split ours"],
            results["split base"],
            "orjson loads+dumps of the same text",
        ),
    ]
