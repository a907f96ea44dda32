"""``doctor``'s line per ACP agent: the daemon's own start-up check, pass / warn / fail / skip."""

from __future__ import annotations

from bridge.agent_config import AgentConfig
from bridge.doctor import Status, check_agents
from tests.ops.test_doctor_agents import ENV
from tests.support.fake_acp_agent import fake_agent_command


async def test_each_agent_gets_a_line_from_the_same_check_as_the_daemon() -> None:
    good = AgentConfig(
        "good", "Good", tuple(fake_agent_command("--name", "Good", "--version", "2"))
    )
    bad = AgentConfig("bad", "Bad", ("/nonexistent/bad", "--acp"), origin="file c [agents.bad]")
    passed, failed = await check_agents([good, bad], ENV)
    assert passed.status is Status.PASS
    assert passed.summary.startswith("good: starts (Good 2 (loadSession), answered in ")
    assert passed.details["capabilities"]["loadSession"] is True
    assert failed.status is Status.FAIL
    assert failed.summary == (
        "bad: does not start: /nonexistent/bad was not found (no such file); install it, or set "
        "agents.bad.command in config.toml"
    )
    assert failed.fix is not None and "/nonexistent/bad --acp" in failed.fix
