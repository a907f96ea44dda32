"""Provider profiles: upsert/delete, tri-state token, https rule, redaction, session resolution."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

import bridge.engine
from bridge.engine.phones.providers import (
    MAX_PROFILES,
    MAX_TOKEN_LENGTH,
    ProbeRequest,
    ProviderBook,
    ProviderProfile,
    ResolvedProvider,
    profile_from_record,
    profile_to_record,
    provider_profile_ack,
    provider_profiles_message,
    token_problem,
)
from bridge.protocol import (
    BASE_URL_ERROR,
    DecodeError,
    ModelEntry,
    ProviderProfileWrite,
    SetProviderProfileCommand,
    decode_phone_to_bridge,
    encode,
)

TOKEN = "sk-SECRET-token-0123456789"
OTHER = "sk-OTHER-token-abcdef"
NOW = 1_700_000_000.0
_ABSENT = object()


def set_command(
    profile_id: str = "kimi",
    *,
    token: object = _ABSENT,
    base_url: str = "https://api.example.com/anthropic",
    label: str = "Kimi",
    models: list[dict[str, str]] | None = None,
    default_model: str | None = None,
    delete: bool = False,
) -> SetProviderProfileCommand:
    """Build the command through the real wire decoder (absent token = the key left out)."""
    payload: dict[str, Any] = {"type": "set-provider-profile", "profileId": profile_id}
    if delete:
        payload["profile"] = None
    else:
        profile: dict[str, Any] = {
            "label": label,
            "baseUrl": base_url,
            "models": models or [{"id": "k3", "label": "K3"}, {"id": "k2"}],
        }
        if default_model is not None:
            profile["defaultModel"] = default_model
        if token is not _ABSENT:
            profile["authToken"] = token
        payload["profile"] = profile
    command = decode_phone_to_bridge(json.dumps(payload))
    assert isinstance(command, SetProviderProfileCommand)
    return command


def stored(
    profile_id: str = "kimi",
    *,
    token: str | None = TOKEN,
    base_url: str = "https://api.example.com/anthropic",
    label: str = "Kimi",
    default_model: str | None = None,
) -> ProviderProfile:
    return ProviderProfile(
        id=profile_id,
        label=label,
        base_url=base_url,
        models=(ModelEntry(id="k3", label="K3"), ModelEntry(id="k2")),
        default_model=default_model,
        auth_token=token,
        updated_at=NOW - 100,
    )


# --- tri-state token -----------------------------------------------------------------------

TRI_STATE_CASES = [
    # (stored token before, authToken on the wire, token after)
    (None, _ABSENT, None),
    (None, None, None),
    (None, OTHER, OTHER),
    (TOKEN, _ABSENT, TOKEN),
    (TOKEN, None, None),
    (TOKEN, OTHER, OTHER),
]


@pytest.mark.parametrize(
    ("before", "wire", "after"),
    TRI_STATE_CASES,
    ids=["none-keep", "none-clear", "none-set", "tok-keep", "tok-clear", "tok-set"],
)
def test_tri_state_token_on_an_existing_profile(before: Any, wire: Any, after: Any) -> None:
    book = ProviderBook([stored(token=before)])
    outcome = book.apply_set(set_command(token=wire), NOW)
    assert outcome.success and outcome.error is None
    assert outcome.changed and not outcome.delete
    assert outcome.save is not None and outcome.save.auth_token == after
    assert book.get("kimi") == outcome.save
    assert outcome.save.updated_at == NOW
    if after is None:
        assert outcome.probe is None
    else:
        assert outcome.probe == ProbeRequest("https://api.example.com/anthropic", after, "k3")


@pytest.mark.parametrize(
    ("wire", "after"), [(_ABSENT, None), (None, None), (TOKEN, TOKEN)], ids=["keep", "clear", "set"]
)
def test_tri_state_token_on_a_new_profile(wire: Any, after: Any) -> None:
    book = ProviderBook()
    outcome = book.apply_set(set_command(token=wire), NOW)
    assert outcome.success and outcome.save is not None
    assert outcome.save.auth_token == after
    assert outcome.save.has_token is (after is not None)


def test_an_empty_token_string_is_a_decode_error() -> None:
    with pytest.raises(DecodeError):
        set_command(token="")


def test_upsert_replaces_fields_and_the_probe_uses_the_default_model() -> None:
    book = ProviderBook([stored()])
    outcome = book.apply_set(
        set_command(label="Kimi 2", base_url="https://b.example/", default_model="k2"), NOW
    )
    profile = book.get("kimi")
    assert profile is not None and profile.label == "Kimi 2"
    assert profile.base_url == "https://b.example/" and profile.default_model == "k2"
    assert outcome.probe == ProbeRequest("https://b.example/", TOKEN, "k2")


# --- delete ----------------------------------------------------------------------------------


def test_delete_removes_the_profile() -> None:
    book = ProviderBook([stored(), stored("other", label="Other")])
    outcome = book.apply_set(set_command(delete=True), NOW)
    assert outcome.success and outcome.delete and outcome.changed
    assert outcome.save is None and outcome.probe is None
    assert "kimi" not in book and len(book) == 1


def test_delete_of_an_unknown_profile_succeeds_without_a_change() -> None:
    book = ProviderBook()
    outcome = book.apply_set(set_command("ghost", delete=True), NOW)
    assert outcome.success and not outcome.delete and not outcome.changed


# --- the https rule --------------------------------------------------------------------------

URL_CASES = [
    ("https://api.example.com", True),
    ("HTTPS://API.EXAMPLE.COM/x", True),
    ("http://localhost:8080", True),
    ("http://LOCALHOST", True),
    ("http://127.0.0.1:4000/v", True),
    ("http://[::1]:1234", True),
    ("http://0.0.0.0:8080", False),
    ("http://foo.localhost", False),
    ("http://localhost.example.com", False),
    ("http://127.0.0.2", False),
    ("http://api.example.com", False),
    ("ftp://localhost", False),
    ("not a url", False),
]


@pytest.mark.parametrize(("url", "allowed"), URL_CASES, ids=[c[0] for c in URL_CASES])
def test_https_rule_on_write(url: str, allowed: bool) -> None:
    book = ProviderBook()
    if allowed:
        outcome = book.apply_set(set_command(base_url=url, token=TOKEN), NOW)
        assert outcome.success and outcome.save is not None
        assert outcome.probe is not None and outcome.probe.base_url == url
        return
    # The wire decoder already refuses it (the phone checks on encode too) ...
    with pytest.raises(DecodeError, match=r"Base URL must be https://"):
        set_command(base_url=url, token=TOKEN)
    # ... and the book refuses to persist it even if a caller skipped validation.
    write = ProviderProfileWrite.model_construct(
        label="X", baseUrl=url, authToken=TOKEN, models=[ModelEntry(id="m")], defaultModel=None
    )
    command = SetProviderProfileCommand.model_construct(profileId="x", profile=write)
    outcome = book.apply_set(command, NOW)
    assert not outcome.success and outcome.error == BASE_URL_ERROR
    assert outcome.save is None and not outcome.changed and "x" not in book


def test_a_legacy_insecure_profile_is_listed_and_deletable_but_never_used() -> None:
    legacy = profile_from_record(
        "old",
        {
            "label": "Old",
            "baseUrl": "http://relay.example.com",
            "authToken": TOKEN,
            "models": [{"id": "m1"}],
        },
    )
    assert legacy is not None and not legacy.secure
    book = ProviderBook([legacy])
    assert [p.id for p in book.redacted()] == ["old"]
    assert book.redacted()[0].baseUrl == "http://relay.example.com"
    reason = book.resolve_for_session("old")
    assert isinstance(reason, str) and BASE_URL_ERROR in reason and TOKEN not in reason
    assert book.probe_request("old") is None
    outcome = book.apply_set(set_command("old", delete=True), NOW)
    assert outcome.success and outcome.delete and "old" not in book


# --- limits and token checks -----------------------------------------------------------------


def test_the_number_of_profiles_is_bounded_but_existing_ones_stay_editable() -> None:
    book = ProviderBook([stored(f"p{i}", label=f"P{i}") for i in range(MAX_PROFILES)])
    refused = book.apply_set(set_command("one-more"), NOW)
    assert not refused.success and refused.error is not None and "too many" in refused.error
    assert book.apply_set(set_command("p0", token=OTHER), NOW).success


@pytest.mark.parametrize(
    "token",
    ["has space", "tab\there", "ünïcode", "x" * (MAX_TOKEN_LENGTH + 1), "new\nline"],
    ids=["space", "tab", "unicode", "long", "newline"],
)
def test_unusable_tokens_are_refused_without_being_quoted(token: str) -> None:
    assert token_problem(token) is not None
    book = ProviderBook([stored()])
    outcome = book.apply_set(set_command(token=token), NOW)
    assert not outcome.success and outcome.error is not None
    assert token not in outcome.error
    assert book.get("kimi") == stored()  # unchanged


# --- session resolution, labels --------------------------------------------------------------


def test_resolve_for_session_defaults_the_model() -> None:
    book = ProviderBook([stored(), stored("d", label="D", default_model="k2")])
    first = book.resolve_for_session("kimi")
    assert first == ResolvedProvider(
        "kimi", "Kimi", "https://api.example.com/anthropic", TOKEN, "k3"
    )
    second = book.resolve_for_session("d")
    assert isinstance(second, ResolvedProvider) and second.model == "k2"
    explicit = book.resolve_for_session("kimi", "k2")
    assert isinstance(explicit, ResolvedProvider) and explicit.model == "k2"


@pytest.mark.parametrize(
    ("profiles", "provider_id", "model", "expected"),
    [
        ([], "gone", None, 'provider profile "gone" does not exist'),
        ([stored(token=None)], "kimi", None, 'provider profile "Kimi" has no auth token'),
        ([stored(base_url="http://x.example")], "kimi", None, "cannot be used"),
        ([stored()], "kimi", "opus", 'model "opus" is not offered by provider profile "Kimi"'),
    ],
    ids=["unknown", "no-token", "insecure", "foreign-model"],
)
def test_resolve_for_session_refusals_are_readable(
    profiles: list[ProviderProfile], provider_id: str, model: str | None, expected: str
) -> None:
    reason = ProviderBook(profiles).resolve_for_session(provider_id, model)
    assert isinstance(reason, str) and expected in reason


def test_label_of_and_allows_model() -> None:
    book = ProviderBook([stored(default_model="special")])
    assert book.label_of("kimi") == "Kimi"
    assert book.label_of("deleted-id") == "deleted-id"
    assert book.allows_model("kimi", "k2") and book.allows_model("kimi", "special")
    assert not book.allows_model("kimi", "opus") and not book.allows_model("gone", "k2")


def test_redacted_list_order_is_label_then_id() -> None:
    book = ProviderBook(
        [stored("b", label="beta"), stored("a2", label="Alpha"), stored("a1", label="alpha")]
    )
    assert [p.id for p in book.redacted()] == ["a1", "a2", "b"]


# --- messages and redaction ------------------------------------------------------------------


def test_ack_tri_state_token_valid() -> None:
    absent = json.loads(encode(provider_profile_ack("m", "kimi", success=True)))
    assert absent == {
        "type": "provider-profile-ack",
        "machine": "m",
        "profileId": "kimi",
        "success": True,
    }
    valid = json.loads(encode(provider_profile_ack("m", "kimi", success=True, token_valid=False)))
    assert valid["tokenValid"] is False
    refused = json.loads(
        encode(provider_profile_ack("m", "x", success=False, error=BASE_URL_ERROR))
    )
    assert refused["error"] == BASE_URL_ERROR and "tokenValid" not in refused


def test_the_token_never_reaches_a_phone_message_or_a_repr() -> None:
    book = ProviderBook()
    outcome = book.apply_set(set_command(token=TOKEN), NOW)
    listing = encode(provider_profiles_message("machine", book))
    assert json.loads(listing)["profiles"] == [
        {
            "id": "kimi",
            "label": "Kimi",
            "baseUrl": "https://api.example.com/anthropic",
            "models": [{"id": "k3", "label": "K3"}, {"id": "k2"}],
            "hasToken": True,
        }
    ]
    ack = encode(provider_profile_ack("machine", "kimi", success=True, token_valid=True))
    resolved = book.resolve_for_session("kimi")
    texts = [
        listing,
        ack,
        repr(outcome),
        repr(book.get("kimi")),
        repr(resolved),
        repr(book.probe_request("kimi")),
        repr(book.redacted()),
        repr(set_command(token=TOKEN)),
    ]
    for text in texts:
        assert TOKEN not in text, text


# --- store records ---------------------------------------------------------------------------


def test_record_round_trip_keeps_the_token_for_the_store() -> None:
    profile = stored(default_model="k2")
    record = profile_to_record(profile)
    assert record["authToken"] == TOKEN
    assert profile_from_record("kimi", json.loads(json.dumps(record))) == profile
    bare = profile_to_record(stored(token=None))
    assert "authToken" not in bare and "defaultModel" not in bare


@pytest.mark.parametrize(
    "record",
    [
        {},
        {"label": "", "baseUrl": "https://x", "models": [{"id": "m"}]},
        {"label": "L", "baseUrl": 3, "models": [{"id": "m"}]},
        {"label": "L", "baseUrl": "https://x", "models": "m"},
        {"label": "L", "baseUrl": "https://x", "models": [{"id": ""}, "junk"]},
    ],
    ids=["empty", "no-label", "bad-url", "bad-models", "no-usable-model"],
)
def test_unusable_records_are_skipped(record: dict[str, Any]) -> None:
    assert profile_from_record("p", record) is None


def test_odd_optional_fields_of_a_record_are_ignored() -> None:
    profile = profile_from_record(
        "p",
        {
            "label": "L",
            "baseUrl": "https://x",
            "models": [{"id": "m", "label": 5}],
            "defaultModel": 7,
            "authToken": "",
            "updatedAt": True,
        },
    )
    assert profile == ProviderProfile("p", "L", "https://x", (ModelEntry(id="m"),))


# --- purity of the engine modules written for the v10 command set ----------------------------

FORBIDDEN = {"asyncio", "time", "random", "secrets", "logging", "os", "socket", "aiosqlite"}
PURE_MODULES = [
    "phones/providers.py",
    "phones/credentials.py",
    "phones/device_config.py",
    "sessions/uploads.py",
]


@pytest.mark.parametrize("name", PURE_MODULES)
def test_engine_modules_are_sans_io(name: str) -> None:
    path = Path(bridge.engine.__file__).parent / name
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = [node.module or ""]
        for module in modules:
            top = module.split(".")[0]
            assert top not in FORBIDDEN, f"{name} imports {module}"
            assert top not in {"store", "aiohttp"}, f"{name} imports {module}"
