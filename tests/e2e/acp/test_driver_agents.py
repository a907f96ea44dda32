"""The bridge's ACP driver (bridge.agents.acp) driving the real OpenCode and Gemini CLI binaries
against the local mock model APIs: the same core scenarios for both, to prove the runner generic.

The host's services are :class:`~tests.host.fakes.FakeServices` (the daemon's side is covered by
tests/e2e/acp/test_opencode_sessions.py); everything between the driver and the agent is real.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from bridge.agents.acp import AcpDriver, acp_driver_factory
from bridge.host.driver import DriverSpec, PermissionAnswer, ToolVerdict
from bridge.host.events import Answered, InputTaken, PermissionAsked, Ready
from tests.e2e.acp.conftest import AgentSetup
from tests.host.fakes import FakeServices

pytestmark = pytest.mark.e2e

AGENT_IDS = {"opencode": "opencode", "gemini": "gemini"}


class Driven:
    def __init__(self, driver: AcpDriver, services: FakeServices) -> None:
        self.driver = driver
        self.services = services
        self.task = asyncio.ensure_future(driver.run())

    async def turn(self, uid: str, text: str, timeout: float = 60) -> list[dict[str, Any]]:
        before = len(self.services.entries())
        count = len(self.services.of(Answered)) + 1
        self.driver.send_input(uid, text)
        await self.services.wait_event(Answered, count, timeout=timeout)
        return self.services.entries()[before:]


@pytest.fixture
async def drive(tmp_path: Path) -> AsyncIterator[Callable[..., Driven]]:
    started: list[Driven] = []

    def make(setup: AgentSetup, services: FakeServices, **changes: Any) -> Driven:
        spec = DriverSpec(
            session_id="s-1",
            cwd=str(setup.workspace),
            env=setup.env,
            permission_mode=changes.pop("permission_mode", "default"),
            options={
                "agent_id": AGENT_IDS[setup.name],
                "label": setup.name,
                "command": setup.command,
                "record_dir": str(tmp_path / "records"),
            },
            **changes,
        )
        driven = Driven(acp_driver_factory(spec, services), services)
        started.append(driven)
        return driven

    yield make
    for driven in started:
        await driven.driver.close(interrupt=False)
        await asyncio.wait_for(driven.task, 15)


def allow_all() -> FakeServices:
    return FakeServices(
        tool_policy=lambda name, args: ToolVerdict("none"),
        permission_policy=lambda ask: PermissionAnswer(allow=True),
    )


async def test_a_turn_of_text(agent: AgentSetup, drive: Callable[..., Driven]) -> None:
    driven = drive(agent, allow_all())
    ready = await driven.services.wait_event(Ready, timeout=60)
    assert ready.sdk_session_id
    entries = await driven.turn("u1", "hello agent")
    texts = [e["content"] for e in entries if e["entryType"] == "text"]
    assert texts == ["echo: hello agent"]  # one entry per message, however many chunks
    assert entries[-1]["metadata"] == {"stream_end": True}
    assert [e.uid for e in driven.services.of(InputTaken)] == ["u1"]


async def test_a_shell_call_passes_the_gate_then_runs(
    agent: AgentSetup, drive: Callable[..., Driven]
) -> None:
    services = allow_all()
    driven = drive(agent, services)
    await services.wait_event(Ready, timeout=60)
    entries = await driven.turn("u1", "[[bash: echo ran > out.txt]]")
    asked = services.of(PermissionAsked)
    assert [(a.tool_name, a.tool_input) for a in asked] == [
        ("Bash", {"command": "echo ran > out.txt"})
    ]
    assert (agent.workspace / "out.txt").read_text().strip() == "ran"
    kinds = [e["entryType"] for e in entries]
    assert kinds.index("tool_use") < kinds.index("tool_result")


async def test_a_deny_listed_command_is_blocked_with_its_reason(
    agent: AgentSetup, drive: Callable[..., Driven]
) -> None:
    services = FakeServices(
        tool_policy=lambda name, args: ToolVerdict("deny", "deny_list:curl_pipe_sh"),
        permission_policy=lambda ask: PermissionAnswer(allow=True),
    )
    driven = drive(agent, services)
    await services.wait_event(Ready, timeout=60)
    entries = await driven.turn("u1", "[[bash: touch pwned.txt]]")
    assert not services.of(PermissionAsked)
    assert not (agent.workspace / "pwned.txt").exists()
    results = [e for e in entries if e["entryType"] == "tool_result"]
    assert results[0]["content"] == "Blocked: deny_list:curl_pipe_sh"


async def test_a_card_denied_from_the_phone_does_not_run(
    agent: AgentSetup, drive: Callable[..., Driven]
) -> None:
    services = FakeServices(
        tool_policy=lambda name, args: ToolVerdict("none"),
        permission_policy=lambda ask: PermissionAnswer(allow=False, message="not now"),
    )
    driven = drive(agent, services)
    await services.wait_event(Ready, timeout=60)
    await driven.turn("u1", "[[bash: touch nope.txt]]")
    assert not (agent.workspace / "nope.txt").exists()


async def test_interrupt_while_a_card_waits(
    agent: AgentSetup, drive: Callable[..., Driven]
) -> None:
    services = FakeServices(tool_policy=lambda name, args: ToolVerdict("none"))
    driven = drive(agent, services)
    await services.wait_event(Ready, timeout=60)
    driven.driver.send_input("u1", "[[bash: touch late.txt]]")
    ask = await services.next_ask(timeout=60)
    await driven.driver.interrupt()
    await services.wait_event(Answered, timeout=30)
    assert services.withdrawn == [ask.request.request_id]
    assert not (agent.workspace / "late.txt").exists()
    # The session goes on. (OpenCode sends the aborted call's result with the next prompt, and the
    # mock then answers that result rather than the text: any reply will do.)
    entries = await driven.turn("u2", "still there?")
    assert [e["entryType"] for e in entries if e["entryType"] == "text"] == ["text"]


async def test_opencode_models_and_resume_in_a_new_process(
    opencode: Callable[..., AgentSetup], drive: Callable[..., Driven]
) -> None:
    setup = opencode()
    first = drive(setup, allow_all())
    ready = await first.services.wait_event(Ready, timeout=60)
    assert [m.id for m in ready.models] == ["mock/mock-model"]
    await first.turn("u1", "remember this")
    await first.driver.close(interrupt=False)
    second = drive(setup, allow_all(), resume=True, sdk_session_id=ready.sdk_session_id)
    again = await second.services.wait_event(Ready, timeout=60)
    assert again.sdk_session_id == ready.sdk_session_id
    assert second.services.entries() == []  # the replay is not shown twice
    assert await second.driver.received({"u1", "u2"}) == {"u1"}
