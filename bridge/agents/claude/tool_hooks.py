"""The SDK's two permission callbacks of a session: the ``PreToolUse`` hook and ``can_use_tool``.

Claude Code consults them in this order, and they do different jobs:

- **``PreToolUse``** sees *every* tool call, before Claude Code's own rules (its permission mode,
  the allow rules of the settings files). The daemon's :data:`ToolCheck` (its risk gate) answers
  there: ``deny`` blocks the call in every mode, including calls Claude Code would allow without
  asking, and ``ask`` makes the prompt run for one it would allow. Without a check the hook is
  not installed at all.
- **``can_use_tool``** is the permission prompt: it runs only for calls that would ask. It waits
  (at most :data:`TOOL_USE_WAIT` s) until the reader has emitted the call's ``tool_use`` entry
  (:class:`~bridge.agents.claude.permissions.ToolOrder`), so the card never overtakes it, then
  emits ``PermissionRequested(request_id=tool_use_id, …)`` and reports ``waiting_permission``
  (``waiting_question`` for ``AskUserQuestion``) until
  :meth:`~bridge.agents.claude.ClaudeRunner.answer_permission` resolves the call's future in the
  :class:`~bridge.agents.claude.permissions.PermissionBroker`. Interrupt, restart, end and close
  deny every pending call there; the CLI can also cancel the callback itself (an interrupt), and
  either way the call leaves the broker and the state goes back to ``running``.

A call that comes in while the runner is closing is denied at once: nobody would see its card.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, Final

from claude_agent_sdk import PermissionResultDeny, ToolPermissionContext

from bridge.engine.inputs import PermissionRequested

from ..base import Phase
from .permissions import PermissionResult
from .runner_state import CLOSE_DENY_MESSAGE, RunnerState

__all__ = ["TOOL_USE_WAIT", "ToolCheck", "ToolHooks"]

TOOL_USE_WAIT: Final = 2.0
"""Seconds a permission card waits for its call's ``tool_use`` entry (then goes out anyway)."""

ToolCheck = Callable[[str, str, dict[str, Any]], tuple[str, str] | None]
"""(session id, tool name, tool input) → ``("deny", why)``, ``("ask", why)`` (the permission
prompt, i.e. ``can_use_tool``, must run even where Claude Code would allow by itself), or None
(Claude Code's own rules decide)."""


class ToolHooks:
    """The permission callbacks of one session (see the module docstring).

    Args:
        state: the session's shared state.
        tool_check: the bridge's check of every call; None = no ``PreToolUse`` hook.
    """

    def __init__(self, state: RunnerState, tool_check: ToolCheck | None) -> None:
        self._state = state
        self._tool_check = tool_check

    @property
    def checks_every_call(self) -> bool:
        """Whether :meth:`pre_tool_use` has a check to run (else the hook is left out)."""
        return self._tool_check is not None

    async def pre_tool_use(
        self, input_data: Any, tool_use_id: str | None, context: Any
    ) -> dict[str, Any]:
        """Every tool call passes here before Claude Code's own rules: the bridge's deny list
        blocks it in every mode, including calls Claude Code would allow without asking."""
        if self._tool_check is None or not isinstance(input_data, dict):
            return {}
        tool_input = input_data.get("tool_input")
        verdict = self._tool_check(
            self._state.session_id,
            str(input_data.get("tool_name", "")),
            tool_input if isinstance(tool_input, dict) else {},
        )
        if verdict is None:
            return {}
        decision, reason = verdict
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": decision,
                "permissionDecisionReason": reason,
            }
        }

    async def can_use_tool(
        self, tool_name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResult:
        """Ask the phone about one call; cancel-safe (a cancelled call leaves nothing pending)."""
        state = self._state
        request_id = context.tool_use_id or f"permission_{uuid.uuid4().hex}"
        await state.tool_order.wait(request_id, TOOL_USE_WAIT)
        if state.phase is Phase.CLOSED or state.stop.is_set():
            return PermissionResultDeny(message=CLOSE_DENY_MESSAGE)
        future = state.broker.open(request_id, tool_name, tool_input, context.suggestions)
        waiting = "waiting_question" if tool_name == "AskUserQuestion" else "waiting_permission"
        try:
            state.emit(
                PermissionRequested(
                    state.session_id,
                    request_id,
                    tool_name,
                    dict(tool_input),
                    description=context.title or context.description,
                    agent_id=context.agent_id,
                )
            )
            state.set_state(waiting)
            return await future
        finally:
            # Also when the CLI cancelled the request (an interrupt): nothing is left waiting.
            state.broker.discard(request_id, future)
            if not state.broker.pending and state.state.startswith("waiting_"):
                state.set_state("running")
