"""The control client's errors: no daemon, stale socket, mismatch, timeouts, garbled answers."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from bridge.control import (
    CONTROL_PROTOCOL_VERSION,
    PROTOCOL_MISMATCH,
    ControlClient,
    ControlError,
    ControlServer,
    DaemonNotRunning,
    FrameDecoder,
    ProtocolMismatchError,
    control_socket_path,
    encode_frame,
)
from tests.control.fake_handler import FakeHandler

Responder = Callable[[dict[str, object]], Awaitable[bytes | None]]


@asynccontextmanager
async def scripted_daemon(home: Path, respond: Responder) -> AsyncIterator[None]:
    """A fake daemon on the home's socket that answers each request with ``respond(request)``
    (None: close the connection)."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = FrameDecoder()
        try:
            while chunk := await reader.read(65536):
                for body in decoder.feed(chunk):
                    answer = await respond(json.loads(body))
                    if answer is None:
                        return
                    writer.write(answer)
                    await writer.drain()
        finally:
            writer.close()

    server = await asyncio.start_unix_server(serve, path=str(control_socket_path(home)))
    try:
        yield
    finally:
        server.close()
        await server.wait_closed()


def result(request: dict[str, object], value: object) -> bytes:
    body = {"jsonrpc": "2.0", "id": request["id"], "result": value}
    return encode_frame(json.dumps(body).encode())


async def test_no_socket_means_no_daemon(home: Path) -> None:
    with pytest.raises(DaemonNotRunning) as info:
        await ControlClient.connect(home)
    assert not info.value.stale
    assert str(info.value) == (
        f"no codedeck-bridge is running for {home}; start it with `codedeck-bridge run` or "
        "`systemctl --user start codedeck-bridge`"
    )


async def test_a_stale_socket_means_no_daemon(home: Path) -> None:
    path = control_socket_path(home)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()
    with pytest.raises(DaemonNotRunning) as info:
        await ControlClient.connect(home)
    assert info.value.stale
    assert f"its control socket {path} is left over from a daemon that stopped" in str(info.value)


async def test_a_daemon_of_another_major_is_refused_by_the_client(home: Path) -> None:
    async def respond(request: dict[str, object]) -> bytes:
        return result(
            request, {"protocolVersion": "2.1.0", "server": {"name": "x", "version": "9"}}
        )

    async with scripted_daemon(home, respond):
        with pytest.raises(ProtocolMismatchError) as info:
            await ControlClient.connect(home)
    assert info.value.code == PROTOCOL_MISMATCH
    assert (
        f"daemon speaks control protocol 2.1.0, this command speaks {CONTROL_PROTOCOL_VERSION}"
        in str(info.value)
    )


@pytest.mark.parametrize("answer", [None, [], {"protocolVersion": "one"}, {"server": {}}])
async def test_a_malformed_initialize_answer(home: Path, answer: object) -> None:
    async def respond(request: dict[str, object]) -> bytes:
        return result(request, answer)

    async with scripted_daemon(home, respond):
        with pytest.raises(ControlError, match="initialize answer is malformed"):
            await ControlClient.connect(home)


async def test_garbled_bytes(home: Path) -> None:
    async def respond(request: dict[str, object]) -> bytes:
        return b"HTTP/1.1 400 Bad Request\r\n\r\n"

    async with scripted_daemon(home, respond):
        with pytest.raises(ControlError, match="answer to initialize is garbled"):
            await ControlClient.connect(home)


async def test_a_daemon_that_hangs_up(home: Path) -> None:
    async def respond(request: dict[str, object]) -> None:
        return None

    async with scripted_daemon(home, respond):
        with pytest.raises(
            ControlError, match="connection to the daemon was lost during initialize"
        ):
            await ControlClient.connect(home)


async def test_a_daemon_that_never_answers(home: Path) -> None:
    never = asyncio.Event()

    async def respond(request: dict[str, object]) -> bytes:
        await never.wait()
        return b""

    async with scripted_daemon(home, respond):
        with pytest.raises(ControlError, match=r"did not answer initialize within 0\.2 s"):
            await ControlClient.connect(home, timeout=0.2)
        never.set()


async def test_after_a_timeout_the_client_refuses_further_calls(home: Path) -> None:
    handler = FakeHandler()
    handler.block_status = True
    async with ControlServer(control_socket_path(home), handler):
        client = await ControlClient.connect(home)
        with pytest.raises(ControlError, match=r"did not answer status within 0\.2 s"):
            await client.call("status", timeout=0.2)
        with pytest.raises(
            ControlError, match=r"cannot call phones\.list: an earlier call timed out"
        ):
            await client.phones_list()
        await client.close()
        handler.block.set()
        with pytest.raises(ControlError, match="cannot call status"):
            await client.status()


async def test_a_remote_error_leaves_the_client_usable(home: Path) -> None:
    async with (
        ControlServer(control_socket_path(home), FakeHandler()),
        await ControlClient.connect(home) as client,
    ):
        with pytest.raises(ControlError, match="method not found"):
            await client.call("shutdown")
        assert await client.phones_list() == []
        assert "token" not in repr(client)
