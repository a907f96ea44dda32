"""Fixtures for the store tests: a fresh bridge home and an open bridge database."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from store import BridgeDatabase, open_bridge_db


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A bridge home path that does not exist yet."""
    return tmp_path / "home"


@pytest.fixture
async def db(home: Path) -> AsyncIterator[BridgeDatabase]:
    database = await open_bridge_db(home)
    try:
        yield database
    finally:
        await database.close()


@pytest.fixture
def umask() -> Iterator[None]:
    """Restore the process umask after a test that changes it."""
    previous = os.umask(0o022)
    os.umask(previous)
    try:
        yield
    finally:
        os.umask(previous)
