"""Doctor check: does each configured ACP agent (OpenCode, ``[agents.<id>]``) start?

One line per agent, from the same check the daemon runs at start
(:func:`bridge.runtime.hosts.agent_probe.probe_agent`: spawn, ACP ``initialize``, stop), all agents at
once. An agent that was configured on purpose (a table in config.toml) and does not start is a
failure; the built-in OpenCode found on ``PATH`` that does not start is a warning (nobody asked
for it, and Claude Code sessions work without it). No agent configured is a skip that says how
to add one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bridge.agent_config import OPENCODE_ID, AgentConfig
from bridge.doctor.model import Check, Status
from bridge.runtime.hosts.agent_probe import AgentProbe, probe_agents

__all__ = ["agent_check", "check_agents"]


async def check_agents(agents: Sequence[AgentConfig], env: Mapping[str, str]) -> list[Check]:
    """One check per agent, in the configuration's order (a skip when there is none)."""
    if not agents:
        return [
            Check(
                "agent",
                Status.SKIP,
                "no ACP agent is configured (OpenCode is not on PATH); Claude Code only",
                details={"agents": []},
            )
        ]
    probes = await probe_agents(agents, env)
    return [agent_check(agent, probe) for agent, probe in zip(agents, probes, strict=True)]


def agent_check(agent: AgentConfig, probe: AgentProbe) -> Check:
    """The report line of one agent's start-up check."""
    details = {
        "id": agent.agent_id,
        "label": agent.label,
        "command": list(agent.command),
        "origin": agent.origin,
        "started": probe.started,
        "name": probe.name,
        "version": probe.version,
        "capabilities": dict(probe.capabilities),
        "seconds": round(probe.seconds, 2),
    }
    if probe.started:
        return Check(
            "agent", Status.PASS, f"{agent.agent_id}: starts ({probe.describe()})", details=details
        )
    builtin = agent.agent_id == OPENCODE_ID and agent.origin.startswith("built-in")
    fix = (
        f"run `{' '.join(agent.command)}` by hand to see why; fix or reinstall the agent, or "
        f"correct agents.{agent.agent_id}.command in config.toml"
    )
    if builtin:
        fix += " (or set agents.opencode.enabled = false to leave OpenCode out)"
    return Check(
        "agent",
        Status.WARN if builtin else Status.FAIL,
        f"{agent.agent_id}: does not start: {probe.reason}",
        fix,
        details=details,
    )
