"""The session task of one Claude Code session: connect, serve, restart.

The task owns the SDK client: it connects, serves, disconnects and restarts, so the client lives
and dies in the task that connected it (the SDK's rule). While connected, it runs three helpers
and waits for the first to stop: the *reader* and the *writer* (:mod:`.stream`) and the
*controls* (:class:`~bridge.agents.claude.channel.ControlChannel`: interrupt, mode, model,
effort). The runner's methods only put work on those queues, so nothing touches the client from
the daemon's tasks.

- **Ready** once the CLI answered ``initialize`` (and ``get_settings``, for the model in force):
  ``AgentReady(session_id, sdk_session_id, model, cwd)``. New conversations get their SDK session
  id from the runner (``--session-id``), so it is known before the first turn. ``AgentReady`` is
  emitted again after every restart (the engine then updates the record and delivers pending
  inputs).
- **Crashes**: when the CLI dies or its stream fails after ready, the task denies pending calls
  (:data:`RESTART_DENY_MESSAGE`), emits a ``system`` entry ``special:"session_restart"`` and
  reconnects with ``resume`` (up to :data:`MAX_RESTARTS` times in a row; a completed turn resets
  the count). Inputs written to the dead CLI that its transcript never recorded are written
  again. A conversation that cannot be resumed ("No conversation found") starts fresh with a new
  SDK session id; the dropped ids stay in the state's ``previous_ids`` (and ``received`` still
  reads their transcripts). When the restarts run out: ``AgentEnded`` (the engine writes the
  ``session_died`` entry); when a respawn fails: ``AgentFailed``.
- **Stop** (the state's ``stop`` event, set by ``close``): the helpers are cancelled and the CLI is
  disconnected (stdin closed, then terminate/kill escalation by the SDK; interrupted first when a
  turn runs). Whatever way the task ends, pending calls are denied and queued control operations
  fail, so no caller is left waiting.

``get_settings`` has no SDK method: it uses the SDK's private ``Query._send_control_request``
(:func:`~bridge.agents.claude.channel.control_request`), as effort changes do; the SDK version is
pinned for that reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Final, cast

from claude_agent_sdk import ClaudeSDKClient, HookCallback

from bridge.engine.inputs import AgentEnded, AgentFailed, AgentReady

from ..base import LIVE_PHASES, Phase, SessionSpec
from .channel import control_request
from .environment import claude_config_dir
from .process import session_options, stop_client
from .runner_state import RunnerState, short_reason
from .stream import StreamFailed, read_messages, write_inputs
from .tool_hooks import ToolHooks
from .transcript import last_total_cost, transcript_paths

__all__ = [
    "CLOSE_TIMEOUT",
    "CONTROL_TIMEOUT",
    "MAX_RESTARTS",
    "RESTART_DENY_MESSAGE",
    "EnvHook",
    "SessionTask",
]

logger = logging.getLogger(__name__)

MAX_RESTARTS: Final = 2
"""Restarts in a row (no completed turn between them) before the session ends."""
RESTART_DENY_MESSAGE: Final = "Session restarted — please retry"
"""Why the tool calls pending when the CLI died were denied."""
CONTROL_TIMEOUT: Final = 30.0
"""Seconds a control request (``get_settings``, a mode or model change) may take."""
CLOSE_TIMEOUT: Final = 20.0
"""Seconds a CLI (and the session task) may take to stop before it is killed (cancelled)."""
_CONNECT_TIMEOUT: Final = 90.0  # spawn + initialize (the SDK's own floor is 60 s)
_END_DENY_MESSAGE: Final = "The session ended"
_UNRESUMABLE: Final = "No conversation found"
_STDERR_LINES: Final = 5  # the last lines are searched for _UNRESUMABLE
_STDERR_CHARS: Final = 500

EnvHook = Callable[[SessionSpec, dict[str, str]], Awaitable[Mapping[str, str]]]
"""Called at every spawn (start, restart, resume) with the spec and the environment so far;
returns the complete environment the CLI must see (provider-bound sessions: ``provider_env``)."""


class SessionTask:
    """The body of the session task (see the module docstring); :meth:`run` is the task.

    Args:
        state: the session's shared state.
        hooks: the permission callbacks every spawn is given.
        cli_path: the ``claude`` executable; None = the SDK's bundled CLI.
        config_dir: forces ``CLAUDE_CONFIG_DIR``.
        env_hook: see :data:`EnvHook`.
        max_restarts: restarts in a row before the session ends.
    """

    def __init__(
        self,
        state: RunnerState,
        hooks: ToolHooks,
        *,
        cli_path: str | Path | None,
        config_dir: Path | None,
        env_hook: EnvHook | None,
        max_restarts: int,
    ) -> None:
        self._state = state
        self._hooks = hooks
        self._cli_path = cli_path
        self._config_dir = config_dir
        self._env_hook = env_hook
        self._max_restarts = max_restarts
        self._stderr: deque[str] = deque(maxlen=_STDERR_LINES)

    async def run(self, spec: SessionSpec, resume: bool) -> None:
        """Run the session until it stops, ends or fails; reports every outcome as an event."""
        state = self._state
        try:
            await self._lifecycle(spec, resume)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug here, or an emit that raised
            logger.error("x Claude session %s failed", state.sid, exc_info=exc)
            if state.phase is not Phase.CLOSED:
                state.phase = Phase.ENDED
                with contextlib.suppress(Exception):
                    state.emit(AgentEnded(state.session_id, f"runner failed: {type(exc).__name__}"))
        finally:
            if state.phase in LIVE_PHASES:
                state.phase = Phase.ENDED
            state.broker.deny_all(_END_DENY_MESSAGE)
            state.controls.fail_pending("the Claude Code session has ended")

    async def _lifecycle(self, spec: SessionSpec, resume: bool) -> None:
        state = self._state
        if not spec.cwd.is_dir():
            self._fail(f"working directory {spec.cwd} does not exist")
            return
        resume_id = spec.sdk_session_id if resume else None
        restarts = 0
        while not state.stop.is_set():
            client = await self._connect_or_fail(spec, resume_id)
            if client is None:
                return
            state.turn_completed = False
            reason: str | None = None
            try:
                if state.stop.is_set():
                    return
                state.phase = Phase.READY
                model = state.model or state.applied_model
                state.emit(AgentReady(state.session_id, state.sdk_session_id, model, str(spec.cwd)))
                reason = await self._serve(client)
            finally:
                pid, state.pid = state.pid, None
                await stop_client(
                    client,
                    interrupt_first=reason is None and state.state != "idle",
                    pid=pid,
                    timeout=CLOSE_TIMEOUT,
                    label=state.sid,
                )
            if reason is None:
                return
            if state.turn_completed:
                restarts = 0
            if not await self._restart(reason, restarts):
                return
            restarts += 1
            resume_id = state.sdk_session_id

    async def _restart(self, reason: str, restarts: int) -> bool:
        """After the CLI died: deny, mark, requeue; False when the restarts ran out."""
        state = self._state
        state.broker.deny_all(RESTART_DENY_MESSAGE)
        state.set_state("idle")
        if restarts >= self._max_restarts:
            state.phase = Phase.ENDED
            suffix = f" after {restarts} restart(s)" if restarts else ""
            state.emit(AgentEnded(state.session_id, f"Claude Code stopped ({reason}){suffix}"))
            return False
        state.phase = Phase.RESTARTING
        count = f"{restarts + 1} of {self._max_restarts}"
        logger.warning("! Claude session %s: %s; restart %s", state.sid, reason, count)
        state.entry(
            "system",
            f"Claude Code stopped unexpectedly ({reason}) — restarting ({count})",
            {"special": "session_restart"},
        )
        try:
            recorded = await asyncio.to_thread(state.recorded)
        except OSError:
            logger.warning("! Claude session %s: transcript unreadable; nothing resent", state.sid)
            recorded = set(state.inputs.unanswered)
        if resent := state.inputs.requeue(recorded):
            logger.info("Claude session %s: resending %d input(s)", state.sid, resent)
        return True

    def _fail(self, reason: str) -> None:
        """Report that the CLI cannot run.

        Before ready this fails the session's creation; on a restart or a resume the engine ends
        the session ("Session could not be resumed").
        """
        state = self._state
        if state.phase is not Phase.CLOSED:
            state.phase = Phase.FAILED if state.phase is Phase.STARTING else Phase.ENDED
        state.emit(AgentFailed(state.session_id, reason))

    async def _connect_or_fail(
        self, spec: SessionSpec, resume_id: str | None
    ) -> ClaudeSDKClient | None:
        """A connected client, or None after reporting why there is none."""
        state = self._state
        try:
            return await self._connect(spec, resume_id)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if resume_id is None or not self._unresumable(exc, resume_id):
                logger.warning(
                    "! Claude session %s could not start: %s", state.sid, short_reason(exc)
                )
                self._fail(short_reason(exc))
                return None
        # The conversation is gone (or was never written): start a new one.
        logger.warning("! Claude session %s: %s cannot be resumed", state.sid, resume_id[:8])
        state.previous_ids.append(resume_id)
        try:
            client = await self._connect(spec, None)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._fail(short_reason(exc))
            return None
        state.adapter.last_total_cost = None
        state.entry(
            "system",
            "The previous conversation could not be resumed — this is a new conversation",
            {"special": "session_restart", "previous_sdk_session_id": resume_id},
        )
        return client

    def _unresumable(self, exc: Exception, resume_id: str) -> bool:
        if _UNRESUMABLE in str(exc) or any(_UNRESUMABLE in line for line in self._stderr):
            return True
        lookup = self._state.lookup_dir
        return lookup is not None and not transcript_paths(lookup, [resume_id])

    async def _environment(self, spec: SessionSpec) -> dict[str, str]:
        base_env = self._state.base_env
        env = dict(os.environ) if base_env is None else dict(base_env)
        env.update(spec.env)
        if self._config_dir is not None:
            env["CLAUDE_CONFIG_DIR"] = str(self._config_dir)
        if self._env_hook is not None:
            env = dict(await self._env_hook(spec, env))
        return env

    async def _connect(self, spec: SessionSpec, resume_id: str | None) -> ClaudeSDKClient:
        state = self._state
        env = await self._environment(spec)
        state.lookup_dir = claude_config_dir(env)
        self._stderr.clear()
        new_id = None if resume_id else str(uuid.uuid4())
        hooks = self._hooks
        options = session_options(
            cwd=spec.cwd,
            cli_path=self._cli_path,
            env=env,
            mode=state.mode,
            model=state.model,
            effort=state.effort,
            can_use_tool=hooks.can_use_tool,
            pre_tool_use=(
                cast(HookCallback, hooks.pre_tool_use) if hooks.checks_every_call else None
            ),
            stderr=self._on_stderr,
            resume=resume_id,
            session_id=new_id,
        )
        client = ClaudeSDKClient(options)
        async with asyncio.timeout(_CONNECT_TIMEOUT):
            await client.connect()  # on failure the SDK disconnects (and reaps the CLI) itself
        info = await client.get_server_info()
        pid = (info or {}).get("pid")
        try:
            async with asyncio.timeout(CONTROL_TIMEOUT):
                settings = await control_request(client, {"subtype": "get_settings"})
        except BaseException:
            await stop_client(
                client,
                interrupt_first=False,
                pid=pid if isinstance(pid, int) else None,
                timeout=CLOSE_TIMEOUT,
                label=state.sid,
            )
            raise
        state.server_info = dict(info) if isinstance(info, dict) else None
        state.pid = pid if isinstance(pid, int) else None
        applied = settings.get("applied")
        model = applied.get("model") if isinstance(applied, dict) else None
        state.applied_model = model if isinstance(model, str) and model else None
        state.sdk_session_id = resume_id or new_id
        if resume_id is not None and state.adapter.last_total_cost is None:
            paths = transcript_paths(state.lookup_dir, [resume_id])
            state.adapter.last_total_cost = await asyncio.to_thread(last_total_cost, paths)
        return client

    async def _serve(self, client: ClaudeSDKClient) -> str | None:
        """Run the helpers until one stops: the failure's reason, or None when asked to stop."""
        state = self._state
        helpers = {
            asyncio.create_task(read_messages(state, client), name=f"claude-read-{state.sid}"),
            asyncio.create_task(write_inputs(state, client), name=f"claude-write-{state.sid}"),
            asyncio.create_task(state.controls.serve(client), name=f"claude-ctl-{state.sid}"),
        }
        stopper = asyncio.create_task(state.stop.wait())
        try:
            done, _ = await asyncio.wait({*helpers, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (*helpers, stopper):
                task.cancel()
            await asyncio.gather(*helpers, stopper, return_exceptions=True)
        if stopper in done:
            return None
        for task in done:
            exc = task.exception()
            if isinstance(exc, StreamFailed):
                return str(exc)
            if exc is not None:
                raise exc
        return "Claude Code stopped"

    def _on_stderr(self, line: str) -> None:
        """The CLI's stderr: the last lines are kept (see :meth:`_unresumable`), all logged."""
        self._stderr.append(line[:_STDERR_CHARS])
        logger.info("  claude %s: %s", self._state.sid, line[:_STDERR_CHARS])
