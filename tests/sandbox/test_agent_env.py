"""The daemon's plan of each agent spawn: confined, unconfined with a warning, or refused."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from bridge.agents.base import SessionSpec
from bridge.config import Settings
from bridge.engine.core import Engine, EngineConfig, EngineState
from bridge.engine.effects import SessionRecord
from bridge.runtime.hosts.agent_env import AgentEnvironment, sandbox_support_of
from bridge.sandbox import SandboxSettings, hidden_paths
from tests.runtime.support import BRIDGE, NOW


def environment(tmp_path: Path, sandbox: SandboxSettings) -> AgentEnvironment:
    home = tmp_path / "bridge"
    home.mkdir(exist_ok=True)
    settings = Settings(
        home=home,
        relays=(),
        workspaces=(tmp_path,),
        machine_name="box",
        embedded_relay=("127.0.0.1", 7777),
        key_file=None,
        agent="scripted",
        sandbox=sandbox,
    )
    record = SessionRecord("s-1", str(tmp_path / "ws"), "2026-01-01T00:00:00Z", "2026-01-01")
    engine = Engine(
        EngineConfig(
            bridge_pubkey=BRIDGE.public_hex,
            machine="box",
            roots=(str(tmp_path),),
            home=str(tmp_path),
            secrets=hidden_paths(str(Path.home()), str(home)),
        ),
        EngineState(sessions=[record]),
        decrypt=lambda author, payload: "",
        new_id=lambda: "id",
        now=NOW,
    )
    support = asyncio.run(sandbox_support_of(sandbox))
    return AgentEnvironment(settings, engine, lambda event: None, sandbox=support)


def spec(tmp_path: Path, cwd: Path | None = None) -> SessionSpec:
    folder = cwd or tmp_path / "ws"
    folder.mkdir(parents=True, exist_ok=True)
    return SessionSpec("s-1", folder)


def test_disabled_runs_unconfined(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        agents = environment(tmp_path, SandboxSettings(enabled=False))
    assert "the sandbox is off" in caplog.text
    assert agents.sandbox_for(spec(tmp_path), {}) is None
    assert agents.sandbox_summary().startswith("off")


@pytest.mark.parametrize("required", [False, True])
def test_unavailable_runs_unconfined_or_fails_when_required(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, required: bool
) -> None:
    missing = str(tmp_path / "no-bwrap")
    with caplog.at_level(logging.WARNING):
        agents = environment(tmp_path, SandboxSettings(required=required, bwrap=missing))
        got = agents.sandbox_for(spec(tmp_path), {})
    assert "bubblewrap is missing" in caplog.text  # at start
    if required:
        assert isinstance(got, str) and "[sandbox] required = true" in got
        assert agents.sandbox_summary().startswith("required but unavailable")
    else:
        assert got is None
        assert "runs unconfined" in caplog.text  # and at the session's start
        assert agents.sandbox_summary().startswith("unavailable")
