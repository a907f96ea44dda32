"""Resources for the control socket tests: a short private home and a served fake handler."""

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
async def server(home: Path, handler: FakeHandler) -> AsyncIterator[ControlServer]:
    control = ControlServer(control_socket_path(home), handler)
    await control.start()
    try:
        yield control
    finally:
        await control.close()
