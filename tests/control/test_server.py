"""The control server over a real unix socket in a temporary home, with a fake handler."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import socket
import stat
import struct
from pathlib import Path
from typing import Any

import pytest

from bridge.control import (
    CONTROL_PROTOCOL_VERSION,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    NOT_INITIALIZED,
    PROTOCOL_MISMATCH,
    REQUEST_FAILED,
    ControlClient,
    ControlError,
    ControlServer,
    ControlSocketError,
    FrameDecoder,
    RemoteError,
    control_socket_path,
    encode_frame,
)
from bridge.nostr.keys import Keypair
from bridge.peercred import peer_allowed
from tests.control.fake_handler import FakeHandler, RefusingHandler

PHONE = Keypair.from_secret("02" * 32)
INIT = {"protocolVersion": CONTROL_PROTOCOL_VERSION, "client": {"name": "raw", "version": "1"}}


class Raw:
    """A bare socket client that speaks frames, for protocol-level checks."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.decoder = FrameDecoder()
        self.pending: list[dict[str, Any]] = []

    @classmethod
    async def open(cls, path: Path) -> Raw:
        return cls(*await asyncio.open_unix_connection(str(path)))

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def request(self, method: str, params: Any = None, request_id: Any = 1) -> None:
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}
        await self.send(encode_frame(json.dumps(message).encode()))

    async def answer(self) -> dict[str, Any]:
        while not self.pending:
            chunk = await asyncio.wait_for(self.reader.read(65536), 10)
            if not chunk:
                raise EOFError
            self.pending += [json.loads(body) for body in self.decoder.feed(chunk)]
        return self.pending.pop(0)

    async def at_eof(self) -> bool:
        return await asyncio.wait_for(self.reader.read(65536), 10) == b""

    async def initialize(self) -> None:
        await self.request("initialize", INIT, 0)
        assert "result" in await self.answer()

    def close(self) -> None:
        self.writer.close()


async def test_the_socket_is_private_and_removed_at_close(home: Path, handler: FakeHandler) -> None:
    path = control_socket_path(home)
    server = ControlServer(path, handler)
    await server.start()
    info = path.lstat()
    assert stat.S_ISSOCK(info.st_mode)
    assert stat.S_IMODE(info.st_mode) == 0o600
    assert [p.name for p in home.iterdir()] == ["control.sock"]  # no temporary name left
    await server.close()
    assert not path.exists()
    await server.close()  # idempotent


async def test_start_twice_is_refused(server: ControlServer) -> None:
    with pytest.raises(ControlSocketError, match="already started"):
        await server.start()


async def test_requests_before_initialize_are_refused(server: ControlServer) -> None:
    raw = await Raw.open(server.path)
    await raw.request("status", {}, 1)
    reply = await raw.answer()
    assert reply["error"]["code"] == NOT_INITIALIZED
    await raw.initialize()
    await raw.request("status", {}, 2)
    assert (await raw.answer())["result"]["machine"] == "test-machine"
    raw.close()


