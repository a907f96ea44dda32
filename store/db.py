"""The bridge database, `<home>/bridge.db`, for the asyncio daemon.

One `BridgeDatabase` owns one SQLite connection and the one thread that uses it
(`store.worker.ConnectionThread`; statements run in order). The file checks and migrations
(`store.sqlite.open_sqlite`) run in a helper thread, off the event loop; the connection is then
handed to its own thread, which alone uses it from then on.

Trips. Every call below is one trip to that thread and back (a thread hand-off and a wake-up of
the event loop): `execute`, `fetchone`, `fetchall`, `executemany` one statement each; `write` a
whole transaction of statements, `run` any synchronous function of the connection (several
queries, a read and its updates). The daemon's hot path uses the last two: a commit is one trip,
however many statements it has (the trips, not SQLite, are the cost).

Transactions. Statements outside a transaction run in autocommit (each one is its own
transaction). `async with db.transaction():` runs `BEGIN IMMEDIATE … COMMIT` and rolls back on any
exception, cancellation included; the exactly-once ingest relies on it ("mark processed" and the
command's state change commit together or not at all). Since the connection is shared, a
transaction is owned by the task that opened it: an `asyncio.Lock` makes statements of *other*
tasks wait until it ends (otherwise they would silently join it, and vanish with its rollback).
So: inside a transaction, use the database only from the task that opened it; awaiting another
task that uses the database, from inside the transaction, would deadlock. A nested
`transaction()` (or `write`) in the owning task becomes a SAVEPOINT, so repository functions that
need atomicity can open one whether or not their caller already did. `write` and `run` take the
same lock, for the length of their one trip.

COMMIT and ROLLBACK are shielded from cancellation: once queued on the connection's thread they
run before any later statement, so a cancelled task never leaves the connection mid-transaction.
A `write` is one job: it commits or rolls back on the thread whatever its caller does meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Final, NamedTuple, TypeVar

from store.errors import StoreError
from store.home import ensure_home
from store.migrations import Migration, current_version
from store.schema import BRIDGE_MIGRATIONS
from store.sqlite import open_sqlite, translate_error
from store.worker import ConnectionThread

__all__ = [
    "BRIDGE_DB_FILENAME",
    "BridgeDatabase",
    "Params",
    "Row",
    "Statement",
    "open_bridge_db",
]

logger = logging.getLogger(__name__)

BRIDGE_DB_FILENAME: Final = "bridge.db"
_BRIDGE_LOSS_NOTE: Final = (
    "the bridge identity in it will be lost, and every phone will have to pair again"
)

Params = Sequence[Any] | Mapping[str, Any]
"""Statement parameters: positional (`?`) or named (`:name`)."""
Row = tuple[Any, ...]

_T = TypeVar("_T")


class Statement(NamedTuple):
    """One SQL statement and its parameters, to run later (in `BridgeDatabase.write`)."""

    sql: str
    params: Params = ()


class BridgeDatabase:
    """An open bridge database. Build it with `open_bridge_db()`; close it with `close()`.

    Attributes:
        path: the database file.
        schema_version: the schema version after the migrations of this open.
    """

    def __init__(self, conn: ConnectionThread, path: Path, schema_version: int) -> None:
        self._conn = conn
        self.path = path
        self.schema_version = schema_version
        self._lock = asyncio.Lock()
        self._owner: asyncio.Task[Any] | None = None
        self._savepoints = 0
        self._closing = False  # no new work accepted
        self._closed = False  # the connection is gone

    def __repr__(self) -> str:
        state = "closed" if self._closing else "open"
        return f"<BridgeDatabase {self.path} v{self.schema_version} {state}>"

    async def __aenter__(self) -> BridgeDatabase:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def in_transaction(self) -> bool:
        """True when the calling task is inside one of its `transaction()` blocks."""
        return self._owner is not None and self._owner is asyncio.current_task()

    async def execute(self, sql: str, params: Params = ()) -> int:
        """Run one statement; returns the number of rows it changed (0 for non-DML).

        The changed-row count is the difference of SQLite's total-changes counter around the
        statement: exact, since jobs run one at a time on the connection's thread (the schema
        has no triggers).
        """

        def job(conn: sqlite3.Connection) -> int:
            before = conn.total_changes
            conn.execute(sql, params).fetchall()
            return conn.total_changes - before

        return await self._run(job)

    async def executemany(self, sql: str, rows: Iterable[Params]) -> int:
        """Run one statement for each parameter set; returns the total rows changed."""
        params = list(rows)  # read here, on the event loop, not on the connection's thread

        def job(conn: sqlite3.Connection) -> int:
            return conn.executemany(sql, params).rowcount

        return await self._run(job)

    async def fetchone(self, sql: str, params: Params = ()) -> Row | None:
        """Run a query and return its first row, or None."""

        def job(conn: sqlite3.Connection) -> Row | None:
            row = conn.execute(sql, params).fetchone()
            return None if row is None else tuple(row)

        return await self._run(job)

    async def fetchall(self, sql: str, params: Params = ()) -> list[Row]:
        """Run a query and return all its rows."""

        def job(conn: sqlite3.Connection) -> list[Row]:
            return [tuple(row) for row in conn.execute(sql, params).fetchall()]

        return await self._run(job)

    async def run(self, job: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run a synchronous function of the connection in one trip; returns its result.

        For work of several statements that belongs together (reads, or a read and the updates
        it decides). `job` runs on the connection's thread: it must only use the connection it
        is given, and must not leave a transaction open (use `write` for writes that must be
        atomic). SQLite errors are translated as for every other call.
        """
        return await self._run(job)

    async def write(self, statements: Sequence[Statement]) -> None:
        """Run `statements` as ONE transaction, in one trip to the connection's thread.

        `BEGIN IMMEDIATE`, the statements in order, `COMMIT`; any failure rolls the whole of it
        back (on the thread, before the next job) and is raised. Inside the calling task's own
        `transaction()` it is a SAVEPOINT of it instead, rolled back alone on failure.

        Raises:
            StoreError: a statement, BEGIN or COMMIT failed; nothing of `statements` is stored.
        """
        if not statements:
            return
        batch = list(statements)
        if self.in_transaction:
            self._savepoints += 1
            name = f"sp{self._savepoints}"
            try:
                await self._run(lambda conn: _in_savepoint(conn, name, batch))
            finally:
                self._savepoints -= 1
            return
        await self._run(lambda conn: _in_transaction(conn, batch))

    def start_write(self, statements: Sequence[Statement]) -> Awaitable[None]:
        """`write`, queued on the connection's thread before this returns; await the result.

        The caller can do CPU work while SQLite runs the transaction on its own thread (both
        release the GIL for their heavy parts). The transaction is one job, so it cannot land
        inside another task's `transaction()` as long as none is open, which is checked here;
        when one is (or when the caller is inside its own), it waits its turn like `write`,
        from the moment the result is awaited. Await the result in every case: a queued write
        runs — and commits — whether or not anyone waits for it.
        """
        if not statements or self._owner is not None or self._closing:
            return self.write(statements)
        batch = list(statements)
        return self._translated(self._conn.submit(lambda conn: _in_transaction(conn, batch)))

    def start_run(self, job: Callable[[sqlite3.Connection], _T]) -> Awaitable[_T]:
        """`run`, queued on the connection's thread before this returns; await the result.

        For a reader that works on one batch of rows while SQLite reads the next. Like
        `start_write`, it waits its turn from the moment it is awaited when a transaction is
        open. Await the result in every case.
        """
        if self._owner is not None or self._closing:
            return self.run(job)
        return self._translated(self._conn.submit(job))

    async def _translated(self, job: Awaitable[_T]) -> _T:
        try:
            return await job
        except (sqlite3.ProgrammingError, sqlite3.InterfaceError):
            raise
        except sqlite3.Error as exc:
            raise translate_error(exc, self.path, loss_note=_BRIDGE_LOSS_NOTE) from exc

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """`BEGIN IMMEDIATE … COMMIT`, rolled back if the block raises or is cancelled.

        Nested in the same task, it is a SAVEPOINT: an inner failure that the outer block
        catches undoes only the inner part. See the module docstring for the ownership rule.

        Raises:
            StoreError: BEGIN or COMMIT failed (busy, full, I/O); on a failed COMMIT the
                transaction was rolled back.
        """
        task = asyncio.current_task()
        if task is not None and self._owner is task:
            async with self._savepoint():
                yield
            return
        self._check_open()
        async with self._lock:
            self._check_closed()
            self._owner = task
            try:
                try:
                    await self._control("BEGIN IMMEDIATE")
                    yield
                except BaseException:
                    await self._rollback("ROLLBACK")
                    raise
                try:
                    await self._control("COMMIT")
                except StoreError:
                    await self._rollback("ROLLBACK")
                    raise
            finally:
                self._owner = None

    async def close(self) -> None:
        """Refuse new work, let queued work and a running transaction finish, then close.

        Idempotent.

        Raises:
            RuntimeError: called from inside a transaction of the calling task.
        """
        if self.in_transaction:
            raise RuntimeError("BridgeDatabase.close() called inside a transaction")
        if self._closing:
            return
        self._closing = True
        async with self._lock:
            try:
                # Cheap, and lets SQLite refresh its planner statistics where they went stale.
                await self._conn.submit(lambda conn: conn.execute("PRAGMA optimize").fetchall())
            except sqlite3.Error:
                logger.warning("PRAGMA optimize failed on %s", self.path, exc_info=True)
            await self._conn.stop()
            self._closed = True
        logger.info("closed %s", self.path)

    @asynccontextmanager
    async def _savepoint(self) -> AsyncIterator[None]:
        self._savepoints += 1
        name = f"sp{self._savepoints}"
        try:
            try:
                await self._control(f"SAVEPOINT {name}")
                yield
            except BaseException:
                await self._rollback(f"ROLLBACK TO {name}", f"RELEASE {name}")
                raise
            await self._control(f"RELEASE {name}")
        finally:
            self._savepoints -= 1

    async def _rollback(self, *statements: str) -> None:
        """Undo the current (save)point, unless SQLite already rolled back by itself.

        Failures are logged, not raised: the caller is already propagating the original error.
        """
        for sql in statements:
            if not self._conn.in_transaction:
                return
            try:
                await self._control(sql)
            except StoreError:
                logger.error("%s failed on %s", sql, self.path, exc_info=True)
                return

    async def _control(self, sql: str) -> None:
        """Run a transaction-control statement to completion, even if the caller is cancelled.

        Once queued, the statement runs anyway on the connection's thread; returning early would
        let the caller believe in a state the connection is not in (e.g. a BEGIN that lands
        after its rollback was skipped). So a cancellation is held back until the statement has
        finished, then re-raised: the delay is one local statement, bounded by the busy timeout.
        """
        inner = asyncio.ensure_future(self._raw(sql))
        cancelled: asyncio.CancelledError | None = None
        while True:
            try:
                await asyncio.shield(inner)
                break
            except asyncio.CancelledError as exc:
                if inner.cancelled():
                    raise  # the statement itself was cancelled: the loop is shutting down
                cancelled = exc
                if inner.done():
                    break
            except Exception:
                if cancelled is None:
                    raise
                break  # a cancellation is pending: it wins, the failure is logged below
        if cancelled is not None:
            if inner.exception() is not None:
                logger.error("%s failed on %s during a cancellation", sql, self.path)
            raise cancelled

    async def _raw(self, sql: str) -> None:
        try:
            await self._conn.submit(lambda conn: conn.execute(sql).fetchall())
        except (sqlite3.ProgrammingError, sqlite3.InterfaceError):
            raise
        except sqlite3.Error as exc:
            raise translate_error(exc, self.path, loss_note=_BRIDGE_LOSS_NOTE) from exc

    async def _run(self, job: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run `job` in one trip: directly inside our own transaction, else after the lock."""
        if self.in_transaction:
            return await self._translated(self._conn.submit(job))
        self._check_open()
        async with self._lock:
            self._check_closed()
            return await self._translated(self._conn.submit(job))

    def _check_open(self) -> None:
        if self._closing:
            raise StoreError(f"{self.path} is closed (the bridge is shutting down)", path=self.path)

    def _check_closed(self) -> None:
        if self._closed:  # pragma: no cover - work queued before close() runs before it
            raise StoreError(f"{self.path} is closed (the bridge is shutting down)", path=self.path)


async def open_bridge_db(
    home: str | os.PathLike[str],
    *,
    migrations: Sequence[Migration] = BRIDGE_MIGRATIONS,
) -> BridgeDatabase:
    """Open `<home>/bridge.db`: make the home private, create/check the file, migrate it.

    Args:
        home: the bridge home (created with mode 0700 if missing; see `store.home`).
        migrations: the schema history; the default is the bridge's own (tests pass others).

    Returns:
        The open database. Close it with `await db.close()` (or `async with`).

    Raises:
        StoreError: see `store.sqlite.open_sqlite` and `store.home.ensure_home`; each subclass
            names the file and the fix.
    """
    home_path = await asyncio.to_thread(ensure_home, home)
    path = home_path / BRIDGE_DB_FILENAME

    def connect() -> tuple[sqlite3.Connection, int]:
        # check_same_thread=False: opened here, then used only by the connection's own thread.
        conn = open_sqlite(
            path,
            migrations,
            program="codedeck-bridge",
            loss_note=_BRIDGE_LOSS_NOTE,
            check_same_thread=False,
        )
        try:
            return conn, current_version(conn)
        except sqlite3.Error as exc:
            conn.close()
            raise translate_error(exc, path, loss_note=_BRIDGE_LOSS_NOTE) from exc

    opening = asyncio.ensure_future(asyncio.to_thread(connect))
    try:
        sync_conn, version = await asyncio.shield(opening)
    except asyncio.CancelledError:
        # The thread cannot be stopped; close what it opens once it is done.
        opening.add_done_callback(_close_abandoned)
        raise
    return BridgeDatabase(ConnectionThread(sync_conn), path, version)


def _close_abandoned(opening: asyncio.Future[tuple[sqlite3.Connection, int]]) -> None:
    if not opening.cancelled() and opening.exception() is None:
        opening.result()[0].close()


def _in_transaction(conn: sqlite3.Connection, statements: Sequence[Statement]) -> None:
    """`statements` as one transaction, on the connection's thread (see `BridgeDatabase.write`)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for sql, params in statements:
            conn.execute(sql, params)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:  # SQLite may have rolled back by itself (e.g. disk full)
            conn.execute("ROLLBACK")
        raise


def _in_savepoint(conn: sqlite3.Connection, name: str, statements: Sequence[Statement]) -> None:
    """`statements` as a savepoint of the transaction the connection is in."""
    conn.execute(f"SAVEPOINT {name}")
    try:
        for sql, params in statements:
            conn.execute(sql, params)
    except BaseException:
        if conn.in_transaction:
            conn.execute(f"ROLLBACK TO {name}")
            conn.execute(f"RELEASE {name}")
        raise
    conn.execute(f"RELEASE {name}")
