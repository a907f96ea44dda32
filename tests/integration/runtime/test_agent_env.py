"""The agents' side of the runtime per session: runner kind, environment, gate, model lists."""

from __future__ import annotations

from pathlib import Path

from bridge.agent_config import AgentConfig
from bridge.engine.agents import AgentCheck
from bridge.engine.inputs import AgentsChecked
from bridge.protocol import ModelEntry
from bridge.runtime.hosts.agent_env import (
    MODELS_KEEP,
)
from tests.runtime.support import FakeClock
from tests.runtime.test_agent_env import LiveModels, make
from tests.support.fake_acp_agent import fake_agent_command


async def test_acp_models_live_first_then_a_short_lived_run_kept_a_while(tmp_path: Path) -> None:
    log = tmp_path / "agent.log"
    fake = AgentConfig("fake", "Fake", tuple(fake_agent_command("--log", str(log))))
    clock = FakeClock()
    env, _ = make(tmp_path, (fake,), [], clock)
    live = LiveModels({"fake": [ModelEntry(id="live/one")]})
    assert await env.list_models(live, "fake") == [ModelEntry(id="live/one")]  # type: ignore[arg-type]
    assert not log.exists()  # a live session answered: nothing started

    idle = LiveModels({})
    listed = [
        ModelEntry(id="fake/small", label="Small"),
        ModelEntry(id="fake/large", label="Large"),
    ]
    assert await env.list_models(idle, "fake") == listed  # type: ignore[arg-type]
    assert await env.list_models(idle, "fake") == listed  # type: ignore[arg-type]
    starts = [line for line in log.read_text().splitlines() if '"event": "start"' in line]
    assert len(starts) == 1  # the second came from the kept list
    clock.advance(MODELS_KEEP + 1)
    await env.list_models(idle, "fake")  # type: ignore[arg-type]
    starts = [line for line in log.read_text().splitlines() if '"event": "start"' in line]
    assert len(starts) == 2
    assert await env.list_models(idle, "unknown") == []  # type: ignore[arg-type]


async def test_check_agents_tells_the_engine_which_started(tmp_path: Path) -> None:
    good = AgentConfig("good", "Good", tuple(fake_agent_command()))
    bad = AgentConfig("bad", "Bad", ("/nonexistent/bad",))
    env, fed = make(tmp_path, (good, bad), [])
    await env.check_agents()
    [checked] = fed
    assert isinstance(checked, AgentsChecked)
    assert checked.checks[0] == AgentCheck("good", True)
    assert checked.checks[1].agent_id == "bad" and not checked.checks[1].started
    assert "not found" in (checked.checks[1].reason or "")
    assert env.probes["good"].started and not env.probes["bad"].started
