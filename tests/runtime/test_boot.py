"""Boot: the engine's state from the store; rows it cannot use are skipped by name, never fatal."""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

import pytest

from bridge.engine.effects import PairedPhone
from bridge.logs import REDACTED, redact
from bridge.protocol import ModelEntry
from bridge.runtime.boot import load_engine_state
from bridge.runtime.boot import session_record as to_record
from store import accounts, bridge_state
from store.db import BridgeDatabase
from tests.runtime.support import PHONE, session_record

GOOD = session_record("good-session", "/ws/a", title="ok", model="m-1")
TOKEN = "kimi-token-boot-1f0a"
SKIPPED_TOKEN = "kimi-token-boot-skipped-77e3"
API_KEY = "stored-api-key-boot-2b9c"


def record_text(data: object) -> str:
    return data if isinstance(data, str) else json.dumps(data)


async def add_session(db: BridgeDatabase, session_id: str, data: object) -> None:
    await db.execute(
        "INSERT INTO sessions (session_id, record) VALUES (?, ?)", (session_id, record_text(data))
    )


async def add_profile(db: BridgeDatabase, profile_id: str, data: object) -> None:
    await db.execute(
        "INSERT INTO provider_profiles (id, record, updated_at) VALUES (?, ?, 0)",
        (profile_id, record_text(data)),
    )


def fields(**overrides: Any) -> dict[str, Any]:
    return {**dataclasses.asdict(GOOD), **overrides}


async def test_good_rows_load(db: BridgeDatabase) -> None:
    await bridge_state.save_phone(db, PHONE.public_hex, PHONE.npub, "Pixel", "2026-01-01T00:00:00Z")
    await bridge_state.mark_processed(db, "aa" * 32, 1_799_999_000)
    await bridge_state.set_cursor(db, 1_799_999_500)
    await bridge_state.add_tombstone(db, "closed-1")
    await add_session(db, GOOD.session_id, fields(future_field="from a newer version"))
    await bridge_state.append_transcript(db, GOOD.session_id, 7, "{}")
    await add_profile(
        db,
        "kimi",
        {
            "label": "Kimi",
            "baseUrl": "https://kimi.test",
            "models": [{"id": "k2"}],
            "authToken": TOKEN,
        },
    )
    await accounts.set_credential(db, "anthropicApiKey", API_KEY)

    state = await load_engine_state(db)

    assert state.phones == [
        PairedPhone(PHONE.public_hex, PHONE.npub, "Pixel", "2026-01-01T00:00:00Z")
    ]
    assert (state.last_seen, dict(state.processed)) == (1_799_999_500, {"aa" * 32: 1_799_999_000})
    assert list(state.tombstones) == ["closed-1"]
    assert list(state.sessions) == [dataclasses.replace(GOOD, seq_high=7)]  # from the transcript
    [profile] = state.providers
    assert (profile.id, profile.label, profile.models, profile.auth_token) == (
        "kimi",
        "Kimi",
        (ModelEntry(id="k2"),),
        TOKEN,
    )
    assert state.credentials is not None and state.credentials.anthropic_api_key == API_KEY
    # Loaded secrets are masked in every later log line.
    assert redact(f"{TOKEN} {API_KEY}") == f"{REDACTED} {REDACTED}"


async def test_unusable_rows_are_skipped_by_name_and_stay_in_the_database(
    db: BridgeDatabase, caplog: pytest.LogCaptureFixture
) -> None:
    await add_session(db, GOOD.session_id, fields())
    await add_session(db, "list-record", [1, 2])
    await add_session(db, "broken-json", "{not json")
    await add_session(db, "no-cwd-here", {k: v for k, v in fields().items() if k != "cwd"})
    await add_session(db, "cwd-number", fields(cwd=5))
    await add_profile(
        db, "kimi", {"label": "Kimi", "baseUrl": "https://kimi.test", "models": [{"id": "k2"}]}
    )
    await add_profile(
        db,
        "no-models",
        {"label": "Empty", "baseUrl": "https://e.test", "models": [], "authToken": SKIPPED_TOKEN},
    )
    await add_profile(db, "not-an-object", '"just text"')

    state = await load_engine_state(db)

    assert [r.session_id for r in state.sessions] == [GOOD.session_id]
    assert [p.id for p in state.providers] == ["kimi"]
    assert sorted(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING) == sorted(
        [
            "! session list-rec skipped at load: its stored record is not a JSON object "
            "(it stays in the database, but is not resumed or listed)",
            "! session broken-j skipped at load: its stored record is not a JSON object "
            "(it stays in the database, but is not resumed or listed)",
            "! session no-cwd-h skipped at load: it does not fit a session record "
            "(SessionRecord.__init__() missing 1 required positional argument: 'cwd') "
            "(it stays in the database, but is not resumed or listed)",
            "! session cwd-numb skipped at load: its id or cwd is not text "
            "(it stays in the database, but is not resumed or listed)",
            "! provider profile 'no-models' skipped at load: it lacks a label, a base URL or a "
            "model (sessions bound to it fail with a readable reason; re-create it on the phone)",
            "! provider profile 'not-an-object' skipped at load: its stored record is not a JSON "
            "object",
        ]
    )
    assert await db.fetchall("SELECT count(*) FROM sessions") == [(5,)]  # nothing deleted
    assert await db.fetchall("SELECT count(*) FROM provider_profiles") == [(3,)]
    assert redact(SKIPPED_TOKEN) == REDACTED  # a skipped profile's token is a secret too


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (
            {"session_id": 5, "cwd": "/w", "created_at": "t", "last_activity": "t"},
            "its id or cwd is not text",
        ),
        (
            {
                "session_id": "s",
                "cwd": "/w",
                "created_at": "t",
                "last_activity": "t",
                "seq_high": "7",
            },
            "its seq_high is not a number",
        ),
        (
            {
                "session_id": "s",
                "cwd": "/w",
                "created_at": "t",
                "last_activity": "t",
                "seq_high": True,
            },
            "its seq_high is not a number",
        ),
        (
            {"session_id": "s", "cwd": "/w", "created_at": "t", "last_activity": "t", "agent": ""},
            "its agent is not a name",
        ),
    ],
    ids=["id-not-text", "seq-high-text", "seq-high-bool", "agent-empty"],
)
def test_session_record_says_why_a_record_does_not_fit(data: dict[str, Any], problem: str) -> None:
    assert to_record(data) == problem
