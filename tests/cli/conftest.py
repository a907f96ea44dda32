"""Resources for the CLI tests: a short private home and a control server with a fake handler."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bridge.control import ControlServer, control_socket_path
from tests.control.fake_handler import FakeHandler, short_home


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
