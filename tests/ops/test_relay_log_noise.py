"""The embedded relay's log: what a doctor probe or a phone's reconnect leaves in the daemon's log.

The ``websockets`` library logs every connection opened and closed, and every HTTP answer, at
INFO, with the connection object as an extra (rendered as its repr). The relay must keep those out
of the daemon's log and still let the library's errors through.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator

import pytest
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection
from websockets.http11 import Request, Response

from bridge.doctor.relays import probe_relay
from bridge.logs import TextFormatter
from bridge.relay.server import RelayServer
from bridge.relay.storage import EventStore

OBJECT_REPR = re.compile(r"<[^<>]* at 0x[0-9a-f]+")


@pytest.fixture
async def server() -> AsyncIterator[RelayServer]:
    relay = RelayServer("127.0.0.1", 0, store=EventStore(None), admit=None, clock=time.time)
    await relay.start()
    try:
        yield relay
    finally:
        await relay.close()


def library_record(record: logging.LogRecord) -> bool:
    """A record the ``websockets`` library wrote, under its own logger or one the relay gave it."""
    return record.name.startswith("websockets") or record.pathname.find("/websockets/") >= 0


def as_in_the_daemon_log(caplog: pytest.LogCaptureFixture) -> None:
    """Render captured records with the daemon's text format, as they are emitted (an extra may
    be a weak reference to a connection that is gone by the end of the test)."""
    caplog.handler.setFormatter(TextFormatter())


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The captured log lines, tracebacks left out."""
    return [line for line in caplog.text.splitlines() if not line.startswith("    ")]


async def probe_like_doctor(relay: RelayServer) -> None:
    """What ``codedeck-bridge doctor`` does to the embedded relay: a websocket probe (connect,
    REQ, EOSE, close) and a bare TCP connect to the address phones dial."""
    probe = await probe_relay(f"ws://127.0.0.1:{relay.port}", timeout=5.0)
    assert probe.error is None, probe
    _, writer = await asyncio.open_connection("127.0.0.1", relay.port)
    writer.close()
    await writer.wait_closed()


async def test_connections_leave_no_library_info_lines(
    server: RelayServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    as_in_the_daemon_log(caplog)
    await probe_like_doctor(server)
    async with connect(f"ws://127.0.0.1:{server.port}") as ws:  # a phone comes and goes
        await ws.send('["REQ","s",{"limit":1}]')
        assert "EOSE" in str(await asyncio.wait_for(ws.recv(), 5))
    await asyncio.sleep(0.1)  # the server side logs the close after the client's close returns
    noise = [
        f"{record.levelname} {record.name}: {record.getMessage()}"
        for record in caplog.records
        if library_record(record) and record.levelno < logging.WARNING
    ]
    assert noise == []
    assert [line for line in lines(caplog) if OBJECT_REPR.search(line)] == []


async def test_a_library_error_is_still_logged(caplog: pytest.LogCaptureFixture) -> None:
    relay = RelayServer("127.0.0.1", 0, store=EventStore(None), admit=None, clock=time.time)

    def broken(connection: ServerConnection, request: Request) -> Response | None:
        raise RuntimeError("a bug in the HTTP answer")

    relay._http = broken  # type: ignore[method-assign]
    caplog.set_level(logging.INFO)
    as_in_the_daemon_log(caplog)
    await relay.start()
    try:
        with pytest.raises(Exception, match="500"):
            async with connect(f"ws://127.0.0.1:{relay.port}"):
                pass
    finally:
        await relay.close()
    errors = [r for r in caplog.records if library_record(r) and r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in errors] == ["process_request failed"]
    assert errors[0].exc_info is not None
    error_lines = [line for line in lines(caplog) if "process_request failed" in line]
    assert len(error_lines) == 1
    assert not OBJECT_REPR.search(error_lines[0]), error_lines[0]
    assert "client=127.0.0.1:" in error_lines[0]  # the connection, by its address
