"""The asyncio bridge database: opening, modes, transactions, task isolation, closing."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import sqlite3
import stat
import threading
from pathlib import Path

import pytest

from store import (
    BRIDGE_MIGRATIONS,
    BridgeDatabase,
    CorruptDatabase,
    Migration,
    MigrationFailed,
    SchemaTooNew,
    Statement,
    StoreError,
    kv_get,
    kv_set,
    load_identity,
    open_bridge_db,
    save_identity,
)

SECRET = bytes(range(1, 33))
WAIT = 5.0


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


async def keys(db: BridgeDatabase) -> list[str]:
    return [row[0] for row in await db.fetchall("SELECT key FROM kv ORDER BY key")]


async def test_open_creates_a_private_home_and_file(home: Path) -> None:
    db = await open_bridge_db(home)
    try:
        assert db.path == home / "bridge.db"
        assert db.schema_version == len(BRIDGE_MIGRATIONS)
        assert mode_of(home) == 0o700
        assert mode_of(db.path) == 0o600
        await kv_set(db, "k", "v")
        assert mode_of(Path(f"{db.path}-wal")) == 0o600
        assert mode_of(Path(f"{db.path}-shm")) == 0o600
        assert repr(db) == f"<BridgeDatabase {db.path} v{db.schema_version} open>"
        assert await db.fetchone("PRAGMA journal_mode") == ("wal",)
        assert await db.fetchone("PRAGMA foreign_keys") == (1,)
    finally:
        await db.close()
    assert repr(db).endswith(" closed>")


async def test_reopen_is_idempotent_and_keeps_data(home: Path) -> None:
    async with await open_bridge_db(home) as db:
        await kv_set(db, "k", "v")
        first = await db.fetchall("SELECT * FROM schema_version")
    async with await open_bridge_db(home) as db:
        assert await kv_get(db, "k") == "v"
        assert await db.fetchall("SELECT * FROM schema_version") == first


async def test_corrupt_database_never_gets_a_new_identity(home: Path) -> None:
    async with await open_bridge_db(home) as db:
        await save_identity(db, SECRET)
        await kv_set(db, "filler", "x" * 50_000)
    path = home / "bridge.db"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    before = hashlib.sha256(path.read_bytes()).digest()
    with pytest.raises(CorruptDatabase) as info:
        await open_bridge_db(home)
    assert str(info.value).endswith(
        f"(mv {path} {path}.corrupt); the bridge identity in it will be lost, and every phone "
        "will have to pair again"
    )
    assert hashlib.sha256(path.read_bytes()).digest() == before


async def test_garbage_database_is_refused(home: Path) -> None:
    home.mkdir(mode=0o700)
    (home / "bridge.db").write_bytes(b"\x00garbage" * 100)
    with pytest.raises(CorruptDatabase, match="file is not a database"):
        await open_bridge_db(home)
    assert (home / "bridge.db").read_bytes() == b"\x00garbage" * 100


async def test_newer_database_is_refused(home: Path) -> None:
    newer = [
        *BRIDGE_MIGRATIONS,
        Migration(len(BRIDGE_MIGRATIONS) + 1, "future", "CREATE TABLE f (x)"),
    ]
    async with await open_bridge_db(home, migrations=newer):
        pass
    with pytest.raises(SchemaTooNew) as info:
        await open_bridge_db(home)
    assert str(info.value) == (
        f"{home / 'bridge.db'} was created by a newer codedeck-bridge "
        f"(schema v{len(newer)}, this build knows v{len(BRIDGE_MIGRATIONS)}): "
        "upgrade codedeck-bridge"
    )


async def test_failed_migration_keeps_the_previous_version(home: Path) -> None:
    async with await open_bridge_db(home) as db:
        await kv_set(db, "k", "v")
    broken = [
        *BRIDGE_MIGRATIONS,
        Migration(len(BRIDGE_MIGRATIONS) + 1, "broken", "CREATE TABLE a (x); DROP TABLE missing"),
    ]
    with pytest.raises(MigrationFailed, match="no such table: missing"):
        await open_bridge_db(home, migrations=broken)
    async with await open_bridge_db(home) as db:
        assert db.schema_version == len(BRIDGE_MIGRATIONS)
        assert await kv_get(db, "k") == "v"
        assert await db.fetchone("SELECT name FROM sqlite_master WHERE name = 'a'") is None


async def test_execute_fetch_and_rowcounts(db: BridgeDatabase) -> None:
    assert await db.execute("INSERT INTO kv VALUES (?, ?, ?)", ("a", "1", 5)) == 1
    assert (
        await db.executemany(
            "INSERT INTO kv VALUES (:k, :v, 5)", [{"k": "b", "v": "2"}, {"k": "c", "v": "3"}]
        )
        == 2
    )
    assert await db.fetchone("SELECT value FROM kv WHERE key = ?", ("b",)) == ("2",)
    assert await db.fetchone("SELECT value FROM kv WHERE key = ?", ("zz",)) is None
    assert await db.fetchall("SELECT key, value FROM kv ORDER BY key") == [
        ("a", "1"),
        ("b", "2"),
        ("c", "3"),
    ]
    assert await db.execute("UPDATE kv SET value = 'x'") == 3
    assert await db.execute("DELETE FROM kv WHERE key = 'nope'") == 0
    assert await db.execute("CREATE TABLE scratch (x)") == 0  # not DML: nothing changed
    async with db.transaction():
        assert await db.execute("DELETE FROM kv WHERE key IN ('a', 'b')") == 2


async def test_sqlite_errors_become_store_errors(db: BridgeDatabase) -> None:
    with pytest.raises(StoreError, match=r"bridge\.db: no such table: nope"):
        await db.fetchall("SELECT * FROM nope")
    with pytest.raises(StoreError, match="CHECK constraint failed"):
        await db.execute("INSERT INTO identity VALUES (1, x'00', 0)")
    await kv_set(db, "still", "works")


async def test_transaction_commits(db: BridgeDatabase) -> None:
    async with db.transaction():
        assert db.in_transaction
        await kv_set(db, "a", "1")
        await kv_set(db, "b", "2")
    assert not db.in_transaction
    assert await keys(db) == ["a", "b"]


async def test_transaction_rolls_back_on_error(db: BridgeDatabase) -> None:
    await kv_set(db, "kept", "1")

    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        async with db.transaction():
            await kv_set(db, "a", "1")
            await db.execute("DELETE FROM kv WHERE key = 'kept'")
            raise Boom
    assert await keys(db) == ["kept"]
    assert not db.in_transaction


async def test_transaction_rolls_back_on_cancellation(db: BridgeDatabase) -> None:
    inside = asyncio.Event()

    async def writer() -> None:
        async with db.transaction():
            await kv_set(db, "a", "1")
            inside.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(writer())
    await inside.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await keys(db) == []
    # The connection is back in autocommit: a plain write is durable on its own.
    await kv_set(db, "b", "2")
    async with await open_bridge_db(db.path.parent) as other:
        assert await keys(other) == ["b"]


async def test_cancellation_while_beginning_leaves_no_open_transaction(
    db: BridgeDatabase,
) -> None:
    """Cancelled while BEGIN waits for another writer: the BEGIN still lands, then is undone."""
    blocker = sqlite3.connect(db.path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")

    async def begin() -> None:
        async with db.transaction():
            await kv_set(db, "never", "1")

    task = asyncio.create_task(begin())
    for _ in range(5):
        await asyncio.sleep(0)  # the task queues BEGIN, which waits on the blocker's lock
    task.cancel()
    blocker.execute("ROLLBACK")
    with pytest.raises(asyncio.CancelledError):
        await task
    await kv_set(db, "after", "1")  # runs after the BEGIN on the worker thread
    # No transaction was left open on `db`: another connection can write at once.
    blocker.execute("PRAGMA busy_timeout = 100")
    blocker.execute("INSERT INTO kv VALUES ('other', '1', 0)")
    blocker.close()
    assert await keys(db) == ["after", "other"]


async def test_nested_transaction_is_a_savepoint(db: BridgeDatabase) -> None:
    async with db.transaction():
        await kv_set(db, "outer", "1")
        with pytest.raises(ValueError):
            async with db.transaction():
                await kv_set(db, "inner", "1")
                raise ValueError
        async with db.transaction():
            await kv_set(db, "inner2", "1")
    assert await keys(db) == ["inner2", "outer"]


async def test_outer_rollback_undoes_released_savepoints(db: BridgeDatabase) -> None:
    with pytest.raises(RuntimeError):
        async with db.transaction():
            async with db.transaction():
                await kv_set(db, "inner", "1")
            raise RuntimeError
    assert await keys(db) == []


async def test_other_tasks_wait_for_the_transaction(db: BridgeDatabase) -> None:
    """Another task's write must not join (and vanish with) a transaction it is not part of."""
    in_tx = asyncio.Event()
    other_started = asyncio.Event()

    async def owner() -> None:
        async with db.transaction():
            await kv_set(db, "owner", "1")
            in_tx.set()
            await other_started.wait()
            raise LookupError

    async def other() -> None:
        await in_tx.wait()
        write = asyncio.create_task(kv_set(db, "other", "1"))
        await asyncio.sleep(0)  # let it queue its statement, or wait for the lock
        other_started.set()
        await write

    results = await asyncio.gather(owner(), other(), return_exceptions=True)
    assert isinstance(results[0], LookupError)
    assert results[1] is None
    assert await keys(db) == ["other"]


