"""Which model a task runs with: its role, else its preference; Claude Code's models only."""

from __future__ import annotations

from bridge.desiide.handlers import task_model
from bridge.desiide.settings import DesiideSettings

LOCAL = {
    "id": "local",
    "provider": "ollama",
    "baseUrl": "http://127.0.0.1:11434",
    "model": "qwen2.5-coder",
}


def test_no_role_the_preference_picks() -> None:
    config = DesiideSettings.from_params({})
    assert task_model(config, "edit", None) == (None, None)
    assert task_model(config, "edit", "balanced") == (None, None)
    assert task_model(config, "ask", "cheap") == ("haiku", None)
    assert task_model(config, "fix", "best") == ("opus", None)


def test_a_role_naming_a_claude_model_is_used() -> None:
    config = DesiideSettings.from_params(
        {"roles": {"fix": "claude:opus", "default": "claude:haiku"}}
    )
    assert task_model(config, "fix", "cheap") == ("opus", None)
    assert task_model(config, "ask", None) == ("haiku", None)


def test_a_role_claude_code_cannot_run_is_model_unavailable_with_the_fix() -> None:
    config = DesiideSettings.from_params({"models": [LOCAL], "roles": {"edit": "local"}})
    model, unavailable = task_model(config, "edit", None)
    assert model is None and unavailable is not None
    assert "'local'" in unavailable and "desiide.roles" in unavailable
