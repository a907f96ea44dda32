"""Fuzzing a live relay connection: after any burst of bad frames it is still open and delivers.

The connection (:class:`~bridge.nostr.relay.RelayConnection`) reads frames from a scripted relay
over a real websocket: after any burst of bad frames (mutated events, wrong arities and types,
junk) it is still open, never logged an error (its reader did not crash), delivered only events
that verify and match the subscription, and still delivers the next good event.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.nostr.event import VerifiedEvent, sign_event, verify_event
from bridge.nostr.filters import matches_any
from bridge.nostr.relay import ConnectionState, RelayConnection, RelayEventReceived
from tests.fuzz.frame_strategies import ALICE, FILTERS, SUB, frames
from tests.support.relay import ScriptedRelay


class Reader:
    """A connection to a scripted relay, with the events it delivered."""

    def __init__(self, relay: ScriptedRelay, connection: RelayConnection) -> None:
        self.relay = relay
        self.connection = connection
        self.events: list[RelayEventReceived] = []
        self.arrived = asyncio.Event()

    def on_event(self, received: RelayEventReceived) -> None:
        self.events.append(received)
        self.arrived.set()

    async def send(self, frame: str | bytes) -> None:
        """One frame as is: text as a text frame, bytes as a binary frame."""
        for connection in list(self.relay.connections):
            # A lone surrogate cannot be sent as UTF-8 text; such frames never reach the client.
            with contextlib.suppress(UnicodeEncodeError):
                await connection.send(frame)

    async def deliver(self, event: VerifiedEvent) -> None:
        """Send a good event and wait for it: every frame sent before it was handled."""
        await self.relay.send(["EVENT", SUB, event.to_dict()])
        async with asyncio.timeout(10):
            while event.id not in {r.event.id for r in self.events}:
                self.arrived.clear()
                await self.arrived.wait()


async def _eose(relay: ScriptedRelay, connection: Any, frame: str) -> None:
    parsed = json.loads(frame)
    if parsed[0] == "REQ":
        await connection.send(json.dumps(["EOSE", parsed[1]]))


@pytest.fixture
async def reader() -> AsyncIterator[Reader]:
    async with ScriptedRelay(_eose) as relay:
        holder: list[Reader] = []
        connection = RelayConnection(
            relay.url,
            ALICE,
            on_event=lambda received: holder[0].on_event(received),
            close_timeout=1.0,
        )
        holder.append(Reader(relay, connection))
        await connection.connect()
        await connection.subscribe(SUB, FILTERS)
        await relay.next_frame("REQ")
        try:
            yield holder[0]
        finally:
            await connection.close()


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(burst=st.lists(frames(), min_size=1, max_size=8))
async def test_connection_survives_any_burst(
    reader: Reader, burst: list[str | bytes], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="bridge.nostr")
    for frame in burst:
        await reader.send(frame)
    good = sign_event(ALICE, 1, f"after {time.monotonic_ns()}", (), created_at=1_700_000_000)
    await reader.deliver(good)
    assert reader.connection.state is ConnectionState.OPEN
    for received in reader.events:
        assert received.subscription_id == SUB
        assert verify_event(received.event) and matches_any(FILTERS, received.event)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []
    caplog.clear()
