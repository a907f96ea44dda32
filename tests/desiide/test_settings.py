"""The settings snapshot: one validation (the params model's), refs only, storage modes, strict
mode, secret handling."""

from __future__ import annotations

import dataclasses
import json
import stat
from pathlib import Path
from typing import Any

import pytest

from bridge.control.framing import FrameDecoder, encode_frame
from bridge.desiide.connection import Answer, Call, DesiideConnection
from bridge.desiide.errors import INVALID_PARAMS
from bridge.desiide.schema.config import DesiideConfig
from bridge.desiide.settings import (
    STRICT_MODE_LABEL,
    DesiideSettings,
    GatingSettings,
    JevSettings,
    ModelSettings,
    RiskOutcome,
    SecretNotSet,
    SecretRef,
    SecretValue,
    SettingsError,
    apply_strict,
    config_path,
    load_config,
    resolve_secret,
    save_config,
)

RAW_KEY = "sk-ant-api03-THIS-IS-A-RAW-KEY"


def make_model(**overrides: Any) -> dict[str, Any]:
    model: dict[str, Any] = {
        "id": "fast",
        "provider": "anthropic",
        "baseUrl": "https://api.example.com/",
        "model": "claude-haiku-4-5",
        "apiKey": "secret:anthropic",
    }
    model.update(overrides)
    return {k: v for k, v in model.items() if v is not None}


def make_params(**overrides: Any) -> dict[str, Any]:
    params: dict[str, Any] = {
        "models": [make_model()],
        "roles": {"planner": "fast", "coder": "claude:sonnet"},
        "jev": {"baseUrl": "http://127.0.0.1:8080", "model": "judge", "apiKey": "secret:jev"},
        "gating": {"strict": True},
    }
    params.update(overrides)
    return params


class FakeSecrets:
    def __init__(self, values: dict[str, str | None]) -> None:
        self.values = values
        self.asked: list[str] = []

    async def get(self, ref: str) -> str | None:
        self.asked.append(ref)
        return self.values.get(ref)


# --- from_params -------------------------------------------------------------------------------


def test_a_full_snapshot_is_read() -> None:
    config = DesiideSettings.from_params(make_params())
    assert config.models == (
        ModelSettings(
            id="fast",
            provider="anthropic",
            base_url="https://api.example.com",
            model="claude-haiku-4-5",
            api_key=SecretRef("anthropic"),
            auth="x-api-key",
            locality="remote",
        ),
    )
    assert config.roles == (("coder", "claude:sonnet"), ("planner", "fast"))
    assert config.role("planner") == "fast"
    assert config.role("nope") is None
    assert config.jev == JevSettings(
        base_url="http://127.0.0.1:8080", model="judge", api_key=SecretRef("jev")
    )
    assert config.gating == GatingSettings(strict=True)
    assert config.secret_refs() == ("secret:anthropic", "secret:jev")


def test_absent_sections_take_defaults() -> None:
    assert DesiideSettings.from_params({}) == DesiideSettings()
    assert DesiideSettings().gating.strict is False
    assert DesiideSettings().jev is None


def test_defaults_per_provider_and_host() -> None:
    config = DesiideSettings.from_params(
        make_params(
            models=[
                make_model(id="oa", provider="openai"),
                make_model(
                    id="ol", provider="ollama", baseUrl="http://localhost:11434", apiKey=None
                ),
                make_model(
                    id="lan", provider="ollama", baseUrl="http://192.168.1.5:11434", apiKey=None
                ),
            ]
        )
    )
    oa, ol, lan = config.models
    assert (oa.auth, oa.locality) == ("bearer", "remote")
    assert (ol.auth, ol.locality, ol.api_key) == ("bearer", "local", None)
    assert lan.locality == "remote"


