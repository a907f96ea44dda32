"""The session registry, tombstones, and the small text rules around sessions.

The registry is what the heartbeat lists. Its rules (REFERENCE-BEHAVIOUR §1.9–1.11, the bug-B
contract of PROTOCOL.md):

- A session is listed from ``session-ready`` until the phone closes it; a runner that died leaves
  the record listed (idle) so the phone can still read and resume it.
- A session being created (between ``session-pending`` and ``session-ready``) is kept as a
  *pending* record: persisted, so a crash does not orphan the phone's placeholder, but never
  listed in a heartbeat.
- Closing a session removes the record and adds a tombstone; at most 100 tombstones, oldest
  first out, no duplicates.

Pure: timestamps are passed in as ISO strings.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from bridge.engine.effects import SessionRecord
from bridge.protocol import RemoteSessionInfo

__all__ = [
    "MAX_TOMBSTONES",
    "PENDING_STATE",
    "Registry",
    "check_folder_path",
    "title_from_input",
    "to_remote_info",
]

MAX_TOMBSTONES = 100
PENDING_STATE = "starting"
"""Registry state of a session whose runner has not reported ready yet (never on the wire)."""

TITLE_MAX = 80
_SLASH_COMMAND = re.compile(r"^/[A-Za-z][\w:-]*(\s|$)")


def title_from_input(text: str) -> str | None:
    """The session title a first message gives, or None when it gives none.

    Newlines become spaces; empty messages, messages starting with ``[`` and
    ``Request interrupted`` give none; the title is at most 80 characters (77 + ``...``).
    """
    flat = " ".join(text.split())
    if not flat or flat.startswith("[") or flat.startswith("Request interrupted"):
        return None
    if len(flat) > TITLE_MAX:
        return flat[: TITLE_MAX - 3] + "..."
    return flat


def is_slash_command(text: str) -> bool:
    return _SLASH_COMMAND.match(text) is not None


def to_remote_info(
    record: SessionRecord, *, offline: bool = False, provider_label: str | None = None
) -> RemoteSessionInfo:
    """The wire view of a record (``lineCount`` = ``seqHigh``, ``slug`` = first 8 of the id)."""
    state = "offline" if offline else record.state
    percentage = record.context_percentage
    return RemoteSessionInfo(
        id=record.session_id,
        slug=record.session_id[:8],
        cwd=record.cwd,
        lastActivity=record.last_activity,
        lineCount=record.seq_high,
        title=record.title,
        project=record.project or posixpath.basename(record.cwd.rstrip("/")) or record.cwd,
        permissionMode=record.permission_mode,
        effortLevel=record.effort_level,
        model=record.model,
        contextWindow=record.context_window,
        contextPercentage=round(percentage) if percentage is not None else None,
        committed=True if record.committed else None,
        state=state,
        seqHigh=record.seq_high,
        providerId=record.provider_id,
        providerLabel=provider_label if record.provider_id else None,
    )


def check_folder_path(path: str, root: str | None, roots: Sequence[str]) -> tuple[str, str] | str:
    """Validate a ``create-folder`` request: ``(root, relative path)`` or the error text.

    The error texts are the reference bridge's (REFERENCE-BEHAVIOUR §1.13).
    """
    if not roots:
        return "no workspace root is configured"
    if root is None:
        chosen = roots[0]
    else:
        wanted = posixpath.normpath(root)
        matches = [r for r in roots if posixpath.normpath(r) == wanted]
        if not matches:
            return "unknown workspace root"
        chosen = matches[0]
    rel = path.strip()
    if not rel:
        return "folder name is empty"
    if rel.startswith("/") or rel.startswith("~"):
        return "folder path must be relative to the workspace root"
    normalized = posixpath.normpath(rel)
    if normalized in (".", "..") or normalized.startswith("../") or "\x00" in normalized:
        return "folder path escapes the workspace root"
    return chosen, normalized


class Registry:
    """Session records (listed and pending) and tombstones, in memory; the store mirrors it."""

    def __init__(self, records: Iterable[SessionRecord], tombstones: Sequence[str]) -> None:
        self._records: dict[str, SessionRecord] = {r.session_id: r for r in records}
        self.tombstones: list[str] = list(dict.fromkeys(tombstones))[-MAX_TOMBSTONES:]

    def get(self, session_id: str) -> SessionRecord | None:
        return self._records.get(session_id)

    def listed(self) -> list[SessionRecord]:
        """Records a heartbeat lists (pending ones excluded), oldest first."""
        return sorted(
            (r for r in self._records.values() if r.state != PENDING_STATE),
            key=lambda r: (r.created_at, r.session_id),
        )

    def pending(self) -> list[SessionRecord]:
        return [r for r in self._records.values() if r.state == PENDING_STATE]

    def all(self) -> list[SessionRecord]:
        return list(self._records.values())

    def put(self, record: SessionRecord) -> SessionRecord:
        self._records[record.session_id] = record
        return record

    def update(self, session_id: str, **changes: Any) -> SessionRecord | None:
        record = self._records.get(session_id)
        if record is None:
            return None
        updated = replace(record, **changes)
        self._records[session_id] = updated
        return updated

    def remove(self, session_id: str) -> SessionRecord | None:
        """Drop a record; listed ones get a tombstone (returned record is the removed one)."""
        record = self._records.pop(session_id, None)
        if record is not None and record.state != PENDING_STATE:
            if session_id in self.tombstones:
                self.tombstones.remove(session_id)
            self.tombstones.append(session_id)
            del self.tombstones[:-MAX_TOMBSTONES]
        return record
