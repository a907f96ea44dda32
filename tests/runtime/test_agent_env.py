"""The agents' side of the runtime per session: runner kind, environment, gate, model lists."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bridge.agent_config import AgentConfig
from bridge.agents.acp import RECORD_DIR_OPTION
from bridge.agents.base import RunnerError, SessionSpec
from bridge.config import Settings
from bridge.engine.agents import ConfiguredAgent
from bridge.engine.core import Engine, EngineConfig, EngineState
from bridge.engine.effects import SessionRecord
from bridge.engine.inputs import Input
from bridge.protocol import ModelEntry
from bridge.runtime.hosts.agent_env import (
    ACP_AGENT_KIND,
    AgentEnvironment,
    acp_driver_options,
    no_longer_configured,
)
from bridge.runtime.hosts.launcher import HostLauncher
from bridge.sandbox import SandboxSupport

from .support import BRIDGE, NOW, FakeClock, session_record

SANDBOX = SandboxSupport(available=True, bwrap="/usr/bin/bwrap")
"""The start's answer, given: the trial starts a process (tests/integration/sandbox tries it)."""

ROOT = "/ws"


def make(
    tmp_path: Path,
    agents: tuple[AgentConfig, ...],
    records: list[SessionRecord],
    clock: FakeClock | None = None,
    secrets: tuple[str, ...] = (),
) -> tuple[AgentEnvironment, list[Input]]:
    settings = Settings(
        home=tmp_path / "home",
        relays=(),
        workspaces=(Path(ROOT),),
        machine_name="box",
        embedded_relay=("127.0.0.1", 7777),
        key_file=None,
        agent="scripted",  # Claude Code's sessions: the scripted agent (no CLI to import)
        agents=agents,
    )
    engine = Engine(
        EngineConfig(
            bridge_pubkey=BRIDGE.public_hex,
            machine="box",
            roots=(ROOT,),
            home=str(tmp_path),
            secrets=secrets,
            agents=tuple(ConfiguredAgent(a.agent_id, a.label) for a in agents),
        ),
        EngineState(sessions=records),
        decrypt=lambda author, payload: "",
        new_id=lambda: "id",
        now=NOW,
    )
    fed: list[Input] = []
    monotonic = (clock or FakeClock()).monotonic
    return AgentEnvironment(settings, engine, fed.append, sandbox=SANDBOX, monotonic=monotonic), fed


OPENCODE = AgentConfig(
    "opencode", "OpenCode", ("/opt/opencode", "acp"), {"OPENCODE_CONFIG": "/oc.json"}
)


def runner_of(env: AgentEnvironment, tmp_path: Path, session_id: str) -> Any:
    factory = env.runner_factory(HostLauncher(tmp_path / "home"), store=object())  # type: ignore[arg-type]
    return factory(session_id, lambda event: None)


def test_each_session_gets_the_runner_of_its_own_agent(tmp_path: Path) -> None:
    records = [session_record("s-oc", ROOT, agent="opencode"), session_record("s-cc", ROOT)]
    env, _ = make(tmp_path, (OPENCODE,), records)
    acp = runner_of(env, tmp_path, "s-oc")
    assert (acp._agent, acp._label) == (ACP_AGENT_KIND, "OpenCode")
    assert acp._options == {
        "agent_id": "opencode",
        "label": "OpenCode",
        "command": ["/opt/opencode", "acp"],
        "record_dir": str(tmp_path / "home" / "acp"),
    }
    assert acp._options == acp_driver_options(OPENCODE, tmp_path / "home")
    assert RECORD_DIR_OPTION in acp._options  # the driver's own name for it
    assert json.loads(json.dumps(acp._options)) == acp._options  # JSON values only
    assert acp._tool_check == env.tool_check  # the same gate as Claude Code's
    claude = runner_of(env, tmp_path, "s-cc")
    assert claude._agent == "scripted"  # agent = "scripted" replaces Claude Code only


def test_a_session_whose_agent_left_the_configuration_fails_readably(tmp_path: Path) -> None:
    record = session_record("s-gm", ROOT, agent="gemini")
    env, _ = make(tmp_path, (OPENCODE,), [record])
    reason = no_longer_configured("gemini")
    assert "[agents.gemini]" in reason
    assert env.session_env(record) == reason  # at start: the runner manager fails the session
    assert env.agent_env(SessionSpec("s-gm", Path(ROOT))) == reason  # at each restart
    with pytest.raises(RunnerError, match="no longer configured"):
        runner_of(env, tmp_path, "s-gm")


def test_an_acp_agent_gets_the_daemons_environment_plus_its_table_and_no_provider(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FROM_DAEMON", "yes")
    monkeypatch.setenv("NOTIFY_SOCKET", "/run/systemd/notify")
    record = session_record("s-oc", ROOT, agent="opencode", provider_id="kimi")
    env, _ = make(tmp_path, (OPENCODE,), [record])
    assert env.session_env(record) == {"OPENCODE_CONFIG": "/oc.json"}
    spawned = env.agent_env(SessionSpec("s-oc", Path(ROOT), provider_id="kimi"))
    assert isinstance(spawned, dict)
    assert spawned["FROM_DAEMON"] == "yes" and spawned["OPENCODE_CONFIG"] == "/oc.json"
    assert "NOTIFY_SOCKET" not in spawned and "ANTHROPIC_BASE_URL" not in spawned


def test_claude_codes_plan_file_is_claude_codes_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    plan = {"file_path": str(tmp_path / "claude" / "plans" / "p.md"), "content": "# plan"}
    records = [
        session_record("s-cc", ROOT, permission_mode="plan"),
        session_record("s-oc", ROOT, permission_mode="plan", agent="opencode"),
    ]
    env, _ = make(tmp_path, (OPENCODE,), records)
    assert env.tool_check("s-cc", "Write", plan) is None
    verdict = env.tool_check("s-oc", "Write", plan)
    assert verdict is not None and verdict[0] in ("ask", "deny")


def test_the_hook_denies_a_hidden_path_whatever_the_mode(tmp_path: Path) -> None:
    secret = f"{ROOT}/.codedeck"
    records = [session_record("s-cc", ROOT, permission_mode="plan")]
    env, fed = make(tmp_path, (), records, secrets=(secret,))
    verdict = env.tool_check("s-cc", "Bash", {"command": f"cat {secret}/bridge.db"})
    assert verdict is not None and verdict[0] == "deny" and "deny_list:secret_path" in verdict[1]
    assert env.tool_check("s-cc", "Read", {"file_path": f"{ROOT}/README.md"}) is None
    assert len(fed) == 1  # the block is fed to the engine for the audit log


class LiveModels:
    """A runner manager's model lists per agent."""

    def __init__(self, by_agent: dict[str, list[ModelEntry]]) -> None:
        self.by_agent = by_agent

    def models(self, agent: str = "claude") -> list[ModelEntry]:
        return list(self.by_agent.get(agent, []))


async def test_scripted_claude_models_are_unchanged(tmp_path: Path) -> None:
    env, _ = make(tmp_path, (), [])
    assert await env.list_models(LiveModels({}), None) == [  # type: ignore[arg-type]
        ModelEntry(id="scripted", label="Scripted test agent")
    ]


async def test_no_agent_no_check(tmp_path: Path) -> None:
    env, fed = make(tmp_path, (), [])
    await env.check_agents()
    assert fed == [] and env.probes == {}
