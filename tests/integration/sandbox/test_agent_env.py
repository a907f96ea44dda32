"""The daemon's plan of each agent spawn: confined, unconfined with a warning, or refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bridge.sandbox import SandboxPolicy, SandboxSettings, check_sandbox
from tests.sandbox.test_agent_env import environment, spec

AVAILABLE = check_sandbox(None, os.environ.get("PATH")).available


@pytest.mark.skipif(not AVAILABLE, reason="bubblewrap cannot run here")
def test_a_session_gets_a_policy_from_its_agents_env(tmp_path: Path) -> None:
    agent_home = tmp_path / "agent-home"
    (agent_home / ".ssh").mkdir(parents=True)
    env = {"HOME": str(agent_home), "CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")}
    policy = environment(tmp_path, SandboxSettings()).sandbox_for(spec(tmp_path), env)
    assert isinstance(policy, SandboxPolicy)
    assert policy.cwd == str((tmp_path / "ws").resolve())
    assert str(tmp_path / "cfg") in policy.writable and (tmp_path / "cfg").is_dir()
    assert str(agent_home / ".ssh") in policy.hidden_dirs  # the agent's own home's secrets too
    assert str(tmp_path / "bridge") in policy.hidden_dirs


@pytest.mark.skipif(not AVAILABLE, reason="bubblewrap cannot run here")
def test_a_folder_inside_the_bridge_home_is_refused(tmp_path: Path) -> None:
    agents = environment(tmp_path, SandboxSettings())
    refused = agents.sandbox_for(spec(tmp_path, tmp_path / "bridge" / "x"), {})
    assert isinstance(refused, str) and "hidden from agents" in refused
