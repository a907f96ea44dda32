"""The isolated OpenCode environment: complete, private, offline, and its two permission layers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.opencode_env import ASK_EVERYTHING, opencode_config, opencode_env


def test_config_points_one_provider_at_the_mock() -> None:
    config = opencode_config("http://127.0.0.1:4181/")
    (provider,) = config["provider"].values()
    assert provider["npm"] == "@ai-sdk/anthropic"
    assert provider["options"] == {"baseURL": "http://127.0.0.1:4181/v1", "apiKey": "test-key"}
    assert list(provider["models"]) == ["mock-model"]
    assert config["model"] == config["small_model"] == "mock/mock-model"
    assert config["enabled_providers"] == ["mock"]
    assert (config["autoupdate"], config["share"]) == (False, "disabled")
    assert "permission" not in config


def test_env_is_complete_private_and_does_not_leak(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "leak")
    monkeypatch.setenv("OPENCODE_CONFIG", "/home/user/opencode.json")
    env = opencode_env("http://127.0.0.1:1", tmp_path, permission={"bash": "allow"})
    assert "ANTHROPIC_API_KEY" not in env and "OPENCODE_CONFIG" not in env
    for name in ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        assert Path(env[name]).is_relative_to(tmp_path) and Path(env[name]).is_dir()
    for flag in ("MODELS_FETCH", "AUTOUPDATE", "DEFAULT_PLUGINS", "LSP_DOWNLOAD", "SHARE"):
        assert env[f"OPENCODE_DISABLE_{flag}"] == "1"
    assert env["OPENCODE_DISABLE_CLAUDE_CODE"] == "1"
    assert json.loads(env["OPENCODE_CONFIG_CONTENT"])["permission"] == {"bash": "allow"}
    assert "OPENCODE_PERMISSION" not in env


def test_env_permission_layer_and_extras(tmp_path: Path) -> None:
    env = opencode_env(
        "http://127.0.0.1:1",
        tmp_path,
        env_permission=ASK_EVERYTHING,
        extra={"OPENCODE_LOG_LEVEL": "DEBUG"},
    )
    assert json.loads(env["OPENCODE_PERMISSION"]) == {"*": "ask"}
    assert env["OPENCODE_LOG_LEVEL"] == "DEBUG"
