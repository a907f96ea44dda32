"""Provider-bound environments: the vendor scrub, the profile's variables, the config dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.agents.claude import (
    KEPT_CLAUDE_VARIABLES,
    MODEL_VARIABLES,
    claude_config_dir,
    provider_env,
    scrub_vendor_env,
)

DAEMON_ENV = {
    "PATH": "/usr/bin",
    "HOME": "/home/dev",
    "HTTPS_PROXY": "http://proxy:3128",
    "ANTHROPIC_API_KEY": "sk-daemon",
    "ANTHROPIC_BASE_URL": "https://api.anthropic.com",
    "ANTHROPIC_MODEL": "opus",
    "ANTHROPIC_VERTEX_PROJECT_ID": "p",
    "CLAUDE_CODE_USE_BEDROCK": "1",
    "CLAUDE_CODE_OAUTH_TOKEN": "oauth-secret",
    "CLAUDE_CONFIG_DIR": "/home/dev/.bridge-claude",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "CLAUDE_CODE_MAX_RETRIES": "3",
    "AWS_SECRET_ACCESS_KEY": "aws",
    "AWS_REGION": "eu-west-1",
    "AZURE_OPENAI_KEY": "az",
    "BEDROCK_ENDPOINT": "b",
    "CLOUDSDK_CONFIG": "c",
    "GCLOUD_PROJECT": "g",
    "GOOGLE_APPLICATION_CREDENTIALS": "/k.json",
    "VERTEX_REGION_CLAUDE": "v",
    "CLOUD_ML_REGION": "us-east5",
    "DISABLE_AUTOUPDATER": "1",
}


def test_scrub_keeps_what_claude_code_needs_and_nothing_vendor() -> None:
    assert scrub_vendor_env(DAEMON_ENV) == {
        "PATH": "/usr/bin",
        "HOME": "/home/dev",
        "HTTPS_PROXY": "http://proxy:3128",
        "CLAUDE_CONFIG_DIR": "/home/dev/.bridge-claude",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_RETRIES": "3",
        "DISABLE_AUTOUPDATER": "1",
    }
    assert all(name.startswith("CLAUDE_") for name in KEPT_CLAUDE_VARIABLES)


def test_provider_env_sets_the_profile() -> None:
    env = provider_env(DAEMON_ENV, "https://llm.example.org/", "tok-1", "big-model")
    assert env["ANTHROPIC_BASE_URL"] == "https://llm.example.org"
    assert env["ANTHROPIC_AUTH_TOKEN"] == "tok-1"
    for name in MODEL_VARIABLES:
        assert env[name] == "big-model"
    assert {"ANTHROPIC_DEFAULT_HAIKU_MODEL", "ANTHROPIC_SMALL_FAST_MODEL"} <= set(MODEL_VARIABLES)
    assert "ANTHROPIC_API_KEY" not in env and "CLAUDE_CODE_OAUTH_TOKEN" not in env
    assert env["CLAUDE_CONFIG_DIR"] == "/home/dev/.bridge-claude"
    without_model = provider_env(DAEMON_ENV, "https://llm.example.org", "tok-1", None)
    assert not set(MODEL_VARIABLES) & set(without_model)


@pytest.mark.parametrize(
    ("url", "token", "message"),
    [(" ", "t", "no base URL"), ("https://x", "", "no token")],
)
def test_provider_env_refuses_incomplete_profiles(url: str, token: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        provider_env(DAEMON_ENV, url, token, None)


def test_claude_config_dir() -> None:
    assert claude_config_dir({"CLAUDE_CONFIG_DIR": "/c"}) == Path("/c")
    assert claude_config_dir({"HOME": "/h"}) == Path("/h/.claude")
    assert claude_config_dir({}) == Path.home() / ".claude"
