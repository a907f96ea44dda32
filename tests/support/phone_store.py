"""The phone simulator's state file: one JSON document, written atomically, mode 0600.

Why a file: the chaos tests restart phones the way a real phone app is killed and reopened, and
the phone's promises across a restart (same identity, the 4516 cursor that drives ``since``, the
ids already seen, the merged session list, the transcripts) are exactly what the daemon's
behaviour is judged against. The file holds the phone's secret key, like the app's own storage,
hence 0600; the key is never logged.

A missing file means a fresh phone. A file that cannot be read or has another format version is an
error that names the file and what is wrong, never a silent fresh start: a test that restarts a
phone must not pass by accident with a new one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any

import orjson

__all__ = [
    "STATE_FORMAT",
    "PhoneStateError",
    "read_state",
    "write_state",
]

STATE_FORMAT = 1


class PhoneStateError(RuntimeError):
    """The state file exists but cannot be used."""


def write_state(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` to ``path`` atomically (temp file in the same folder, fsync, rename)."""
    document = {"format": STATE_FORMAT, **state}
    data = orjson.dumps(document)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_name)
        raise


def read_state(path: Path) -> dict[str, Any] | None:
    """The saved state, or None when there is no file yet.

    Raises:
        PhoneStateError: unreadable, not JSON, not an object, or another format version.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PhoneStateError(f"cannot read phone state {path}: {exc.strerror}") from None
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise PhoneStateError(f"phone state {path} is not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise PhoneStateError(f"phone state {path} is not a JSON object")
    if document.get("format") != STATE_FORMAT:
        raise PhoneStateError(
            f"phone state {path} has format {document.get('format')!r}, expected {STATE_FORMAT}"
        )
    return document
