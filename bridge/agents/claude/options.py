"""Effort and model changes of a running Claude Code session.

Mode changes have an SDK method (``set_permission_mode``) and stay in the runner, which also
tracks the mode the CLI switches to by itself. Here:

- **effort** has no SDK method. It goes through the CLI's ``apply_flag_settings`` control request
  with ``{"effortLevel": level}`` (``auto`` sends ``null``, which removes the flag and leaves the
  model's default) and is read back with ``get_settings`` (``applied.effort``): the value in
  force is what the CLI applied, which may be clamped for a model that lacks the level. The CLI
  ignores an unknown level silently, hence the read-back.
- **model** is ``set_model``; the CLI refuses a malformed name with a control error, and probes
  the API (one non-streaming request) for a name it does not know.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

from claude_agent_sdk import ClaudeSDKClient

from bridge.protocol.enums import EFFORT_LEVELS

from .channel import control_request

__all__ = ["MAX_MODEL_LENGTH", "Call", "change_effort", "change_model"]

T = TypeVar("T")
Call = Callable[[Callable[[ClaudeSDKClient], Awaitable[Any]]], Awaitable[Any]]
"""Runs an operation on the session's client (``ClaudeRunner._call``)."""

MAX_MODEL_LENGTH: Final = 200


async def change_effort(call: Call, value: str) -> str | None:
    """Set the effort level; the level now in force, or None if `value` is not one.

    Raises:
        RunnerError: the session is not running or did not answer.
        Exception: the CLI refused the request.
    """
    if value not in EFFORT_LEVELS:
        return None
    flag = {"effortLevel": None if value == "auto" else value}
    await call(lambda c: control_request(c, {"subtype": "apply_flag_settings", "settings": flag}))
    settings = await call(lambda c: control_request(c, {"subtype": "get_settings"}))
    applied = settings.get("applied") if isinstance(settings, dict) else None
    effort = applied.get("effort") if isinstance(applied, dict) else None
    if value == "auto":
        return "auto"
    return effort if isinstance(effort, str) and effort in EFFORT_LEVELS else None


async def change_model(call: Call, value: str) -> str | None:
    """Switch the model; the name now in force, or None if it is not a plausible name.

    Raises:
        RunnerError: the session is not running or did not answer.
        Exception: the CLI refused the model.
    """
    name = value.strip()
    if not name or len(name) > MAX_MODEL_LENGTH or not name.isprintable():
        return None
    await call(lambda client: client.set_model(name))
    return name
