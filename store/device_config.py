"""Each phone's device-testing configuration (schema v4, table `device_config`).

One JSON object per phone pubkey (64 hex characters), as `bridge.engine.phones.device_config` prepares
it: the wire's `DeviceConfig` fields that were set, transport-only fields already stripped.
Plain values in and out, like `store.bridge_state`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from store.db import BridgeDatabase, Statement

__all__ = [
    "delete_device_config",
    "load_device_config",
    "load_device_configs",
    "save_device_config",
    "save_device_config_statement",
]


def _check_phone(phone: str) -> None:
    if len(phone) != 64:
        raise ValueError("a phone is identified by its 64-hex-character pubkey")


def save_device_config_statement(
    phone: str, config: Mapping[str, Any], *, now: int | None = None
) -> Statement:
    """`save_device_config` as a statement to run later; the same checks."""
    _check_phone(phone)
    text = json.dumps(dict(config), separators=(",", ":"))
    return Statement(
        "INSERT INTO device_config (phone, config, updated_at) VALUES (?, ?, ?) "
        "ON CONFLICT (phone) DO UPDATE SET config = excluded.config, "
        "updated_at = excluded.updated_at",
        (phone, text, int(time.time()) if now is None else now),
    )


async def save_device_config(
    db: BridgeDatabase, phone: str, config: Mapping[str, Any], *, now: int | None = None
) -> None:
    """Insert or replace the configuration of `phone`.

    Raises:
        ValueError: `phone` is not a 64-character pubkey.
        TypeError: `config` is not JSON-serializable.
        StoreError: the database failed.
    """
    await db.execute(*save_device_config_statement(phone, config, now=now))


async def load_device_config(db: BridgeDatabase, phone: str) -> dict[str, Any] | None:
    """The configuration of `phone`, or None (also for an unreadable row)."""
    row = await db.fetchone("SELECT config FROM device_config WHERE phone = ?", (phone,))
    if row is None:
        return None
    return _parse(str(row[0]))


async def load_device_configs(db: BridgeDatabase) -> dict[str, dict[str, Any]]:
    """Every stored configuration by phone pubkey (unreadable rows skipped)."""
    configs: dict[str, dict[str, Any]] = {}
    for phone, text in await db.fetchall("SELECT phone, config FROM device_config"):
        parsed = _parse(str(text))
        if parsed is not None:
            configs[str(phone)] = parsed
    return configs


async def delete_device_config(db: BridgeDatabase, phone: str) -> bool:
    """Remove the configuration of `phone` (e.g. when it is unpaired); whether it existed."""
    return await db.execute("DELETE FROM device_config WHERE phone = ?", (phone,)) > 0


def _parse(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