async def test_many_concurrent_writers(db: BridgeDatabase) -> None:
    async def write(i: int) -> None:
        if i % 3 == 0:
            async with db.transaction():
                await kv_set(db, f"k{i:03}", "t")
        else:
            await kv_set(db, f"k{i:03}", "p")

    await asyncio.gather(*(write(i) for i in range(60)))
    assert await keys(db) == [f"k{i:03}" for i in range(60)]


async def test_failed_commit_rolls_back(home: Path) -> None:
    deferred = [
        *BRIDGE_MIGRATIONS,
        Migration(
            len(BRIDGE_MIGRATIONS) + 1,
            "deferred fk",
            "CREATE TABLE parent (id INTEGER PRIMARY KEY);"
            "CREATE TABLE child (id INTEGER PRIMARY KEY, parent INTEGER "
            "REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED);",
        ),
    ]
    async with await open_bridge_db(home, migrations=deferred) as db:
        with pytest.raises(StoreError, match="FOREIGN KEY constraint failed"):
            async with db.transaction():
                await kv_set(db, "a", "1")
                await db.execute("INSERT INTO child VALUES (1, 99)")
        assert not db.in_transaction
        assert await keys(db) == []
        assert await db.fetchall("SELECT * FROM child") == []
        await kv_set(db, "b", "1")
        assert await keys(db) == ["b"]


