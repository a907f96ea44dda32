"""A phone picks an ACP agent through a real relay: the daemon's check, the heartbeat's ``agents``
and ``opencode``, ``create-session.backend`` / ``agent``, ``models-request.backend``.

The agents are the fake ACP agent of tests/support (configured as ``opencode`` and under an id of
its own) and one whose program does not exist: what is checked is the daemon's side — the
check in the background, what the heartbeat advertises, which runner a session gets — with the
real session host and ACP driver in between.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bridge.protocol import CreateSessionCommand, InputCommand, ModelsRequestCommand
from tests.support.daemon import DaemonProcess, home_with_agents
from tests.support.fake_acp_agent import fake_agent_command
from tests.support.phone import PhoneSimulator
from tests.support.relay import LoopbackRelay

CHECKED = 60.0
"""Seconds for the daemon's check of the agents to reach the heartbeat (a loaded CI machine)."""


@pytest.fixture
async def daemon(
    relay: LoopbackRelay, tmp_path: Path, workspace: Path
) -> AsyncIterator[DaemonProcess]:
    agent = fake_agent_command()
    home = home_with_agents(
        tmp_path,
        {"opencode": agent, "fake": agent, "broken": "/nonexistent/broken-agent --acp"},
        labels={"fake": "Fake"},
    )
    async with DaemonProcess(home, [relay.url], workspace) as running:
        yield running
    running.kill()


async def test_the_agents_that_start_are_advertised_and_run_sessions(
    daemon: DaemonProcess, phone: PhoneSimulator
) -> None:
    beat = await phone.wait_for(
        "sessions", lambda m: "opencode" in (m.capabilities or []), timeout=CHECKED
    )
    agents = beat.message.agents or []
    assert [a.id for a in agents] == ["claude", "opencode", "fake"]  # broken: not advertised
    assert agents[1].label == "OpenCode" and agents[2].label == "Fake"

    mark = phone.mark()
    await phone.send(CreateSessionCommand(backend="opencode"))
    ready = await phone.wait_for("session-ready", after=mark, timeout=60)
    info = ready.message.session
    assert (info.backend, info.agent) == ("opencode", "opencode")

    mark = phone.mark()
    await phone.send(InputCommand(sessionId=info.id, text="hello acp", inputId="in-1"))
    await phone.wait_for("output", lambda m: "echo: hello acp" in m.entry.content, after=mark)

    mark = phone.mark()
    await phone.send(ModelsRequestCommand(backend="opencode"))
    models = await phone.wait_for("models", lambda m: m.agent == "opencode", after=mark)
    assert [m.id for m in models.message.models] == ["fake/small", "fake/large"]

    mark = phone.mark()
    await phone.send(CreateSessionCommand(agent="broken"))
    failed = await phone.wait_for("session-failed", after=mark)
    assert failed.message.reason.startswith("broken is not available on this machine: ")
    assert "/nonexistent/broken-agent was not found" in failed.message.reason
    assert phone.violations == [] and phone.errors == []
