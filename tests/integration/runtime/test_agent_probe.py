"""The ACP agents' start-up check, against the fake agent of tests/support (a real subprocess)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from bridge.agent_config import AgentConfig
from bridge.protocol import ModelEntry
from bridge.runtime.hosts.agent_probe import list_agent_models, probe_agent, probe_agents
from tests.support.fake_acp_agent import fake_agent_command

ENV = {"PATH": os.environ.get("PATH", os.defpath), "HOME": os.environ.get("HOME", "/")}


def fake(*args: str, env: dict[str, str] | None = None, agent_id: str = "fake") -> AgentConfig:
    return AgentConfig(agent_id, "Fake", tuple(fake_agent_command(*args)), env or {})


def log_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_an_agent_that_answers_initialize_starts(tmp_path: Path) -> None:
    log = tmp_path / "agent.log"
    agent = fake(
        "--name", "Fake Agent", "--version", "9.1", "--log", str(log), env={"FROM_TABLE": "t"}
    )
    probe = await probe_agent(agent, {**ENV, "FROM_DAEMON": "d"})
    assert probe.started and probe.reason is None
    assert (probe.name, probe.version, probe.load_session) == ("Fake Agent", "9.1", True)
    assert probe.capabilities["loadSession"] is True
    assert probe.describe().startswith("Fake Agent 9.1 (loadSession), answered in ")
    start, initialize = log_lines(log)
    # The complete environment it was given, plus its own table (the SDK alone passes 6 names).
    assert start["env"]["FROM_DAEMON"] == "d" and start["env"]["FROM_TABLE"] == "t"
    # In an empty temporary directory, removed afterwards; the agent is stopped.
    assert start["cwd"] != os.getcwd() and not Path(start["cwd"]).exists()
    assert initialize["method"] == "initialize" and initialize["protocol_version"] == 1
    assert gone(start["pid"])


async def test_agents_are_checked_at_once_and_a_failure_says_why() -> None:
    probes = await probe_agents(
        [
            fake(agent_id="a"),
            fake("--exit-at-start", "4", agent_id="b"),
            fake("--protocol-version", "7", agent_id="c"),
        ],
        ENV,
    )
    assert [(p.agent_id, p.started) for p in probes] == [("a", True), ("b", False), ("c", False)]
    assert probes[1].reason == (
        "it exited with status 4 before it could answer initialize: "
        "fake agent: told to exit with status 4"
    )
    assert probes[2].reason == (
        "it speaks ACP version 7, this bridge speaks version 1; use a version of the agent made "
        "for ACP v1"
    )
    assert probes[2].describe() == probes[2].reason


async def test_an_agent_that_never_answers_times_out_and_is_stopped(tmp_path: Path) -> None:
    log = tmp_path / "agent.log"
    probe = await probe_agent(fake("--hang", "--log", str(log)), ENV, timeout=2.5)
    assert probe.reason == "it did not answer initialize within 2.5 s"
    assert gone(log_lines(log)[0]["pid"])


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        (
            ("/nonexistent/agent", "--acp"),
            "/nonexistent/agent was not found (no such file); install it, or set "
            "agents.x.command in config.toml",
        ),
        (
            ("no-such-agent-on-path",),
            "no-such-agent-on-path was not found (not on the bridge's PATH); install it, or set "
            "agents.x.command in config.toml",
        ),
    ],
    ids=["path", "name"],
)
async def test_a_missing_program_is_named(command: tuple[str, ...], reason: str) -> None:
    probe = await probe_agent(AgentConfig("x", "X", command), ENV)
    assert (probe.started, probe.reason) == (False, reason)


async def test_a_program_that_cannot_run_is_named(tmp_path: Path) -> None:
    script = tmp_path / "agent"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o644)
    probe = await probe_agent(AgentConfig("x", "X", (str(script),)), ENV)
    assert probe.reason == f"{script} cannot be run (permission denied; chmod +x it?)"


async def test_a_cancelled_check_stops_the_agent(tmp_path: Path) -> None:
    log = tmp_path / "agent.log"
    task = asyncio.ensure_future(probe_agent(fake("--hang", "--log", str(log)), ENV))
    for _ in range(200):
        if len(log_lines(log)) == 2:  # started and asked
            break
        await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert gone(log_lines(log)[0]["pid"])


async def test_models_come_from_a_new_sessions_model_option(tmp_path: Path) -> None:
    log = tmp_path / "agent.log"
    listed = await list_agent_models(fake("--models", "p/a,p/b-1", "--log", str(log)), ENV)
    assert listed.models == (ModelEntry(id="p/a", label="A"), ModelEntry(id="p/b-1", label="B-1"))
    assert (listed.default_model, listed.reason) == ("p/a", None)
    new = [line for line in log_lines(log) if line.get("method") == "session/new"]
    assert len(new) == 1 and not Path(new[0]["cwd"]).exists()


async def test_an_agent_without_a_model_option_lists_none_and_says_so() -> None:
    listed = await list_agent_models(fake("--models", ""), ENV)
    assert listed.models == () and listed.reason == "Fake offers no model option on a new session"
    failed = await list_agent_models(fake("--exit-at-start", "1"), ENV)
    assert failed.models == () and failed.reason is not None
    assert failed.reason.startswith("it exited with status 1 before it could answer initialize")
