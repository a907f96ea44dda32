"""The Claude Code runner: one ``ClaudeSDKClient`` (one CLI process) per session.

Theory of operation. A session's work is split in four jobs that share one
:class:`~bridge.agents.claude.runner_state.RunnerState`:

- this module, :class:`ClaudeRunner`: the :class:`~bridge.agents.base.Runner` methods, called
  from the daemon's tasks. They never touch the SDK client (the SDK wants it used only in the
  task that connected it): they check the phase and put work on queues, inputs on
  :class:`~bridge.agents.claude.handoff.InputHandoff`, client operations (interrupt, mode, model,
  effort) on :class:`~bridge.agents.claude.channel.ControlChannel`;
- :mod:`.lifecycle`: the **session task**, spawned by ``start``, which connects, serves,
  restarts and disconnects the CLI, and emits ``AgentReady`` / ``AgentFailed`` / ``AgentEnded``;
- :mod:`.stream`: the reader (SDK messages → agent events) and the writer (inputs → the CLI);
- :mod:`.tool_hooks`: the ``PreToolUse`` hook and ``can_use_tool`` (permission cards).

What the methods promise:

- ``start`` checks the spec (:func:`~bridge.agents.base.check_start`), fixes the options the
  first spawn gets (``bypassPermissions`` is coerced to ``default``; an unknown mode is ``plan``)
  and spawns the session task; ``AgentReady`` or ``AgentFailed`` follows from there.
- **Inputs** go out with ``uuid`` = :func:`~bridge.agents.claude.transcript.input_uuid` (uid), which
  Claude Code records in its transcript; :meth:`ClaudeRunner.received` reads it back
  (:mod:`bridge.agents.claude.transcript`), from the transcripts of every SDK session id the
  session has had (:attr:`ClaudeRunner.previous_sdk_session_ids`).
- ``interrupt`` asks the CLI to stop the turn and denies every pending tool call; restart, end
  and close deny them too, so no call waits for a card nobody can answer.
- ``set_option`` changes the mode here (``set_permission_mode``, remembering that the CLI's
  report of it is not news) and effort and model through :mod:`.options`.
- ``close`` stops the session task (which disconnects: stdin closed, then terminate/kill
  escalation by the SDK), denies pending calls, and emits nothing from the moment it is called.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Mapping
from pathlib import Path
from typing import Any, Final, TypeVar, cast

from claude_agent_sdk import ClaudeSDKClient

from bridge.protocol import ModelEntry
from bridge.protocol.enums import EFFORT_LEVELS, PERMISSION_MODES
from bridge.tasks import TaskSet

from ..base import Emit, Phase, Runner, RunnerError, RunnerFactory, SessionSpec, check_start
from .lifecycle import (
    CLOSE_TIMEOUT,
    CONTROL_TIMEOUT,
    MAX_RESTARTS,
    RESTART_DENY_MESSAGE,
    EnvHook,
    SessionTask,
)
from .models import models_from_server_info
from .options import change_effort, change_model
from .runner_state import AGENT_NAME, CLOSE_DENY_MESSAGE, RunnerState, short_reason
from .tool_hooks import TOOL_USE_WAIT, ToolCheck, ToolHooks
from .transcript import input_uuid

__all__ = [
    "MAX_RESTARTS",
    "RESTART_DENY_MESSAGE",
    "TOOL_USE_WAIT",
    "ClaudeRunner",
    "EnvHook",
    "ToolCheck",
    "claude_runner_factory",
]

logger = logging.getLogger(__name__)

_INTERRUPT_DENY_MESSAGE: Final = "Interrupted by the user"

_T = TypeVar("_T")


class ClaudeRunner:
    """One Claude Code session (see the module docstring).

    Args:
        session_id: the bridge's session id.
        emit: where agent events go.
        cli_path: the ``claude`` executable; None = the SDK's bundled CLI.
        base_env: the environment sessions start from; None = ``os.environ`` read at each spawn.
        config_dir: forces ``CLAUDE_CONFIG_DIR`` (tests; a per-daemon config).
        env_hook: see :data:`EnvHook` (provider profiles, re-read at each spawn).
        diff_allowed: whether the diff gate is open (asked at each Edit/Write/MultiEdit call).
        tool_check: see :data:`ToolCheck` (the daemon's risk gate, asked about every call).
        clock: unix seconds, for entry timestamps.
        max_restarts: restarts in a row before the session ends.
    """

    def __init__(
        self,
        session_id: str,
        emit: Emit,
        *,
        cli_path: str | Path | None = None,
        base_env: Mapping[str, str] | None = None,
        config_dir: Path | None = None,
        env_hook: EnvHook | None = None,
        diff_allowed: Callable[[], bool] | None = None,
        tool_check: ToolCheck | None = None,
        clock: Callable[[], float] = time.time,
        max_restarts: int = MAX_RESTARTS,
    ) -> None:
        self._state = RunnerState(
            session_id,
            emit,
            clock=clock,
            base_env=base_env,
            config_dir=config_dir,
            diff_allowed=diff_allowed or (lambda: False),
        )
        self._session = SessionTask(
            self._state,
            ToolHooks(self._state, tool_check),
            cli_path=cli_path,
            config_dir=config_dir,
            env_hook=env_hook,
            max_restarts=max_restarts,
        )
        self._tasks = TaskSet(f"Claude session {self._state.sid}", logger=logger)

    # -- properties -----------------------------------------------------------------------------

    @property
    def session_id(self) -> str:
        return self._state.session_id

    @property
    def sdk_session_id(self) -> str | None:
        """The SDK session id in use (None before the first connect)."""
        return self._state.sdk_session_id

    @property
    def previous_sdk_session_ids(self) -> tuple[str, ...]:
        """SDK session ids dropped because they could not be resumed, oldest first."""
        return tuple(self._state.previous_ids)

    @property
    def cli_pid(self) -> int | None:
        """The pid of the running CLI (from its initialize answer), if connected."""
        return self._state.pid

    @property
    def permission_mode(self) -> str:
        return self._state.mode

    @property
    def pending_permissions(self) -> tuple[str, ...]:
        """The request ids of the tool calls waiting for an answer."""
        return tuple(self._state.broker.pending)

    @property
    def server_info(self) -> Mapping[str, Any] | None:
        """The CLI's initialize answer (commands, models, version, …), once connected."""
        return self._state.server_info

    def models(self) -> list[ModelEntry]:
        """The models the CLI offers (``[]`` before the first connect)."""
        return models_from_server_info(self._state.server_info)

    # -- the Runner protocol --------------------------------------------------------------------

    async def start(self, spec: SessionSpec, *, resume: bool) -> None:
        """Start or resume; ``AgentReady`` or ``AgentFailed`` follows from the session task.

        Raises:
            RunnerError: already started or closed, or `spec` is for another session.
        """
        state = self._state
        check_start(AGENT_NAME, state.phase, state.session_id, spec)
        state.spec = spec
        mode = "default" if spec.permission_mode == "bypassPermissions" else spec.permission_mode
        state.mode = mode if mode in PERMISSION_MODES else "plan"
        state.model = spec.model
        state.effort = spec.effort_level if spec.effort_level in EFFORT_LEVELS else None
        state.phase = Phase.STARTING
        self._tasks.spawn(self._session.run(spec, resume), f"claude-{state.sid}")

    async def send_input(self, uid: str, text: str) -> None:
        """Queue one input for the CLI (written in order by the session task).

        Cancel-safe: nothing is awaited. An input queued while the CLI restarts is written once it
        is back.

        Raises:
            RunnerError: the session is not running, or the arguments are not strings.
        """
        self._state.require_live()
        if not isinstance(uid, str) or not uid:
            raise RunnerError("the input uid must be a non-empty string")
        if not isinstance(text, str):
            raise RunnerError("the input text must be a string")
        self._state.adapter.authored(text)
        self._state.inputs.put(uid, text)

    async def received(self, uids: Collection[str]) -> set[str]:
        """The subset of `uids` that Claude Code recorded in this session's transcripts.

        Works before start and after close (it reads files only).

        Raises:
            RunnerError: a transcript exists but cannot be read.
        """
        try:
            found = await asyncio.to_thread(self._state.recorded)
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise RunnerError(f"the Claude Code transcript cannot be read: {reason}") from exc
        return {uid for uid in uids if input_uuid(uid) in found}

    async def interrupt(self) -> None:
        """Stop the current turn; pending tool calls are denied. A no-op when not connected."""
        if self._state.phase is Phase.READY:
            with contextlib.suppress(RunnerError):
                await self._call(lambda client: client.interrupt())
        self._state.broker.deny_all(_INTERRUPT_DENY_MESSAGE)

    async def set_option(self, option: str, value: str) -> str | None:
        """Change ``mode`` / ``effort`` / ``model``; the value now in force, None if refused.

        ``bypassPermissions`` is coerced to ``default``; ``effort`` may come back clamped by the
        CLI (a level the model lacks); ``auto`` effort leaves the model's default.

        Raises:
            RunnerError: the session is not running.
        """
        self._state.require_live()
        if not isinstance(value, str):
            return None
        try:
            if option == "mode":
                return await self._set_mode(value)
            if option == "effort":
                return await self._set_effort(value)
            if option == "model":
                return await self._set_model(value)
        except RunnerError:
            raise
        except Exception as exc:  # the CLI refused (a control error)
            logger.info("! %s change of %s refused: %s", option, self._state.sid, short_reason(exc))
        return None

    async def answer_permission(
        self,
        request_id: str,
        allow: bool,
        *,
        message: str = "",
        always: bool = False,
        updated_input: dict[str, Any] | None = None,
    ) -> None:
        """Resolve a pending ``PermissionRequested`` (unknown ids are ignored)."""
        self._state.broker.answer(
            request_id, allow, message=message, always=always, updated_input=updated_input
        )

    async def close(self) -> None:
        """Stop the CLI and the session task (idempotent); nothing is emitted from here on.

        The task gets :data:`~bridge.agents.claude.lifecycle.CLOSE_TIMEOUT` s to disconnect the
        CLI by itself, then it is cancelled (and gets as long again).
        """
        state = self._state
        state.phase = Phase.CLOSED
        state.broker.deny_all(CLOSE_DENY_MESSAGE)
        state.stop.set()
        await self._tasks.drain(CLOSE_TIMEOUT)
        await self._tasks.close(CLOSE_TIMEOUT)

    # -- options --------------------------------------------------------------------------------

    async def _set_mode(self, value: str) -> str | None:
        mode = "default" if value == "bypassPermissions" else value
        if mode not in PERMISSION_MODES:
            return None
        if mode != self._state.mode:
            self._state.expected_mode = mode  # the CLI's `status` frame about it is not news
        await self._call(lambda client: client.set_permission_mode(cast(Any, mode)))
        self._state.mode = mode
        return mode

    async def _set_effort(self, value: str) -> str | None:
        effort = await change_effort(self._call, value)
        if effort is not None:
            self._state.effort = effort
        return effort

    async def _set_model(self, value: str) -> str | None:
        model = await change_model(self._call, value)
        if model is not None:
            self._state.model = model
        return model

    async def _call(self, op: Callable[[ClaudeSDKClient], Awaitable[_T]]) -> _T:
        self._state.require_live()
        return await self._state.controls.call(op, CONTROL_TIMEOUT)


def claude_runner_factory(
    *,
    cli_path: str | Path | None = None,
    base_env: Mapping[str, str] | None = None,
    config_dir: Path | None = None,
    env_hook: EnvHook | None = None,
    diff_allowed: Callable[[], bool] | None = None,
    tool_check: ToolCheck | None = None,
    clock: Callable[[], float] = time.time,
    max_restarts: int = MAX_RESTARTS,
) -> RunnerFactory:
    """A :data:`~bridge.agents.base.RunnerFactory` of :class:`ClaudeRunner` (arguments as there)."""

    def make(session_id: str, emit: Emit) -> Runner:
        return ClaudeRunner(
            session_id,
            emit,
            cli_path=cli_path,
            base_env=base_env,
            config_dir=config_dir,
            env_hook=env_hook,
            diff_allowed=diff_allowed,
            tool_check=tool_check,
            clock=clock,
            max_restarts=max_restarts,
        )

    return make
