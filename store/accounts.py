"""Secrets set from phones (schema v4): provider profiles and credentials.

Plain values in and out, like `store.bridge_state`: a provider profile is its JSON record
(`bridge.engine.phones.providers.profile_to_record`, auth token included), a credential a name and a
text value. The values are secret: they are never logged and never put in an exception message
(only names and ids are); the database file is 0600 in a 0700 home, and the store's connection
thread (`store.worker`) logs no statement or parameter.

Callers apply a command's writes inside the command's `db.transaction()`, so a profile or key
change commits together with the command's "processed" mark.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from typing import Any, Final

from store.db import BridgeDatabase, Statement

__all__ = [
    "CREDENTIALS_TABLE",
    "PROVIDER_PROFILES_TABLE",
    "delete_provider_profile",
    "delete_provider_profile_statement",
    "load_credentials",
    "load_provider_profiles",
    "save_provider_profile",
    "save_provider_profile_statement",
    "set_credential",
    "set_credential_statement",
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


def save_provider_profile_statement(
    profile_id: str, record: Mapping[str, Any], *, now: int | None = None
) -> Statement:
    """`save_provider_profile` as a statement to run later; the same checks."""
    if not profile_id:
        raise ValueError("a provider profile id must not be empty")
    text = json.dumps(dict(record), separators=(",", ":"))
    return Statement(
        "INSERT INTO provider_profiles (id, record, updated_at) VALUES (?, ?, ?) "
        "ON CONFLICT (id) DO UPDATE SET record = excluded.record, updated_at = excluded.updated_at",
        (profile_id, text, _now(now)),
    )


async def save_provider_profile(
    db: BridgeDatabase, profile_id: str, record: Mapping[str, Any], *, now: int | None = None
) -> None:
    """Insert or replace the profile `profile_id`.

    Raises:
        ValueError: `profile_id` is empty.
        TypeError: `record` is not JSON-serializable.
        StoreError: the database failed.
    """
    await db.execute(*save_provider_profile_statement(profile_id, record, now=now))


def delete_provider_profile_statement(profile_id: str) -> Statement:
    return Statement("DELETE FROM provider_profiles WHERE id = ?", (profile_id,))


async def delete_provider_profile(db: BridgeDatabase, profile_id: str) -> bool:
    """Remove the profile; returns whether it existed."""
    return await db.execute(*delete_provider_profile_statement(profile_id)) > 0


async def load_credentials(db: BridgeDatabase) -> dict[str, str]:
    """The stored credentials, ``{name: value}``."""
    rows = await db.fetchall("SELECT name, value FROM credentials")
    return {str(name): str(value) for name, value in rows}


def set_credential_statement(name: str, value: str | None, *, now: int | None = None) -> Statement:
    """`set_credential` as a statement to run later; the same checks."""
    if not name:
        raise ValueError("a credential name must not be empty")
    if not value:
        return Statement("DELETE FROM credentials WHERE name = ?", (name,))
    return Statement(
        "INSERT INTO credentials (name, value, updated_at) VALUES (?, ?, ?) "
        "ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        (name, value, _now(now)),
    )


async def set_credential(
    db: BridgeDatabase, name: str, value: str | None, *, now: int | None = None
) -> None:
    """Store `value` under `name`, or delete the row when `value` is None (or empty).

    Raises:
        ValueError: `name` is empty.
        StoreError: the database failed.
    """
    await db.execute(*set_credential_statement(name, value, now=now))
