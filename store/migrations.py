"""Versioned schema migrations for any of the project's SQLite databases (synchronous core).

Theory of operation:

- A database's schema is the ordered list of `Migration`s its owner declares (`store.schema` for
  `bridge.db`; the relay policy keeps its own list for its registry). Versions are 1, 2, 3, …
  without gaps, so adding a table is appending one list entry; released entries are never edited
  or renamed (their names are compared on open to catch a file of another program).
- Applied migrations are recorded in `schema_version(version, name, applied_at)`.
- Each pending migration runs in its own `BEGIN IMMEDIATE … COMMIT`, together with its
  `schema_version` row, so a crash or an error leaves the file at the previous version, never in
  between (SQLite's DDL is transactional). A second process migrating at the same moment waits on
  the write lock, then sees the new version and applies nothing twice.
- An up-to-date database is checked with reads only: no write lock is taken on a plain open.
- A file whose recorded version is above what this build knows is refused with `SchemaTooNew`
  (downgrading would run an old build against tables it does not understand).

The SQL of a migration is split into statements here, because `sqlite3.executescript` commits
any open transaction first, which would break the one-transaction-per-migration rule.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from store.errors import MigrationFailed, SchemaMismatch, SchemaTooNew

__all__ = ["Migration", "current_version", "migrate", "split_statements"]

logger = logging.getLogger(__name__)

_SCHEMA_TABLE = """CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at INTEGER NOT NULL
)"""

# Statements that would end or nest the migration's own transaction, or cannot run inside one.
_FORBIDDEN_FIRST_WORDS = frozenset(
    {"BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE", "VACUUM", "ATTACH", "DETACH"}
)
_LEADING_COMMENTS = re.compile(r"\A(?:\s+|--[^\n]*(?:\n|\Z)|/\*.*?\*/)*", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Migration:
    """One step of a database's schema history.

    Attributes:
        version: 1 for the first migration, then one more for each next one.
        name: a short description, frozen once released (it is checked against the file).
        sql: one or more SQL statements separated by `;`. No transaction control: the runner
            wraps the whole migration in one transaction.
        disable_foreign_keys: run with `PRAGMA foreign_keys=OFF` (needed by SQLite's 12-step
            table rebuild); `PRAGMA foreign_key_check` still has to pass before the commit.
    """

    version: int
    name: str
    sql: str
    disable_foreign_keys: bool = False

    def __post_init__(self) -> None:
        if self.version < 1:
            raise ValueError(f"migration versions start at 1, got {self.version}")
        if not self.name.strip():
            raise ValueError(f"migration v{self.version} needs a name")
        statements = split_statements(self.sql)
        if not statements:
            raise ValueError(f"migration v{self.version} ({self.name}) has no SQL statement")
        for statement in statements:
            body = _LEADING_COMMENTS.sub("", statement)
            first = body.split(None, 1)[0].upper().rstrip(";") if body else ""
            if first in _FORBIDDEN_FIRST_WORDS:
                raise ValueError(
                    f"migration v{self.version} ({self.name}) must not contain {first}: "
                    "each migration already runs in its own transaction"
                )


def split_statements(sql: str) -> list[str]:
    """Split SQL text into complete statements, keeping `;` inside strings, comments and triggers.

    Statements consisting only of whitespace and comments are dropped.

    Raises:
        ValueError: the text ends inside an unterminated string, comment or trigger body.
    """
    statements: list[str] = []
    pending = ""
    pieces = sql.split(";")
    for index, piece in enumerate(pieces):
        last = index == len(pieces) - 1
        pending += piece if last else piece + ";"
        if last:
            break
        if sqlite3.complete_statement(pending):
            _append_statement(statements, pending)
            pending = ""
    if _LEADING_COMMENTS.sub("", pending):
        # The text does not end with ';': accept a final statement that is complete with one.
        if not sqlite3.complete_statement(pending + ";"):
            raise ValueError("SQL ends inside an unterminated string, comment or statement")
        _append_statement(statements, pending + ";")
    return statements


def _append_statement(statements: list[str], text: str) -> None:
    body = _LEADING_COMMENTS.sub("", text)
    if body.strip() and body.strip() != ";":
        statements.append(text.strip())


def current_version(conn: sqlite3.Connection) -> int:
    """The highest applied migration of the database, 0 for a fresh one (read-only)."""
    if not _has_table(conn, "schema_version"):
        return 0
    row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def migrate(
    conn: sqlite3.Connection,
    migrations: Sequence[Migration],
    *,
    path: Path,
    program: str = "codedeck-bridge",
) -> int:
    """Bring the database up to the last of `migrations`, one transaction per migration.

    Args:
        conn: an open connection in autocommit mode (`isolation_level=None`), no transaction open.
        migrations: the database's full history, versions 1..n in order.
        path: the file, for error messages.
        program: who creates this kind of database, for "upgrade X" in error messages.

    Returns:
        The schema version after migrating (`len(migrations)`).

    Raises:
        ValueError: `migrations` is not numbered 1..n, or a transaction is already open.
        SchemaTooNew: the file was migrated by a newer build.
        SchemaMismatch: the file belongs to another program or a diverged build.
        MigrationFailed: a migration raised; the file keeps the version before it.
        sqlite3.Error: the file itself failed (busy, corrupt, full, read-only); the caller maps
            it (see `store.sqlite.translate_error`).
    """
    _check_numbering(migrations)
    if conn.in_transaction:
        raise ValueError("migrate() needs a connection with no open transaction")
    known = len(migrations)
    # One read transaction, so that the history is read from one snapshot even while another
    # process commits a migration between our queries.
    conn.execute("BEGIN DEFERRED")
    try:
        version = _check_history(conn, migrations, path=path, program=program)
    finally:
        conn.execute("ROLLBACK")
    while version < known:
        version = _apply_next(conn, migrations, migrations[version], path=path, program=program)
    return version


def _check_numbering(migrations: Sequence[Migration]) -> None:
    versions = [m.version for m in migrations]
    if versions != list(range(1, len(versions) + 1)):
        raise ValueError(f"migration versions must be 1..n in order, got {versions}")


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
    ).fetchone()
    return row is not None


def _check_history(
    conn: sqlite3.Connection, migrations: Sequence[Migration], *, path: Path, program: str
) -> int:
    """Read the applied history and compare it with ours; returns the current version."""
    if not _has_table(conn, "schema_version"):
        row = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name LIMIT 1"
        ).fetchone()
        if row is not None:
            raise SchemaMismatch(
                f"{path} is a SQLite database but not one made by {program} (it has a table "
                f"{row[0]!r} and no schema_version): pass the right file, or move this one aside",
                path=path,
            )
        return 0
    applied = conn.execute("SELECT version, name FROM schema_version ORDER BY version").fetchall()
    known = len(migrations)
    found = int(applied[-1][0]) if applied else 0
    if found > known:
        raise SchemaTooNew(
            f"{path} was created by a newer {program} (schema v{found}, this build knows "
            f"v{known}): upgrade {program}",
            path=path,
            found=found,
            known=known,
        )
    expected = [(m.version, m.name) for m in migrations[:found]]
    if [(int(v), str(n)) for v, n in applied] != expected:
        raise SchemaMismatch(
            f"{path} has a schema history this build of {program} does not recognise "
            f"(applied: {[f'v{v} {n}' for v, n in applied]}): it was made by another program "
            "or a diverged build; pass the right file, or move this one aside",
            path=path,
        )
    return found


def _apply_next(
    conn: sqlite3.Connection,
    migrations: Sequence[Migration],
    pending: Migration,
    *,
    path: Path,
    program: str,
) -> int:
    """Apply `pending` in its own transaction, unless another process got there first.

    Returns the version the file is at afterwards.
    """
    # PRAGMA foreign_keys is a no-op inside a transaction, so it is set before BEGIN.
    foreign_keys = bool(conn.execute("PRAGMA foreign_keys").fetchone()[0])
    if pending.disable_foreign_keys:
        conn.execute("PRAGMA foreign_keys = OFF")
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Re-read under the write lock: another process may have migrated meanwhile.
            version = _check_history(conn, migrations, path=path, program=program)
            if version != pending.version - 1:
                logger.info("%s: another process migrated it to v%d meanwhile", path, version)
                conn.execute("ROLLBACK")
                return version
            conn.execute(_SCHEMA_TABLE)
            for statement in split_statements(pending.sql):
                conn.execute(statement)
            problems = conn.execute("PRAGMA foreign_key_check").fetchall()
            if problems:
                raise sqlite3.IntegrityError(
                    f"foreign key check failed after the migration ({len(problems)} row(s), "
                    f"first in table {problems[0][0]!r})"
                )
            conn.execute(
                "INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)",
                (pending.version, pending.name, int(time.time())),
            )
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error) and not _is_file_level(exc):
                raise MigrationFailed(
                    f"{path}: migration v{pending.version} ({pending.name}) failed: {exc}. "
                    f"Nothing of it was applied; the database stays at "
                    f"v{pending.version - 1}. Report this to the {program} developers",
                    path=path,
                    version=pending.version,
                ) from exc
            raise
    finally:
        if pending.disable_foreign_keys and foreign_keys:
            conn.execute("PRAGMA foreign_keys = ON")
    logger.info("applied migration v%d (%s) to %s", pending.version, pending.name, path)
    return pending.version


def _is_file_level(exc: sqlite3.Error) -> bool:
    """Errors about the file itself (corrupt, busy, full, I/O), which the caller maps by kind."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:
        return False
    return code & 0xFF in _FILE_LEVEL_CODES


_FILE_LEVEL_CODES = frozenset(
    {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_CORRUPT,
        sqlite3.SQLITE_NOTADB,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_PERM,
    }
)
