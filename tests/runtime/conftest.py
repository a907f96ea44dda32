"""Resources for the in-process runtime tests: a real bridge database in a temporary home.

Builders (clock, pool, runners, engine, the whole stack) live in ``tests/runtime/support.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from store.db import BridgeDatabase, open_bridge_db


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[BridgeDatabase]:
    """The bridge's own database (schema, WAL, migrations), closed after the test."""
    database = await open_bridge_db(tmp_path / "home")
    try:
        yield database
    finally:
        await database.close()
