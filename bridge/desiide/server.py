"""``codedeck-bridge desiide``: the Desiide orchestrator process, stdio edge and method table.

The editor extension forks this process and speaks JSON-RPC 2.0 to it over stdin/stdout in
``Content-Length`` frames (``DESIIDE.md``). Here is the I/O edge around the sans-I/O
:class:`~bridge.desiide.connection.DesiideConnection`:

- **stdout carries only frames.** Every byte written to fd 1 is a whole frame, written by one
  writer; logs go to stderr as JSON lines and to a rotating ``orchestrator.log`` in ``--log-dir``
  (0600 in a 0700 directory), both through the bridge's secret redaction.
- **Requests run concurrently**, each in its own task, so a slow ``models.test`` never holds up a
  ``task.approve``; answers carry their request's id. A handler's ``DesiideError`` is answered
  with its code; anything else is a bug: ``InternalError`` to the editor, the traceback to the
  log only.
- **stdin** is the editor's pipe. Anything else works too (a manual run, a script): a regular
  file is read as the stream and ``/dev/null`` or a closed stdin is an immediate EOF; the event
  loop cannot wait on those, so they are read in a thread. A stdin that cannot be read at all is
  one line in the log and exit status 1.
- **Shutdown**: stdin's end, SIGTERM or SIGINT cancel every unfinished task (their sessions are
  interrupted, the daemon keeps their history), let go of the daemon (stopping it when it ran in
  this process), and exit 0.

Secrets: ``secrets.get`` is our one request to the extension; its value lives in memory for the
call that needed it (a model test, the judge), never in a log, a file or a message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import logging.handlers
import os
import selectors
import signal
import stat
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final

from bridge.desiide.connection import Answer, Call, Closed, DesiideConnection, ReverseResult
from bridge.desiide.daemon_link import DaemonLink
from bridge.desiide.errors import SECRET_MISSING, DesiideError
from bridge.desiide.handlers import Handlers
from bridge.desiide.lifecycle.types import LifecycleError
from bridge.desiide.orchestrator import Orchestrator, lifecycle_error
from bridge.desiide.schema.methods import SecretsGetParams, SecretsGetResult
from bridge.logs import JsonFormatter, RedactionFilter, configure_logging
from bridge.tasks import TaskSet, race

__all__ = ["LOG_FILE", "run_orchestrator", "serve"]

logger = logging.getLogger(__name__)

LOG_FILE: Final = "orchestrator.log"
LOG_FILE_BYTES: Final = 5 * 1024 * 1024
LOG_FILE_BACKUPS: Final = 3
READ_SIZE: Final = 65536
STDIN_FD: Final = 0
SECRET_TIMEOUT: Final = 60.0


class _Secrets:
    """``secrets.get`` as an awaitable: our request out, the extension's answer back."""

    def __init__(self, conn: DesiideConnection, write: Callable[[bytes], None]) -> None:
        self._conn = conn
        self._write = write
        self._waiting: dict[int, asyncio.Future[ReverseResult]] = {}

    async def get(self, ref: str) -> str | None:
        """The value of ``secret:<name>`` in the editor's SecretStorage; None when unset.

        Raises:
            DesiideError: SecretMissing when the extension does not answer or refuses.
        """
        request_id, data = self._conn.request("secrets.get", SecretsGetParams(ref=ref))
        waiter = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = waiter
        self._write(data)
        try:
            answer = await asyncio.wait_for(waiter, SECRET_TIMEOUT)
        except TimeoutError:
            raise DesiideError(
                SECRET_MISSING, f"the editor did not answer secrets.get for {ref}"
            ) from None
        finally:
            self._waiting.pop(request_id, None)
        if answer.error is not None or not isinstance(answer.result, SecretsGetResult):
            raise DesiideError(SECRET_MISSING, f"the editor could not read {ref}")
        value = answer.result.value
        return value.get_secret_value() if value is not None else None

    def answered(self, result: ReverseResult) -> None:
        waiter = self._waiting.get(result.request_id)
        if waiter is not None and not waiter.done():
            waiter.set_result(result)


