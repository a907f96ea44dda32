"""Secrets set from phones (schema v4): provider profiles and credentials.

Plain values in and out, like `store.bridge_state`: a provider profile is its JSON record
(`bridge.engine.providers.profile_to_record`, auth token included), a credential a name and a
text value. The values are secret: they are never logged and never put in an exception message
(only names and ids are); the database file is 0600 in a 0700 home, and `store.db` drops
aiosqlite's statement logging, which would print parameters.

Callers apply a command's writes inside the command's `db.transaction()`, so a profile or key
change commits together with the command's "processed" mark.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from typing import Any, Final

from store.db import BridgeDatabase

__all__ = [
    "CREDENTIALS_TABLE",
    "PROVIDER_PROFILES_TABLE",
    "delete_provider_profile",
    "load_credentials",
    "load_provider_profiles",
    "save_provider_profile",
    "set_credential",
]

logger = logging.getLogger(__name__)

PROVIDER_PROFILES_TABLE: Final = "provider_profiles"
CREDENTIALS_TABLE: Final = "credentials"


def _now(now: int | None) -> int:
    return int(time.time()) if now is None else now


async def load_provider_profiles(db: BridgeDatabase) -> list[tuple[str, dict[str, Any]]]:
    """Every stored profile as ``(id, record)``, by id. Unreadable records are skipped, logged."""
    profiles: list[tuple[str, dict[str, Any]]] = []
    for profile_id, text in await db.fetchall(
        "SELECT id, record FROM provider_profiles ORDER BY id"
    ):
        try:
            record = json.loads(text)
        except ValueError:
            record = None
        if isinstance(record, dict):
            profiles.append((str(profile_id), record))
        else:
            logger.warning(
                "! provider profile %r skipped at load: its stored record is not a JSON object",
                str(profile_id)[:40],
            )
    return profiles


async def save_provider_profile(
    db: BridgeDatabase, profile_id: str, record: Mapping[str, Any], *, now: int | None = None
) -> None:
    """Insert or replace the profile `profile_id`.

    Raises:
        ValueError: `profile_id` is empty.
        TypeError: `record` is not JSON-serializable.
        StoreError: the database failed.
    """
    if not profile_id:
        raise ValueError("a provider profile id must not be empty")
    text = json.dumps(dict(record), separators=(",", ":"))
    await db.execute(
        "INSERT INTO provider_profiles (id, record, updated_at) VALUES (?, ?, ?) "
        "ON CONFLICT (id) DO UPDATE SET record = excluded.record, updated_at = excluded.updated_at",
        (profile_id, text, _now(now)),
    )


async def delete_provider_profile(db: BridgeDatabase, profile_id: str) -> bool:
    """Remove the profile; returns whether it existed."""
    return await db.execute("DELETE FROM provider_profiles WHERE id = ?", (profile_id,)) > 0


async def load_credentials(db: BridgeDatabase) -> dict[str, str]:
    """The stored credentials, ``{name: value}``."""
    rows = await db.fetchall("SELECT name, value FROM credentials")
    return {str(name): str(value) for name, value in rows}


async def set_credential(
    db: BridgeDatabase, name: str, value: str | None, *, now: int | None = None
) -> None:
    """Store `value` under `name`, or delete the row when `value` is None (or empty).

    Raises:
        ValueError: `name` is empty.
        StoreError: the database failed.
    """
    if not name:
        raise ValueError("a credential name must not be empty")
    if not value:
        await db.execute("DELETE FROM credentials WHERE name = ?", (name,))
        return
    await db.execute(
        "INSERT INTO credentials (name, value, updated_at) VALUES (?, ?, ?) "
        "ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        (name, value, _now(now)),
    )
