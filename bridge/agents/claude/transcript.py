"""Reading Claude Code's own session transcript: the durable record of what the agent received.

Layout relied on (Claude Code 2.1.332, measured): the CLI appends one JSON object per line to
``<config dir>/projects/<cwd slug>/<SDK session id>.jsonl``, where the config dir is
``CLAUDE_CONFIG_DIR`` (else ``~/.claude``) and the slug is the session's cwd with every
non-alphanumeric character replaced by ``-``. The slug rule is not relied on: files are found by
their session id under any project directory (ids are UUIDs, unique across projects). Lines used:

- ``{"type": "user", "uuid": <uuid>, "message": {...}, ...}``: a user message the CLI took into
  the conversation. A message sent with ``"uuid"`` on the SDK's streaming input keeps that uuid
  here, so the bridge's input uids are found verbatim (non-UUID uids are mapped to a UUID by
  :func:`input_uuid` first). A message still waiting in the CLI's queue is only a
  ``queue-operation`` line without uuid: it is **not** received, and is lost if the CLI dies.
- A message that arrives while a turn runs is queued by the CLI, and may be **absorbed mid-turn**:
  the model gets it between two steps of the running turn, and no user line is written for it.
  Its trace is ``{"type": "queue-operation", "operation": "remove", "reason":
  "absorbed_mid_turn", "commandUuid": <uuid>}`` and an ``{"attachment": {"type":
  "queued_command", "source_uuid": <uuid>, ...}}`` line (measured on 2.1.332, found by the
  real-CLI chaos run: counting only user lines sent such an input again, and it ran twice).
- ``{"type": "cost-state", "totalCostUSD": <float>, ...}``: the cumulative cost so far, from which a
  resumed session's first per-turn cost is computed.

Everything else is skipped; so are lines that are not complete JSON (a crash mid-append), and a
transcript that does not exist is an empty one. The user line is a plain append (no fsync) that
the CLI writes a moment after it read the message (observed on 2.1.332: its session writes are
batched), by which time the API request is already out; it survives a crash of the CLI or of the
host, not of the machine. A message still waiting in the CLI's queue, or read just before the CLI
died, is not in the file: it counts as not received.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Final

__all__ = [
    "INPUT_UUID_NAMESPACE",
    "input_uuid",
    "last_total_cost",
    "received_uuids",
    "transcript_paths",
]

INPUT_UUID_NAMESPACE: Final = uuid.UUID("5d0c3f52-0c1b-4d55-9a43-7f0f3c1c2a10")
"""The uuid5 namespace that maps a non-UUID input uid to the uuid Claude Code records."""

_SESSION_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def input_uuid(uid: str) -> str:
    """The uuid under which the input `uid` is sent to (and recorded by) Claude Code.

    A UUID uid is used as it is (canonical lower-case form); anything else maps to a stable uuid5,
    so that the same uid always finds the same transcript line.
    """
    try:
        return str(uuid.UUID(uid))
    except ValueError:
        return str(uuid.uuid5(INPUT_UUID_NAMESPACE, uid))


def transcript_paths(config_dir: Path, sdk_session_ids: Iterable[str]) -> list[Path]:
    """The transcript files of these SDK sessions that exist (ids that are not safe are skipped)."""
    projects = config_dir / "projects"
    found: list[Path] = []
    for session_id in sdk_session_ids:
        if not _SESSION_ID.fullmatch(session_id):
            continue
        try:
            found.extend(sorted(projects.glob(f"*/{session_id}.jsonl")))
        except OSError:
            continue
    return found


def _records(path: Path, marker: bytes) -> Iterator[dict[str, object]]:
    """The JSON objects of the lines of `path` that contain `marker` (a cheap pre-filter)."""
    try:
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return
    for line in data.split(b"\n"):
        if marker not in line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a torn last line, or damage
        if isinstance(record, dict):
            yield record


def received_uuids(paths: Iterable[Path]) -> set[str]:
    """The uuids of every user message the CLI took into the conversation, as a user line or
    absorbed into a running turn (see the module docstring).

    Raises:
        OSError: a transcript exists but cannot be read.
    """
    found: set[str] = set()
    for path in paths:
        for record in _records(path, b"uid"):  # uuid, commandUuid, source_uuid
            found.update(_taken(record))
    return found


def _taken(record: dict[str, object]) -> Iterator[str]:
    """The input uuids one transcript line says the CLI took."""
    kind = record.get("type")
    if kind == "user":
        value = record.get("uuid")
        if isinstance(value, str):
            yield value
    elif kind == "queue-operation":
        value = record.get("commandUuid")
        if record.get("reason") == "absorbed_mid_turn" and isinstance(value, str):
            yield value
    attachment = record.get("attachment")
    if isinstance(attachment, dict) and attachment.get("type") == "queued_command":
        value = attachment.get("source_uuid")
        if isinstance(value, str):
            yield value


def last_total_cost(paths: Iterable[Path]) -> float | None:
    """The last cumulative cost recorded (``cost-state``) across these transcripts, if any."""
    total: float | None = None
    for path in paths:
        try:
            for record in _records(path, b'"cost-state"'):
                value = record.get("totalCostUSD")
                if record.get("type") == "cost-state" and isinstance(value, (int, float)):
                    total = float(value)
        except OSError:
            continue
    return total
