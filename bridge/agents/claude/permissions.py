"""The runner's side of ``can_use_tool``: tool calls waiting for the phone's answer.

Each pending call is a future the SDK's callback awaits; the engine answers it through
``Runner.answer_permission``. The rules that keep a session from hanging: an answer to an unknown
id is ignored; :meth:`PermissionBroker.deny_all` resolves every pending call (interrupt, restart,
end, close); and the callback always discards its entry
(:meth:`~PermissionBroker.discard`), also when the CLI cancels it (``control_cancel_request``
after an interrupt cancels the callback's task).

``always`` adds an allow rule to the project's local settings (``<cwd>/.claude/settings.local.json``,
the file Claude Code's own "don't ask again" writes and git ignores): the CLI's own ``addRules``
suggestion for the call when it made one (for ``Bash`` a prefix rule for that command, not every
command), otherwise a rule for the whole tool. The same rule is also added to the running
session: measured, Claude Code only picks the settings file up a moment later (its watcher), so
without the session copy the very next identical call would still ask.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny, PermissionUpdate
from claude_agent_sdk.types import PermissionRuleValue

__all__ = [
    "ALWAYS_DESTINATION",
    "DEFAULT_DENY_MESSAGE",
    "PendingPermission",
    "PermissionBroker",
    "PermissionResult",
    "ToolOrder",
    "always_rules",
]

logger = logging.getLogger(__name__)

ALWAYS_DESTINATION: Final = "localSettings"
DEFAULT_DENY_MESSAGE: Final = "The user denied this tool call from the phone."

PermissionResult = PermissionResultAllow | PermissionResultDeny


@dataclass(frozen=True, slots=True)
class PendingPermission:
    """One tool call waiting for an answer."""

    request_id: str
    tool_name: str
    tool_input: Mapping[str, Any]
    suggestions: Sequence[PermissionUpdate]
    future: asyncio.Future[PermissionResult]


def always_rules(tool_name: str, suggestions: Sequence[PermissionUpdate]) -> list[PermissionUpdate]:
    """The permission updates of an ``always`` answer: one rule, kept and in force at once."""
    rule = next(
        (s for s in suggestions if s.type == "addRules" and s.behavior == "allow" and s.rules),
        PermissionUpdate(
            type="addRules", rules=[PermissionRuleValue(tool_name=tool_name)], behavior="allow"
        ),
    )
    return [replace(rule, destination=ALWAYS_DESTINATION), replace(rule, destination="session")]


class PermissionBroker:
    """The pending tool calls of one session, by request id (the call's ``tool_use_id``)."""

    def __init__(self) -> None:
        self._pending: dict[str, PendingPermission] = {}

    @property
    def pending(self) -> Mapping[str, PendingPermission]:
        return dict(self._pending)

    def open(
        self,
        request_id: str,
        tool_name: str,
        tool_input: Mapping[str, Any],
        suggestions: Sequence[PermissionUpdate] = (),
    ) -> asyncio.Future[PermissionResult]:
        """Register a call and return the future its callback awaits.

        A second call with the same id (the CLI asks again for the same tool use) replaces the
        first, which is denied so that nothing is left waiting.
        """
        previous = self._pending.pop(request_id, None)
        if previous is not None and not previous.future.done():
            previous.future.set_result(PermissionResultDeny(message="Superseded by a new request"))
        future: asyncio.Future[PermissionResult] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = PendingPermission(
            request_id, tool_name, dict(tool_input), tuple(suggestions), future
        )
        return future

    def answer(
        self,
        request_id: str,
        allow: bool,
        *,
        message: str = "",
        always: bool = False,
        updated_input: Mapping[str, Any] | None = None,
    ) -> bool:
        """Resolve one pending call; False when the id is unknown or already answered."""
        entry = self._pending.get(request_id)
        if entry is None or entry.future.done():
            return False
        result: PermissionResult
        if allow:
            result = PermissionResultAllow(
                updated_input=dict(updated_input) if updated_input is not None else None,
                updated_permissions=(
                    always_rules(entry.tool_name, entry.suggestions) if always else None
                ),
            )
        else:
            result = PermissionResultDeny(message=message or DEFAULT_DENY_MESSAGE)
        entry.future.set_result(result)
        return True

    def deny_all(self, message: str) -> int:
        """Deny every pending call with `message`; how many were pending."""
        count = 0
        for entry in list(self._pending.values()):
            if not entry.future.done():
                entry.future.set_result(PermissionResultDeny(message=message))
                count += 1
        return count

    def discard(self, request_id: str, future: asyncio.Future[PermissionResult]) -> None:
        """Forget a call once its callback is done (only if it is still this call's entry)."""
        entry = self._pending.get(request_id)
        if entry is not None and entry.future is future:
            del self._pending[request_id]


class ToolOrder:
    """Keeps a permission card behind the ``tool_use`` entry of its call.

    The SDK reads the CLI's frames in one task and runs ``can_use_tool`` in another, so the
    callback can start before the reader has turned the call's ``assistant`` frame into its
    ``tool_use`` entry. The reader reports each call it emitted (:meth:`seen`); the callback
    waits (:meth:`wait`) for its call first, for a bounded time.
    """

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
        """Wait until the call was seen; False when `timeout` passed first (logged, not fatal)."""
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
