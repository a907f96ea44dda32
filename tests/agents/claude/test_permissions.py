"""Our answers to prompts and checks, the ``always`` rules, and the card's order behind its call."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bridge.agents.claude import (
    DEFAULT_DENY_MESSAGE,
    UNKNOWN_VERDICT_MESSAGE,
    ToolOrder,
    always_rules,
    hook_response,
    permission_response,
)
from bridge.host.driver import PermissionAnswer, ToolVerdict

BASH_SUGGESTION = {
    "type": "addRules",
    "rules": [{"toolName": "Bash", "ruleContent": "npm test:*", "extra": 1}],
    "behavior": "allow",
    "destination": "projectSettings",
}


def _rule(rules: list[dict[str, Any]], destination: str) -> dict[str, Any]:
    return {"type": "addRules", "rules": rules, "behavior": "allow", "destination": destination}


def test_always_rules_use_the_cli_suggestion_in_both_places() -> None:
    mode = {"type": "setMode", "mode": "acceptEdits", "destination": "session"}
    rules = [{"toolName": "Bash", "ruleContent": "npm test:*"}]
    assert always_rules("Bash", [mode, "junk", BASH_SUGGESTION]) == [
        _rule(rules, "localSettings"),
        _rule(rules, "session"),
    ]


@pytest.mark.parametrize(
    "suggestions",
    [
        [],
        [{"type": "addRules", "behavior": "deny", "rules": [{"toolName": "Write"}]}],
        [{"type": "addRules", "behavior": "allow", "rules": [{"ruleContent": "no tool"}]}],
    ],
)
def test_always_rules_fall_back_to_the_whole_tool(suggestions: list[Any]) -> None:
    assert always_rules("Write", suggestions) == [
        _rule([{"toolName": "Write"}], "localSettings"),
        _rule([{"toolName": "Write"}], "session"),
    ]


PERMISSION_CASES = [
    (
        "allow keeps the input",
        PermissionAnswer(True),
        {"behavior": "allow", "updatedInput": {"c": 1}},
    ),
    (
        "allow with an updated input",
        PermissionAnswer(True, updated_input={"answers": {"q": "a"}}),
        {"behavior": "allow", "updatedInput": {"answers": {"q": "a"}}},
    ),
    (
        "always",
        PermissionAnswer(True, always=True),
        {
            "behavior": "allow",
            "updatedInput": {"c": 1},
            "updatedPermissions": always_rules("Bash", [BASH_SUGGESTION]),
        },
    ),
    ("deny", PermissionAnswer(False), {"behavior": "deny", "message": DEFAULT_DENY_MESSAGE}),
    (
        "deny with a message (always is moot)",
        PermissionAnswer(False, "Not that file", always=True),
        {"behavior": "deny", "message": "Not that file"},
    ),
]


@pytest.mark.parametrize(
    ("answer", "expected"), [c[1:] for c in PERMISSION_CASES], ids=[c[0] for c in PERMISSION_CASES]
)
def test_permission_response(answer: PermissionAnswer, expected: dict[str, Any]) -> None:
    assert permission_response(answer, "Bash", {"c": 1}, [BASH_SUGGESTION]) == expected


def _hook(decision: str, reason: str) -> dict[str, Any]:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": reason,
        }
    }


@pytest.mark.parametrize(
    ("verdict", "expected"),
    [
        (ToolVerdict("none", "ignored"), {}),
        (ToolVerdict("deny", "rm -rf"), _hook("deny", "rm -rf")),
        (ToolVerdict("ask", "a floor"), _hook("ask", "a floor")),
        (ToolVerdict("allow", "x"), _hook("deny", UNKNOWN_VERDICT_MESSAGE)),  # fails closed
    ],
)
def test_hook_response(verdict: ToolVerdict, expected: dict[str, Any]) -> None:
    assert hook_response(verdict) == expected


async def test_tool_order() -> None:
    order = ToolOrder()
    order.seen("toolu_a")
    assert await order.wait("toolu_a", timeout=0.01)
    waiting = asyncio.ensure_future(order.wait("toolu_b", timeout=5))
    await asyncio.sleep(0)
    order.seen("toolu_b")
    assert await waiting
    assert not await order.wait("toolu_never", timeout=0.01)