def test_to_wire_round_trips_and_holds_refs_only() -> None:
    config = DesiideSettings.from_params(
        make_params(
            models=[make_model(label="Fast", contextTokens=200000, costTier="low", auth="bearer")]
        )
    )
    wire = config.to_wire()
    assert DesiideSettings.from_params(wire) == config
    assert wire["models"][0]["apiKey"] == "secret:anthropic"
    assert wire["jev"]["apiKey"] == "secret:jev"


# What the editor is answered for each invalid value: the params model's ``InvalidParams``.
ERROR_CASES: list[tuple[str, Any, str]] = [
    ("unknown top-level", make_params(extra=1), "extra: unknown param"),
    ("models not a list", make_params(models={}), "models: Input should be a valid list"),
    ("unknown model key", make_params(models=[make_model(temperature=1)]), "models[0].temperature: unknown param"),
    ("missing model", make_params(models=[make_model(model=None)]), "models[0].model: required"),
    ("missing provider", make_params(models=[make_model(provider=None)]), "models[0].provider: required"),
    ("bad provider", make_params(models=[make_model(provider="gemini")]), "models[0].provider: Input should be 'anthropic', 'openai' or 'ollama'"),
    ("reserved prefix", make_params(models=[make_model(id="claude:x")]), "models[0].id: the prefixes claude:, profile:, ollama: are taken by other model sources"),
    ("bad id chars", make_params(models=[make_model(id="a b")]), "models[0].id: must be 1-100 of A-Z a-z 0-9 . _ -"),
    ("duplicate id", make_params(models=[make_model(), make_model()]), "models: model ids must be unique"),
    ("bad secret name", make_params(models=[make_model(apiKey="secret:has space")]), "models[0].apiKey: the secret name must be 1-200 printable characters without spaces"),
    ("empty secret name", make_params(models=[make_model(apiKey="secret:")]), "models[0].apiKey: the secret name must be 1-200 printable characters without spaces"),
    ("key over plain http", make_params(models=[make_model(baseUrl="http://api.example.com")]), "models[0]: baseUrl: an endpoint that gets an API key must be https:// (http:// only for localhost, 127.0.0.1 or [::1])"),
    ("not a URL scheme", make_params(models=[make_model(baseUrl="ftp://x")]), "models[0].baseUrl: must be an http(s) URL"),
    ("query in URL", make_params(models=[make_model(baseUrl="https://x/?a=1")]), "models[0].baseUrl: must not have a query or fragment"),
    ("bad context", make_params(models=[make_model(contextTokens=0)]), "models[0].contextTokens: Input should be greater than or equal to 1"),
    ("bool context", make_params(models=[make_model(contextTokens=True)]), "models[0].contextTokens: Input should be a valid integer"),
    ("bad tier", make_params(models=[make_model(costTier="free")]), "models[0].costTier: Input should be 'low', 'medium' or 'high'"),
    ("roles not object", make_params(roles=[]), "roles: Input should be a valid dictionary"),
    ("bad role name", make_params(roles={"Planner": "fast"}), "roles.Planner.[key]: String should match pattern '^[a-z][a-z0-9_]{0,39}$'"),
    ("bad role value", make_params(roles={"planner": 3}), "roles.planner: Input should be a valid string"),
    ("jev unknown key", make_params(jev={"baseUrl": "https://x", "model": "m", "x": 1}), "jev.x: unknown param"),
    ("jev missing model", make_params(jev={"baseUrl": "https://x"}), "jev.model: required"),
    ("jev timeout", make_params(jev={"baseUrl": "https://x", "model": "m", "timeoutMs": 10}), "jev.timeoutMs: Input should be greater than or equal to 1000"),
    ("jev riskGate", make_params(jev={"baseUrl": "https://x", "model": "m", "riskGate": "yes"}), "jev.riskGate: Input should be a valid boolean"),
    ("strict not bool", make_params(gating={"strict": 1}), "gating.strict: Input should be a valid boolean"),
    ("gating unknown", make_params(gating={"strict": True, "mode": "x"}), "gating.mode: unknown param"),
    ("params not object", [], "params must be an object"),
]  # fmt: skip


