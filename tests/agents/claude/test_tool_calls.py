"""The prompt and check handlers without a CLI: state, the ask, withdrawal, the hook's answers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bridge.agents.claude import ControlError, ToolCalls, ToolOrder, hooks_config
from bridge.host.driver import PermissionAnswer, ToolVerdict
from bridge.host.events import PermissionAsked
from tests.host.fakes import FakeServices


def make() -> tuple[ToolCalls, FakeServices, ToolOrder, list[str]]:
    services = FakeServices()
    order = ToolOrder()
    states: list[str] = []
    return ToolCalls(services, order, states.append, label="t"), services, order, states


def _prompt(tool_name: str = "Bash", tool_use_id: str | None = "toolu_1") -> dict[str, Any]:
    return {
        "subtype": "can_use_tool",
        "tool_name": tool_name,
        "input": {"command": "ls"},
        "tool_use_id": tool_use_id,
        "title": "Run ls",
        "description": "List files",
        "agent_id": "agent-7",
    }


async def test_a_prompt_asks_the_phone_and_answers() -> None:
    calls, services, order, states = make()
    order.seen("toolu_1")  # the reader emitted the call's entry already
    task = asyncio.ensure_future(calls.can_use_tool("cli-1", _prompt()))
    ask = await services.next_ask()
    assert ask.request == PermissionAsked("toolu_1", "Bash", {"command": "ls"}, "Run ls", "agent-7")
    assert states == ["waiting_permission"] and calls.pending == 1
    ask.future.set_result(PermissionAnswer(True))
    assert await task == {"behavior": "allow", "updatedInput": {"command": "ls"}}
    assert states == ["waiting_permission", "running"] and calls.pending == 0


async def test_a_question_waits_as_a_question_and_gets_an_id_when_the_cli_gave_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("bridge.agents.claude.tool_calls.TOOL_USE_WAIT", 0.2)
    calls, services, _, states = make()
    request = _prompt("AskUserQuestion", tool_use_id=None)
    del request["title"]
    task = asyncio.ensure_future(calls.can_use_tool("cli-1", request))
    ask = await services.next_ask(timeout=5)  # after the bounded wait for a tool_use
    assert ask.request.request_id.startswith("permission_")
    assert ask.request.description == "List files"
    assert states == ["waiting_question"]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_cancelled_prompt_is_withdrawn_and_the_state_moves_on_at_once() -> None:
    calls, services, order, states = make()
    order.seen("toolu_1")
    order.seen("toolu_2")
    first = asyncio.ensure_future(calls.can_use_tool("cli-1", _prompt()))
    second = asyncio.ensure_future(
        calls.can_use_tool("cli-2", _prompt("AskUserQuestion", "toolu_2"))
    )
    await services.wait_for(lambda: len(services.asks) == 2)
    assert states[-1] == "waiting_question"
    calls.withdrawn("cli-2")  # the CLI's cancel request, before its task sees it
    assert states[-1] == "waiting_permission"
    second.cancel()
    calls.withdrawn("cli-1")
    first.cancel()
    await asyncio.gather(first, second, return_exceptions=True)
    assert states[-1] == "running" and calls.pending == 0
    assert sorted(services.withdrawn) == ["toolu_1", "toolu_2"]


async def test_a_failing_host_is_not_turned_into_an_answer() -> None:
    calls, services, order, states = make()
    order.seen("toolu_1")

    async def broken(request: PermissionAsked) -> PermissionAnswer:
        raise OSError("journal")

    services.ask_permission = broken  # type: ignore[method-assign]
    with pytest.raises(OSError, match="journal"):
        await calls.can_use_tool("cli-1", _prompt())
    assert states == ["waiting_permission", "running"]


async def test_the_hook_asks_the_daemon_with_the_cli_request_id() -> None:
    calls, services, _, _ = make()
    services.tool_policy = lambda name, tool_input: ToolVerdict("deny", f"{name}:{tool_input}")
    request = {
        "subtype": "hook_callback",
        "callback_id": "hook_0",
        "input": {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": 3},
    }
    answer = await calls.hook_callback("cli-9", request)
    assert answer["hookSpecificOutput"]["permissionDecisionReason"] == "Bash:{}"
    other_event = {**request, "input": {"hook_event_name": "PostToolUse"}}
    assert await calls.hook_callback("cli-10", other_event) == {}
    with pytest.raises(ControlError, match="No hook callback found for ID: hook_1"):
        await calls.hook_callback("cli-11", {**request, "callback_id": "hook_1"})


def test_hooks_config() -> None:
    assert hooks_config(False) is None
    [matcher] = (hooks_config(True) or {})["PreToolUse"]
    assert matcher["onFailure"] == "block" and matcher["timeout"] >= 7 * 24 * 3600
