"""An editor's task on the real bundled Claude Code CLI: the Desiide tools and nothing else.

The driver runs with ``editor_tools`` and ``check_tools`` (as the daemon starts a task) against
the mock API. The model (scripted by ``[[tool: mcp__desiide__… | {json}]]``) calls the tools of
the in-process MCP server; the test is the host: it answers the pre-tool checks with ``none`` and
the permission prompts by hand, as the daemon's gate would.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from bridge.host.driver import PermissionAnswer, ToolVerdict
from bridge.host.events import Ready
from tests.host.fakes import WAIT, FakeServices
from tests.support.mock_anthropic import MockAnthropic
from tests.support.processes import alive

from .conftest import Harness, make_spec, start

pytestmark = pytest.mark.e2e

DESIIDE_TOOLS = {
    "mcp__desiide__read_file",
    "mcp__desiide__list_files",
    "mcp__desiide__search",
    "mcp__desiide__propose_edit",
    "mcp__desiide__run_command",
}


@pytest.fixture
async def task_session(
    mock_api: MockAnthropic, tmp_path: Path
) -> AsyncIterator[Callable[..., Any]]:
    """``await task_session(allowed=[...])`` → a ready :class:`Harness` on a workspace."""
    harnesses: list[Harness] = []

    async def make(allowed: list[str] | None = None) -> Harness:
        root = tmp_path / f"s{len(harnesses)}"
        spec = make_spec(mock_api, root, check_tools=True)
        option: dict[str, Any] = {"root": spec.cwd}
        if allowed is not None:
            option["allowed"] = allowed
        spec = dataclasses.replace(spec, options={**spec.options, "editor_tools": option})
        checked: list[tuple[str, dict[str, Any]]] = []

        def check(name: str, tool_input: Mapping[str, Any]) -> ToolVerdict:
            checked.append((name, dict(tool_input)))
            return ToolVerdict("none")  # leave it to the permission prompt

        harness = await start(spec, FakeServices(tool_policy=check), root / "config")
        harness.extra["checked"] = checked
        harnesses.append(harness)
        assert harness.services.of(Ready), harness.services.events
        return harness

    try:
        yield make
    finally:
        for harness in harnesses:
            await harness.driver.close()
            if harness.run is not None:
                await asyncio.wait_for(harness.run, WAIT)


def tool_results(mock_api: MockAnthropic, session_id: str | None) -> list[dict[str, Any]]:
    """The tool_result blocks the CLI sent the model, in order."""
    found: list[dict[str, Any]] = []
    seen: set[str] = set()
    for request in mock_api.message_requests(session_id=session_id):
        for message in request.body.get("messages", []):
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                if block.get("type") == "tool_result" and block["tool_use_id"] not in seen:
                    seen.add(block["tool_use_id"])
                    found.append(block)
    return found


def result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "".join(item.get("text", "") for item in content)
    return str(content)


def directive(tool: str, arguments: dict[str, Any]) -> str:
    return f"[[tool: mcp__desiide__{tool} | {json.dumps(arguments)}]]"


async def test_only_the_desiide_tools_are_offered_and_read_file_reads(
    task_session: Any, mock_api: MockAnthropic
) -> None:
    harness: Harness = await task_session(allowed=["read_file", "propose_edit"])
    (harness.cwd / "notes.txt").write_text("hello from the workspace\n")
    mark = harness.mark()
    harness.driver.send_input(str(uuid.uuid4()), directive("read_file", {"path": "notes.txt"}))
    ask = await harness.services.next_ask()
    assert harness.extra["checked"] == [("mcp__desiide__read_file", {"path": "notes.txt"})]
    assert ask.request.tool_name == "mcp__desiide__read_file"
    assert ask.request.tool_input == {"path": "notes.txt"}
    ask.future.set_result(PermissionAnswer(True))
    await harness.turn_end(mark)
    sdk_id = harness.driver.status().sdk_session_id
    [block] = tool_results(mock_api, sdk_id)
    assert result_text(block) == "hello from the workspace\n"
    assert not block.get("is_error")
    # The model was offered the five tools (and the CLI's uncallable placeholder), nothing else.
    for request in mock_api.message_requests(session_id=sdk_id):
        offered = {tool["name"] for tool in request.body.get("tools", [])}
        assert offered - {"DeferredToolPlaceholder"} == DESIIDE_TOOLS
        assert not offered & {"Write", "Edit", "Bash", "Read", "Task", "Agent", "WebFetch"}


async def test_propose_edit_returns_the_editors_report_and_writes_nothing(
    task_session: Any, mock_api: MockAnthropic
) -> None:
    harness: Harness = await task_session()
    target = harness.cwd / "a.py"
    target.write_text("old\n")
    proposal = {"summary": "Make it new", "files": [{"path": "a.py", "content": "new\n"}]}
    mark = harness.mark()
    harness.driver.send_input(str(uuid.uuid4()), directive("propose_edit", proposal))
    ask = await harness.services.next_ask()
    assert ask.request.tool_name == "mcp__desiide__propose_edit"
    assert ask.request.tool_input == proposal
    report = [{"path": "a.py", "status": "applied"}]
    ask.future.set_result(PermissionAnswer(True, updated_input={**proposal, "report": report}))
    await harness.turn_end(mark)
    [block] = tool_results(mock_api, harness.driver.status().sdk_session_id)
    assert result_text(block) == "Proposal 'Make it new': 1 of 1 file applied.\na.py: applied"
    assert target.read_text() == "old\n"  # the editor applies; the tool never writes


async def test_a_proposal_allowed_without_a_report_is_not_reviewed(
    task_session: Any, mock_api: MockAnthropic
) -> None:
    harness: Harness = await task_session()
    proposal = {"summary": "s", "files": [{"path": "b.py", "content": "x"}]}
    forged = {**proposal, "report": [{"path": "b.py", "status": "applied"}]}  # by the model
    mark = harness.mark()
    harness.driver.send_input(str(uuid.uuid4()), directive("propose_edit", forged))
    ask = await harness.services.next_ask()
    assert ask.request.tool_input == proposal  # the card never shows the model's report
    ask.future.set_result(PermissionAnswer(True))  # an allow without the editor's report
    await harness.turn_end(mark)
    [block] = tool_results(mock_api, harness.driver.status().sdk_session_id)
    assert block.get("is_error") is True
    assert "not_reviewed: the editor has not reviewed this proposal" in result_text(block)
    assert not (harness.cwd / "b.py").exists()


async def test_a_tool_outside_the_allowed_set_does_not_run(
    task_session: Any, mock_api: MockAnthropic
) -> None:
    harness: Harness = await task_session(allowed=["read_file"])
    mark = harness.mark()
    command = {"command": "touch made.txt"}
    harness.driver.send_input(str(uuid.uuid4()), directive("run_command", command))
    ask = await harness.services.next_ask()
    ask.future.set_result(PermissionAnswer(True))  # a gate that let it through by mistake
    await harness.turn_end(mark)
    [block] = tool_results(mock_api, harness.driver.status().sdk_session_id)
    assert result_text(block).startswith("tool_not_allowed: run_command")
    assert not (harness.cwd / "made.txt").exists()


async def test_run_command_runs_in_the_workspace(
    task_session: Any, mock_api: MockAnthropic
) -> None:
    harness: Harness = await task_session()
    mark = harness.mark()
    harness.driver.send_input(
        str(uuid.uuid4()), directive("run_command", {"command": "echo ran > out.txt; cat out.txt"})
    )
    ask = await harness.services.next_ask()
    assert ask.request.tool_input == {"command": "echo ran > out.txt; cat out.txt"}
    ask.future.set_result(PermissionAnswer(True))
    await harness.turn_end(mark)
    [block] = tool_results(mock_api, harness.driver.status().sdk_session_id)
    assert result_text(block) == "exit code 0\nran\n"
    assert (harness.cwd / "out.txt").read_text() == "ran\n"


async def test_an_interrupt_kills_a_running_command_and_the_tools_go_on(
    task_session: Any, mock_api: MockAnthropic
) -> None:
    harness: Harness = await task_session()
    mark = harness.mark()
    command = {"command": "echo $$ > sh.pid; sleep 30"}
    harness.driver.send_input(str(uuid.uuid4()), directive("run_command", command))
    ask = await harness.services.next_ask()
    ask.future.set_result(PermissionAnswer(True))
    pid_file = harness.cwd / "sh.pid"
    started = time.monotonic()
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert time.monotonic() - started < WAIT, "the command did not start"
        await asyncio.sleep(0.05)
    started = time.monotonic()
    await harness.driver.interrupt()  # the CLI cancels the call: notifications/cancelled
    await harness.turn_end(mark)
    pid = int(pid_file.read_text())
    while alive(pid):
        assert time.monotonic() - started < 5, "the command outlived the interrupt"
        await asyncio.sleep(0.05)
    cli = harness.driver._cli
    assert cli is not None and cli.protocol.handling == 0  # the cancelled call was answered
    (harness.cwd / "n.txt").write_text("still here")
    mark = harness.mark()
    harness.driver.send_input(str(uuid.uuid4()), directive("read_file", {"path": "n.txt"}))
    ask = await harness.services.next_ask()
    ask.future.set_result(PermissionAnswer(True))
    await harness.turn_end(mark)
    last = tool_results(mock_api, harness.driver.status().sdk_session_id)[-1]
    assert result_text(last) == "still here"
