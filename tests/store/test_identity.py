"""The bridge identity: save, load, idempotence, refusal to replace, validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from store import BridgeDatabase, IdentityConflict, open_bridge_db
from store.identity import load_identity, save_identity

KEY_A = bytes.fromhex("7f" * 32)
KEY_B = bytes.fromhex("01" * 31 + "02")


async def test_no_identity_at_first(db: BridgeDatabase) -> None:
    assert await load_identity(db) is None


async def test_save_then_load(db: BridgeDatabase) -> None:
    await save_identity(db, KEY_A, now=1_700_000_000)
    assert await load_identity(db) == KEY_A
    assert await db.fetchall("SELECT id, created_at FROM identity") == [(1, 1_700_000_000)]


async def test_saving_the_same_key_again_is_a_no_op(db: BridgeDatabase) -> None:
    await save_identity(db, KEY_A, now=1)
    await save_identity(db, bytearray(KEY_A), now=2)
    assert await db.fetchall("SELECT created_at FROM identity") == [(1,)]


async def test_a_different_key_is_refused_and_the_old_one_kept(db: BridgeDatabase) -> None:
    await save_identity(db, KEY_A)
    with pytest.raises(IdentityConflict) as info:
        await save_identity(db, KEY_B)
    message = str(info.value)
    assert message == (
        f"{db.path} already holds a different bridge identity; refusing to replace it (the "
        "paired phones know the old one). Move the database aside first if you really mean to "
        "start over"
    )
    for key in (KEY_A, KEY_B):
        assert key.hex() not in message and repr(key) not in message
    assert info.value.path == db.path
    assert await load_identity(db) == KEY_A
    assert not db.in_transaction


async def test_identity_survives_reopen(home: Path) -> None:
    async with await open_bridge_db(home) as db:
        await save_identity(db, KEY_A)
    async with await open_bridge_db(home) as db:
        assert await load_identity(db) == KEY_A


async def test_save_inside_a_rolled_back_transaction_is_undone(db: BridgeDatabase) -> None:
    with pytest.raises(OSError):
        async with db.transaction():
            await save_identity(db, KEY_A)
            assert await load_identity(db) == KEY_A
            raise OSError("later step failed")
    assert await load_identity(db) is None


@pytest.mark.parametrize(
    ("secret", "error", "message"),
    [
        (b"", ValueError, "must be 32 bytes, got 0"),
        (b"\x01" * 31, ValueError, "must be 32 bytes, got 31"),
        (b"\x01" * 33, ValueError, "must be 32 bytes, got 33"),
        ("7f" * 32, TypeError, "must be bytes, not str"),
        (None, TypeError, "must be bytes, not NoneType"),
    ],
    ids=["empty", "short", "long", "hex-str", "none"],
)
async def test_invalid_secrets_are_rejected(
    db: BridgeDatabase, secret: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        await save_identity(db, secret)  # type: ignore[arg-type]
    assert await load_identity(db) is None
