"""Per-phone device configuration in the bridge database (schema v4)."""

from __future__ import annotations

import pytest

from store import BridgeDatabase
from store.device_config import (
    delete_device_config,
    load_device_config,
    load_device_configs,
    save_device_config,
)

PHONE = "ab" * 32
OTHER = "cd" * 32


async def test_round_trip_and_replace(db: BridgeDatabase) -> None:
    assert await load_device_config(db, PHONE) is None
    await save_device_config(db, PHONE, {"label": "Pixel", "appUnderTest": "kubo"}, now=5)
    await save_device_config(db, PHONE, {"label": "Pixel 9", "appUnderTest": "veil"}, now=6)
    await save_device_config(db, OTHER, {"label": "iPhone", "appUnderTest": "custom"}, now=6)
    assert await load_device_config(db, PHONE) == {"label": "Pixel 9", "appUnderTest": "veil"}
    assert set(await load_device_configs(db)) == {PHONE, OTHER}
    assert await db.fetchone("SELECT updated_at FROM device_config WHERE phone = ?", (PHONE,)) == (
        6,
    )


async def test_delete(db: BridgeDatabase) -> None:
    await save_device_config(db, PHONE, {"label": "x"})
    assert await delete_device_config(db, PHONE)
    assert not await delete_device_config(db, PHONE)
    assert await load_device_configs(db) == {}


async def test_bad_rows_and_keys(db: BridgeDatabase) -> None:
    with pytest.raises(ValueError, match="64-hex"):
        await save_device_config(db, "short", {})
    await db.execute(
        "INSERT INTO device_config (phone, config, updated_at) VALUES (?, 'nope', 1)", (OTHER,)
    )
    assert await load_device_config(db, OTHER) is None
    assert await load_device_configs(db) == {}
