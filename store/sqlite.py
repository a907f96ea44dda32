"""Open one of the project's SQLite databases safely (synchronous core, shared with relaypolicy).

`open_sqlite()` is the only way the project opens a database file. In order, it:

1. creates the file itself with mode 0600 if it is missing (`store.home.create_private_file`),
   or checks that an existing one is a regular file of ours and tightens it to 0600 — and does
   the same for existing `-wal` / `-shm` / `-journal` files, before SQLite opens them;
2. reads the 100-byte header itself: a non-empty file that does not start with
   `SQLite format 3\\0` is refused as corrupt before SQLite is involved at all;
3. connects in autocommit mode (`isolation_level=None`: transactions are always explicit) and
   runs `PRAGMA quick_check`, still before anything is written. A failing check (a truncated
   file, a damaged page) raises `CorruptDatabase` and leaves the file as it was. The check reads
   the whole file, which is linear in its size and, with a warm page cache, cheap next to a
   daemon start;
4. sets WAL, `synchronous=NORMAL` and `foreign_keys=ON`, with a 5 s busy timeout;
5. applies the pending migrations (`store.migrations.migrate`), and checks the modes of the
   `-wal`/`-shm` files SQLite has created meanwhile (SQLite copies the database's mode; this is
   the belt to that brace).

`synchronous=NORMAL` in WAL mode: a commit survives the process being killed (the WAL is in the
OS's cache); only a power loss can lose the last transactions, never corrupt the file.

Every `sqlite3` error that is about the file, not a bug in our SQL, is translated by
`translate_error()` into a `StoreError` whose message names the file and the fix.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from store.errors import (
    CorruptDatabase,
    DatabaseBusy,
    DatabaseUnreadable,
    StoreError,
)
from store.home import (
    create_private_file,
    read_only_reason,
    tighten_file_mode,
    unwritable_message,
)
from store.migrations import Migration, migrate

__all__ = [
    "BUSY_TIMEOUT_MS",
    "MIN_SQLITE_VERSION",
    "SQLITE_HEADER",
    "open_sqlite",
    "translate_error",
]

logger = logging.getLogger(__name__)

SQLITE_HEADER: Final = b"SQLite format 3\x00"
BUSY_TIMEOUT_MS: Final = 5000
# UPSERT (`INSERT … ON CONFLICT DO UPDATE`) arrived in 3.24.0 (2018).
MIN_SQLITE_VERSION: Final = (3, 24, 0)
_SIDECARS: Final = ("-wal", "-shm", "-journal")
_DEFAULT_LOSS = "everything stored in it will be lost"


def open_sqlite(
    path: str | os.PathLike[str],
    migrations: Sequence[Migration],
    *,
    program: str = "codedeck-bridge",
    loss_note: str = _DEFAULT_LOSS,
    check_same_thread: bool = True,
    busy_timeout_ms: int = BUSY_TIMEOUT_MS,
) -> sqlite3.Connection:
    """Open (creating if needed) a database file, check it, and migrate it.

    The folder must exist; for the bridge home, `store.home.ensure_home` makes it private first.

    Args:
        path: the database file.
        migrations: the database's full schema history (see `store.migrations`).
        program: the program that owns this kind of file, for "upgrade X" in messages.
        loss_note: what the user loses by moving a corrupt file aside, for the message.
        check_same_thread: passed to `sqlite3.connect`.
        busy_timeout_ms: how long a statement waits for another connection's write lock.

    Returns:
        A connection in autocommit mode (`isolation_level=None`), WAL, foreign keys on.

    Raises:
        CorruptDatabase: the file is not a SQLite database or is damaged; it was not modified.
        DatabaseUnreadable: permissions, a missing folder, not a regular file, read-only disk.
        SchemaTooNew, SchemaMismatch, MigrationFailed: see `store.migrations.migrate`.
        DatabaseBusy: another process held the write lock past the busy timeout.
        StoreError: SQLite too old, disk full, I/O error.
    """
    path = Path(path)
    if sqlite3.sqlite_version_info < MIN_SQLITE_VERSION:
        wanted = ".".join(map(str, MIN_SQLITE_VERSION))
        raise StoreError(
            f"this Python uses SQLite {sqlite3.sqlite_version}; {program} needs {wanted} or "
            "newer: use a newer Python build",
            path=path,
        )
    create_private_file(path)
    for suffix in _SIDECARS:
        tighten_file_mode(_sidecar(path, suffix))
    _check_header(path, program=program, loss_note=loss_note)
    try:
        conn = sqlite3.connect(
            path,
            timeout=busy_timeout_ms / 1000,
            isolation_level=None,
            check_same_thread=check_same_thread,
        )
    except sqlite3.Error as exc:
        raise translate_error(exc, path, loss_note=loss_note) from exc
    try:
        _quick_check(conn, path, loss_note=loss_note)
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            logger.warning(
                "%s: SQLite refused WAL mode (journal_mode is %s; a network filesystem?)",
                path,
                mode,
            )
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        version = migrate(conn, migrations, path=path, program=program)
        for suffix in _SIDECARS:
            tighten_file_mode(_sidecar(path, suffix))
    except (sqlite3.ProgrammingError, sqlite3.InterfaceError):
        conn.close()
        raise
    except sqlite3.Error as exc:
        conn.close()
        raise translate_error(exc, path, loss_note=loss_note) from exc
    except BaseException:
        conn.close()
        raise
    logger.info("opened %s (schema v%d)", path, version)
    return conn


def translate_error(
    exc: sqlite3.Error, path: Path, *, loss_note: str = _DEFAULT_LOSS
) -> StoreError:
    """Map a `sqlite3` error about a file to the store's error with a message that says the fix.

    Errors that are bugs in our own SQL (`ProgrammingError`, `InterfaceError`) should not be
    passed here: let them propagate as they are.
    """
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
        return _corrupt(path, str(exc), loss_note)
    if primary in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return DatabaseBusy(
            f"{path} stayed locked by another process ({exc}): is another copy of the program, "
            "or an sqlite3 shell, writing to it? Close it and try again",
            path=path,
        )
    if primary in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN):
        # SQLite creates -wal/-shm beside the file: a folder it cannot write fails here even
        # for a file we may read; say which cause it is (a remount is no chmod).
        reason = read_only_reason(path.parent)
        if reason is not None:
            return DatabaseUnreadable(
                f"cannot open {path} ({exc}): "
                + unwritable_message(
                    path.parent, reason, what="its folder", elsewhere="keep the file in"
                ),
                path=path,
            )
    if primary == sqlite3.SQLITE_READONLY:
        return DatabaseUnreadable(
            f"{path} cannot be written ({exc}): it and its folder must belong to the user "
            "running this program and the disk must not be read-only",
            path=path,
        )
    if primary in (sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH):
        return DatabaseUnreadable(
            f"cannot open {path} ({exc}): it and its folder must exist and belong to the user "
            "running this program",
            path=path,
        )
    if primary == sqlite3.SQLITE_FULL:
        return StoreError(f"{path}: the disk is full ({exc}); free some space", path=path)
    if primary == sqlite3.SQLITE_IOERR:
        return StoreError(f"{path}: I/O error ({exc}); check the disk", path=path)
    return StoreError(f"{path}: {exc}", path=path)


def _sidecar(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def _corrupt(path: Path, detail: str, loss_note: str) -> CorruptDatabase:
    return CorruptDatabase(
        f"{path} is not a valid SQLite database ({detail}). It was left untouched. Move it "
        f"aside to start fresh (mv {path} {path}.corrupt); {loss_note}",
        path=path,
    )


def _check_header(path: Path, *, program: str, loss_note: str) -> None:
    """Refuse a non-empty file without SQLite's magic, and check we may read and write it."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except PermissionError as exc:
        raise DatabaseUnreadable(
            f"cannot open {path} for reading and writing: permission denied. It must belong to "
            f"the user running {program}, with mode 0600 (see `ls -l {path}`)",
            path=path,
        ) from exc
    except OSError as exc:
        raise DatabaseUnreadable(f"cannot open {path}: {exc.strerror}", path=path) from exc
    try:
        head = os.read(fd, 100)
    except OSError as exc:
        raise StoreError(
            f"{path}: I/O error reading it ({exc.strerror}); check the disk", path=path
        ) from exc
    finally:
        os.close(fd)
    if head and (len(head) < 100 or not head.startswith(SQLITE_HEADER)):
        raise _corrupt(path, "file is not a database: no SQLite header", loss_note)


def _quick_check(conn: sqlite3.Connection, path: Path, *, loss_note: str) -> None:
    """Run `PRAGMA quick_check` (a read) and refuse a damaged file."""
    rows = conn.execute("PRAGMA quick_check").fetchall()
    if rows != [("ok",)]:
        detail = "; ".join(str(row[0]) for row in rows[:3])
        logger.error("%s failed its integrity check: %s", path, detail)
        raise _corrupt(path, f"database disk image is malformed: {detail}", loss_note)
