"""Opening a database file: modes, pragmas, corruption, permissions, error translation."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import sqlite3
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.errors import (
    CorruptDatabase,
    DatabaseBusy,
    DatabaseUnreadable,
    StoreError,
)
from store.migrations import Migration
from store.sqlite import open_sqlite, translate_error

M1 = Migration(1, "kv", "CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT)")
M2 = Migration(2, "more", "CREATE TABLE more (x)")
LOSS = "the bridge identity in it will be lost"


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "test.db"


def make_real_db(path: Path, rows: int = 3000) -> None:
    """A checkpointed, multi-page database file with no -wal left beside it."""
    conn = open_sqlite(path, [M1])
    conn.executemany("INSERT INTO kv VALUES (?, ?)", ((str(i), "v" * 200) for i in range(rows)))
    conn.close()
    assert not Path(f"{path}-wal").exists()


@pytest.fixture
def opened(path: Path) -> Iterator[sqlite3.Connection]:
    conn = open_sqlite(path, [M1])
    yield conn
    conn.close()


def test_new_database_file_and_settings(path: Path, opened: sqlite3.Connection) -> None:
    assert mode_of(path) == 0o600
    assert opened.isolation_level is None
    assert opened.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert opened.execute("PRAGMA foreign_keys").fetchone() == (1,)
    assert opened.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
    assert opened.execute("PRAGMA busy_timeout").fetchone() == (5000,)
    assert opened.execute("SELECT max(version) FROM schema_version").fetchone() == (1,)


@pytest.mark.parametrize("umask_value", [0o000, 0o022], ids=oct)
def test_wal_and_shm_files_are_0600(path: Path, umask: None, umask_value: int) -> None:
    os.umask(umask_value)
    conn = open_sqlite(path, [M1])
    try:
        conn.execute("INSERT INTO kv VALUES ('a', 'b')")
        for suffix in ("", "-wal", "-shm"):
            assert mode_of(Path(f"{path}{suffix}")) == 0o600, suffix
    finally:
        conn.close()


def test_loose_existing_files_are_tightened(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    conn = open_sqlite(path, [M1])
    conn.execute("INSERT INTO kv VALUES ('a', 'b')")
    # Keep -wal/-shm on disk: a second connection stays open while the first closes.
    keeper = sqlite3.connect(path)
    keeper.execute("SELECT 1 FROM kv").fetchall()
    conn.close()
    for suffix in ("", "-wal", "-shm"):
        os.chmod(f"{path}{suffix}", 0o644)
    with caplog.at_level(logging.WARNING, logger="store.home"):
        reopened = open_sqlite(path, [M1])
    try:
        for suffix in ("", "-wal", "-shm"):
            assert mode_of(Path(f"{path}{suffix}")) == 0o600, suffix
        assert caplog.text.count("(mode 0644); tightened it to 0600") == 3
        assert reopened.execute("SELECT v FROM kv").fetchall() == [("b",)]
    finally:
        reopened.close()
        keeper.close()


def test_reopen_keeps_data(path: Path) -> None:
    conn = open_sqlite(path, [M1])
    conn.execute("INSERT INTO kv VALUES ('a', 'b')")
    conn.close()
    conn = open_sqlite(path, [M1, M2])
    try:
        assert conn.execute("SELECT v FROM kv").fetchall() == [("b",)]
        assert conn.execute("SELECT max(version) FROM schema_version").fetchone() == (2,)
    finally:
        conn.close()


def test_empty_file_is_a_new_database(path: Path) -> None:
    path.touch(mode=0o600)
    conn = open_sqlite(path, [M1])
    conn.close()
    assert path.read_bytes().startswith(b"SQLite format 3\x00")


GARBAGE = [
    ("random-bytes", bytes(range(256)) * 40),
    ("text", b'{"secretKeyHex": "' + b"ab" * 32 + b'"}\n'),
    ("short", b"SQLite"),
    ("header-only", b"SQLite format 3\x00" + b"\x00" * 10),
]


@pytest.mark.parametrize("content", [c[1] for c in GARBAGE], ids=[c[0] for c in GARBAGE])
def test_garbage_file_is_refused_untouched(path: Path, content: bytes) -> None:
    path.write_bytes(content)
    path.chmod(0o600)
    with pytest.raises(CorruptDatabase) as info:
        open_sqlite(path, [M1], loss_note=LOSS)
    assert str(info.value) == (
        f"{path} is not a valid SQLite database (file is not a database: no SQLite header). "
        f"It was left untouched. Move it aside to start fresh (mv {path} {path}.corrupt); "
        f"{LOSS}"
    )
    assert path.read_bytes() == content
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_truncated_database_is_refused_untouched(path: Path) -> None:
    make_real_db(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    before = digest(path)
    with pytest.raises(CorruptDatabase) as info:
        open_sqlite(path, [M1, M2], loss_note=LOSS)
    message = str(info.value)
    assert message.startswith(
        f"{path} is not a valid SQLite database (database disk image is malformed"
    )
    assert message.endswith(f"Move it aside to start fresh (mv {path} {path}.corrupt); {LOSS}")
    assert digest(path) == before


def test_damaged_page_is_refused_untouched(path: Path) -> None:
    make_real_db(path)
    with open(path, "r+b") as handle:
        handle.seek(4096 * 5)
        handle.write(b"\xa5" * 4096)
    before = digest(path)
    with pytest.raises(CorruptDatabase, match="malformed"):
        open_sqlite(path, [M1])
    assert digest(path) == before


def test_index_damage_found_by_quick_check(path: Path) -> None:
    """A database SQLite can read, whose index disagrees with its table."""
    make_real_db(path, rows=10)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute("CREATE INDEX kv_v ON kv (v)")
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'kv_v'").fetchone()[0]
    conn.close()
    # Empty the index b-tree page: the table still has 10 rows, the index none.
    with open(path, "r+b") as handle:
        page_size = 4096
        handle.seek((root - 1) * page_size)
        page = bytearray(handle.read(page_size))
        page[3:5] = b"\x00\x00"  # cell count 0
        handle.seek((root - 1) * page_size)
        handle.write(page)
    before = digest(path)
    with pytest.raises(CorruptDatabase, match="malformed"):
        open_sqlite(path, [M1])
    assert digest(path) == before


def test_constraint_damage_reported_by_quick_check(path: Path) -> None:
    """A file SQLite reads without error, whose rows break their table's NOT NULL rule."""
    make_real_db(path, rows=10)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE t (x)")
    conn.execute("INSERT INTO t VALUES (NULL)")
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute("UPDATE sqlite_master SET sql = 'CREATE TABLE t (x NOT NULL)' WHERE name = 't'")
    conn.close()
    before = digest(path)
    with pytest.raises(CorruptDatabase) as info:
        open_sqlite(path, [M1])
    assert f"{path} is not a valid SQLite database (database disk image is malformed: " in str(
        info.value
    )
    assert "NULL value in t.x" in str(info.value)
    assert digest(path) == before


