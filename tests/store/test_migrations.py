"""The migration runner: order, once-only, atomic failure, newer/foreign schemas, splitting."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.errors import MigrationFailed, SchemaMismatch, SchemaTooNew
from store.migrations import Migration, current_version, migrate, split_statements

# Each migration records its own run in `log`, so a second run would show as a second row.
M1 = Migration(
    1, "log table", "CREATE TABLE log (version INTEGER NOT NULL); INSERT INTO log VALUES (1)"
)
M2 = Migration(
    2, "things", "CREATE TABLE things (id INTEGER PRIMARY KEY); INSERT INTO log VALUES (2)"
)
M3 = Migration(3, "more", "ALTER TABLE things ADD COLUMN label TEXT; INSERT INTO log VALUES (3)")
# Its first statement succeeds, its second fails: the first must be undone too.
M2_BAD = Migration(
    2, "things", "CREATE TABLE things (id INTEGER PRIMARY KEY); INSERT INTO nowhere VALUES (1)"
)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "test.db"


@pytest.fixture
def conn(path: Path) -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA foreign_keys = ON")
    yield connection
    connection.close()


def log(conn: sqlite3.Connection) -> list[int]:
    return [row[0] for row in conn.execute("SELECT version FROM log ORDER BY rowid")]


def history(conn: sqlite3.Connection) -> list[tuple[int, str]]:
    return conn.execute("SELECT version, name FROM schema_version ORDER BY version").fetchall()


def tables(conn: sqlite3.Connection) -> set[str]:
    return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def test_applies_in_order_once(conn: sqlite3.Connection, path: Path) -> None:
    assert current_version(conn) == 0
    assert migrate(conn, [M1, M2, M3], path=path) == 3
    assert log(conn) == [1, 2, 3]
    assert history(conn) == [(1, "log table"), (2, "things"), (3, "more")]
    applied_at = conn.execute("SELECT applied_at FROM schema_version").fetchall()
    assert all(isinstance(row[0], int) and row[0] > 1_600_000_000 for row in applied_at)
    assert current_version(conn) == 3
    assert not conn.in_transaction


def test_rerun_is_a_no_op(conn: sqlite3.Connection, path: Path) -> None:
    migrate(conn, [M1, M2], path=path)
    before = conn.execute("SELECT * FROM schema_version").fetchall()
    assert migrate(conn, [M1, M2], path=path) == 2
    assert log(conn) == [1, 2]
    assert conn.execute("SELECT * FROM schema_version").fetchall() == before


def test_only_pending_migrations_run(conn: sqlite3.Connection, path: Path) -> None:
    migrate(conn, [M1], path=path)
    assert migrate(conn, [M1, M2, M3], path=path) == 3
    assert log(conn) == [1, 2, 3]


def test_failing_migration_rolls_back_to_previous_version(
    conn: sqlite3.Connection, path: Path
) -> None:
    with pytest.raises(MigrationFailed) as info:
        migrate(conn, [M1, M2_BAD, M3], path=path)
    assert str(info.value) == (
        f"{path}: migration v2 (things) failed: no such table: nowhere. Nothing of it was "
        "applied; the database stays at v1. Report this to the codedeck-bridge developers"
    )
    assert info.value.version == 2
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)
    assert current_version(conn) == 1
    assert "things" not in tables(conn)
    assert log(conn) == [1]
    assert not conn.in_transaction
    # A fixed build migrates the same file on.
    assert migrate(conn, [M1, M2, M3], path=path) == 3
    assert log(conn) == [1, 2, 3]


def test_failure_in_the_first_migration_leaves_no_schema_version(
    conn: sqlite3.Connection, path: Path
) -> None:
    bad = Migration(1, "bad", "CREATE TABLE t (x); SELECT * FROM missing")
    with pytest.raises(MigrationFailed, match="the database stays at v0"):
        migrate(conn, [bad], path=path)
    assert tables(conn) == set()
    assert current_version(conn) == 0


def test_newer_schema_is_refused(conn: sqlite3.Connection, path: Path) -> None:
    migrate(conn, [M1, M2, M3], path=path)
    with pytest.raises(SchemaTooNew) as info:
        migrate(conn, [M1, M2], path=path)
    assert str(info.value) == (
        f"{path} was created by a newer codedeck-bridge (schema v3, this build knows v2): "
        "upgrade codedeck-bridge"
    )
    assert (info.value.found, info.value.known) == (3, 2)
    with pytest.raises(
        SchemaTooNew, match=r"newer codedeck-relaypolicy .*: upgrade codedeck-relaypolicy"
    ):
        migrate(conn, [M1], path=path, program="codedeck-relaypolicy")
    assert log(conn) == [1, 2, 3]


def test_foreign_database_is_refused(conn: sqlite3.Connection, path: Path) -> None:
    conn.execute("CREATE TABLE users (id)")
    with pytest.raises(SchemaMismatch) as info:
        migrate(conn, [M1], path=path)
    assert str(info.value) == (
        f"{path} is a SQLite database but not one made by codedeck-bridge (it has a table "
        "'users' and no schema_version): pass the right file, or move this one aside"
    )
    assert "schema_version" not in tables(conn)


def test_diverged_history_is_refused(conn: sqlite3.Connection, path: Path) -> None:
    migrate(conn, [M1, M2], path=path)
    renamed = Migration(2, "other things", M2.sql)
    with pytest.raises(SchemaMismatch, match=r"schema history .* \['v1 log table', 'v2 things'\]"):
        migrate(conn, [M1, renamed, M3], path=path)
    assert current_version(conn) == 2


def test_foreign_keys_off_migration_rebuilds_a_table(conn: sqlite3.Connection, path: Path) -> None:
    base = Migration(
        1,
        "parent and child",
        "CREATE TABLE parent (id INTEGER PRIMARY KEY);"
        "CREATE TABLE child (id INTEGER PRIMARY KEY, parent INTEGER REFERENCES parent(id));"
        "INSERT INTO parent VALUES (1); INSERT INTO child VALUES (10, 1);",
    )
    # SQLite's 12-step rebuild: with foreign keys on, dropping `parent` would fail or cascade.
    rebuild = Migration(
        2,
        "rebuild parent",
        "CREATE TABLE parent_new (id INTEGER PRIMARY KEY, name TEXT NOT NULL DEFAULT '');"
        "INSERT INTO parent_new (id) SELECT id FROM parent;"
        "DROP TABLE parent; ALTER TABLE parent_new RENAME TO parent;",
        disable_foreign_keys=True,
    )
    assert migrate(conn, [base, rebuild], path=path) == 2
    assert conn.execute("PRAGMA foreign_keys").fetchone() == (1,)
    assert conn.execute("SELECT id, name FROM parent").fetchall() == [(1, "")]


def test_foreign_key_violation_fails_the_migration(conn: sqlite3.Connection, path: Path) -> None:
    base = Migration(
        1,
        "parent and child",
        "CREATE TABLE parent (id INTEGER PRIMARY KEY);"
        "CREATE TABLE child (id INTEGER PRIMARY KEY, parent INTEGER REFERENCES parent(id));"
        "INSERT INTO parent VALUES (1); INSERT INTO child VALUES (10, 1);",
    )
    breaking = Migration(2, "drop parents", "DELETE FROM parent", disable_foreign_keys=True)
    with pytest.raises(MigrationFailed, match=r"foreign key check failed .* table 'child'"):
        migrate(conn, [base, breaking], path=path)
    assert conn.execute("SELECT count(*) FROM parent").fetchone() == (1,)
    assert conn.execute("PRAGMA foreign_keys").fetchone() == (1,)


def test_connection_with_open_transaction_is_rejected(conn: sqlite3.Connection, path: Path) -> None:
    conn.execute("BEGIN")
    with pytest.raises(ValueError, match="no open transaction"):
        migrate(conn, [M1], path=path)


@pytest.mark.parametrize(
    "versions", [[2], [1, 3], [2, 1], [1, 1]], ids=lambda v: "-".join(map(str, v))
)
def test_numbering_must_be_1_to_n(
    conn: sqlite3.Connection, path: Path, versions: list[int]
) -> None:
    migrations = [Migration(v, f"m{v}", "SELECT 1") for v in versions]
    with pytest.raises(ValueError, match=r"must be 1\.\.n in order"):
        migrate(conn, migrations, path=path)


def test_concurrent_migrators_apply_each_migration_once(path: Path) -> None:
    slow = Migration(
        2,
        "slow",
        "CREATE TABLE big (x); "
        "INSERT INTO big WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
        "WHERE x < 20000) SELECT x FROM c; INSERT INTO log VALUES (2)",
    )
    last = Migration(3, "last", "CREATE TABLE last (x); INSERT INTO log VALUES (3)")
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def worker() -> None:
        conn = sqlite3.connect(path, isolation_level=None, timeout=30)
        try:
            barrier.wait()
            migrate(conn, [M1, slow, last], path=path)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            conn.close()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    conn = sqlite3.connect(path)
    try:
        assert log(conn) == [1, 2, 3]
        assert history(conn) == [(1, "log table"), (2, "slow"), (3, "last")]
    finally:
        conn.close()


INVALID_MIGRATIONS = [
    ("version-0", dict(version=0, name="x", sql="SELECT 1"), "start at 1"),
    ("blank-name", dict(version=1, name="  ", sql="SELECT 1"), "needs a name"),
    ("no-sql", dict(version=1, name="x", sql="  -- nothing\n"), "has no SQL statement"),
    ("begin", dict(version=1, name="x", sql="BEGIN; CREATE TABLE t (x)"), "must not contain BEGIN"),
    (
        "commit",
        dict(version=1, name="x", sql="CREATE TABLE t (x);\ncommit;"),
        "must not contain COMMIT",
    ),
    (
        "commented-vacuum",
        dict(version=1, name="x", sql="/* tidy */ -- up\n VACUUM"),
        "must not contain VACUUM",
    ),
    ("unterminated", dict(version=1, name="x", sql="SELECT 'oops"), "unterminated"),
]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [c[1:] for c in INVALID_MIGRATIONS],
    ids=[c[0] for c in INVALID_MIGRATIONS],
)
def test_invalid_migrations_are_rejected_when_declared(
    kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        Migration(**kwargs)  # type: ignore[arg-type]


SPLIT_CASES = [
    (
        "simple",
        "CREATE TABLE a (x); CREATE TABLE b (y);",
        ["CREATE TABLE a (x);", "CREATE TABLE b (y);"],
    ),
    ("no-final-semicolon", "SELECT 1; SELECT 2", ["SELECT 1;", "SELECT 2;"]),
    (
        "semicolon-in-string",
        "INSERT INTO t VALUES ('a;b'); SELECT 1;",
        ["INSERT INTO t VALUES ('a;b');", "SELECT 1;"],
    ),
    ("semicolon-in-comment", "-- one; two\nSELECT 1;", ["-- one; two\nSELECT 1;"]),
    ("block-comment", "/* a; b */ SELECT 1;", ["/* a; b */ SELECT 1;"]),
    (
        "trigger",
        "CREATE TRIGGER tr AFTER INSERT ON t BEGIN UPDATE t SET x = 1; DELETE FROM u; END; SELECT 1;",
        [
            "CREATE TRIGGER tr AFTER INSERT ON t BEGIN UPDATE t SET x = 1; DELETE FROM u; END;",
            "SELECT 1;",
        ],
    ),
    ("empty-statements", " ; ;\n;SELECT 1;;", ["SELECT 1;"]),
    ("comments-only", "-- nothing here\n/* nor here */", []),
    ("trailing-comment", "SELECT 1; -- done", ["SELECT 1;"]),
]


@pytest.mark.parametrize(
    ("sql", "expected"), [c[1:] for c in SPLIT_CASES], ids=[c[0] for c in SPLIT_CASES]
)
def test_split_statements(sql: str, expected: list[str]) -> None:
    assert split_statements(sql) == expected
    conn = sqlite3.connect(":memory:")
    try:
        for statement in expected:
            assert sqlite3.complete_statement(statement)
    finally:
        conn.close()


def test_split_rejects_unterminated_text() -> None:
    with pytest.raises(ValueError, match="unterminated"):
        split_statements("SELECT 1; /* open")
