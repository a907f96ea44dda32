"""The ACP driver against a real ACP agent process (tests/support/fake_acp_agent.py, on the SDK's
agent side): start, turns, the gate, cards, interrupt, options, death and resume with exactly-once."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from bridge.agents.acp import AcpDriver, acp_driver_factory
from bridge.host.driver import DriverError, DriverSpec, PermissionAnswer, ToolVerdict
from bridge.host.events import (
    Answered,
    Failed,
    InputTaken,
    OptionSet,
    PermissionAsked,
    Ready,
)
from tests.host.fakes import FakeServices
from tests.support.fake_acp_agent import fake_agent_command

REPO = Path(__file__).resolve().parents[4]


def make_spec(tmp_path: Path, **changes: Any) -> DriverSpec:
    cwd = tmp_path / "ws"
    cwd.mkdir(exist_ok=True)
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(REPO),
        **changes.pop("env", {}),
    }
    options = {
        "agent_id": "scripted-acp",
        "label": "Scripted ACP",
        "command": changes.pop(
            "command", fake_agent_command("--state", str(tmp_path / "agent-state"))
        ),
        "record_dir": str(tmp_path / "records"),
    }
    return DriverSpec(session_id="s-1", cwd=str(cwd), env=env, options=options, **changes)


class Running:
    """A driver whose `run` is a task; stopped at the end of the test."""

    def __init__(self, driver: AcpDriver, services: FakeServices) -> None:
        self.driver = driver
        self.services = services
        self.task = asyncio.ensure_future(driver.run())

    async def ready(self) -> Ready:
        return await self.services.wait_event(Ready)

    async def turn(self, uid: str, text: str) -> list[dict[str, Any]]:
        before = len(self.services.entries())
        count = len(self.services.of(Answered)) + 1
        self.driver.send_input(uid, text)
        await self.services.wait_event(Answered, count)
        return self.services.entries()[before:]


@pytest.fixture
async def start(tmp_path: Path) -> AsyncIterator[Callable[..., Running]]:
    running: list[Running] = []

    def make(services: FakeServices | None = None, **changes: Any) -> Running:
        services = services or FakeServices(
            tool_policy=lambda name, args: ToolVerdict("none"),
            permission_policy=lambda ask: PermissionAnswer(allow=True),
        )
        driver = acp_driver_factory(make_spec(tmp_path, **changes), services)
        run = Running(driver, services)
        running.append(run)
        return run

    yield make
    for run in running:
        await run.driver.close(interrupt=False)
        await asyncio.wait_for(run.task, 10)


async def test_a_turn_joins_chunks_into_one_text_entry_and_ends_with_stream_end(
    start: Callable[..., Running],
) -> None:
    run = start()
    ready = await run.ready()
    assert ready.sdk_session_id and ready.sdk_session_id.startswith("fake-")
    assert [m.id for m in ready.models] == ["fake/small", "fake/large"]
    assert ready.model == "fake/small"
    entries = await run.turn("u1", "hello there")
    texts = [e for e in entries if e["entryType"] == "text"]
    assert [t["content"] for t in texts] == ["echo: hello there"]
    assert texts[0]["metadata"] == {"role": "assistant", "model": "fake/small"}
    result = [e for e in entries if e["metadata"].get("subtype") == "result"]
    assert result[0]["metadata"]["context_window"] == 200000
    assert result[0]["metadata"]["context_percentage"] == 0  # 42 of 200,000 tokens
    assert entries[-1] == {**entries[-1], "entryType": "system", "content": ""}
    assert entries[-1]["metadata"] == {"stream_end": True}
    assert [e.uid for e in run.services.of(InputTaken)] == ["u1"]
    assert run.services.states() == ["running", "idle"]


async def test_every_tool_call_passes_the_gate_then_the_broker(
    start: Callable[..., Running], tmp_path: Path
) -> None:
    services = FakeServices()
    run = start(services)
    await run.ready()
    run.driver.send_input("u1", "permission echo hi")
    check = await services.wait_for(lambda: services.checks and services.checks[0])
    assert (check.tool_name, check.tool_input) == ("Bash", {"command": "echo hi"})
    # The phone sees the call before its card.
    assert [e["entryType"] for e in services.entries()] == ["tool_use"]
    assert services.entries()[0]["content"] == "Bash: echo hi"
    check.future.set_result(ToolVerdict("none"))
    ask = await services.next_ask()
    assert ask.request.tool_name == "Bash"
    assert services.states()[-1] == "waiting_permission"
    ask.future.set_result(PermissionAnswer(allow=True))
    await services.wait_event(Answered)
    assert (tmp_path / "ws" / "ran.txt").read_text() == "echo hi\n"
    assert (tmp_path / "ws" / "answers.txt").read_text() == "once\n"  # allow_once, never always
    kinds = [e["entryType"] for e in services.entries()]
    assert kinds[:2] == ["tool_use", "tool_result"]
    assert services.entries()[1]["content"].startswith("ran: ")


async def test_a_deny_verdict_refuses_without_a_card(
    start: Callable[..., Running], tmp_path: Path
) -> None:
    services = FakeServices(tool_policy=lambda name, args: ToolVerdict("deny", "deny_list:rm_rf"))
    run = start(services)
    await run.ready()
    entries = await run.turn("u1", "permission rm -rf /")
    assert not services.asks and not services.of(PermissionAsked)
    assert not (tmp_path / "ws" / "ran.txt").exists()
    assert (tmp_path / "ws" / "answers.txt").read_text() == "reject\n"
    results = [e for e in entries if e["entryType"] == "tool_result"]
    assert len(results) == 1  # the agent's own "rejected" update is not shown twice
    assert results[0]["content"] == "Blocked: deny_list:rm_rf"
    assert results[0]["metadata"]["is_error"] is True


async def test_a_denied_card_rejects_and_always_is_kept_by_the_bridge(
    start: Callable[..., Running], tmp_path: Path
) -> None:
    answers = iter(
        [PermissionAnswer(allow=False, message="no"), PermissionAnswer(True, always=True)]
    )
    services = FakeServices(
        tool_policy=lambda name, args: ToolVerdict("none"),
        permission_policy=lambda ask: next(answers),
    )
    run = start(services)
    await run.ready()
    await run.turn("u1", "permission echo one")
    await run.turn("u2", "permission echo two")
    await run.turn("u3", "permission echo two")  # same call: allowed without a card
    assert len(services.of(PermissionAsked)) == 2
    assert (tmp_path / "ws" / "answers.txt").read_text().split() == ["reject", "once", "once"]
    assert (tmp_path / "ws" / "ran.txt").read_text().split("\n")[:2] == ["echo two", "echo two"]


async def test_interrupt_cancels_a_slow_turn(start: Callable[..., Running]) -> None:
    run = start()
    await run.ready()
    run.driver.send_input("u1", "slow")
    await run.services.wait_event(InputTaken)
    await asyncio.sleep(0.2)
    await run.driver.interrupt()
    await run.services.wait_event(Answered)
    contents = [e["content"] for e in run.services.entries()]
    assert "Interrupted" in contents


async def test_interrupt_withdraws_a_pending_card(start: Callable[..., Running]) -> None:
    services = FakeServices(tool_policy=lambda name, args: ToolVerdict("none"))
    run = start(services)
    await run.ready()
    run.driver.send_input("u1", "permission echo wait")
    ask = await services.next_ask()
    await run.driver.interrupt()
    await services.wait_event(Answered)
    assert services.withdrawn == [ask.request.request_id]


async def test_model_and_mode_options(start: Callable[..., Running]) -> None:
    run = start()
    await run.ready()
    await run.driver.set_option("model", "fake/large")
    await run.driver.set_option("model", "nope/none")
    await run.driver.set_option("mode", "plan")
    await run.driver.set_option("effort", "high")
    sets = run.services.of(OptionSet)
    assert [(s.option, s.value, s.result) for s in sets] == [
        ("model", "fake/large", "fake/large"),
        ("model", "nope/none", None),
        ("mode", "plan", "plan"),
        ("effort", "high", None),
    ]
    assert run.driver.status().model == "fake/large"
    entries = await run.turn("u1", "hi")
    assert next(e for e in entries if e["entryType"] == "text")["metadata"]["model"] == "fake/large"


async def test_plan_updates_become_a_todo_list(start: Callable[..., Running]) -> None:
    run = start()
    await run.ready()
    entries = await run.turn("u1", "plan")
    todo = next(e for e in entries if e["entryType"] == "tool_use")
    assert todo["metadata"]["tool_name"] == "TodoWrite"
    assert [t["status"] for t in todo["metadata"]["tool_input"]["todos"]] == [
        "completed",
        "in_progress",
    ]


async def test_an_agent_error_is_an_error_entry_and_the_turn_ends(
    start: Callable[..., Running],
) -> None:
    run = start()
    await run.ready()
    entries = await run.turn("u1", "fail")
    assert [e["entryType"] for e in entries][-2:] == ["error", "system"]
    assert "scripted failure" in entries[-2]["content"]


async def test_a_crash_ends_run_with_the_reason(start: Callable[..., Running]) -> None:
    run = start()
    await run.ready()
    run.driver.send_input("u1", "crash")
    reason = await asyncio.wait_for(run.task, 30)
    assert reason == "Scripted ACP exited with code 3"
    with pytest.raises(DriverError):
        run.driver.send_input("u2", "more")


async def test_a_command_that_does_not_exist_fails_the_start(start: Callable[..., Running]) -> None:
    run = start(command=["/nonexistent/agent", "acp"])
    failed = await run.services.wait_event(Failed)
    assert "cannot start" in failed.reason
    assert await asyncio.wait_for(run.task, 10) == failed.reason


async def test_resume_loads_the_session_and_knows_what_the_last_agent_took(
    start: Callable[..., Running], tmp_path: Path
) -> None:
    first = start()
    ready = await first.ready()
    await first.turn("u1", "first input")
    first.driver.send_input("u2", "crash")
    await asyncio.wait_for(first.task, 30)
    # u3 was logged by a host that died before it prompted: the agent never saw it.
    from bridge.agents.input_log import InputLog, inputs_path

    log = InputLog(inputs_path(tmp_path / "records", "s-1"))
    log.append("u3", "never sent", "2026-01-01T00:00:00.000Z")
    log.close()
    second = start(resume=True, sdk_session_id=ready.sdk_session_id)
    again = await second.ready()
    assert again.sdk_session_id == ready.sdk_session_id
    assert second.services.entries() == []  # the replay is not shown again
    assert await second.driver.received({"u1", "u2", "u3"}) == {"u1", "u2"}
    entries = await second.turn("u4", "after the resume")
    assert [e["content"] for e in entries if e["entryType"] == "text"] == ["echo: after the resume"]


async def test_an_agent_that_cannot_load_counts_logged_inputs_as_received(
    start: Callable[..., Running],
) -> None:
    run = start(env={"FAKE_ACP_ARGS": "--no-load-session"})
    await run.ready()
    await run.turn("u1", "hello")
    assert await run.driver.received({"u1", "u9"}) == {"u1"}


async def test_a_stop_that_is_not_the_users_answers_nothing(
    start: Callable[..., Running], tmp_path: Path
) -> None:
    """The agent is killed before a word reaches the call it waits on: no refusal is recorded."""
    services = FakeServices(tool_policy=lambda name, args: ToolVerdict("none"))
    run = start(services)
    await run.ready()
    run.driver.send_input("u1", "permission echo never")
    await services.next_ask()
    await run.driver.close(interrupt=False)
    assert await asyncio.wait_for(run.task, 10) is None
    assert not (tmp_path / "ws" / "answers.txt").exists()
    assert not (tmp_path / "ws" / "ran.txt").exists()


async def test_the_agent_dies_with_its_host_and_never_reads_eof(tmp_path: Path) -> None:
    """kill -9 of the process that runs the driver: the agent dies at once (PDEATHSIG), without
    answering the permission it waits on (its stdin never reached EOF)."""
    script = tmp_path / "host.py"
    script.write_text(
        "import asyncio, os, sys\n"
        "from pathlib import Path\n"
        "from bridge.agents.acp import acp_driver_factory\n"
        "from bridge.host.driver import ToolVerdict\n"
        "from tests.host.fakes import FakeServices\n"
        "from tests.integration.agents.acp.test_driver import make_spec\n"
        "async def main():\n"
        "    services = FakeServices(tool_policy=lambda n, a: ToolVerdict('none'))\n"
        "    driver = acp_driver_factory(make_spec(Path(sys.argv[1])), services)\n"
        "    task = asyncio.ensure_future(driver.run())\n"
        "    from bridge.host.events import Ready\n"
        "    await services.wait_event(Ready)\n"
        "    driver.send_input('u1', 'permission echo never')\n"
        "    await services.next_ask()\n"
        "    print(driver._process.pid, flush=True)\n"
        "    await asyncio.sleep(60)\n"
        "asyncio.run(main())\n"
    )
    host = await asyncio.create_subprocess_exec(
        sys.executable, str(script), str(tmp_path),
        stdout=asyncio.subprocess.PIPE, cwd=REPO, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert host.stdout is not None
    agent_pid = int(await asyncio.wait_for(host.stdout.readline(), 60))
    host.kill()
    await host.wait()
    for _ in range(100):
        try:
            os.kill(agent_pid, 0)
        except ProcessLookupError:
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the agent outlived its host")
    assert not (tmp_path / "ws" / "answers.txt").exists()


async def test_a_resume_the_agent_cannot_do_starts_a_new_conversation_and_says_so(
    start: Callable[..., Running],
) -> None:
    first = start()
    ready = await first.ready()
    await first.turn("u1", "hello")
    await first.driver.close(interrupt=False)
    second = start(
        env={"FAKE_ACP_ARGS": "--no-load-session"}, resume=True, sdk_session_id=ready.sdk_session_id
    )
    again = await second.ready()
    assert again.sdk_session_id != ready.sdk_session_id
    (notice,) = second.services.entries()
    assert notice["metadata"] == {"special": "resume_lost"}
    assert "could not resume" in notice["content"]
    # Nothing can be checked against the agent: what was logged counts as received.
    assert await second.driver.received({"u1"}) == {"u1"}