async def test_close_is_idempotent_and_final(home: Path) -> None:
    db = await open_bridge_db(home)
    await db.close()
    await db.close()
    with pytest.raises(StoreError, match=r"bridge\.db is closed"):
        await kv_get(db, "k")
    with pytest.raises(StoreError, match="is closed"):
        async with db.transaction():
            pass


async def test_close_inside_a_transaction_is_a_bug(db: BridgeDatabase) -> None:
    with pytest.raises(RuntimeError, match="inside a transaction"):
        async with db.transaction():
            await db.close()


async def test_close_waits_for_a_running_transaction(home: Path) -> None:
    db = await open_bridge_db(home)
    inside = asyncio.Event()
    release = asyncio.Event()

    async def writer() -> None:
        async with db.transaction():
            await kv_set(db, "a", "1")
            inside.set()
            await release.wait()
            await kv_set(db, "b", "2")  # the transaction may finish its work

    async def queued() -> None:
        await kv_set(db, "c", "3")  # waits for the transaction, before close() does

    task = asyncio.create_task(writer())
    await inside.wait()
    waiting = asyncio.create_task(queued())
    await asyncio.sleep(0)
    closing = asyncio.create_task(db.close())
    await asyncio.sleep(0)
    with pytest.raises(StoreError, match="is closed"):
        await kv_get(db, "a")  # new work is refused at once
    release.set()
    await task
    await waiting
    await closing
    async with await open_bridge_db(home) as again:
        assert await keys(again) == ["a", "b", "c"]