INIT: dict[str, Any] = {
    "protocolVersion": "1.0.0",
    "client": {"name": "desiide", "version": "0.3.0"},
    "workspaceRoots": [],
}


def frame(request_id: int, method: str, params: Any) -> bytes:
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    return encode_frame(json.dumps(body).encode())


@pytest.mark.parametrize(
    ("params", "message"), [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES]
)
def test_an_invalid_value_is_refused_once_with_the_editors_message(
    params: Any, message: str, tmp_path: Path
) -> None:
    """The connection refuses it with the params model's message (no handler call follows),
    and a stored file holding it is refused by the same model with the same words."""
    conn = DesiideConnection()
    [_] = conn.feed(frame(1, "initialize", INIT))
    [answer] = conn.feed(frame(2, "config.update", params))
    assert isinstance(answer, Answer)  # answered by the connection: no Call reaches a handler
    [body] = FrameDecoder().feed(answer.data)
    assert json.loads(body)["error"] == {
        "code": INVALID_PARAMS,
        "message": f"invalid params: {message}",
    }
    config_path(tmp_path).parent.mkdir()
    config_path(tmp_path).write_text(json.dumps(params))
    with pytest.raises(SettingsError) as caught:
        load_config(tmp_path)
    assert str(caught.value) == f"{config_path(tmp_path)}: invalid params: {message}"


def test_a_valid_update_becomes_the_frozen_snapshot_without_a_second_check() -> None:
    """What the connection accepted is what the snapshot holds: the handler converts, it does
    not validate again (it has no rules of its own to disagree with)."""
    conn = DesiideConnection()
    [_] = conn.feed(frame(1, "initialize", INIT))
    [call] = conn.feed(frame(2, "config.update", make_params()))
    assert isinstance(call, Call) and isinstance(call.params, DesiideConfig)
    settings = DesiideSettings.from_config(call.params)
    assert settings == DesiideSettings.from_params(make_params())
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.roles = ()  # type: ignore[misc]


@pytest.mark.parametrize("where", ["model", "jev"])
def test_a_raw_key_is_refused_without_quoting_it(where: str) -> None:
    if where == "model":
        params = make_params(models=[make_model(apiKey=RAW_KEY)])
        field_name = "models[0].apiKey"
    else:
        params = make_params(jev={"baseUrl": "https://x", "model": "m", "apiKey": RAW_KEY})
        field_name = "jev.apiKey"
    with pytest.raises(SettingsError) as caught:
        DesiideSettings.from_params(params)
    text = str(caught.value)
    assert text.startswith(
        f"invalid params: {field_name}: API keys are accepted only as secret:<name> references"
    )
    assert "raw key is refused" in text
    assert RAW_KEY not in text
    assert "THIS-IS" not in text


def test_credentials_inside_a_url_are_refused_without_quoting_them() -> None:
    params = make_params(models=[make_model(baseUrl="https://user:hunter2@api.example.com")])
    with pytest.raises(SettingsError) as caught:
        DesiideSettings.from_params(params)
    assert str(caught.value) == (
        "invalid params: models[0].baseUrl: credentials inside the URL are refused; use apiKey"
    )


def test_an_endpoint_without_key_may_be_plain_http_on_the_lan() -> None:
    config = DesiideSettings.from_params(
        make_params(jev={"baseUrl": "http://10.0.0.2:8080/", "model": "judge"})
    )
    assert config.jev is not None
    assert (config.jev.base_url, config.jev.api_key) == ("http://10.0.0.2:8080", None)


# --- storage -----------------------------------------------------------------------------------


def test_save_writes_0600_in_0700_with_refs_only(tmp_path: Path) -> None:
    config = DesiideSettings.from_params(make_params())
    path = save_config(tmp_path, config)
    assert path == config_path(tmp_path) == tmp_path / "desiide" / "config.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    stored = json.loads(path.read_text())
    assert stored == config.to_wire()
    assert "secret:anthropic" in path.read_text()
    assert [p.name for p in path.parent.iterdir()] == ["config.json"]  # no temp file left
    assert load_config(tmp_path) == config


