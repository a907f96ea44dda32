"""The CLI's questions about tool calls: ``can_use_tool`` and the ``PreToolUse`` hook callback.

Claude Code asks in this order, and the two do different jobs:

- **``PreToolUse``** (``hook_callback`` for ``hook_0``, registered only when the session has
  ``check_tools``) sees *every* call, before Claude Code's own rules. The daemon's check answers
  through :meth:`~bridge.host.driver.HostServices.check_tool`, keyed by the CLI's request id; see
  :func:`~bridge.agents.claude.permissions.hook_response` for the verdicts. The matcher is
  registered with ``onFailure: "block"`` and a timeout of :data:`HOOK_TIMEOUT` (the CLI's
  default is 60 s, after which a PreToolUse callback counts as failed, i.e. blocked): a check may
  wait for a daemon that is restarting, and must still be answered by it.
- **``can_use_tool``** is the permission prompt; it runs only for calls that would ask. The
  handler waits (at most :data:`TOOL_USE_WAIT` s) until the reader has emitted the call's
  ``tool_use`` entry (:class:`~bridge.agents.claude.permissions.ToolOrder`), reports
  ``waiting_permission`` (``waiting_question`` for ``AskUserQuestion``), then asks the phone
  through :meth:`~bridge.host.driver.HostServices.ask_permission` with ``request_id`` = the
  call's ``tool_use_id`` — **without a time limit**: nothing here ever denies on the daemon's
  behalf. A ``report`` the model wrote into a Desiide ``propose_edit`` is dropped first
  (:func:`~.editor_tools.without_model_report`). When no prompt is pending any more the state is ``running`` again.

Both handlers are cancel-safe: the CLI cancels a prompt (``control_cancel_request``, after an
interrupt) by cancelling the handler's task, which cancels the host's wait (the host withdraws
the card) and answers nothing. A wait the daemon answers with a failure (the host is broken) is
not turned into a refusal either: the exception goes to the protocol, which ends the session.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

from bridge.host.driver import HostServices
from bridge.host.events import PermissionAsked

from .cli_protocol import ControlError, Handler
from .editor_tools import without_model_report
from .permissions import ToolOrder, hook_response, permission_response

__all__ = ["HOOK_CALLBACK_ID", "HOOK_TIMEOUT", "TOOL_USE_WAIT", "ToolCalls", "hooks_config"]

logger = logging.getLogger(__name__)

TOOL_USE_WAIT: Final = 2.0
"""Seconds a permission card waits for its call's ``tool_use`` entry (then goes out anyway)."""
HOOK_CALLBACK_ID: Final = "hook_0"
HOOK_TIMEOUT: Final = 7 * 24 * 3600
"""Seconds the CLI waits for a ``PreToolUse`` answer (far beyond any daemon restart; the CLI's
timer holds up to ~24.8 days)."""


def hooks_config(check_tools: bool) -> dict[str, Any] | None:
    """The ``hooks`` of the ``initialize`` request: one ``PreToolUse`` matcher for every call."""
    if not check_tools:
        return None
    matcher = {
        "matcher": None,
        "hookCallbackIds": [HOOK_CALLBACK_ID],
        "timeout": HOOK_TIMEOUT,
        "onFailure": "block",
    }
    return {"PreToolUse": [matcher]}


class ToolCalls:
    """The handlers of one CLI's tool-call questions (see the module docstring).

    Args:
        services: the host's services.
        order: the reader's record of the calls it emitted.
        set_state: reports the agent's state (the driver's, which emits only changes).
        label: a short name for logs.
    """

    def __init__(
        self,
        services: HostServices,
        order: ToolOrder,
        set_state: Callable[[str], None],
        *,
        label: str,
    ) -> None:
        self._services = services
        self._order = order
        self._set_state = set_state
        self._label = label
        self._prompts: dict[str, str] = {}  # request id → tool name, while the phone is asked

    @property
    def pending(self) -> int:
        """How many permission prompts wait for the phone now."""
        return len(self._prompts)

    def handlers(self) -> dict[str, Handler]:
        """The protocol handlers, by control request subtype."""
        return {"can_use_tool": self.can_use_tool, "hook_callback": self.hook_callback}

    async def can_use_tool(self, cli_request_id: str, request: Mapping[str, Any]) -> dict[str, Any]:
        """Ask the phone about one call (no time limit; cancel-safe)."""
        tool_name = str(request.get("tool_name") or "")
        raw_input = request.get("input")
        tool_input: dict[str, Any] = dict(raw_input) if isinstance(raw_input, Mapping) else {}
        tool_input = without_model_report(tool_name, tool_input)
        tool_use_id = request.get("tool_use_id")
        request_id = (
            tool_use_id if isinstance(tool_use_id, str) and tool_use_id else _generated_id()
        )
        await self._order.wait(request_id, TOOL_USE_WAIT)
        description = _text(request.get("title")) or _text(request.get("description"))
        ask = PermissionAsked(
            request_id, tool_name, tool_input, description, _text(request.get("agent_id"))
        )
        self._prompts[cli_request_id] = tool_name
        try:
            self._show_state()
            answer = await self._services.ask_permission(ask)
        finally:
            self.withdrawn(cli_request_id)
        suggestions = request.get("permission_suggestions")
        logger.debug("= %s: %s answered (allow=%s)", self._label, request_id[:12], answer.allow)
        return permission_response(
            answer, tool_name, tool_input, suggestions if isinstance(suggestions, list) else ()
        )

    def withdrawn(self, cli_request_id: str) -> None:
        """A prompt is over (answered, or cancelled by the CLI: then called at once, before the
        frames that follow the cancellation are read); the state says what still waits."""
        if self._prompts.pop(cli_request_id, None) is not None:
            self._show_state()

    def _show_state(self) -> None:
        if not self._prompts:
            self._set_state("running")
        elif "AskUserQuestion" in self._prompts.values():
            self._set_state("waiting_question")
        else:
            self._set_state("waiting_permission")

    async def hook_callback(
        self, cli_request_id: str, request: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The daemon's pre-tool check of one call (no time limit; cancel-safe).

        Raises:
            ControlError: not our callback (the CLI gets an error answer: the call is blocked).
        """
        callback_id = request.get("callback_id")
        if callback_id != HOOK_CALLBACK_ID:
            raise ControlError(f"No hook callback found for ID: {callback_id}")
        data = request.get("input")
        hook_input: Mapping[str, Any] = data if isinstance(data, Mapping) else {}
        if hook_input.get("hook_event_name", "PreToolUse") != "PreToolUse":
            return {}
        raw_input = hook_input.get("tool_input")
        verdict = await self._services.check_tool(
            cli_request_id,
            str(hook_input.get("tool_name") or ""),
            dict(raw_input) if isinstance(raw_input, Mapping) else {},
        )
        logger.debug("= %s: check %s → %s", self._label, cli_request_id[:12], verdict.decision)
        return hook_response(verdict)


def _generated_id() -> str:
    return f"permission_{uuid.uuid4().hex}"


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
