"""The daemon's start, in process: a start that fails half-way leaves nothing listening."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bridge.config import Settings
from bridge.runtime.daemon import Daemon, DaemonError
from bridge.runtime.hosts.agent_env import AgentEnvironment, AgentLoadError
from bridge.sandbox import SandboxSettings
from store.db import BridgeDatabase
from tests.runtime.support import BRIDGE

DRIVER_MISSING = (
    "the Claude Code driver cannot load (No module named 'claude'); reinstall the project "
    '(pip install -e .) or set agent = "scripted" to run without Claude Code'
)


def missing_driver(*args: object, **kwargs: object) -> None:
    raise AgentLoadError(DRIVER_MISSING)


async def test_a_start_that_fails_before_serving_stops_the_embedded_relay_and_the_registration(
    db: BridgeDatabase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = tmp_path / "relay.token"
    token.write_text("secret-token\n")
    token.chmod(0o600)
    settings = Settings(
        home=tmp_path / "home",
        relays=(),
        workspaces=(tmp_path,),
        machine_name="box",
        embedded_relay=("127.0.0.1", 0),
        key_file=None,
        register_url="http://127.0.0.1:9/admin",  # nothing answers: the calls only wait
        register_token_file=token,
        sandbox=SandboxSettings(enabled=False),  # no bubblewrap trial: no process in this tier
    )
    monkeypatch.setattr(AgentEnvironment, "runner_factory", missing_driver)
    daemon = Daemon(settings, db, BRIDGE, keep_sessions=False)
    with pytest.raises(DaemonError) as failed:
        await daemon.serve(asyncio.Event())
    assert str(failed.value) == DRIVER_MISSING
    relay, registration = daemon.embedded, daemon.registration
    assert relay is not None and relay.port != 0  # it was listening
    assert not relay.running
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", relay.port)
    assert registration is not None and registration._tasks.closed
