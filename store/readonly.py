"""Read-only access to `<home>/bridge.db`, for the CLI commands that work with the daemon stopped.

`keys show`, `decisions` and `doctor` read the database without starting the daemon, and they
must not change anything while they do: no home is created, no file is created, tightened or
migrated, and no lock is taken (a running daemon keeps its own). So this module does not go
through `store.sqlite.open_sqlite`, which does all of those; it opens the file with SQLite's
``mode=ro`` after the same checks that decide whether the store would trust it:

1. the file exists (else `NoDatabase`: the bridge has not run with this home yet);
2. it starts with SQLite's header (else `CorruptDatabase`, in the store's own words);
3. ``PRAGMA quick_check`` passes (else `CorruptDatabase`): a damaged file is refused politely
   rather than half-read.

Reading while the daemon runs is safe: the database is in WAL mode, so a reader sees the last
committed state and never blocks the writer. (SQLite may create the ``-wal``/``-shm`` files of a
WAL database for a reader when they are missing; it gives them the database file's mode.) A home
on a read-only file system (a backup, a ``ro`` mount) is read too: there SQLite cannot create
those files, and the file is opened ``immutable`` instead (`_frozen` says when that is safe).

The schema version is reported as found (`ReadOnlyDatabase.schema_version`); callers check for
the table they need with `has_table`, so an older file simply has "nothing of that kind yet".
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from types import TracebackType
from typing import Any, Final
from urllib.parse import quote

from store.db import BRIDGE_DB_FILENAME
from store.errors import CorruptDatabase, DatabaseUnreadable, StoreError
from store.home import read_only_reason, resolve_home
from store.migrations import current_version
from store.sqlite import BUSY_TIMEOUT_MS, SQLITE_HEADER, translate_error

__all__ = ["NoDatabase", "ReadOnlyDatabase", "open_readonly"]

_LOSS_NOTE: Final = (
    "the bridge identity in it will be lost, and every phone will have to pair again"
)


class NoDatabase(StoreError):
    """The home has no ``bridge.db`` yet (the bridge never ran with it)."""


class ReadOnlyDatabase:
    """An open, checked, read-only connection to a bridge database. Close it (or use ``with``).

    Attributes:
        path: the database file.
        schema_version: the highest migration applied to the file (0 for an empty file).
    """

    def __init__(self, conn: sqlite3.Connection, path: Path, schema_version: int) -> None:
        self._conn = conn
        self.path = path
        self.schema_version = schema_version

    def __repr__(self) -> str:
        return f"<ReadOnlyDatabase {self.path} v{self.schema_version}>"

    def __enter__(self) -> ReadOnlyDatabase:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection. Idempotent."""
        self._conn.close()

    def has_table(self, name: str) -> bool:
        """True when the file has a table of that name (older files lack newer tables)."""
        row = self.fetchone(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
        )
        return row is not None

    def fetchone(self, sql: str, params: Any = ()) -> tuple[Any, ...] | None:
        """Run a query and return its first row, or None.

        Raises:
            StoreError: the file failed (busy, damaged, unreadable).
        """
        try:
            row = self._conn.execute(sql, params).fetchone()
        except (sqlite3.ProgrammingError, sqlite3.InterfaceError):
            raise
        except sqlite3.Error as exc:
            raise translate_error(exc, self.path, loss_note=_LOSS_NOTE) from exc
        return None if row is None else tuple(row)

    def fetchall(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        """Run a query and return all its rows.

        Raises:
            StoreError: the file failed (busy, damaged, unreadable).
        """
        try:
            rows = self._conn.execute(sql, params).fetchall()
        except (sqlite3.ProgrammingError, sqlite3.InterfaceError):
            raise
        except sqlite3.Error as exc:
            raise translate_error(exc, self.path, loss_note=_LOSS_NOTE) from exc
        return [tuple(row) for row in rows]


def _corrupt(path: Path, detail: str) -> CorruptDatabase:
    # The same words as store.sqlite, so every command says the same thing about one file.
    return CorruptDatabase(
        f"{path} is not a valid SQLite database ({detail}). It was left untouched. Move it "
        f"aside to start fresh (mv {path} {path}.corrupt); {_LOSS_NOTE}",
        path=path,
    )


def _check_header(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise NoDatabase(
            f"there is no bridge database at {path} yet: the bridge has not run with this home; "
            "start it once (`codedeck-bridge run`)",
            path=path,
        ) from None
    except PermissionError:
        raise DatabaseUnreadable(
            f"cannot read {path}: permission denied; run this as the user that runs the bridge",
            path=path,
        ) from None
    except OSError as exc:
        raise DatabaseUnreadable(f"cannot open {path}: {exc.strerror}", path=path) from None
    try:
        head = os.read(fd, 100)
    except OSError as exc:
        raise StoreError(f"{path}: I/O error reading it ({exc.strerror}); check the disk") from None
    finally:
        os.close(fd)
    if head and (len(head) < 100 or not head.startswith(SQLITE_HEADER)):
        raise _corrupt(path, "file is not a database: no SQLite header")


def open_readonly(home: str | os.PathLike[str] | None) -> ReadOnlyDatabase:
    """Open `<home>/bridge.db` read-only after checking it (see the module docstring).

    Args:
        home: the bridge home; None means the default (`~/.codedeck`).

    Raises:
        NoDatabase: the file does not exist.
        CorruptDatabase: not a SQLite file, or it fails its integrity check (left untouched).
        DatabaseUnreadable: permissions.
        StoreError: anything else about the file (busy, I/O).
    """
    path = resolve_home(home) / BRIDGE_DB_FILENAME
    _check_header(path)
    try:
        conn, version = _open_checked(path, immutable=False)
    except sqlite3.Error as exc:
        if not _frozen(exc, path):
            raise translate_error(exc, path, loss_note=_LOSS_NOTE) from exc
        try:
            conn, version = _open_checked(path, immutable=True)
        except sqlite3.Error as again:
            raise translate_error(again, path, loss_note=_LOSS_NOTE) from again
    return ReadOnlyDatabase(conn, path, version)


def _frozen(exc: sqlite3.Error, path: Path) -> bool:
    """True when `path` cannot change and SQLite failed only for want of its ``-shm`` file.

    A WAL database needs ``-wal``/``-shm`` beside it even to be read, and SQLite cannot create
    them in a folder it may not write (a read-only mount, a folder of ours without write
    permission).
    No daemon can write there either, so the file is as it will stay, and reading it as
    ``immutable`` (no locks, no shared memory) gives the same rows. Not when a ``-wal`` with
    content exists: it may hold committed rows that only a normal open would see.
    """
    code = getattr(exc, "sqlite_errorcode", None)
    if not isinstance(code, int) or code & 0xFF not in (
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_READONLY,
    ):
        return False
    reason = read_only_reason(path.parent)
    if reason is None:
        return False
    if "read-only" not in reason and not _ours(path.parent):
        return False  # its owner may write there: a daemon of theirs could be mid-write
    try:
        return path.with_name(path.name + "-wal").stat().st_size == 0
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _ours(directory: Path) -> bool:
    try:
        return directory.stat().st_uid == os.geteuid()
    except OSError:
        return False


def _open_checked(path: Path, *, immutable: bool) -> tuple[sqlite3.Connection, int]:
    """A ``mode=ro`` connection that passed ``quick_check``, and the file's schema version.

    Raises:
        sqlite3.Error: SQLite failed (the caller translates it).
        CorruptDatabase: the integrity check failed.
    """
    uri = f"file:{quote(str(path))}?mode=ro" + ("&immutable=1" if immutable else "")
    conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    try:
        rows = conn.execute("PRAGMA quick_check").fetchall()
        if rows != [("ok",)]:
            detail = "; ".join(str(row[0]) for row in rows[:3])
            raise _corrupt(path, f"database disk image is malformed: {detail}")
        version = current_version(conn)
    except BaseException:
        conn.close()
        raise
    return conn, version
