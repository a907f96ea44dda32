"""Our answers to the CLI's two kinds of tool-call questions, and the order of a card and its call.

- A **permission prompt** (``can_use_tool``) is answered with :func:`permission_response`: allow
  runs the call with ``updatedInput`` (the phone's ``updated_input`` — an ``AskUserQuestion``'s
  answers — or the call's own input: the CLI wants one either way), plus ``updatedPermissions``
  when the phone said *always*; deny carries the phone's message, or :data:`DEFAULT_DENY_MESSAGE`.
- A **pre-tool check** (the ``PreToolUse`` hook) is answered with :func:`hook_response`: ``deny``
  blocks the call in every mode, ``ask`` makes the permission prompt run for a call Claude Code
  would allow by itself, ``none`` leaves the decision to Claude Code's own rules. Any other
  verdict is a bug on the daemon's side and blocks the call (the gate fails closed).

``always`` adds an allow rule to the project's local settings (``<cwd>/.claude/settings.local
.json``, the file Claude Code's own "don't ask again" writes and git ignores): the CLI's own
``addRules`` suggestion for the call when it made one (for ``Bash`` a prefix rule for that
command, not every command), otherwise a rule for the whole tool. The same rule is also added to
the running session: measured, Claude Code only picks the settings file up a moment later (its
watcher), so without the session copy the very next identical call would still ask. Rules are the
CLI's wire dicts (``{"toolName", "ruleContent"?}``), as the SDK's ``PermissionUpdate.to_dict``
writes them.

:class:`ToolOrder` keeps a permission card behind the ``tool_use`` entry of its call: the CLI
sends the ``assistant`` frame with the call before it asks, but the ask is handled in a task of
its own and could otherwise overtake the reader.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, Final

from bridge.host.driver import PermissionAnswer, ToolVerdict

__all__ = [
    "ALWAYS_DESTINATION",
    "DEFAULT_DENY_MESSAGE",
    "UNKNOWN_VERDICT_MESSAGE",
    "ToolOrder",
    "always_rules",
    "hook_response",
    "permission_response",
]

logger = logging.getLogger(__name__)

ALWAYS_DESTINATION: Final = "localSettings"
DEFAULT_DENY_MESSAGE: Final = "The user denied this tool call from the phone."
UNKNOWN_VERDICT_MESSAGE: Final = "The bridge could not check this tool call."


def _rules(raw: object) -> list[dict[str, Any]]:
    """The well-formed rules of a suggestion, in the CLI's wire form."""
    rules: list[dict[str, Any]] = []
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, Mapping) or not isinstance(item.get("toolName"), str):
            continue
        rule: dict[str, Any] = {"toolName": item["toolName"]}
        if isinstance(item.get("ruleContent"), str):
            rule["ruleContent"] = item["ruleContent"]
        rules.append(rule)
    return rules


def always_rules(tool_name: str, suggestions: Sequence[object]) -> list[dict[str, Any]]:
    """The ``updatedPermissions`` of an ``always`` answer: one rule, kept and in force at once.

    Args:
        tool_name: the call's tool (the rule when the CLI suggested none).
        suggestions: the request's ``permission_suggestions`` (malformed items are skipped).
    """
    rules = [{"toolName": tool_name}]
    for suggestion in suggestions:
        if (
            isinstance(suggestion, Mapping)
            and suggestion.get("type") == "addRules"
            and suggestion.get("behavior") == "allow"
            and (suggested := _rules(suggestion.get("rules")))
        ):
            rules = suggested
            break
    return [
        {"type": "addRules", "rules": rules, "behavior": "allow", "destination": destination}
        for destination in (ALWAYS_DESTINATION, "session")
    ]


def permission_response(
    answer: PermissionAnswer,
    tool_name: str,
    tool_input: Mapping[str, Any],
    suggestions: Sequence[object] = (),
) -> dict[str, Any]:
    """The ``can_use_tool`` answer for the phone's `answer` (see the module docstring)."""
    if not answer.allow:
        return {"behavior": "deny", "message": answer.message or DEFAULT_DENY_MESSAGE}
    updated = answer.updated_input if answer.updated_input is not None else tool_input
    response: dict[str, Any] = {"behavior": "allow", "updatedInput": dict(updated)}
    if answer.always:
        response["updatedPermissions"] = always_rules(tool_name, suggestions)
    return response


def hook_response(verdict: ToolVerdict) -> dict[str, Any]:
    """The ``PreToolUse`` hook's answer for the daemon's `verdict` (see the module docstring)."""
    if verdict.decision == "none":
        return {}
    decision, reason = verdict.decision, verdict.reason
    if decision not in ("deny", "ask"):
        logger.error("! unknown pre-tool verdict %r: the call is blocked", decision[:20])
        decision, reason = "deny", UNKNOWN_VERDICT_MESSAGE
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": reason,
        }
    }


class ToolOrder:
    """Keeps a permission card behind the ``tool_use`` entry of its call (see the module
    docstring): the reader reports each call it emitted (:meth:`seen`); the prompt's handler
    waits for its call (:meth:`wait`) for a bounded time first."""

    def __init__(self, memory: int = 512) -> None:
        self._seen: deque[str] = deque(maxlen=memory)
        self._waiters: dict[str, asyncio.Event] = {}

    def seen(self, tool_use_id: str) -> None:
        """The reader emitted this call's entries."""
        self._seen.append(tool_use_id)
        waiter = self._waiters.get(tool_use_id)
        if waiter is not None:
            waiter.set()

    async def wait(self, tool_use_id: str, timeout: float) -> bool:
        """Wait until the call was seen; False when `timeout` passed first (logged, not fatal).

        Cancel-safe.
        """
        if tool_use_id in self._seen:
            return True
        event = self._waiters.setdefault(tool_use_id, asyncio.Event())
        try:
            async with asyncio.timeout(timeout):
                await event.wait()
            return True
        except TimeoutError:
            logger.debug("- tool_use %s not seen before its permission request", tool_use_id[:12])
            return False
        finally:
            self._waiters.pop(tool_use_id, None)