def test_directory_in_place_of_the_file(path: Path) -> None:
    path.mkdir()
    with pytest.raises(DatabaseUnreadable, match="is not a regular file"):
        open_sqlite(path, [M1])


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(DatabaseUnreadable, match="does not exist"):
        open_sqlite(tmp_path / "nope" / "x.db", [M1])


def test_symlinked_database_is_refused(tmp_path: Path, path: Path) -> None:
    real = tmp_path / "real.db"
    open_sqlite(real, [M1]).close()
    path.symlink_to(real)
    with pytest.raises(DatabaseUnreadable, match="is not a regular file"):
        open_sqlite(path, [M1])


@contextlib.contextmanager
def unprivileged() -> Iterator[None]:
    """Run the block without root's permission bypass (as `nobody`), if we are root."""
    if os.geteuid() != 0:
        yield
        return
    os.setegid(65534)
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


def test_permission_denied(tmp_path: Path) -> None:
    """A file of ours that we may not read (mode 0000): the error says what to check."""
    base = Path(tempfile.mkdtemp(prefix="store-perm-"))
    try:
        base.chmod(0o711)
        folder = base / "home"
        folder.mkdir(mode=0o700)
        path = folder / "test.db"
        open_sqlite(path, [M1]).close()
        path.chmod(0o000)
        if os.geteuid() == 0:
            os.chown(folder, 65534, 65534)
            os.chown(path, 65534, 65534)
        with unprivileged(), pytest.raises(DatabaseUnreadable) as info:
            open_sqlite(path, [M1])
        assert str(info.value) == (
            f"cannot open {path} for reading and writing: permission denied. It must belong to "
            f"the user running codedeck-bridge, with mode 0600 (see `ls -l {path}`)"
        )
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o000
    finally:
        shutil.rmtree(base)


def test_file_of_another_user(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    open_sqlite(path, [M1]).close()
    owner = path.stat().st_uid
    monkeypatch.setattr(os, "geteuid", lambda: owner + 1)
    with pytest.raises(DatabaseUnreadable) as info:
        open_sqlite(path, [M1])
    assert str(info.value) == (
        f"the file {path} belongs to uid {owner}, not to you (uid {owner + 1}): "
        "chown it to yourself or move it away"
    )


def test_busy_database(path: Path) -> None:
    open_sqlite(path, [M1]).close()
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        # Up to date: opening needs no write lock, so a busy writer does not block it.
        open_sqlite(path, [M1], busy_timeout_ms=50).close()
        with pytest.raises(DatabaseBusy) as info:
            open_sqlite(path, [M1, M2], busy_timeout_ms=50)
        assert str(info.value) == (
            f"{path} stayed locked by another process (database is locked): is another copy of "
            "the program, or an sqlite3 shell, writing to it? Close it and try again"
        )
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    open_sqlite(path, [M1, M2]).close()


def test_too_old_sqlite(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 22, 0))
    monkeypatch.setattr(sqlite3, "sqlite_version", "3.22.0")
    with pytest.raises(StoreError) as info:
        open_sqlite(path, [M1])
    assert str(info.value) == (
        "this Python uses SQLite 3.22.0; codedeck-bridge needs 3.24.0 or newer: "
        "use a newer Python build"
    )
    assert not path.exists()


