"""Small named text values in the bridge database (`kv` table).

The reference bridge kept everything in one JSON map (`state.json`'s `kv`); here the KV table
holds what has no table of its own (e.g. `deviceConfig.<phone>`), one row per key, written
durably on each `kv_set` (or inside the caller's `db.transaction()`). Values may be secret
(the reference stored credentials here), so they never appear in logs or error messages;
keys do.
"""

from __future__ import annotations

import time
from typing import Final

from store.db import BridgeDatabase, Statement

__all__ = ["MAX_KEY_LENGTH", "kv_delete", "kv_get", "kv_set", "kv_set_statement"]

MAX_KEY_LENGTH: Final = 256


async def kv_get(db: BridgeDatabase, key: str) -> str | None:
    """The value stored under `key`, or None.

    Raises:
        ValueError, TypeError: `key` is not a valid key (see `kv_set`).
        StoreError: the database failed.
    """
    _check_key(key)
    row = await db.fetchone("SELECT value FROM kv WHERE key = ?", (key,))
    return None if row is None else str(row[0])


def kv_set_statement(key: str, value: str, *, now: int | None = None) -> Statement:
    """`kv_set` as a statement to run later (in a `db.write` with others); the same checks.

    Raises:
        TypeError: `key` or `value` is not a `str`.
        ValueError: `key` is empty or too long, or either is not valid Unicode (lone surrogates).
    """
    _check_key(key)
    if not isinstance(value, str):
        raise TypeError(f"kv value for {key!r} must be str, not {type(value).__name__}")
    if not _is_encodable(value):
        raise ValueError(f"kv value for {key!r} is not valid Unicode text (lone surrogates)")
    updated_at = int(time.time()) if now is None else now
    return Statement(
        "INSERT INTO kv (key, value, updated_at) VALUES (?, ?, ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        (key, value, updated_at),
    )


async def kv_set(db: BridgeDatabase, key: str, value: str, *, now: int | None = None) -> None:
    """Store `value` under `key`, replacing any previous value.

    Args:
        db: the bridge database.
        key: 1 to `MAX_KEY_LENGTH` characters of text.
        value: any text (it may be secret: it is never logged or echoed in errors).
        now: the `updated_at` to record (unix seconds); the current time by default.

    Raises:
        TypeError: `key` or `value` is not a `str`.
        ValueError: `key` is empty or too long, or either is not valid Unicode (lone surrogates).
        StoreError: the database failed.
    """
    await db.execute(*kv_set_statement(key, value, now=now))


async def kv_delete(db: BridgeDatabase, key: str) -> bool:
    """Remove `key`; returns whether it existed.

    Raises:
        ValueError, TypeError: `key` is not a valid key (see `kv_set`).
        StoreError: the database failed.
    """
    _check_key(key)
    return await db.execute("DELETE FROM kv WHERE key = ?", (key,)) > 0


def _check_key(key: str) -> None:
    if not isinstance(key, str):
        raise TypeError(f"kv key must be str, not {type(key).__name__}")
    if not key:
        raise ValueError("kv key must not be empty")
    if len(key) > MAX_KEY_LENGTH:
        raise ValueError(f"kv key is {len(key)} characters long; the limit is {MAX_KEY_LENGTH}")
    if not _is_encodable(key):
        raise ValueError("kv key is not valid Unicode text (lone surrogates)")


def _is_encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