async def test_version_mismatch_message_over_the_socket(
    server: ControlServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("bridge.control.client.CONTROL_PROTOCOL_VERSION", "2.0.0")
    with pytest.raises(ControlError) as info:
        await ControlClient.connect(server.path.parent)
    assert isinstance(info.value, RemoteError)
    assert info.value.code == PROTOCOL_MISMATCH
    mismatch = f"speaks control protocol {CONTROL_PROTOCOL_VERSION}, this command speaks 2.0.0"
    assert mismatch in str(info.value)
    assert "update codedeck-bridge" in str(info.value)


async def test_every_method_reaches_the_handler_with_validated_arguments(
    server: ControlServer, handler: FakeHandler
) -> None:
    async with await ControlClient.connect(server.path.parent) as client:
        assert client.server == {"name": "codedeck-bridge", "version": "0.1.0"}
        assert client.protocol_version == CONTROL_PROTOCOL_VERSION
        assert (await client.status())["npub"]
        opened = await client.pair_open(90)
        assert opened["token"] == "00112233445566778899aabbccddeeff"
        handler.end_window("closed")
        assert await client.pair_wait(5) == {"paired": False, "reason": "closed"}
        paired = await client.pair_npub(PHONE.public_hex.upper(), "Pixel")
        assert paired == {"npub": PHONE.npub, "label": "Pixel", "alreadyPaired": False}
        assert [p["npub"] for p in await client.phones_list()] == [PHONE.npub]
        assert (await client.phones_unpair(PHONE.npub))["unpaired"] is True
        assert await client.sessions_list() == [{"sessionId": "s-1", "state": "idle"}]
        with pytest.raises(RemoteError, match="there is no session s-9") as refused:
            await client.sessions_close("s-9")
        assert refused.value.code == REQUEST_FAILED
        assert await client.sessions_close("s-1") == {"closed": ["s-1"]}
        assert await client.sessions_close() == {"closed": []}
    assert handler.calls == [
        ("status", {}),
        ("pair_open", {"duration": 90.0}),
        ("pair_wait", {"timeout": 5.0}),
        ("pair_npub", {"pubkey": PHONE.public_hex, "label": "Pixel"}),
        ("phones_list", {}),
        ("phones_unpair", {"pubkey": PHONE.public_hex}),
        ("sessions_list", {}),
        ("sessions_close", {"session_id": "s-9", "close_all": False}),
        ("sessions_close", {"session_id": "s-1", "close_all": False}),
        ("sessions_close", {"session_id": None, "close_all": True}),
    ]


@pytest.mark.parametrize(
    ("method", "params", "message"),
    [
        ("pair.open", {"duration": "long"}, "duration must be a number of seconds"),
        ("pair.wait", {}, "timeout is required"),
        ("pair.npub", {"npub": "npub1nope"}, "npub is not a valid public key"),
        ("pair.npub", {"npub": PHONE.npub, "label": "\x07"}, "control characters"),
        ("phones.unpair", {"npub": 42}, "npub must be a string"),
        ("status", {"x": 1}, "unknown param(s) x"),
        ("phones.list", {"x": 1}, "unknown param(s) x"),
        ("sessions.list", {"x": 1}, "unknown param(s) x"),
        ("sessions.close", {}, "give either session_id (one session) or all: true"),
        ("sessions.close", {"session_id": "s-1", "all": True}, "give either session_id"),
        ("sessions.close", {"all": False}, "all must be true"),
        ("sessions.close", {"all": 1}, "all must be true"),
        ("sessions.close", {"session_id": ""}, "session_id must be a non-empty string"),
        ("sessions.close", {"session_id": 7}, "session_id must be a non-empty string"),
        ("sessions.close", {"session_id": "x" * 257}, "longer than 256 characters"),
        ("sessions.close", {"session_id": "a\x1bb"}, "must not contain control characters"),
        ("sessions.close", {"all": True, "force": True}, "unknown param(s) force"),
    ],
)
async def test_invalid_params_over_the_socket(
    server: ControlServer, handler: FakeHandler, method: str, params: Any, message: str
) -> None:
    async with await ControlClient.connect(server.path.parent) as client:
        with pytest.raises(RemoteError, match=re.escape(message)) as info:
            await client.call(method, params)
        assert info.value.code == INVALID_PARAMS
        assert (await client.phones_list()) == []  # the connection goes on
    assert handler.calls == [("phones_list", {})]


async def test_an_unexpected_handler_error_is_logged_not_leaked(
    server: ControlServer, handler: FakeHandler, caplog: pytest.LogCaptureFixture
) -> None:
    handler.fail = RuntimeError("boom with token 00112233445566778899aabbccddeeff")
    async with await ControlClient.connect(server.path.parent) as client:
        with (
            caplog.at_level(logging.ERROR, logger="bridge.control"),
            pytest.raises(RemoteError) as info,
        ):
            await client.status()
        assert info.value.code == INTERNAL_ERROR
        assert str(info.value) == "internal error (details are in the log)"
        handler.fail = None
        assert (await client.status())["machine"] == "test-machine"
    [record] = [r for r in caplog.records if r.name == "bridge.control.server"]
    assert record.getMessage() == "control method status failed"
    assert record.exc_info is not None and "boom" in str(record.exc_info[1])


async def test_a_result_that_is_not_json_is_an_internal_error(
    server: ControlServer, handler: FakeHandler, caplog: pytest.LogCaptureFixture
) -> None:
    async def bad_list() -> Any:
        return [object()]

    handler.phones_list = bad_list  # type: ignore[method-assign]
    async with await ControlClient.connect(server.path.parent) as client:
        with pytest.raises(RemoteError) as info:
            await client.phones_list()
        assert info.value.code == INTERNAL_ERROR
    assert any("not JSON" in r.getMessage() for r in caplog.records)


async def test_a_handler_error_reaches_the_user_verbatim(home: Path) -> None:
    async with (
        ControlServer(control_socket_path(home), RefusingHandler()),
        await ControlClient.connect(home) as client,
    ):
        with pytest.raises(RemoteError, match="shutting down; try again") as info:
            await client.pair_open()
        assert info.value.code == REQUEST_FAILED


async def test_pipelined_requests_are_answered_in_order(server: ControlServer) -> None:
    raw = await Raw.open(server.path)
    frames = b"".join(
        encode_frame(json.dumps(m).encode())
        for m in [
            {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT},
            {"jsonrpc": "2.0", "id": 1, "method": "status"},
            {"jsonrpc": "2.0", "id": 2, "method": "nope"},
            {"jsonrpc": "2.0", "method": "status"},  # a notification: no answer
            {"jsonrpc": "2.0", "id": 3, "method": "phones.list"},
        ]
    )
    await raw.send(frames)
    ids = [(await raw.answer())["id"] for _ in range(4)]
    assert ids == [0, 1, 2, 3]
    raw.close()


async def test_clients_are_served_concurrently(server: ControlServer, handler: FakeHandler) -> None:
    handler.block_status = True
    blocked = await ControlClient.connect(server.path.parent)
    status = asyncio.create_task(blocked.status())
    others = [await ControlClient.connect(server.path.parent) for _ in range(8)]
    lists = await asyncio.gather(*(c.phones_list() for c in others))
    assert lists == [[]] * 8
    assert not status.done()
    handler.block.set()
    assert (await status)["pid"] == os.getpid()
    for client in [blocked, *others]:
        await client.close()


async def test_close_with_clients_connected(home: Path, handler: FakeHandler) -> None:
    server = ControlServer(control_socket_path(home), handler)
    await server.start()
    handler.block_status = True
    busy = await ControlClient.connect(home)
    idle = await ControlClient.connect(home)
    call = asyncio.create_task(busy.status())
    while not handler.calls:
        await asyncio.sleep(0.01)
    await server.close()
    assert server.connections == 0
    with pytest.raises(ControlError, match="connection to the daemon was lost"):
        await call
    with pytest.raises(ControlError):
        await idle.phones_list()
    assert not server.path.exists()
    await busy.close()
    await idle.close()


async def test_a_client_leaving_cancels_a_pairing_wait(
    server: ControlServer, handler: FakeHandler
) -> None:
    client = await ControlClient.connect(server.path.parent)
    await client.pair_open()
    wait = asyncio.create_task(client.pair_wait(600))
    await handler.waiting.wait()
    wait.cancel()
    await client.close()
    await asyncio.wait_for(handler.wait_cancelled.wait(), 10)
    async with await ControlClient.connect(server.path.parent) as again:
        assert await again.phones_list() == []


async def test_a_client_leaving_does_not_cut_a_change_in_half(
    server: ControlServer, handler: FakeHandler, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="bridge.control")
    handler.block_status = True
    raw = await Raw.open(server.path)
    await raw.initialize()
    await raw.request("status", {}, 1)
    while len(handler.calls) < 1:
        await asyncio.sleep(0.01)
    raw.close()
    left = "x control client left during control status: finishing it"
    while not any(r.getMessage() == left for r in caplog.records):
        await asyncio.sleep(0.01)
    handler.block.set()
    await asyncio.wait_for(handler.status_finished.wait(), 10)
    async with await ControlClient.connect(server.path.parent) as client:
        assert await client.sessions_list()


async def test_a_framing_error_is_answered_then_the_connection_closes(
    server: ControlServer,
) -> None:
    raw = await Raw.open(server.path)
    await raw.initialize()
    await raw.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    reply = await raw.answer()
    assert reply["id"] is None
    assert reply["error"]["code"] == -32700
    assert await raw.at_eof()
    raw.close()


async def test_an_oversize_body_is_refused_and_closed(server: ControlServer) -> None:
    raw = await Raw.open(server.path)
    await raw.send(b"Content-Length: %d\r\n\r\n" % (2 << 20))
    reply = await raw.answer()
    assert reply["error"]["code"] == INVALID_REQUEST
    assert "exceeds the 1048576-byte limit" in reply["error"]["message"]
    assert await raw.at_eof()
    raw.close()


async def test_a_silent_client_is_dropped_after_the_handshake_timeout(
    home: Path, handler: FakeHandler
) -> None:
    async with ControlServer(control_socket_path(home), handler, handshake_timeout=0.2) as server:
        raw = await Raw.open(server.path)
        reply = await raw.answer()
        assert reply["error"]["code"] == NOT_INITIALIZED
        assert "timed out" in reply["error"]["message"]
        assert await raw.at_eof()
        raw.close()
        ready = await Raw.open(server.path)
        await ready.initialize()  # an initialised connection has no deadline
        await asyncio.sleep(0.3)
        await ready.request("phones.list", {}, 2)
        assert (await ready.answer())["result"] == []
        ready.close()


async def test_too_many_connections(home: Path, handler: FakeHandler) -> None:
    async with ControlServer(control_socket_path(home), handler, max_connections=2) as server:
        first, second = await Raw.open(server.path), await Raw.open(server.path)
        await first.initialize()
        await second.initialize()
        with pytest.raises(RemoteError, match="too many control connections") as info:
            await ControlClient.connect(home)
        assert info.value.code == REQUEST_FAILED
        first.close()
        while server.connections > 1:
            await asyncio.sleep(0.01)
        async with await ControlClient.connect(home) as client:
            assert await client.phones_list() == []
        second.close()


async def test_a_stale_socket_is_replaced(
    home: Path, handler: FakeHandler, caplog: pytest.LogCaptureFixture
) -> None:
    path = control_socket_path(home)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()  # the file stays; nothing listens: a daemon killed with -9
    with caplog.at_level(logging.INFO, logger="bridge.control"):
        async with ControlServer(path, handler), await ControlClient.connect(home) as client:
            assert await client.phones_list() == []
    assert any("stale control socket" in r.getMessage() for r in caplog.records)


async def test_a_live_socket_is_not_taken_over(server: ControlServer, handler: FakeHandler) -> None:
    second = ControlServer(server.path, FakeHandler())
    with pytest.raises(ControlSocketError, match="another process answers"):
        await second.start()
    await second.close()
    async with await ControlClient.connect(server.path.parent) as client:
        assert await client.phones_list() == []
    assert handler.calls == [("phones_list", {})]


async def test_a_file_that_is_not_a_socket_is_refused(home: Path, handler: FakeHandler) -> None:
    path = control_socket_path(home)
    path.write_text("not a socket")
    with pytest.raises(ControlSocketError, match="exists and is not a socket: move it away"):
        await ControlServer(path, handler).start()
    assert path.read_text() == "not a socket"


async def test_a_path_too_long_for_a_unix_socket(home: Path, handler: FakeHandler) -> None:
    deep = home / ("d" * 120)
    deep.mkdir()
    with pytest.raises(ControlSocketError, match=r"longer than unix sockets allow.*shorter --home"):
        await ControlServer(control_socket_path(deep), handler).start()


async def test_a_missing_directory(home: Path, handler: FakeHandler) -> None:
    with pytest.raises(ControlSocketError, match="cannot create the control socket"):
        await ControlServer(home / "missing" / "control.sock", handler).start()


async def test_close_leaves_a_successors_socket_alone(home: Path, handler: FakeHandler) -> None:
    path = control_socket_path(home)
    server = ControlServer(path, handler)
    await server.start()
    path.unlink()
    successor = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    successor.bind(str(path))
    try:
        await server.close()
        assert stat.S_ISSOCK(path.lstat().st_mode)
    finally:
        successor.close()


class _FakeSocket:
    def __init__(self, uid: int) -> None:
        self.uid = uid

    def getsockopt(self, level: int, option: int, size: int) -> bytes:
        return struct.pack("3i", 1234, self.uid, self.uid)


class _FakeWriter:
    def __init__(self, uid: int) -> None:
        self.sock = _FakeSocket(uid)

    def get_extra_info(self, name: str) -> Any:
        return self.sock


def test_only_our_own_user_may_connect() -> None:
    assert peer_allowed(_FakeWriter(os.geteuid()))  # type: ignore[arg-type]
    assert peer_allowed(_FakeWriter(0))  # type: ignore[arg-type]
    assert not peer_allowed(_FakeWriter(os.geteuid() + 4242))  # type: ignore[arg-type]
