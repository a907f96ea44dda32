"""An append-only, fsync'd record of the inputs an agent session received, and its reader.

A runner's answer to "did this input reach the agent?" (:meth:`Driver.received
<bridge.host.driver.Driver.received>`) must come from a record that outlives the session host
that wrote it. The scripted agent's log is such a record by itself; the ACP runner writes one just
before it hands an input to its agent and checks it against the conversation the agent replays on
a resume. Lean, as host-side code must be: the standard library and :mod:`bridge.host` only.

One line per input, ``{"uid","text","at"}``, appended and fsync'd before the input is acted on.
``json`` with ``ensure_ascii`` (not orjson), so any Python string, a lone surrogate included, can
be logged and read back.

Crash rules. A ``kill -9`` mid-append leaves a torn last line: readers skip any line that is not a
complete JSON record, and the next writer first ends the torn line with a newline so that its own
record starts on a fresh line instead of being glued to the fragment.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
from pathlib import Path

from bridge.host.driver import DriverError
from bridge.records import record

__all__ = [
    "INPUTS_SUFFIX",
    "InputLog",
    "LoggedInput",
    "fsync_directory",
    "inputs_path",
    "read_logged_inputs",
    "read_logged_uids",
    "validate_session_id",
    "write_all",
]

logger = logging.getLogger(__name__)

INPUTS_SUFFIX = ".inputs.jsonl"

# Session ids become file names: the bridge's are UUIDs; anything that could climb out of the
# log directory (`..`, `/`) or hide (a leading dot) is refused.
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", re.ASCII)


@record
class LoggedInput:
    """One record of the log."""

    uid: str
    text: str


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
        write_all(fd, line.encode("ascii"))
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
                write_all(fd, b"\n")
                os.fsync(fd)
            if size == 0:
                fsync_directory(self._path.parent)  # make the new file's name durable
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return fd


def read_logged_inputs(path: Path) -> list[LoggedInput]:
    """Every input recorded in one inputs log, in order, repeats included.

    Lines that are not complete records are skipped: a crash's torn write (the last line, or an
    earlier one that a later writer closed with a newline) or damage. A missing file is an empty
    log.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    inputs: list[LoggedInput] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        record = _parse(raw)
        if record is None:
            logger.debug("! %s: skipped incomplete line %d", path.name, number)
        else:
            inputs.append(record)
    return inputs


def read_logged_uids(path: Path) -> list[str]:
    """Every uid recorded in one inputs log, in order, repeats included (see
    :func:`read_logged_inputs`)."""
    return [record.uid for record in read_logged_inputs(path)]


def _parse(raw: bytes) -> LoggedInput | None:
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    uid, text = record.get("uid"), record.get("text")
    return (
        LoggedInput(uid, text) if isinstance(uid, str) and uid and isinstance(text, str) else None
    )


def _ends_with_newline(path: Path, size: int) -> bool:
    with path.open("rb") as file:
        file.seek(size - 1)
        return file.read(1) == b"\n"


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def fsync_directory(directory: Path) -> None:
    # Not every filesystem lets a directory be opened or synced; the data itself is synced anyway.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
