"""The model list: from an initialize answer, and from a short-lived (fake) CLI."""

from __future__ import annotations

from pathlib import Path

from bridge.agents.claude import fetch_models
from tests.agents.claude.conftest import FakeCli


async def test_fetch_models_asks_a_short_lived_cli(fake_cli: FakeCli, tmp_path: Path) -> None:
    models = await fetch_models(tmp_path, env=fake_cli.env(), cli_path=fake_cli.path, timeout=10)
    assert [m.id for m in models] == ["default", "fast", "plain"]
    [start] = fake_cli.log("start")
    assert "--permission-prompt-tool" not in start["argv"]
    assert fake_cli.log("sigterm")  # stopped, not left running


async def test_fetch_models_reports_an_unusable_cli_as_empty(tmp_path: Path) -> None:
    assert (
        await fetch_models(tmp_path, env={}, cli_path=tmp_path / "no-such-claude", timeout=10) == []
    )


async def test_fetch_models_gives_up_on_a_silent_cli(fake_cli: FakeCli, tmp_path: Path) -> None:
    env = fake_cli.env(FAKE_SILENT_INIT="1")
    assert await fetch_models(tmp_path, env=env, cli_path=fake_cli.path, timeout=0.5) == []
