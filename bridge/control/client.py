"""The CLI's side of the control socket: connect, initialize, call.

`ControlClient.connect(home)` connects to ``<home>/control.sock`` *and* performs the
``initialize`` handshake, so a client object is always usable (nothing can call a method on an
uninitialised connection). Calls are sequential, one at a time, each with a timeout; after a
timeout or a broken stream the client refuses further calls, because a late answer could
otherwise be taken for the next call's.

Every failure is a `ControlError` whose message is one line a user can act on: no daemon
(`DaemonNotRunning`, also for a socket left by a daemon that died), a version mismatch
(`ProtocolMismatchError`), or the daemon's refusal (`RemoteError`, with its JSON-RPC code).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Final, cast

from bridge import __version__
from bridge.control.connection import ClientConnection, mismatch_message, version_major
from bridge.control.framing import FramingError
from bridge.control.methods import (
    CONTROL_PROTOCOL_VERSION,
    PairNpubResult,
    PairOpenResult,
    PairWaitResult,
    PhoneInfo,
    SessionInfo,
    SessionsCloseResult,
    StatusResult,
    UnpairResult,
)
from bridge.control.rpc import PROTOCOL_MISMATCH, ErrorResponse, ResponseError
from bridge.control.server import control_socket_path
from store.home import blocking_file, not_a_directory_message

__all__ = [
    "CONNECT_TIMEOUT",
    "DEFAULT_CALL_TIMEOUT",
    "ControlClient",
    "ControlError",
    "DaemonNotRunning",
    "ProtocolMismatchError",
    "RemoteError",
    "not_running_message",
]

CONNECT_TIMEOUT: Final = 5.0
DEFAULT_CALL_TIMEOUT: Final = 30.0
_WAIT_MARGIN: Final = 15.0  # pair.wait may take its full timeout plus the daemon's own work
_READ_SIZE: Final = 65536
_START_HINT: Final = (
    "start it with `codedeck-bridge run` or `systemctl --user start codedeck-bridge`"
)


class ControlError(Exception):
    """Talking to the daemon failed; the message is one line that says what to do."""


def not_running_message(
    home: Path, socket_path: Path, *, stale: bool, run_command: str = "codedeck-bridge run"
) -> str:
    """ "No daemon" in one line, with how to start one (``run_command`` may carry ``--home``)."""
    detail = f" (its control socket {socket_path} is left over from a daemon that stopped)"
    return (
        f"no codedeck-bridge is running for {home}{detail if stale else ''}; start it with "
        f"`{run_command}` or `systemctl --user start codedeck-bridge`"
    )


class DaemonNotRunning(ControlError):
    """No daemon listens on the home's control socket.

    Attributes:
        home: the bridge home.
        socket_path: the control socket's path.
        stale: True when a socket file exists but nothing accepts on it (a daemon died).
    """

    def __init__(self, home: Path, socket_path: Path, *, stale: bool) -> None:
        super().__init__(not_running_message(home, socket_path, stale=stale))
        self.home = home
        self.socket_path = socket_path
        self.stale = stale


class RemoteError(ControlError):
    """The daemon answered with an error.

    Attributes:
        code: the JSON-RPC error code (see `bridge.control.rpc`).
    """

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class ProtocolMismatchError(RemoteError):
    """The daemon speaks another major version of the control protocol."""


class ControlClient:
    """A connected, initialised control connection. Create it with `connect`.

    Attributes:
        socket_path: the socket it is connected to.
        server: the daemon's ``{name, version}`` from ``initialize``.
        protocol_version: the daemon's control protocol version.
    """

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, socket_path: Path
    ) -> None:
        self.socket_path = socket_path
        self.server: Mapping[str, str] = {}
        self.protocol_version = ""
        self._reader = reader
        self._writer = writer
        self._conn = ClientConnection()
        self._lock = asyncio.Lock()
        self._broken: str | None = None

    def __repr__(self) -> str:
        return f"<ControlClient {self.socket_path} server={dict(self.server)!r}>"

    @classmethod
    async def connect(
        cls,
        home: str | os.PathLike[str],
        *,
        timeout: float = CONNECT_TIMEOUT,
        client_name: str = "codedeck-bridge-cli",
        client_version: str = __version__,
    ) -> ControlClient:
        """Connect to the daemon of ``home`` and initialise the connection.

        Raises:
            DaemonNotRunning: no socket, or nothing accepts on it.
            ProtocolMismatchError: the daemon speaks another major version.
            ControlError: anything else (permissions, timeout, a garbled answer).
        """
        home_path = Path(home).expanduser().absolute()
        return await cls.connect_socket(
            control_socket_path(home_path),
            home=home_path,
            timeout=timeout,
            client_name=client_name,
            client_version=client_version,
        )

    @classmethod
    async def connect_socket(
        cls,
        path: str | os.PathLike[str],
        *,
        home: Path | None = None,
        timeout: float = CONNECT_TIMEOUT,
        client_name: str = "codedeck-bridge-cli",
        client_version: str = __version__,
    ) -> ControlClient:
        """Like `connect`, for an explicit socket path (``home`` only improves messages)."""
        socket_path = Path(path)
        home = home if home is not None else socket_path.parent
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_unix_connection(str(socket_path))
        except FileNotFoundError:
            raise DaemonNotRunning(home, socket_path, stale=False) from None
        except ConnectionRefusedError:
            raise DaemonNotRunning(home, socket_path, stale=True) from None
        except PermissionError:
            raise ControlError(
                f"cannot connect to {socket_path}: permission denied; run this command as the "
                "user that runs the daemon"
            ) from None
        except TimeoutError:
            raise ControlError(
                f"the daemon did not accept a connection on {socket_path} within {timeout:g} s; "
                "it may be overloaded or stuck (check its log)"
            ) from None
        except NotADirectoryError:
            blocker = blocking_file(socket_path.parent)
            if blocker is None:
                raise ControlError(f"cannot connect to {socket_path}: not a directory") from None
            raise ControlError(not_a_directory_message(home, blocker)) from None
        except OSError as exc:
            raise ControlError(f"cannot connect to {socket_path}: {exc.strerror or exc}") from None
        client = cls(reader, writer, socket_path)
        try:
            await client._initialize(client_name, client_version, timeout)
        except BaseException:
            await client.close()
            raise
        return client

    async def _initialize(self, name: str, version: str, timeout: float) -> None:
        params = {
            "protocolVersion": CONTROL_PROTOCOL_VERSION,
            "client": {"name": name, "version": version},
        }
        try:
            result = await self.call("initialize", params, timeout=timeout)
        except RemoteError as exc:
            if exc.code == PROTOCOL_MISMATCH:
                raise ProtocolMismatchError(exc.code, str(exc)) from None
            raise
        server_version = result.get("protocolVersion") if isinstance(result, dict) else None
        if not isinstance(server_version, str) or version_major(server_version) is None:
            raise ControlError(
                "the daemon's initialize answer is malformed; update codedeck-bridge"
            )
        if version_major(server_version) != version_major(CONTROL_PROTOCOL_VERSION):
            raise ProtocolMismatchError(
                PROTOCOL_MISMATCH, mismatch_message(server_version, CONTROL_PROTOCOL_VERSION)
            )
        server = result.get("server")
        if isinstance(server, dict):
            self.server = {k: v for k, v in server.items() if isinstance(v, str)}
        self.protocol_version = server_version

    async def __aenter__(self) -> ControlClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection. Idempotent."""
        self._broken = self._broken or "the connection was closed"
        self._writer.close()
        with contextlib.suppress(OSError, TimeoutError):
            await asyncio.wait_for(self._writer.wait_closed(), 1.0)

    async def call(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = DEFAULT_CALL_TIMEOUT,
    ) -> Any:
        """Call ``method`` and return its result.

        Cancel-safety: cancelling a call (Ctrl-C) leaves the client unusable; close it.

        Raises:
            RemoteError: the daemon answered with an error (its message is for the user).
            ControlError: timeout, connection lost, or a garbled answer.
        """
        async with self._lock:
            if self._broken is not None:
                raise ControlError(f"cannot call {method}: {self._broken}")
            self._broken = "an earlier call did not complete"
            try:
                async with asyncio.timeout(timeout):
                    result = await self._exchange(method, params or {})
            except TimeoutError:
                self._broken = "an earlier call timed out"
                raise ControlError(
                    f"the daemon did not answer {method} within {timeout:g} s; it may be "
                    "overloaded or stuck (check its log)"
                ) from None
            except (ConnectionError, OSError):
                self._broken = "the connection was lost"
                raise ControlError(
                    f"the connection to the daemon was lost during {method} "
                    "(it may have stopped; check `codedeck-bridge status`)"
                ) from None
            except (FramingError, ResponseError) as exc:
                self._broken = "the daemon's answers are garbled"
                raise ControlError(
                    f"the daemon's answer to {method} is garbled ({exc}); "
                    "make sure the command and the daemon are the same version"
                ) from None
            except RemoteError:
                self._broken = None
                raise
            self._broken = None
            return result

    async def _exchange(self, method: str, params: Mapping[str, Any]) -> Any:
        request_id, data = self._conn.request(method, params)
        self._writer.write(data)
        await self._writer.drain()
        while True:
            chunk = await self._reader.read(_READ_SIZE)
            if not chunk:
                raise ConnectionResetError("the daemon closed the connection")
            for response in self._conn.receive_data(chunk):
                if isinstance(response, ErrorResponse):
                    if response.id in (request_id, None):
                        raise RemoteError(response.code, response.message)
                    continue
                if response.id == request_id:
                    return response.result
                # An answer to an earlier, abandoned request cannot happen (the client refuses
                # to continue after one); ignore rather than misattribute it.

    # --- typed wrappers ---------------------------------------------------------------------

    async def status(self) -> StatusResult:
        return cast(StatusResult, await self.call("status"))

    async def pair_open(self, duration: float | None = None) -> PairOpenResult:
        params = {} if duration is None else {"duration": duration}
        return cast(PairOpenResult, await self.call("pair.open", params))

    async def pair_wait(self, timeout: float) -> PairWaitResult:
        result = await self.call("pair.wait", {"timeout": timeout}, timeout=timeout + _WAIT_MARGIN)
        return cast(PairWaitResult, result)

    async def pair_npub(self, npub: str, label: str = "") -> PairNpubResult:
        params = {"npub": npub, "label": label} if label else {"npub": npub}
        return cast(PairNpubResult, await self.call("pair.npub", params))

    async def phones_list(self) -> list[PhoneInfo]:
        return cast(list[PhoneInfo], await self.call("phones.list"))

    async def phones_unpair(self, npub: str) -> UnpairResult:
        return cast(UnpairResult, await self.call("phones.unpair", {"npub": npub}))

    async def sessions_list(self) -> list[SessionInfo]:
        return cast(list[SessionInfo], await self.call("sessions.list"))

    async def sessions_close(self, session_id: str | None = None) -> SessionsCloseResult:
        """Close `session_id`, or every session when it is None (control protocol 1.1)."""
        params: dict[str, Any] = {"all": True} if session_id is None else {"session_id": session_id}
        return cast(SessionsCloseResult, await self.call("sessions.close", params))
