"""The permission callbacks without a CLI: the PreToolUse verdicts and the card's life."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny, ToolPermissionContext

from bridge.agents.base import AgentEvent, Phase
from bridge.agents.claude import CLOSE_DENY_MESSAGE, RunnerState, ToolCheck, ToolHooks
from bridge.engine.inputs import AgentStateChanged, PermissionRequested


def make_state(events: list[AgentEvent]) -> RunnerState:
    state = RunnerState(
        "session-1",
        events.append,
        clock=lambda: 1_700_000_000.0,
        base_env={},
        config_dir=Path("/nowhere"),
        diff_allowed=lambda: False,
    )
    state.phase = Phase.READY
    return state


def hooks_with(check: ToolCheck | None) -> ToolHooks:
    return ToolHooks(make_state([]), check)


def hook_output(decision: str, reason: str) -> dict[str, Any]:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": reason,
        }
    }


BASH_RM = {"tool_name": "Bash", "tool_input": {"command": "rm -rf /"}}

PRE_TOOL_USE_CASES = [
    ("no verdict", lambda s, n, i: None, BASH_RM, {}),
    (
        "deny",
        lambda s, n, i: ("deny", f"{s}:{n}:{i['command']}"),
        BASH_RM,
        hook_output("deny", "session-1:Bash:rm -rf /"),
    ),
    ("ask", lambda s, n, i: ("ask", "a floor"), BASH_RM, hook_output("ask", "a floor")),
    ("not a dict", lambda s, n, i: ("deny", "x"), "garbage", {}),
    (
        "input not a dict",
        lambda s, n, i: ("deny", repr(i)),
        {"tool_name": "Bash", "tool_input": 3},
        hook_output("deny", "{}"),
    ),
]


@pytest.mark.parametrize(
    ("check", "data", "expected"),
    [c[1:] for c in PRE_TOOL_USE_CASES],
    ids=[c[0] for c in PRE_TOOL_USE_CASES],
)
async def test_pre_tool_use(check: ToolCheck, data: Any, expected: dict[str, Any]) -> None:
    hooks = hooks_with(check)
    assert hooks.checks_every_call
    assert await hooks.pre_tool_use(data, "toolu_1", None) == expected


async def test_without_a_check_there_is_no_hook() -> None:
    hooks = hooks_with(None)
    assert not hooks.checks_every_call
    assert await hooks.pre_tool_use(BASH_RM, "toolu_1", None) == {}


def context(tool_use_id: str) -> ToolPermissionContext:
    return ToolPermissionContext(suggestions=[], tool_use_id=tool_use_id, title="Run rm")


async def test_can_use_tool_emits_a_card_and_returns_the_answer() -> None:
    events: list[AgentEvent] = []
    state = make_state(events)
    hooks = ToolHooks(state, None)
    state.tool_order.seen("toolu_1")  # the reader emitted the call's entry already
    state.state = "running"
    call = asyncio.create_task(hooks.can_use_tool("Bash", {"command": "ls"}, context("toolu_1")))
    await asyncio.sleep(0)
    assert events == [
        PermissionRequested(
            "session-1", "toolu_1", "Bash", {"command": "ls"}, description="Run rm"
        ),
        AgentStateChanged("session-1", "waiting_permission"),
    ]
    assert state.broker.answer("toolu_1", True)
    assert isinstance(await call, PermissionResultAllow)
    assert events[-1] == AgentStateChanged("session-1", "running")
    assert state.broker.pending == {}


async def test_a_cancelled_call_leaves_nothing_pending() -> None:
    events: list[AgentEvent] = []
    state = make_state(events)
    hooks = ToolHooks(state, None)
    state.tool_order.seen("toolu_q")
    call = asyncio.create_task(hooks.can_use_tool("AskUserQuestion", {}, context("toolu_q")))
    await asyncio.sleep(0)
    assert state.state == "waiting_question"
    call.cancel()  # the CLI's control_cancel_request after an interrupt
    with pytest.raises(asyncio.CancelledError):
        await call
    assert state.broker.pending == {}
    assert state.state == "running"


async def test_a_call_while_closing_is_denied_without_a_card() -> None:
    events: list[AgentEvent] = []
    state = make_state(events)
    hooks = ToolHooks(state, None)
    state.stop.set()  # close() was called
    state.tool_order.seen("toolu_1")
    result = await hooks.can_use_tool("Bash", {}, context("toolu_1"))
    assert result == PermissionResultDeny(message=CLOSE_DENY_MESSAGE)
    assert events == []
