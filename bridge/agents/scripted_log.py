"""The scripted agent's durable record: what it received, and its stable SDK session id.

This file is to the scripted agent what the Claude Code session transcript is to the real one:
the agent's own memory, independent of the daemon's database and of any one session host. The
daemon reconciles its inbox with it after a crash (:meth:`Driver.received
<bridge.host.driver.Driver.received>` answers from it, for this host and every earlier host of the
session), and the chaos tests count it to prove that every accepted input ran exactly once across
``kill -9``. Lean, as host-side code must be: the standard library and :mod:`bridge.host` only.

Layout of the log directory, per session:

- ``<session_id>.inputs.jsonl``: one line per input received, ``{"uid","text","at"}``, appended and
  fsync'd before the agent acts on it. ``json`` with ``ensure_ascii`` (not orjson), so any Python
  string, a lone surrogate included, can be logged and read back.
- ``<session_id>.sdk-session``: the SDK session id reported in ``Ready``, made on first start and
  kept, so a resumed session reports the same id.

Crash rules. A ``kill -9`` mid-append leaves a torn last line: readers skip any line that is not a
complete JSON record, and the next writer first ends the torn line with a newline so that its own
record starts on a fresh line instead of being glued to the fragment. The id file is replaced
atomically (temporary file, fsync, rename, fsync of the directory).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from .input_log import (
    INPUTS_SUFFIX,
    InputLog,
    fsync_directory,
    inputs_path,
    read_logged_uids,
    validate_session_id,
    write_all,
)

__all__ = [
    "INPUTS_SUFFIX",
    "SDK_SESSION_SUFFIX",
    "InputLog",
    "count_executions",
    "inputs_path",
    "load_or_create_sdk_session_id",
    "read_logged_uids",
    "validate_session_id",
]

SDK_SESSION_SUFFIX = ".sdk-session"


def count_executions(log_dir: Path) -> dict[str, int]:
    """How many times each uid appears across all the inputs logs in `log_dir`.

    The exactly-once check of the chaos tests: every accepted input must map to 1.
    """
    counts: Counter[str] = Counter()
    if not log_dir.is_dir():
        return {}
    for path in sorted(log_dir.glob(f"*{INPUTS_SUFFIX}")):
        counts.update(read_logged_uids(path))
    return dict(counts)


def load_or_create_sdk_session_id(log_dir: Path, session_id: str, new_id: str) -> str:
    """The SDK session id kept for `session_id`, or `new_id` stored as that id.

    Raises:
        OSError: the directory or the id file cannot be read or written.
    """
    path = log_dir / f"{validate_session_id(session_id)}{SDK_SESSION_SUFFIX}"
    try:
        stored = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        stored = ""
    if stored:
        return stored
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        write_all(fd, new_id.encode("utf-8") + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    fsync_directory(log_dir)
    return new_id
