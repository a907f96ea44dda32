"""The bridge database's own connection thread: jobs in, results back on the event loop.

Why a thread of our own rather than aiosqlite: the cost of the daemon's store is not SQLite but
the trips to the connection's thread. Each trip is a queue put, a thread wake-up, the GIL changing
hands twice and a wake-up of the event loop through its self-pipe; with aiosqlite every *statement*
is one (a transcript line would be five: BEGIN, the cursor, the line, the record, COMMIT), which
would make that thread a large part of the daemon's live output. Here a job is
any synchronous function of the connection, so a whole transaction — or a read of several queries
— is ONE trip (:meth:`BridgeDatabase.write` and :meth:`BridgeDatabase.run` build on that).

Rules:

- Jobs run one at a time, in submission order, on one thread that alone touches the connection
  (which is opened with ``check_same_thread=False`` elsewhere and handed over before the first job).
- A job's result or exception is set on its future from the event loop's thread
  (``call_soon_threadsafe``). A future cancelled meanwhile is left alone: the job ran anyway, as
  a statement already queued on a connection always does.
- :meth:`ConnectionThread.stop` queues the end after every job already queued, so queued work
  (a commit among it) still runs before the thread exits.
- The thread is a daemon thread: an interpreter that exits without closing the database is not
  held up by it (SQLite's WAL keeps every committed transaction; one cut short is rolled back).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["ConnectionThread"]

_T = TypeVar("_T")

_Item = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[[sqlite3.Connection], Any]]


class ConnectionThread:
    """One SQLite connection and the one thread that uses it (see the module docstring)."""

    def __init__(self, conn: sqlite3.Connection, name: str = "bridge-db") -> None:
        self._conn = conn
        self._jobs: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    @property
    def in_transaction(self) -> bool:
        """Whether the connection is inside a transaction (SQLite's autocommit flag, safe to read
        from any thread)."""
        return self._conn.in_transaction

    def submit(self, job: Callable[[sqlite3.Connection], _T]) -> asyncio.Future[_T]:
        """Queue `job`; the returned future holds its result (or exception) once it ran."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[_T] = loop.create_future()
        self._jobs.put((loop, future, job))
        return future

    async def stop(self) -> None:
        """Close the connection after every queued job, and wait for the thread to end."""

        def close(conn: sqlite3.Connection) -> None:
            conn.close()

        done = self.submit(close)
        self._jobs.put(None)
        try:
            await done
        finally:
            await asyncio.to_thread(self._thread.join)

    def _main(self) -> None:
        conn = self._conn
        while True:
            item = self._jobs.get()
            if item is None:
                return
            loop, future, job = item
            try:
                result = job(conn)
            except BaseException as exc:  # every failure belongs to the job's caller
                _post(loop, _set_exception, future, exc)
            else:
                _post(loop, _set_result, future, result)


def _post(
    loop: asyncio.AbstractEventLoop,
    setter: Callable[[asyncio.Future[Any], Any], None],
    future: asyncio.Future[Any],
    value: Any,
) -> None:
    # A closed loop raises RuntimeError: nobody waits for this result any more.
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(setter, future, value)


def _set_result(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _set_exception(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)
