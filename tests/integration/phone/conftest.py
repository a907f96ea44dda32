"""Resources for the simulator's integration tests: a fake bridge and a phone on the test relay."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.fake_bridge import FakeBridge
from tests.support.phone import PhoneSimulator
from tests.support.relay import LoopbackRelay


@pytest.fixture
async def bridge(relay: LoopbackRelay) -> AsyncIterator[FakeBridge]:
    async with FakeBridge([relay.url], machine="box") as running:
        yield running


@pytest.fixture
async def phone(relay: LoopbackRelay, bridge: FakeBridge) -> AsyncIterator[PhoneSimulator]:
    async with PhoneSimulator(bridge=bridge.npub, relays=[relay.url]) as running:
        yield running
