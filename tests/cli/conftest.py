"""Resources for the CLI tests: a short private home, a control server with a fake handler, and
processes that pass for session hosts."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bridge.control import ControlServer, control_socket_path
from tests.control.fake_handler import FakeHandler, short_home
from tests.control.fake_hosts import FakeHosts


@pytest.fixture
def home() -> Iterator[Path]:
    with short_home() as path:
        yield path


@pytest.fixture
def handler() -> FakeHandler:
    return FakeHandler()


@pytest.fixture
async def daemon(home: Path, handler: FakeHandler) -> AsyncIterator[ControlServer]:
    """The control socket of a "running daemon" whose handler is the fake."""
    control = ControlServer(control_socket_path(home), handler)
    await control.start()
    try:
        yield control
    finally:
        await control.close()


@pytest.fixture
def hosts(home: Path) -> Iterator[FakeHosts]:
    """Fake session hosts under `home`, killed at the end of the test."""
    fake = FakeHosts(home)
    try:
        yield fake
    finally:
        fake.close()
