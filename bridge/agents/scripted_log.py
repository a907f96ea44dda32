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

import contextlib
import json
import logging
import os
import re
from collections import Counter
from pathlib import Path

from bridge.host.driver import DriverError

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

logger = logging.getLogger(__name__)

INPUTS_SUFFIX = ".inputs.jsonl"
SDK_SESSION_SUFFIX = ".sdk-session"

# Session ids become file names: the bridge's are UUIDs; anything that could climb out of the
# log directory (`..`, `/`) or hide (a leading dot) is refused.
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", re.ASCII)


def validate_session_id(session_id: str) -> str:
    """Return `session_id` if it is safe as a file name in the log directory.

    Raises:
        DriverError: it is not 1-128 characters of ``A-Z a-z 0-9 . _ -`` starting alphanumeric.
    """
    if not isinstance(session_id, str) or _SESSION_ID.fullmatch(session_id) is None:
        raise DriverError(
            "session id must be 1-128 characters of letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return session_id


def inputs_path(log_dir: Path, session_id: str) -> Path:
    """Where the inputs of `session_id` are logged."""
    return log_dir / f"{validate_session_id(session_id)}{INPUTS_SUFFIX}"


class InputLog:
    """Append-only, fsync'd record of the inputs one session received.

    Blocking by design: one ``write`` + ``fsync`` (a fraction of a millisecond on an SSD) done on
    the caller's thread, so that "logged" and "queued for the agent" happen with no await between
    them and cannot be separated by a cancellation.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd: int | None = None

    @property
    def path(self) -> Path:
        """The JSONL file."""
        return self._path

    def append(self, uid: str, text: str, at: str) -> None:
        """Durably record one input: write the whole line, then fsync.

        Raises:
            OSError: the line could not be written or synced (the input must not be acted on).
        """
        line = json.dumps({"uid": uid, "text": text, "at": at}, ensure_ascii=True) + "\n"
        fd = self._open()
        _write_all(fd, line.encode("ascii"))
        os.fsync(fd)

    def close(self) -> None:
        """Release the file descriptor (idempotent); a later :meth:`append` reopens it."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def _open(self) -> int:
        if self._fd is not None:
            return self._fd
        fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            size = os.fstat(fd).st_size
            if size and not _ends_with_newline(self._path, size):
                # A torn line from a crash: close it so the next record starts cleanly.
                _write_all(fd, b"\n")
                os.fsync(fd)
            if size == 0:
                _fsync_directory(self._path.parent)  # make the new file's name durable
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return fd


def read_logged_uids(path: Path) -> list[str]:
    """Every uid recorded in one inputs log, in order, repeats included.

    Lines that are not complete records are skipped: a crash's torn write (the last line, or an
    earlier one that a later writer closed with a newline) or damage. A missing file is an empty
    log.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    uids: list[str] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        uid = _parse_uid(raw)
        if uid is None:
            logger.debug("! %s: skipped incomplete line %d", path.name, number)
        else:
            uids.append(uid)
    return uids


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
        _write_all(fd, new_id.encode("utf-8") + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    _fsync_directory(log_dir)
    return new_id


def _parse_uid(raw: bytes) -> str | None:
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    uid = record.get("uid")
    return uid if isinstance(uid, str) and uid and isinstance(record.get("text"), str) else None


def _ends_with_newline(path: Path, size: int) -> bool:
    with path.open("rb") as file:
        file.seek(size - 1)
        return file.read(1) == b"\n"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _fsync_directory(directory: Path) -> None:
    # Not every filesystem lets a directory be opened or synced; the data itself is synced anyway.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
