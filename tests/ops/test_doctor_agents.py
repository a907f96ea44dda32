"""``doctor``'s line per ACP agent: the daemon's own start-up check, pass / warn / fail / skip."""

from __future__ import annotations

import os

from bridge.agent_config import AgentConfig
from bridge.doctor import CHECK_NAMES, Status, agent_check, check_agents
from bridge.runtime.hosts.agent_probe import AgentProbe

ENV = {"PATH": os.environ.get("PATH", os.defpath)}


async def test_no_agent_is_a_skip_that_says_claude_code_only() -> None:
    (check,) = await check_agents([], ENV)
    assert (check.name, check.status) == ("agent", Status.SKIP)
    assert "Claude Code only" in check.summary


def test_the_built_in_opencode_that_does_not_start_is_a_warning() -> None:
    agent = AgentConfig("opencode", "OpenCode", ("/usr/bin/opencode", "acp"), origin="built-in (…)")
    check = agent_check(agent, AgentProbe("opencode", "OpenCode", False, "it exited"))
    assert check.status is Status.WARN
    assert check.fix is not None and "agents.opencode.enabled = false" in check.fix


def test_the_check_can_be_skipped_by_name() -> None:
    assert "agent" in CHECK_NAMES