async def serve(
    home: Path,
    reader: asyncio.StreamReader,
    write: Callable[[bytes], None],
    *,
    open_link: Callable[[bool], Awaitable[DaemonLink]] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve one editor until stdin ends or `stop` is set; then shut down cleanly."""
    conn = DesiideConnection()
    started = time.monotonic()

    def notify(method: str, params: dict[str, Any]) -> None:
        try:
            write(conn.notify(method, params))
        except (TypeError, ValueError):
            logger.exception("! a %s notification could not be written", method)

    async def default_link(start: bool) -> DaemonLink:
        roots = conn.workspace_roots
        return await DaemonLink.open(home, start=start, extra_roots=roots[:1])

    orchestrator = Orchestrator(home=home, notify=notify, open_link=open_link or default_link)
    secrets = _Secrets(conn, write)
    handlers = Handlers(home, orchestrator, secrets, started)
    calls = TaskSet("desiide requests")
    stop = stop if stop is not None else asyncio.Event()

    async def answer(call: Call) -> None:
        if orchestrator.workspace is None and conn.workspace_roots:
            orchestrator.workspace = Path(conn.workspace_roots[0])
        orchestrator.start()
        try:
            result = await handlers.handle(call.method, call.params)
            data = conn.result(call.request_id, result)
        except DesiideError as exc:
            data = conn.error_for(call.request_id, exc)
        except LifecycleError as exc:
            data = conn.error_for(call.request_id, lifecycle_error(exc))
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("! %s failed", call.method)
            data = conn.internal_error(call.request_id)
        write(data)

    try:
        while True:
            # The read first: bytes read in the same instant as a stop are not dropped.
            won = await race(reader.read(READ_SIZE), stop.wait())
            if won is None or won[0] == 1:
                logger.info("stopping on a signal")
                break
            data = won[1]
            events = conn.feed(data) if data else conn.feed_eof()
            closed = False
            for event in events:
                match event:
                    case Answer():
                        write(event.data)
                    case Call():
                        calls.spawn(answer(event), f"desiide {event.method}")
                    case ReverseResult():
                        secrets.answered(event)
                    case Closed():
                        logger.info("the editor's connection ended (%s)", event.reason)
                        closed = True
            if closed:
                break
    finally:
        await calls.close(timeout=5)
        await orchestrator.shutdown()
        logger.info("orchestrator stopped after %.1f s", time.monotonic() - started)


def _configure_logs(log_dir: Path | None, level: str) -> None:
    configure_logging(level, "json")
    if log_dir is None:
        return
    log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = log_dir / LOG_FILE
    handler = logging.handlers.RotatingFileHandler(
        path, maxBytes=LOG_FILE_BYTES, backupCount=LOG_FILE_BACKUPS, encoding="utf-8"
    )
    with contextlib.suppress(OSError):
        os.chmod(path, 0o600)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RedactionFilter())
    logging.getLogger().addHandler(handler)


def _pollable(fd: int) -> bool:
    """Whether the event loop can wait on `fd`: a pipe, a socket or a terminal can, a regular
    file or ``/dev/null`` cannot (epoll refuses them), nor a closed descriptor."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)):
        return False
    with selectors.DefaultSelector() as selector:
        try:
            selector.register(fd, selectors.EVENT_READ)
        except (OSError, ValueError):
            return False
    return True


async def _read_file(fd: int, reader: asyncio.StreamReader) -> bool:
    """Feed `reader` from a descriptor the loop cannot poll, read in a thread (a regular file's
    reads never wait for a writer, so the thread always ends); then EOF. False when stdin could
    not be read (said in one line)."""
    try:
        while data := await asyncio.to_thread(os.read, fd, READ_SIZE):
            reader.feed_data(data)
    except OSError as exc:
        logger.error(
            "! stdin cannot be read (%s): run codedeck-bridge desiide with the editor's pipe, "
            "a file or /dev/null as stdin",
            exc.strerror or type(exc).__name__,
        )
        return False
    finally:
        reader.feed_eof()
    return True


async def _stdio(home: Path) -> bool:
    """Serve on stdin/stdout; False when stdin could not be read."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 22)
    # A pipe (how the editor forks us) is read by the loop; anything else it cannot wait on (a
    # file, /dev/null) is read in a thread, and its end is EOF as for a closed pipe.
    stdin_reads = TaskSet("desiide stdin", logger=logger)
    file_read: asyncio.Task[bool] | None = None
    if _pollable(STDIN_FD):
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(STDIN_FD, "rb", closefd=False)
        )
    else:
        file_read = stdin_reads.spawn(_read_file(STDIN_FD, reader), "desiide stdin")
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    # Nothing else may write to fd 1 from now on: a stray print would corrupt a frame.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)

    def write(data: bytes) -> None:
        out.write(data)

    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        await serve(home, reader, write, stop=stop)
    finally:
        out.close()
        if file_read is not None and not file_read.done():
            await stdin_reads.close(timeout=1.0)  # stopped on a signal before the file's end
    if file_read is None or not file_read.done() or file_read.cancelled():
        return True
    return file_read.result()


def run_orchestrator(home: Path, log_dir: Path | None, level: str = "INFO") -> int:
    """The ``desiide`` command: serve the editor on stdio until it closes; the exit code."""
    try:
        os.fstat(STDIN_FD)
    except OSError:
        # A closed stdin has nothing to read: /dev/null in its place is its EOF, and keeps fd 0
        # from being taken by the next file opened (a log file, the event loop's own).
        os.open(os.devnull, os.O_RDONLY)
    _configure_logs(log_dir, level)
    logger.info("Desiide orchestrator for %s", home)
    with contextlib.suppress(KeyboardInterrupt):
        if not asyncio.run(_stdio(home)):
            return 1
    return 0
