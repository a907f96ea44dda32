"""The key/value repository: round trips, replacement, deletion, validation, transactions."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store import BridgeDatabase, open_bridge_db
from store.kv import MAX_KEY_LENGTH, kv_delete, kv_get, kv_set


async def test_round_trip_replace_delete(db: BridgeDatabase) -> None:
    assert await kv_get(db, "lastSeenTimestamp") is None
    await kv_set(db, "lastSeenTimestamp", "1700000000", now=100)
    assert await kv_get(db, "lastSeenTimestamp") == "1700000000"
    await kv_set(db, "lastSeenTimestamp", "1700000060", now=160)
    assert await kv_get(db, "lastSeenTimestamp") == "1700000060"
    assert await db.fetchall("SELECT key, value, updated_at FROM kv") == [
        ("lastSeenTimestamp", "1700000060", 160)
    ]
    assert await kv_delete(db, "lastSeenTimestamp") is True
    assert await kv_delete(db, "lastSeenTimestamp") is False
    assert await kv_get(db, "lastSeenTimestamp") is None


async def test_updated_at_defaults_to_now(db: BridgeDatabase) -> None:
    await kv_set(db, "k", "v")
    row = await db.fetchone("SELECT updated_at FROM kv WHERE key = 'k'")
    assert row is not None and row[0] > 1_600_000_000


async def test_empty_value_and_large_value(db: BridgeDatabase) -> None:
    await kv_set(db, "empty", "")
    assert await kv_get(db, "empty") == ""
    big = "x" * 2_000_000
    await kv_set(db, "big", big)
    assert await kv_get(db, "big") == big


async def test_keys_differing_after_a_nul_are_distinct(db: BridgeDatabase) -> None:
    await kv_set(db, "\x00", "nul")
    await kv_set(db, "a\x00b", "1")
    await kv_set(db, "a\x00c", "2")
    assert [await kv_get(db, k) for k in ("\x00", "a\x00b", "a\x00c", "a")] == [
        "nul",
        "1",
        "2",
        None,
    ]


async def test_values_survive_reopen(home: Path) -> None:
    async with await open_bridge_db(home) as db:
        await kv_set(db, "deviceConfig.abc", '{"diff": true}')
    async with await open_bridge_db(home) as db:
        assert await kv_get(db, "deviceConfig.abc") == '{"diff": true}'


async def test_set_in_a_rolled_back_transaction_is_undone(db: BridgeDatabase) -> None:
    await kv_set(db, "k", "old")
    with pytest.raises(KeyError):
        async with db.transaction():
            await kv_set(db, "k", "new")
            await kv_delete(db, "k")
            raise KeyError("stop")
    assert await kv_get(db, "k") == "old"


INVALID = [
    ("empty-key", "", "v", ValueError, "must not be empty"),
    ("long-key", "k" * (MAX_KEY_LENGTH + 1), "v", ValueError, "the limit is 256"),
    ("surrogate-key", "a\ud800", "v", ValueError, "not valid Unicode"),
    ("bytes-key", b"k", "v", TypeError, "must be str, not bytes"),
    ("int-value", "k", 5, TypeError, "for 'k' must be str, not int"),
    ("surrogate-value", "k", "secret\udfff", ValueError, "for 'k' is not valid Unicode"),
]


@pytest.mark.parametrize(
    ("key", "value", "error", "message"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID]
)
async def test_invalid_input_is_rejected(
    db: BridgeDatabase, key: object, value: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message) as info:
        await kv_set(db, key, value)  # type: ignore[arg-type]
    assert "secret" not in str(info.value)
    assert await db.fetchall("SELECT * FROM kv") == []


async def test_key_validation_on_get_and_delete(db: BridgeDatabase) -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        await kv_get(db, "")
    with pytest.raises(TypeError, match="must be str"):
        await kv_delete(db, None)  # type: ignore[arg-type]
    await kv_set(db, "k" * MAX_KEY_LENGTH, "ok")
    assert await kv_get(db, "k" * MAX_KEY_LENGTH) == "ok"


keys_strategy = st.text(min_size=1, max_size=MAX_KEY_LENGTH)
values_strategy = st.text(max_size=500)


def test_round_trip_arbitrary_text(tmp_path: Path) -> None:
    """Any text (NULs, astral characters, RTL marks...) comes back exactly as stored."""
    with asyncio.Runner() as runner:
        db = runner.run(open_bridge_db(tmp_path / "home"))
        try:

            @settings(
                max_examples=200,
                deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture],
            )
            @given(st.dictionaries(keys_strategy, values_strategy, min_size=1, max_size=5))
            def check(entries: dict[str, str]) -> None:
                async def run() -> None:
                    for key, value in entries.items():
                        await kv_set(db, key, value)
                    for key, value in entries.items():
                        assert await kv_get(db, key) == value
                    for key in entries:
                        assert await kv_delete(db, key) is True
                        assert await kv_get(db, key) is None

                runner.run(run())

            check()
        finally:
            runner.run(db.close())
