"""Builders for the phone simulator's tests: messages with sensible defaults."""

from __future__ import annotations

from typing import Any

from bridge.protocol.messages import SessionsMessage, SyncChunkMessage
from bridge.protocol.shared import OutputEntry, RemoteSessionInfo, SyncChunkEntry

__all__ = ["make_chunk", "make_entry", "make_heartbeat", "make_session"]


def make_session(session_id: str, **overrides: Any) -> RemoteSessionInfo:
    fields: dict[str, Any] = {
        "id": session_id,
        "slug": session_id[:8],
        "cwd": "/work/project",
        "lastActivity": "2026-01-01T00:00:00Z",
        "lineCount": 0,
        "title": None,
        "project": "project",
        "state": "idle",
    }
    fields.update(overrides)
    return RemoteSessionInfo(**fields)


def make_heartbeat(*sessions: RemoteSessionInfo | str, **overrides: Any) -> SessionsMessage:
    listed = [make_session(s) if isinstance(s, str) else s for s in sessions]
    fields: dict[str, Any] = {
        "machine": "box",
        "host": "cli",
        "sessions": listed,
        "protocolVersion": 10,
        "capabilities": ["sync/1", "chunked"],
    }
    fields.update(overrides)
    return SessionsMessage(**fields)


def make_entry(content: str, entry_type: str = "text") -> OutputEntry:
    return OutputEntry(entryType=entry_type, content=content, timestamp="2026-01-01T00:00:00Z")


def make_chunk(
    session_id: str, sync_id: str, low: int, high: int, *, skip: frozenset[int] = frozenset()
) -> SyncChunkMessage:
    entries = [
        SyncChunkEntry(seq=seq, entry=make_entry(f"line {seq}"))
        for seq in range(low, high + 1)
        if seq not in skip
    ]
    return SyncChunkMessage(
        sessionId=session_id, syncId=sync_id, range=(low, high), entries=entries
    )
