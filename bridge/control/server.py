"""The daemon's side of the control socket: ``<home>/control.sock``, served on asyncio.

Security: the socket file has mode 0600 inside the 0700 home, and every connection's peer
credentials (``SO_PEERCRED``) must be our own uid (or root's), so only the user who runs the
daemon can drive it. Why bind-then-rename instead of changing the umask around ``bind``: the
umask is process-wide, and the daemon has other threads (the store's, the executor's) that may
create files or directories at that moment. So the socket is bound under a temporary name in the
private home, chmod-ed to 0600, and renamed over ``control.sock``: the final path never exists
with any other mode. ``asyncio.start_unix_server(path=…)`` is not used because it silently
unlinks whatever socket is at the path, including a live daemon's.

A socket file left by a daemon that died (``kill -9``) is replaced only after a connection
attempt was refused; if something answers, start-up fails instead. At `close()` the file is
removed only if it is still the one this server created.

Each connection gets one task (owned by the server's :class:`~bridge.tasks.TaskSet`, cancelled
by `close()`) with two children:
a reader feeding the sans-I/O `ServerConnection`, and a worker answering its events strictly in
order, one handler call at a time. The reader keeps reading during a call so that it sees the
client go away: a waiting call (``pair.wait``) is cancelled then, other calls finish and their
answer is dropped. Queued events are bounded, so a client that floods requests is slowed down
(backpressure), not buffered without limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import secrets
import socket
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Final, assert_never

from bridge import __version__
from bridge.control.connection import Call, Close, ConnectionState, Reply, ServerConnection
from bridge.control.framing import MAX_BODY_BYTES, encode_frame
from bridge.control.methods import ControlHandler, HandlerError
from bridge.control.rpc import REQUEST_FAILED, serialize_error
from bridge.peercred import peer_allowed
from bridge.tasks import TaskSet

__all__ = [
    "CONTROL_SOCKET_NAME",
    "SOCKET_MODE",
    "ControlServer",
    "ControlSocketError",
    "control_socket_path",
]

logger = logging.getLogger(__name__)

CONTROL_SOCKET_NAME: Final = "control.sock"
SOCKET_MODE: Final = 0o600
_SUN_PATH_MAX: Final = 107  # sizeof(sun_path) - 1 on Linux
_READ_SIZE: Final = 65536
_MAX_PENDING_EVENTS: Final = 16
_PROBE_TIMEOUT: Final = 2.0
_CLOSE_WAIT: Final = 1.0


class ControlSocketError(Exception):
    """The control socket cannot be served; the message says why and what to do."""


def control_socket_path(home: str | os.PathLike[str]) -> Path:
    """``<home>/control.sock`` (``~`` expanded, made absolute)."""
    return Path(home).expanduser().absolute() / CONTROL_SOCKET_NAME


async def _answers(path: Path) -> bool:
    """Whether something accepts connections on the unix socket at ``path``."""
    try:
        async with asyncio.timeout(_PROBE_TIMEOUT):
            _, writer = await asyncio.open_unix_connection(str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        return False
    except TimeoutError:
        return True  # a listener whose backlog is full is still alive
    except OSError as exc:
        if exc.errno == errno.EAGAIN:
            return True
        raise ControlSocketError(
            f"cannot check the control socket {path}: {exc.strerror or exc}"
        ) from None
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


class ControlServer:
    """Serve the control API on a unix socket.

    Args:
        path: the socket path (normally `control_socket_path(home)`); its directory must exist
            and be private.
        handler: the daemon's `ControlHandler`.
        server_version: reported to clients in the ``initialize`` result.
        max_connections: connections served at once; more are answered "too many" and closed.
        handshake_timeout: seconds a connection may take to send ``initialize``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        handler: ControlHandler,
        *,
        server_version: str = __version__,
        max_connections: int = 32,
        handshake_timeout: float = 30.0,
        max_body: int = MAX_BODY_BYTES,
    ) -> None:
        self.path = Path(path).absolute()
        self._handler = handler
        self._server_version = server_version
        self._max_connections = max_connections
        self._handshake_timeout = handshake_timeout
        self._max_body = max_body
        self._server: asyncio.Server | None = None
        self._identity: tuple[int, int] | None = None  # (st_dev, st_ino) of our socket file
        self._tasks = TaskSet("control socket", logger=logger)
        self._closing = False

    def __repr__(self) -> str:
        state = "closed" if self._closing else "serving" if self._server else "new"
        return f"<ControlServer {self.path} {state} connections={len(self._tasks)}>"

    @property
    def connections(self) -> int:
        """Connections being served now."""
        return len(self._tasks)

    async def __aenter__(self) -> ControlServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Bind the socket (mode 0600) and start accepting.

        Raises:
            ControlSocketError: the path is too long, is taken by a live daemon or by something
                that is not a socket, or cannot be created.
        """
        if self._server is not None or self._closing:
            raise ControlSocketError("the control server was already started")
        path = self.path
        if len(os.fsencode(path)) > _SUN_PATH_MAX:
            raise ControlSocketError(
                f"the control socket path {path} is longer than unix sockets allow "
                f"({_SUN_PATH_MAX} bytes): use a shorter --home"
            )
        await self._clear_stale(path)
        sock = self._bind(path)
        try:
            self._server = await asyncio.start_unix_server(self._on_client, sock=sock)
        except BaseException:
            sock.close()
            self._remove_socket_file()
            raise
        logger.info("control socket listening on %s", path)

    async def _clear_stale(self, path: Path) -> None:
        try:
            info = path.lstat()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise ControlSocketError(f"cannot inspect {path}: {exc.strerror}") from None
        if not stat.S_ISSOCK(info.st_mode):
            raise ControlSocketError(
                f"{path} exists and is not a socket: move it away so the daemon can create "
                "its control socket there"
            )
        if await _answers(path):
            raise ControlSocketError(
                f"another process answers on the control socket {path}: another "
                "codedeck-bridge seems to use this home; stop it first, or use --home"
            )
        logger.info("replacing the stale control socket %s (no daemon answered on it)", path)

    def _bind(self, path: Path) -> socket.socket:
        temporary = path.parent / f".ctl{secrets.token_hex(4)}"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(str(temporary))
            try:
                os.chmod(temporary, SOCKET_MODE)
                sock.listen(64)
                sock.setblocking(False)
                os.replace(temporary, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    temporary.unlink()
                raise
            info = path.lstat()
            self._identity = (info.st_dev, info.st_ino)
        except OSError as exc:
            sock.close()
            raise ControlSocketError(
                f"cannot create the control socket {path}: {exc.strerror or exc}"
            ) from None
        except BaseException:
            sock.close()
            raise
        return sock

    async def close(self) -> None:
        """Stop accepting, cancel every connection and wait for them, remove the socket file.

        Idempotent. Clients connected at that moment see their connection closed (a client
        waiting for an answer gets a "connection closed" error).
        """
        if self._closing:
            return
        self._closing = True
        server, self._server = self._server, None
        if server is not None:
            server.close()
        await self._tasks.close()
        if server is not None:
            await server.wait_closed()
        self._remove_socket_file()
        logger.debug("x control socket %s closed", self.path)

    def _remove_socket_file(self) -> None:
        """Unlink the socket only if it is still ours (a successor may have replaced it)."""
        identity, self._identity = self._identity, None
        if identity is None:
            return
        try:
            info = self.path.lstat()
        except OSError:
            return
        if (info.st_dev, info.st_ino) == identity:
            with contextlib.suppress(OSError):
                self.path.unlink()

    def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Accept a connection: refuse it at once, or hand it to a task the server owns.

        A plain callback rather than a coroutine: asyncio would run a coroutine in a task of its
        own that `close()` could not own (and Python 3.11 logs a spurious error when such a
        task ends cancelled).
        """
        if self._closing:
            writer.close()
            return
        if not peer_allowed(writer):
            logger.warning("refused a control connection from another user")
            writer.close()
            return
        if len(self._tasks) >= self._max_connections:
            logger.warning("refused a control connection: %d already open", len(self._tasks))
            message = (
                f"too many control connections ({self._max_connections}); "
                "close other codedeck-bridge commands and retry"
            )
            writer.write(encode_frame(serialize_error(None, REQUEST_FAILED, message)))
            writer.close()
            return
        if self._tasks.spawn(self._serve_client(reader, writer), "control connection") is None:
            writer.close()

    async def _serve_client(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            await _Connection(self, reader, writer).run()
        except* (ConnectionError, TimeoutError):
            logger.debug("! control connection lost")
        except* Exception:
            logger.exception("control connection failed")
        finally:
            writer.close()
            with contextlib.suppress(OSError, TimeoutError):
                await asyncio.wait_for(writer.wait_closed(), _CLOSE_WAIT)


class _Connection:
    """One client: a reader and a worker around a `ServerConnection` (see the module docstring)."""

    def __init__(
        self, server: ControlServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self._server = server
        self._reader = reader
        self._writer = writer
        self._conn = ServerConnection(
            server_name="codedeck-bridge",
            server_version=server._server_version,
            max_body=server._max_body,
        )
        self._events: asyncio.Queue[Call | Reply | Close] = asyncio.Queue(_MAX_PENDING_EVENTS)
        self._inflight: asyncio.Task[Any] | None = None
        self._inflight_cancellable = False
        self._gone = False

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self._read_loop())
            group.create_task(self._work_loop())

    async def _read_loop(self) -> None:
        deadline = asyncio.get_running_loop().time() + self._server._handshake_timeout
        while True:
            try:
                data = await self._read(deadline)
            except TimeoutError:
                logger.debug("- control client did not initialize in time")
                events = self._conn.handshake_timeout()
            else:
                if data:
                    events = self._conn.receive_data(data)
                else:
                    self._client_gone()
                    events = self._conn.receive_eof()
            for event in events:
                await self._events.put(event)
            if self._conn.state is ConnectionState.CLOSED:
                return

    async def _read(self, handshake_deadline: float) -> bytes:
        """The next bytes (b"" at EOF or reset); TimeoutError past the handshake deadline."""
        try:
            if self._conn.state is ConnectionState.AWAITING_INITIALIZE:
                async with asyncio.timeout_at(handshake_deadline):
                    return await self._reader.read(_READ_SIZE)
            return await self._reader.read(_READ_SIZE)
        except ConnectionError:
            return b""

    def _client_gone(self) -> None:
        self._gone = True
        if self._inflight is None:
            return
        if self._inflight_cancellable:
            logger.debug("x control client left during %s: cancelled", self._inflight.get_name())
            self._inflight.cancel()
        else:
            logger.debug("x control client left during %s: finishing it", self._inflight.get_name())

    async def _send(self, data: bytes) -> None:
        if not self._gone:
            self._writer.write(data)
            await self._writer.drain()

    async def _work_loop(self) -> None:
        while True:
            event = await self._events.get()
            match event:
                case Close():
                    if event.data is not None:
                        await self._send(event.data)
                    return
                case Reply():
                    await self._send(event.data)  # nothing is sent once the client is gone
                case Call():
                    if self._gone:
                        continue
                    answer = await self._call(event)
                    if answer is not None:
                        await self._send(answer)
                case _:
                    assert_never(event)

    async def _call(self, call: Call) -> bytes | None:
        name = call.spec.name
        logger.debug("< control %s (id %r)", name, call.request_id)
        try:
            method: Callable[..., Awaitable[Any]] | None = call.spec.bind(self._server._handler)
        except AttributeError:
            method = None
        if method is None:
            logger.error("the control handler has no method %s", call.spec.attribute)
            return self._conn.internal_error(call.request_id)
        task = asyncio.create_task(_invoke(method, call.kwargs), name=f"control {name}")
        self._inflight, self._inflight_cancellable = task, call.spec.cancel_on_disconnect
        if self._gone and self._inflight_cancellable:
            task.cancel()
        try:
            await asyncio.wait({task})
        finally:
            self._inflight = None
            if not task.done():  # we are being cancelled: the call goes with us
                task.cancel()
                await asyncio.wait({task})
        if task.cancelled():
            if self._gone:
                logger.debug("x control %s cancelled: the client went away", name)
                return None
            logger.error("control method %s was cancelled unexpectedly", name)
            return self._conn.internal_error(call.request_id)
        error = task.exception()
        if isinstance(error, HandlerError):
            logger.debug("! control %s refused: %s", name, error)
            return self._conn.error(call.request_id, error.code, str(error))
        if error is not None:
            logger.error("control method %s failed", name, exc_info=error)
            return self._conn.internal_error(call.request_id)
        try:
            answer = self._conn.result(call.request_id, task.result())
        except (TypeError, ValueError, RecursionError):
            logger.exception("control method %s returned a result that is not JSON", name)
            return self._conn.internal_error(call.request_id)
        logger.debug("> control %s (id %r) answered", name, call.request_id)
        return answer


async def _invoke(method: Callable[..., Awaitable[Any]], kwargs: dict[str, Any]) -> Any:
    """Await the handler inside the call's task, so that even a non-coroutine mistake is caught."""
    return await method(**kwargs)
