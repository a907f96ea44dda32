"""Provider profiles and credentials in the bridge database (schema v4)."""

from __future__ import annotations

import json
import logging

import pytest

from bridge.engine.phones.providers import ProviderProfile, profile_from_record, profile_to_record
from bridge.protocol import ModelEntry
from store import BRIDGE_MIGRATIONS, BridgeDatabase
from store.accounts import (
    delete_provider_profile,
    load_credentials,
    load_provider_profiles,
    save_provider_profile,
    set_credential,
)

TOKEN = "sk-provider-SECRET-XYZ"
KEY = "sk-ant-SECRET-KEY"


def test_version_four_adds_the_tables() -> None:
    migration = BRIDGE_MIGRATIONS[3]
    assert migration.version == 4
    for table in ("provider_profiles", "credentials", "device_config"):
        assert f"CREATE TABLE {table}" in migration.sql


async def test_profiles_round_trip_with_the_engine_records(db: BridgeDatabase) -> None:
    profile = ProviderProfile(
        id="kimi",
        label="Kimi",
        base_url="https://api.example.com",
        models=(ModelEntry(id="k3", label="K3"),),
        default_model="k3",
        auth_token=TOKEN,
        updated_at=1.5,
    )
    await save_provider_profile(db, "kimi", profile_to_record(profile), now=10)
    await save_provider_profile(
        db, "a", {"label": "A", "baseUrl": "https://a", "models": []}, now=11
    )
    loaded = await load_provider_profiles(db)
    assert [pid for pid, _ in loaded] == ["a", "kimi"]
    assert profile_from_record("kimi", loaded[1][1]) == profile
    row = await db.fetchone("SELECT updated_at FROM provider_profiles WHERE id = 'kimi'")
    assert row == (10,)


async def test_upsert_replaces_and_delete_reports_existence(db: BridgeDatabase) -> None:
    await save_provider_profile(db, "p", {"label": "one"}, now=1)
    await save_provider_profile(db, "p", {"label": "two"}, now=2)
    assert await load_provider_profiles(db) == [("p", {"label": "two"})]
    assert await delete_provider_profile(db, "p")
    assert not await delete_provider_profile(db, "p")
    assert await load_provider_profiles(db) == []


async def test_unreadable_profile_rows_are_skipped(db: BridgeDatabase) -> None:
    await db.execute(
        "INSERT INTO provider_profiles (id, record, updated_at) VALUES ('bad', 'not json', 1)"
    )
    await db.execute(
        "INSERT INTO provider_profiles (id, record, updated_at) VALUES ('list', '[]', 1)"
    )
    await save_provider_profile(db, "ok", {"label": "fine"}, now=1)
    assert await load_provider_profiles(db) == [("ok", {"label": "fine"})]


async def test_empty_profile_id_is_refused(db: BridgeDatabase) -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        await save_provider_profile(db, "", {})


async def test_credentials_set_replace_and_clear(db: BridgeDatabase) -> None:
    assert await load_credentials(db) == {}
    await set_credential(db, "anthropicApiKey", KEY, now=1)
    await set_credential(db, "githubPat", "ghp_1", now=1)
    await set_credential(db, "githubPat", "ghp_2", now=2)
    assert await load_credentials(db) == {"anthropicApiKey": KEY, "githubPat": "ghp_2"}
    await set_credential(db, "anthropicApiKey", None)
    await set_credential(db, "githubPat", "")
    assert await load_credentials(db) == {}
    with pytest.raises(ValueError):
        await set_credential(db, "", "x")


async def test_writes_join_the_callers_transaction(db: BridgeDatabase) -> None:
    with pytest.raises(RuntimeError):
        async with db.transaction():
            await set_credential(db, "anthropicApiKey", KEY, now=1)
            await save_provider_profile(db, "p", {"authToken": TOKEN}, now=1)
            raise RuntimeError("roll back")
    assert await load_credentials(db) == {} and await load_provider_profiles(db) == []


async def test_secrets_never_reach_a_log_line(
    db: BridgeDatabase, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    await set_credential(db, "anthropicApiKey", KEY, now=1)
    await save_provider_profile(db, "p", {"authToken": TOKEN}, now=1)
    await load_credentials(db)
    await load_provider_profiles(db)
    for record in caplog.records:
        text = record.getMessage() + repr(record.args)
        assert KEY not in text and TOKEN not in text and json.dumps(TOKEN) not in text