def test_save_narrows_an_existing_directory_and_replaces_the_file(tmp_path: Path) -> None:
    (tmp_path / "desiide").mkdir(mode=0o755)
    (tmp_path / "desiide").chmod(0o755)
    save_config(tmp_path, DesiideSettings.from_params(make_params()))
    save_config(tmp_path, DesiideSettings())
    assert stat.S_IMODE((tmp_path / "desiide").stat().st_mode) == 0o700
    assert load_config(tmp_path) == DesiideSettings()


def test_load_without_a_file_is_none_and_a_corrupt_file_is_an_error(tmp_path: Path) -> None:
    assert load_config(tmp_path) is None
    config_path(tmp_path).parent.mkdir()
    config_path(tmp_path).write_text("{not json")
    with pytest.raises(SettingsError, match="not valid JSON"):
        load_config(tmp_path)
    config_path(tmp_path).write_text(json.dumps({"models": [make_model(apiKey=RAW_KEY)]}))
    with pytest.raises(SettingsError, match="raw key is refused"):
        load_config(tmp_path)


# --- strict mode -------------------------------------------------------------------------------

STRICT_CASES: list[tuple[RiskOutcome, tuple[str, ...], bool, RiskOutcome, tuple[str, ...]]] = [
    ("auto", (), True, "confirm", (STRICT_MODE_LABEL,)),
    ("auto", ("x",), True, "confirm", ("x", STRICT_MODE_LABEL)),
    ("auto", (STRICT_MODE_LABEL,), True, "confirm", (STRICT_MODE_LABEL,)),
    ("confirm", ("privileged",), True, "confirm", ("privileged",)),
    ("block", ("deny_list:rm_rf",), True, "block", ("deny_list:rm_rf",)),
    ("auto", (), False, "auto", ()),
    ("confirm", ("inline_code",), False, "confirm", ("inline_code",)),
    ("block", ("deny_list:mkfs",), False, "block", ("deny_list:mkfs",)),
]


@pytest.mark.parametrize(("outcome", "reasons", "strict", "want", "want_reasons"), STRICT_CASES)
def test_apply_strict(
    outcome: RiskOutcome,
    reasons: tuple[str, ...],
    strict: bool,
    want: RiskOutcome,
    want_reasons: tuple[str, ...],
) -> None:
    assert apply_strict(outcome, list(reasons), strict) == (want, want_reasons)


def test_strict_mode_label_is_the_seeds() -> None:
    assert STRICT_MODE_LABEL == "policy_override:strict_mode"


# --- secrets -----------------------------------------------------------------------------------


def test_a_secret_value_never_shows_in_repr_or_str() -> None:
    value = SecretValue(RAW_KEY)
    assert repr(value) == str(value) == "SecretValue(***)"
    assert RAW_KEY not in repr([value]) and RAW_KEY not in f"{value}"
    assert value.reveal() == RAW_KEY
    assert value.scrub(f"bad key {RAW_KEY}!") == "bad key ***!"


async def test_resolve_secret_asks_the_resolver_and_refuses_a_missing_one() -> None:
    secrets = FakeSecrets({"secret:a": "value-a", "secret:empty": ""})
    value = await resolve_secret(secrets, SecretRef("a"))
    assert value.reveal() == "value-a"
    for name in ("missing", "empty"):
        with pytest.raises(SecretNotSet) as caught:
            await resolve_secret(secrets, SecretRef(name))
        assert caught.value.ref == f"secret:{name}"
        assert str(caught.value) == (
            f"the secret secret:{name} is not set in the editor's secret storage"
        )
    assert secrets.asked == ["secret:a", "secret:missing", "secret:empty"]