async def test_statement_parameters_never_reach_the_logs(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with await open_bridge_db(home) as db:
        await save_identity(db, SECRET)
        await kv_set(db, "credentials", "sk-ant-secret-token")
        assert await load_identity(db) == SECRET
    text = "\n".join(record.getMessage() for record in caplog.records)
    assert "sk-ant-secret-token" not in text
    assert repr(SECRET) not in text
    assert SECRET.hex() not in text
    assert "opened" in text  # the store's own lifecycle lines are there


# --- one trip: write, run, start_write -------------------------------------------------------


async def test_write_is_one_transaction(db: BridgeDatabase) -> None:
    await db.write(
        [
            Statement("INSERT INTO kv VALUES (?, ?, ?)", ("a", "1", 5)),
            Statement("INSERT INTO kv VALUES (?, ?, ?)", ("b", "2", 5)),
        ]
    )
    assert await keys(db) == ["a", "b"]
    with pytest.raises(StoreError, match="UNIQUE constraint failed"):
        await db.write(
            [
                Statement("INSERT INTO kv VALUES (?, ?, ?)", ("c", "3", 5)),
                Statement("INSERT INTO kv VALUES (?, ?, ?)", ("a", "again", 5)),
            ]
        )
    assert await keys(db) == ["a", "b"]  # nothing of the failed write, "c" included
    await db.write([])  # nothing to do
    await kv_set(db, "d", "4")  # the connection is back in autocommit
    async with await open_bridge_db(db.path.parent) as other:
        assert await keys(other) == ["a", "b", "d"]


async def test_write_inside_a_transaction_is_a_savepoint(db: BridgeDatabase) -> None:
    async with db.transaction():
        await kv_set(db, "outer", "1")
        with pytest.raises(StoreError):
            await db.write(
                [
                    Statement("INSERT INTO kv VALUES ('inner', '1', 0)"),
                    Statement("INSERT INTO kv VALUES ('outer', '2', 0)"),
                ]
            )
        await db.write([Statement("INSERT INTO kv VALUES ('inner2', '1', 0)")])
    assert await keys(db) == ["inner2", "outer"]


async def test_run_is_any_work_of_the_connection_in_one_trip(db: BridgeDatabase) -> None:
    await kv_set(db, "a", "1")

    def job(conn: sqlite3.Connection) -> tuple[int, list[tuple[str]]]:
        count = conn.execute("SELECT count(*) FROM kv").fetchone()[0]
        return int(count), conn.execute("SELECT key FROM kv").fetchall()

    assert await db.run(job) == (1, [("a",)])
    with pytest.raises(StoreError, match="no such table"):
        await db.run(lambda conn: conn.execute("SELECT * FROM nope").fetchall())


async def test_start_write_is_queued_before_it_returns(db: BridgeDatabase) -> None:
    ran = threading.Event()

    def block(conn: sqlite3.Connection) -> None:
        ran.wait(WAIT)  # holds the connection's thread until the write is queued behind it

    blocker = asyncio.ensure_future(db.run(block))
    await asyncio.sleep(0.01)
    writing = db.start_write([Statement("INSERT INTO kv VALUES ('w', '1', 0)")])
    queued = db.fetchall("SELECT key FROM kv")  # queued after the write, so it sees it
    ran.set()
    await blocker
    await writing
    assert await queued == [("w",)]
    with pytest.raises(StoreError, match="UNIQUE constraint failed"):
        await db.start_write([Statement("INSERT INTO kv VALUES ('w', '2', 0)")])


async def test_start_run_is_queued_before_it_returns(db: BridgeDatabase) -> None:
    ran = threading.Event()
    order: list[str] = []

    def block(conn: sqlite3.Connection) -> None:
        ran.wait(WAIT)
        order.append("block")

    def read(conn: sqlite3.Connection) -> int:
        order.append("read")
        return int(conn.execute("SELECT count(*) FROM kv").fetchone()[0])

    blocker = asyncio.ensure_future(db.run(block))
    await asyncio.sleep(0.01)
    reading = db.start_run(read)
    writing = db.start_write([Statement("INSERT INTO kv VALUES ('w', '1', 0)")])
    ran.set()
    await blocker
    await writing
    assert await reading == 0  # queued before the write: it did not see it
    assert order == ["block", "read"]
    with pytest.raises(StoreError, match="no such table"):
        await db.start_run(lambda conn: conn.execute("SELECT * FROM nope").fetchall())


async def test_start_write_waits_for_another_tasks_transaction(db: BridgeDatabase) -> None:
    inside, release = asyncio.Event(), asyncio.Event()

    async def owner() -> None:
        async with db.transaction():
            await kv_set(db, "owner", "1")
            inside.set()
            await release.wait()
            raise LookupError  # rolled back: the other task's write must not vanish with it

    task = asyncio.create_task(owner())
    await inside.wait()
    writing = asyncio.ensure_future(
        db.start_write([Statement("INSERT INTO kv VALUES ('x', '1', 0)")])
    )
    await asyncio.sleep(0.01)
    assert not writing.done()
    release.set()
    with pytest.raises(LookupError):
        await task
    await writing
    assert await keys(db) == ["x"]


async def test_jobs_run_in_order_and_queued_ones_finish_before_close(home: Path) -> None:
    db = await open_bridge_db(home)
    writes = [db.execute("INSERT INTO kv VALUES (?, ?, 0)", (f"k{n}", "v")) for n in range(20)]
    results = await asyncio.gather(*writes, db.close())
    assert results[:20] == [1] * 20
    async with await open_bridge_db(home) as again:
        assert await keys(again) == sorted(f"k{n}" for n in range(20))
