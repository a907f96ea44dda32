"""Starting and stopping one Claude Code process through the SDK.

:func:`session_options` is the one place where a session's settings become SDK options: the
``claude_code`` system prompt preset (``None`` would pass ``--system-prompt ''`` and strip Claude
Code's instructions), the user and project setting sources, the permission mode, model and
effort, the ``can_use_tool`` callback, stderr into the log, and either ``--resume=<id>`` or
``--session-id=<new id>`` (so that a new conversation's id is known before its first turn).

:func:`stop_client` ends a process without ever leaving it behind: the SDK's ``disconnect`` (stdin
closed, then SIGTERM after 5 s, then SIGKILL) runs in its own task so that a cancelled caller
cannot cut it short; if it does not finish in time, the CLI is killed by pid.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, cast

from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, HookCallback, HookMatcher
from claude_agent_sdk.types import CanUseTool

from .environment import sdk_env

__all__ = ["INTERRUPT_BEFORE_STOP", "crash_reason", "kill_child", "session_options", "stop_client"]

logger = logging.getLogger(__name__)

INTERRUPT_BEFORE_STOP: Final = 2.0
"""Seconds to let an interrupt end a running turn before the input is closed: a CLI in the
middle of a turn ignores the end of its input for 5 s, after which the SDK terminates it."""


def session_options(
    *,
    cwd: Path,
    cli_path: str | Path | None,
    env: dict[str, str],
    mode: str,
    model: str | None,
    effort: str | None,
    can_use_tool: CanUseTool,
    stderr: Callable[[str], None],
    resume: str | None,
    session_id: str | None,
    pre_tool_use: HookCallback | None = None,
) -> ClaudeAgentOptions:
    """The SDK options of one session process (see the module docstring).

    Args:
        env: the complete environment the CLI must see (turned into SDK overrides here).
        effort: a level for ``--effort``; None (or ``auto``) leaves the model's default.
        resume: the SDK session id to resume, or None for a new conversation…
        session_id: …whose id this is.
    """
    return ClaudeAgentOptions(
        cwd=cwd,
        cli_path=cli_path,
        env=sdk_env(env),
        permission_mode=cast(Any, mode),
        system_prompt={"type": "preset", "preset": "claude_code"},
        setting_sources=["user", "project"],
        model=model,
        effort=cast(Any, effort if effort != "auto" else None),
        can_use_tool=can_use_tool,
        stderr=stderr,
        resume=resume,
        session_id=None if resume else session_id,
        hooks=(
            {"PreToolUse": [HookMatcher(matcher=None, hooks=[pre_tool_use])]}
            if pre_tool_use is not None
            else None
        ),
    )


async def stop_client(
    client: ClaudeSDKClient,
    *,
    interrupt_first: bool,
    pid: int | None,
    timeout: float,
    label: str,
) -> None:
    """Disconnect `client` and make sure its CLI is gone (see the module docstring)."""
    try:
        if interrupt_first:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(INTERRUPT_BEFORE_STOP):
                    await client.interrupt()
    finally:
        task = asyncio.create_task(client.disconnect(), name=f"claude-close-{label}")
        task.add_done_callback(_log_close_failure)
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout)
        except TimeoutError:
            logger.warning("! Claude session %s: the CLI did not stop; killing it", label)
            kill_child(pid)


def crash_reason(exc: BaseException) -> str:
    """Why a stream failed, without the CLI's output (it could quote anything)."""
    exit_code = getattr(exc, "exit_code", None)
    if isinstance(exit_code, int):
        return f"exit code {exit_code}"
    return type(exc).__name__


def kill_child(pid: int | None) -> None:
    """SIGKILL `pid` if it is still a child of this process (Linux ``/proc``; else nothing)."""
    if pid is None:
        return
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            fields = stat.read().rsplit(")", 1)[-1].split()
        if int(fields[1]) == os.getpid():
            os.kill(pid, signal.SIGKILL)
    except (OSError, ValueError, IndexError):
        return


def _log_close_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.warning("! closing a Claude Code process failed", exc_info=task.exception())
