"""``fetch_models`` asks a short-lived real Claude Code CLI (against the mock API) for its models."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bridge.agents.claude import fetch_models
from tests.support.mock_anthropic import MockAnthropic

pytestmark = pytest.mark.e2e


async def test_fetch_models_asks_a_short_lived_cli(tmp_path: Path) -> None:
    with MockAnthropic() as mock:
        env = {**os.environ, **mock.cli_env(tmp_path / "config")}
        models = await fetch_models(tmp_path, env=env)
        assert mock.message_requests() == []  # no API request for the list
    assert {"default", "opus", "sonnet", "haiku"} <= {m.id for m in models}
    assert all(m.label for m in models)