def sqlite_error(kind: type[sqlite3.Error], code: int, text: str) -> sqlite3.Error:
    exc = kind(text)
    exc.sqlite_errorcode = code
    return exc


TRANSLATIONS = [
    (
        "corrupt",
        sqlite3.DatabaseError,
        sqlite3.SQLITE_CORRUPT,
        CorruptDatabase,
        "is not a valid SQLite database (boom)",
    ),
    ("notadb", sqlite3.DatabaseError, sqlite3.SQLITE_NOTADB, CorruptDatabase, "Move it aside"),
    (
        "busy",
        sqlite3.OperationalError,
        sqlite3.SQLITE_BUSY,
        DatabaseBusy,
        "stayed locked by another process (boom)",
    ),
    (
        "busy-extended",
        sqlite3.OperationalError,
        sqlite3.SQLITE_BUSY | (2 << 8),
        DatabaseBusy,
        "stayed locked",
    ),
    ("locked", sqlite3.OperationalError, sqlite3.SQLITE_LOCKED, DatabaseBusy, "stayed locked"),
    (
        "readonly",
        sqlite3.OperationalError,
        sqlite3.SQLITE_READONLY,
        DatabaseUnreadable,
        "cannot be written (boom)",
    ),
    (
        "cantopen",
        sqlite3.OperationalError,
        sqlite3.SQLITE_CANTOPEN,
        DatabaseUnreadable,
        "cannot open",
    ),
    ("perm", sqlite3.OperationalError, sqlite3.SQLITE_PERM, DatabaseUnreadable, "cannot open"),
    (
        "full",
        sqlite3.OperationalError,
        sqlite3.SQLITE_FULL,
        StoreError,
        "the disk is full (boom); free some space",
    ),
    (
        "ioerr-short-read",
        sqlite3.OperationalError,
        sqlite3.SQLITE_IOERR | (2 << 8),
        StoreError,
        "I/O error (boom); check the disk",
    ),
    ("constraint", sqlite3.IntegrityError, sqlite3.SQLITE_CONSTRAINT, StoreError, ": boom"),
]


@pytest.mark.parametrize(
    ("kind", "code", "expected", "fragment"),
    [c[1:] for c in TRANSLATIONS],
    ids=[c[0] for c in TRANSLATIONS],
)
def test_translate_error(
    path: Path, kind: type[sqlite3.Error], code: int, expected: type[StoreError], fragment: str
) -> None:
    error = translate_error(sqlite_error(kind, code, "boom"), path)
    assert type(error) is expected
    assert str(error).startswith(str(path)) or str(error).startswith(f"cannot open {path}")
    assert fragment in str(error)
    assert error.path == path


def test_translate_error_without_a_code(path: Path) -> None:
    error = translate_error(sqlite3.OperationalError("odd"), path)
    assert type(error) is StoreError
    assert str(error) == f"{path}: odd"


@pytest.mark.parametrize(
    ("reason", "fix"),
    [
        (
            "is on a read-only file system",
            "keep the file in a directory on a writable file system, or remount that file "
            "system read-write",
        ),
        (
            "is not writable by you (mode 0500)",
            "run `chmod u+w {folder}`, or keep the file in a writable directory",
        ),
    ],
    ids=["read-only file system", "no write permission"],
)
def test_a_database_in_a_folder_sqlite_cannot_write_names_the_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reason: str, fix: str
) -> None:
    # SQLite says only "unable to open database file"; the folder's state is what the user needs.
    import store.sqlite

    monkeypatch.setattr(store.sqlite, "read_only_reason", lambda folder: reason)
    error = sqlite3.OperationalError("unable to open database file")
    error.sqlite_errorcode = sqlite3.SQLITE_CANTOPEN
    path = tmp_path / "bridge.db"
    translated = translate_error(error, path)
    assert isinstance(translated, DatabaseUnreadable)
    assert str(translated) == (
        f"cannot open {path} (unable to open database file): its folder {tmp_path} {reason}: "
        + fix.format(folder=tmp_path)
    )
    assert "must exist and belong" not in str(translated)
