"""A Claude Code session's options: the values it starts with, and changes while it runs.

At start (:func:`start_mode`, :func:`start_effort`): ``bypassPermissions`` is never given to a
phone-driven session (it becomes ``default``), an unknown mode is ``plan`` (the safest), and an
effort of ``auto`` or an unknown level passes no ``--effort`` (the model's default).

While it runs, each change is one or two control requests (`request` is the protocol's):

- **mode**: ``set_permission_mode``; ``bypassPermissions`` is coerced to ``default`` here too.
- **effort** has no request of its own. It goes through ``apply_flag_settings`` with
  ``{"effortLevel": level}`` (``auto`` sends ``null``, which removes the flag and leaves the
  model's default) and is read back with ``get_settings`` (``applied.effort``): the value in force
  is what the CLI applied, which may be clamped for a model that lacks the level. The CLI ignores
  an unknown level silently, hence the read-back.
- **model**: ``set_model``; the CLI refuses a malformed name with a control error, and probes the
  API (one non-streaming request) for a name it does not know.

Each returns the value now in force, or None for a value that is not one (nothing is asked);
a refusal by the CLI raises :class:`~bridge.agents.claude.cli_protocol.ControlError`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from bridge.host.vocabulary import EFFORT_LEVELS, PERMISSION_MODES

__all__ = [
    "CONTROL_TIMEOUT",
    "MAX_MODEL_LENGTH",
    "Request",
    "applied_settings",
    "change_effort",
    "change_mode",
    "change_model",
    "requested_mode",
    "start_effort",
    "start_mode",
]

MAX_MODEL_LENGTH: Final = 200
CONTROL_TIMEOUT: Final = 30.0
"""Seconds a control request of ours (settings, a mode, model or effort change) may take."""

Request = Callable[[Mapping[str, Any]], Awaitable[dict[str, Any]]]
"""Sends one control request and returns the CLI's answer (raises ``ControlError``)."""


def requested_mode(value: str) -> str | None:
    """The mode a phone's `value` stands for (``bypassPermissions`` → ``default``), or None."""
    mode = "default" if value == "bypassPermissions" else value
    return mode if mode in PERMISSION_MODES else None


def start_mode(value: str) -> str:
    """The mode a session starts in (see the module docstring)."""
    return requested_mode(value) or "plan"


def start_effort(value: str | None) -> str | None:
    """The ``--effort`` a session starts with, or None (``auto``, unknown: the model's default)."""
    return value if value in EFFORT_LEVELS and value != "auto" else None


def applied_settings(settings: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``applied`` part of a ``get_settings`` answer (empty when malformed)."""
    applied = settings.get("applied")
    return applied if isinstance(applied, Mapping) else {}


async def change_mode(request: Request, value: str) -> str | None:
    """Switch the permission mode; the mode now in force, or None if `value` is not one."""
    mode = requested_mode(value)
    if mode is None:
        return None
    await request({"subtype": "set_permission_mode", "mode": mode})
    return mode


async def change_effort(request: Request, value: str) -> str | None:
    """Set the effort level; the level now in force, or None if `value` is not one (or the CLI
    reports none it knows)."""
    if value not in EFFORT_LEVELS:
        return None
    flag = {"effortLevel": None if value == "auto" else value}
    await request({"subtype": "apply_flag_settings", "settings": flag})
    effort = applied_settings(await request({"subtype": "get_settings"})).get("effort")
    if value == "auto":
        return "auto"
    return effort if isinstance(effort, str) and effort in EFFORT_LEVELS else None


async def change_model(request: Request, value: str) -> str | None:
    """Switch the model; the name now in force, or None if it is not a plausible name."""
    name = value.strip()
    if not name or len(name) > MAX_MODEL_LENGTH or not name.isprintable():
        return None
    await request({"subtype": "set_model", "model": name})
    return name
