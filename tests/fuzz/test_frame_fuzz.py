"""Fuzzing the relay client's frame handling: the parser, then a live connection.

The parser (:func:`~bridge.nostr.messages.parse_relay_message`) is total: any text or bytes
become one message or raise :class:`~bridge.nostr.messages.RelayMessageError`, nothing else; what
parses serializes back to a frame that parses to the same message.

The connection (:class:`~bridge.nostr.relay.RelayConnection`) reads frames from a scripted relay
over a real websocket: after any burst of bad frames (mutated events, wrong arities and types,
junk) it is still open, never logged an error (its reader did not crash), delivered only events
that verify and match the subscription, and still delivers the next good event.

The seed corpus (``corpus/frames/*.json``) is replayed as explicit cases first.
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
from bridge.nostr.filters import Filter, matches_any
from bridge.nostr.keys import Keypair
from bridge.nostr.messages import (
    RelayMessageError,
    parse_relay_message,
    serialize_relay_message,
)
from bridge.nostr.relay import ConnectionState, RelayConnection, RelayEventReceived
from tests.fuzz.corpus import FrameCase, frame_cases
from tests.support.relay import ScriptedRelay

ALICE = Keypair.from_secret("44" * 32)
SUB = "fuzz"
FILTERS = (Filter(kinds=(1,), authors=(ALICE.public_hex,)),)
GOOD = sign_event(ALICE, 1, "good", (), created_at=1_700_000_000)
FRAME_TYPES = ["EVENT", "OK", "EOSE", "CLOSED", "NOTICE", "AUTH", "COUNT", "REQ", "event", ""]

text = st.text(max_size=40)  # lone surrogates included: the wire can carry "\ud800"
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    text,
    st.sampled_from(["a" * 64, SUB, GOOD.id, "blocked: no"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=10,
)


@st.composite
def mutated_events(draw: st.DrawFn) -> dict[str, Any]:
    """The good event with some fields replaced, removed or added."""
    event: dict[str, Any] = dict(GOOD.to_dict())
    for key in draw(st.lists(st.sampled_from([*event, "extra"]), max_size=3)):
        if draw(st.booleans()):
            event.pop(key, None)
        else:
            event[key] = draw(values)
    return event


@st.composite
def frames(draw: st.DrawFn) -> str | bytes:
    """Frames a broken or hostile relay may send."""
    kind = draw(st.integers(0, 4))
    if kind == 0:
        return draw(st.text(max_size=200))
    if kind == 1:
        return draw(st.binary(max_size=200))
    if kind == 2:
        head = draw(st.sampled_from(FRAME_TYPES))
        tail = draw(st.lists(values, max_size=5))
        return json.dumps([head, *tail])
    if kind == 3:
        sub = draw(st.sampled_from([SUB, "other", "", 5]))
        return json.dumps(["EVENT", sub, draw(mutated_events())])
    valid = json.dumps(["OK", GOOD.id, True, ""])
    cut = draw(st.integers(0, len(valid)))
    return valid[:cut] + draw(st.text(max_size=5))


FUZZ = settings(max_examples=400, deadline=None)


@FUZZ
@given(frame=frames())
def test_parser_raises_only_relay_message_error(frame: str | bytes) -> None:
    try:
        message = parse_relay_message(frame)
    except RelayMessageError:
        return
    assert parse_relay_message(serialize_relay_message(message)) == message


@pytest.mark.parametrize("case", frame_cases(), ids=lambda c: c.name)
def test_corpus(case: FrameCase) -> None:
    if case.expect == "ok":
        message = parse_relay_message(case.frame)
        assert parse_relay_message(serialize_relay_message(message)) == message
    else:
        with pytest.raises(RelayMessageError) as caught:
            parse_relay_message(case.frame)
        assert len(str(caught.value)) < 200  # names the problem, never echoes the payload


# --- a live connection ---------------------------------------------------------------------------


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


@pytest.mark.integration
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
