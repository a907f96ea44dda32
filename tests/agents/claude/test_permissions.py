"""The permission broker: answers, deny-all, supersession, and the `always` rules."""

from __future__ import annotations

import pytest
from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny, PermissionUpdate
from claude_agent_sdk.types import PermissionRuleValue

from bridge.agents.claude import DEFAULT_DENY_MESSAGE, PermissionBroker, always_rules


async def test_allow_with_updated_input_and_always() -> None:
    broker = PermissionBroker()
    suggestion = PermissionUpdate(
        type="addRules",
        rules=[PermissionRuleValue("Bash", "npm test:*")],
        behavior="allow",
        destination="localSettings",
    )
    future = broker.open("toolu_1", "Bash", {"command": "npm test"}, [suggestion])
    assert broker.answer("toolu_1", True, always=True, updated_input={"command": "npm t"})
    outcome = future.result()
    assert isinstance(outcome, PermissionResultAllow)
    assert outcome.updated_input == {"command": "npm t"}
    assert [(u.destination, u.rules) for u in outcome.updated_permissions or []] == [
        ("localSettings", [PermissionRuleValue("Bash", "npm test:*")]),
        ("session", [PermissionRuleValue("Bash", "npm test:*")]),
    ]
    assert not broker.answer("toolu_1", False)  # already answered
    assert not broker.answer("unknown", True)
    broker.discard("toolu_1", future)
    assert broker.pending == {}


async def test_deny_messages() -> None:
    broker = PermissionBroker()
    plain = broker.open("a", "Write", {})
    worded = broker.open("b", "Write", {})
    broker.answer("a", False)
    broker.answer("b", False, message="Not that file")
    assert plain.result() == PermissionResultDeny(message=DEFAULT_DENY_MESSAGE)
    assert worded.result() == PermissionResultDeny(message="Not that file")


async def test_deny_all_and_supersession() -> None:
    broker = PermissionBroker()
    first = broker.open("a", "Bash", {})
    second = broker.open("a", "Bash", {})  # the CLI asked again for the same call
    assert isinstance(first.result(), PermissionResultDeny)
    other = broker.open("b", "Bash", {})
    assert broker.deny_all("Session restarted — please retry") == 2
    assert (
        second.result()
        == other.result()
        == PermissionResultDeny(message="Session restarted — please retry")
    )
    broker.discard("a", first)  # a stale future does not remove the newer entry
    assert set(broker.pending) == {"a", "b"}


@pytest.mark.parametrize("destination", [None, "session", "projectSettings"])
def test_always_rules_use_the_cli_suggestion(destination: str | None) -> None:
    suggestion = PermissionUpdate(
        type="addRules",
        rules=[PermissionRuleValue("Bash", "ls *")],
        behavior="allow",
        destination=destination,  # type: ignore[arg-type]
    )
    mode = PermissionUpdate(type="setMode", mode="acceptEdits", destination="session")
    rules = always_rules("Bash", [mode, suggestion])
    assert [(r.type, r.destination, r.rules) for r in rules] == [
        ("addRules", "localSettings", [PermissionRuleValue("Bash", "ls *")]),
        ("addRules", "session", [PermissionRuleValue("Bash", "ls *")]),
    ]


def test_always_rules_fall_back_to_the_whole_tool() -> None:
    rules = always_rules("Write", [])
    assert [r.to_dict() for r in rules] == [
        {
            "type": "addRules",
            "destination": "localSettings",
            "rules": [{"toolName": "Write"}],
            "behavior": "allow",
        },
        {
            "type": "addRules",
            "destination": "session",
            "rules": [{"toolName": "Write"}],
            "behavior": "allow",
        },
    ]
