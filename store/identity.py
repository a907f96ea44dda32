"""The bridge's Nostr identity (its 32-byte secp256k1 secret key) in the bridge database.

The identity is what phones paired with; losing or replacing it silently would orphan every
phone. Hence: `save_identity` refuses to replace a different key (`IdentityConflict`), and a
corrupt database is an error upstream (`store.sqlite`), never a reason to make a new key. The
store checks only the shape (32 bytes); whether the bytes are a valid secp256k1 scalar is
`bridge.nostr.keys`' business. Key bytes never reach a log line, repr or exception message.
"""

from __future__ import annotations

import hmac
import time
from typing import Final

from store.db import BridgeDatabase
from store.errors import IdentityConflict

__all__ = ["SECRET_KEY_LENGTH", "load_identity", "save_identity"]

SECRET_KEY_LENGTH: Final = 32


async def load_identity(db: BridgeDatabase) -> bytes | None:
    """The stored secret key, or None when the bridge has no identity yet.

    Raises:
        StoreError: the database failed.
    """
    row = await db.fetchone("SELECT secret_key FROM identity WHERE id = 1")
    return None if row is None else bytes(row[0])


async def save_identity(
    db: BridgeDatabase, secret: bytes | bytearray | memoryview, *, now: int | None = None
) -> None:
    """Store the bridge's secret key; a no-op if the same key is already stored.

    Args:
        db: the bridge database.
        secret: the 32-byte secret key (bytes-like).
        now: the `created_at` to record (unix seconds); the current time by default.

    Raises:
        TypeError: `secret` is not bytes-like.
        ValueError: `secret` is not 32 bytes long.
        IdentityConflict: a different identity is already stored (it was kept).
        StoreError: the database failed.
    """
    if not isinstance(secret, bytes | bytearray | memoryview):
        raise TypeError(f"the secret key must be bytes, not {type(secret).__name__}")
    key = bytes(secret)
    if len(key) != SECRET_KEY_LENGTH:
        raise ValueError(f"the secret key must be {SECRET_KEY_LENGTH} bytes, got {len(key)}")
    created_at = int(time.time()) if now is None else now
    async with db.transaction():
        row = await db.fetchone("SELECT secret_key FROM identity WHERE id = 1")
        if row is not None:
            if hmac.compare_digest(bytes(row[0]), key):
                return
            raise IdentityConflict(
                f"{db.path} already holds a different bridge identity; refusing to replace it "
                "(the paired phones know the old one). Move the database aside first if you "
                "really mean to start over",
                path=db.path,
            )
        await db.execute(
            "INSERT INTO identity (id, secret_key, created_at) VALUES (1, ?, ?)",
            (key, created_at),
        )
