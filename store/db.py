"""The bridge database, `<home>/bridge.db`, for the asyncio daemon.

One `BridgeDatabase` owns one aiosqlite connection (one worker thread, statements run in order).
The file checks and migrations (`store.sqlite.open_sqlite`) run in a helper thread, off the event
loop; the connection is then handed to aiosqlite, whose thread alone uses it from then on.

Transactions. Statements outside a transaction run in autocommit (each one is its own
transaction). `async with db.transaction():` runs `BEGIN IMMEDIATE … COMMIT` and rolls back on any
exception, cancellation included; the exactly-once ingest relies on it ("mark processed" and the
command's state change commit together or not at all). Since the connection is shared, a
transaction is owned by the task that opened it: an `asyncio.Lock` makes statements of *other*
tasks wait until it ends (otherwise they would silently join it, and vanish with its rollback).
So: inside a transaction, use the database only from the task that opened it; awaiting another
task that uses the database, from inside the transaction, would deadlock. A nested
`transaction()` in the owning task becomes a SAVEPOINT, so repository functions that need
atomicity can open one whether or not their caller already did.

COMMIT and ROLLBACK are shielded from cancellation: once queued on the connection's thread they
run before any later statement, so a cancelled task never leaves the connection mid-transaction.
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
from typing import Any, Final, TypeVar

import aiosqlite

from store.errors import StoreError
from store.home import ensure_home
from store.migrations import Migration, current_version
from store.schema import BRIDGE_MIGRATIONS
from store.sqlite import open_sqlite, translate_error

__all__ = ["BRIDGE_DB_FILENAME", "BridgeDatabase", "Params", "Row", "open_bridge_db"]

logger = logging.getLogger(__name__)

BRIDGE_DB_FILENAME: Final = "bridge.db"
_BRIDGE_LOSS_NOTE: Final = (
    "the bridge identity in it will be lost, and every phone will have to pair again"
)

Params = Sequence[Any] | Mapping[str, Any]
"""Statement parameters: positional (`?`) or named (`:name`)."""
Row = tuple[Any, ...]

_T = TypeVar("_T")


class _DropStatementDebug(logging.Filter):
    """Drop aiosqlite's DEBUG records: they print every statement *with its parameters*.

    Those parameters include the bridge's secret key and the phones' credentials, and a user who
    runs `--log-level DEBUG` must not find them in the journal. aiosqlite's INFO and WARNING
    records carry no parameters and pass.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno > logging.DEBUG


_AIOSQLITE_LOGGER = logging.getLogger("aiosqlite")
if not any(isinstance(f, _DropStatementDebug) for f in _AIOSQLITE_LOGGER.filters):
    _AIOSQLITE_LOGGER.addFilter(_DropStatementDebug())


class BridgeDatabase:
    """An open bridge database. Build it with `open_bridge_db()`; close it with `close()`.

    Attributes:
        path: the database file.
        schema_version: the schema version after the migrations of this open.
    """

    def __init__(self, conn: aiosqlite.Connection, path: Path, schema_version: int) -> None:
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

        One trip to the connection's thread, not two: every trip is a thread hand-off and a
        wake-up of the event loop, and a command's commit is several statements long (the
        profile of the ``input`` → ``input-ack`` path showed the hops). The changed-row count
        is the difference of SQLite's total-changes counter around the statement: exact,
        since statements run one at a time under the lock (the schema has no triggers).
        """

        async def run() -> int:
            before = self._conn.total_changes
            await self._conn.execute_fetchall(sql, params)
            return self._conn.total_changes - before

        return await self._run(run)

    async def executemany(self, sql: str, rows: Iterable[Params]) -> int:
        """Run one statement for each parameter set; returns the total rows changed."""

        async def run() -> int:
            cursor = await self._conn.executemany(sql, rows)
            try:
                return cursor.rowcount
            finally:
                await cursor.close()

        return await self._run(run)

    async def fetchone(self, sql: str, params: Params = ()) -> Row | None:
        """Run a query and return its first row, or None."""

        async def run() -> Row | None:
            cursor = await self._conn.execute(sql, params)
            try:
                row = await cursor.fetchone()
            finally:
                await cursor.close()
            return None if row is None else tuple(row)

        return await self._run(run)

    async def fetchall(self, sql: str, params: Params = ()) -> list[Row]:
        """Run a query and return all its rows."""

        async def run() -> list[Row]:
            rows = await self._conn.execute_fetchall(sql, params)
            return [tuple(row) for row in rows]

        return await self._run(run)

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
                await self._conn.execute("PRAGMA optimize")
            except sqlite3.Error:
                logger.warning("PRAGMA optimize failed on %s", self.path, exc_info=True)
            await self._conn.close()
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
            await self._conn.execute_fetchall(sql)
        except (sqlite3.ProgrammingError, sqlite3.InterfaceError):
            raise
        except sqlite3.Error as exc:
            raise translate_error(exc, self.path, loss_note=_BRIDGE_LOSS_NOTE) from exc

    async def _run(self, op: Callable[[], Awaitable[_T]]) -> _T:
        """Run `op` on the connection: directly inside our own transaction, else after the lock."""
        try:
            if self.in_transaction:
                return await op()
            self._check_open()
            async with self._lock:
                self._check_closed()
                return await op()
        except (sqlite3.ProgrammingError, sqlite3.InterfaceError):
            raise
        except sqlite3.Error as exc:
            raise translate_error(exc, self.path, loss_note=_BRIDGE_LOSS_NOTE) from exc

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
        # check_same_thread=False: opened here, then used only by aiosqlite's one worker thread.
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
    conn = aiosqlite.Connection(lambda: sync_conn, iter_chunk_size=64)
    await conn
    return BridgeDatabase(conn, path, version)


def _close_abandoned(opening: asyncio.Future[tuple[sqlite3.Connection, int]]) -> None:
    if not opening.cancelled() and opening.exception() is None:
        opening.result()[0].close()
