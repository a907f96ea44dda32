"""The Claude Code runner: one ``ClaudeSDKClient`` (one CLI process) per session.

Theory of operation:

- ``start`` checks the spec and spawns the **session task**, which owns the client: it connects,
  serves, disconnects and restarts, so the client lives and dies in the task that connected it
  (the SDK's rule). While connected, the session task runs three helpers and waits for the first to
  stop: the *reader* (SDK messages → :class:`~bridge.agents.claude.adapter.Adapter` → agent events),
  the *writer* (inputs, in order, from :class:`~bridge.agents.claude.handoff.InputHandoff`) and the
  *controls* (:class:`~bridge.agents.claude.channel.ControlChannel`: interrupt, mode, model,
  effort). The runner's methods only put work on those queues, so nothing touches the client
  from the daemon's tasks.
- **Ready** once the CLI answered ``initialize`` (and ``get_settings``, for the model in force):
  ``AgentReady(session_id, sdk_session_id, model, cwd)``. New conversations get their SDK session id
  from the runner (``--session-id``), so it is known before the first turn. ``AgentReady`` is
  emitted again after every restart (the engine then updates the record and delivers pending
  inputs).
- **Inputs** go out with ``uuid`` = :func:`~bridge.agents.claude.transcript.input_uuid` (uid), which
  Claude Code records in its transcript; :meth:`ClaudeRunner.received` reads it back
  (:mod:`bridge.agents.claude.transcript`). ``AgentStateChanged(running)`` when one is written,
  ``idle`` when a result has answered every input written (``ResultMessage.user_message_uuids``:
  Claude Code may answer several queued inputs in one turn), ``waiting_permission`` /
  ``waiting_question`` while a ``can_use_tool`` is pending.
- **Permissions**: ``can_use_tool`` waits (at most :data:`TOOL_USE_WAIT` s) until the reader has
  emitted the call's ``tool_use`` entry, so the card never overtakes it, then emits
  ``PermissionRequested(request_id=tool_use_id, …)`` and awaits
  :meth:`ClaudeRunner.answer_permission`. Interrupt, restart, end and close deny every pending call.
- **Crashes**: when the CLI dies or its stream fails after ready, the runner denies pending calls
  ("Session restarted — please retry"), emits a ``system`` entry ``special:"session_restart"`` and
  reconnects with ``resume`` (up to :data:`MAX_RESTARTS` times in a row; a completed turn resets the
  count). Inputs written to the dead CLI that its transcript never recorded are written again. A
  conversation that cannot be resumed ("No conversation found") starts fresh with a new SDK
  session id; the dropped ids stay in :attr:`ClaudeRunner.previous_sdk_session_ids` (and
  ``received`` still reads their transcripts). When the restarts run out: ``AgentEnded`` (the
  engine writes the ``session_died`` entry); when a respawn fails: ``AgentFailed``.
- **Mode changes Claude Code makes itself** (ExitPlanMode approved → ``default``, EnterPlanMode →
  ``plan``) are reported as ``AgentOptionSet("mode", …)``, which the engine confirms to phones.
- ``close`` stops the session task (disconnect: stdin closed, then terminate/kill escalation by
  the SDK), denies pending calls, and emits nothing from the moment it is called.

Effort has no SDK method: it goes through the CLI's ``apply_flag_settings`` control request
(``{"effortLevel": level}``; ``auto`` removes the flag, leaving the model's default) and is read
back with ``get_settings``. Both use the SDK's private ``Query._send_control_request``: the SDK
version is pinned for that reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import os
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TypeVar, cast

from claude_agent_sdk import (
    AssistantMessage,
    ClaudeSDKClient,
    HookCallback,
    PermissionResultDeny,
    ResultMessage,
    SystemMessage,
    ToolPermissionContext,
    ToolUseBlock,
)

from bridge.engine.inputs import (
    AgentEnded,
    AgentEntry,
    AgentFailed,
    AgentOptionSet,
    AgentReady,
    AgentStateChanged,
    PermissionRequested,
)
from bridge.protocol import ModelEntry, OutputEntry
from bridge.protocol.enums import EFFORT_LEVELS, PERMISSION_MODES, OutputEntryType

from ..base import AgentEvent, Emit, Runner, RunnerError, RunnerFactory, SessionSpec
from .adapter import Adapter
from .channel import ControlChannel, control_request
from .environment import claude_config_dir
from .handoff import InputHandoff
from .models import models_from_server_info
from .options import change_effort, change_model
from .permissions import PermissionBroker, PermissionResult, ToolOrder
from .process import crash_reason, session_options, stop_client
from .transcript import input_uuid, last_total_cost, received_uuids, transcript_paths

ToolCheck = Callable[[str, str, dict[str, Any]], tuple[str, str] | None]
"""(session id, tool name, tool input) → ``("deny", why)``, ``("ask", why)`` (the permission
prompt, i.e. ``can_use_tool``, must run even where Claude Code would allow by itself), or None
(Claude Code's own rules decide)."""

__all__ = [
    "MAX_RESTARTS",
    "RESTART_DENY_MESSAGE",
    "TOOL_USE_WAIT",
    "ClaudeRunner",
    "EnvHook",
    "claude_runner_factory",
]

logger = logging.getLogger(__name__)

MAX_RESTARTS: Final = 2
TOOL_USE_WAIT: Final = 2.0
RESTART_DENY_MESSAGE: Final = "Session restarted — please retry"
_INTERRUPT_DENY_MESSAGE: Final = "Interrupted by the user"
_END_DENY_MESSAGE: Final = "The session ended"
_CLOSE_DENY_MESSAGE: Final = "The session was closed"
_CONNECT_TIMEOUT: Final = 90.0
_CONTROL_TIMEOUT: Final = 30.0
_CLOSE_TIMEOUT: Final = 20.0
_MAX_REASON: Final = 300
_UNRESUMABLE: Final = "No conversation found"

EnvHook = Callable[[SessionSpec, dict[str, str]], Awaitable[Mapping[str, str]]]
"""Called at every spawn (start, restart, resume) with the spec and the environment so far;
returns the complete environment the CLI must see (provider-bound sessions: ``provider_env``)."""

_T = TypeVar("_T")


class _Phase(enum.Enum):
    NEW = "new"
    STARTING = "starting"
    READY = "ready"
    RESTARTING = "restarting"
    FAILED = "failed"
    ENDED = "ended"
    CLOSED = "closed"


_LIVE = frozenset({_Phase.STARTING, _Phase.READY, _Phase.RESTARTING})
_NOT_LIVE = {
    _Phase.NEW: "the Claude Code session has not been started",
    _Phase.FAILED: "the Claude Code session failed to start",
    _Phase.ENDED: "the Claude Code session has ended",
    _Phase.CLOSED: "the Claude Code session is closed",
}


class _StreamFailed(Exception):
    """The CLI died or its stream broke; the text says how (exit code or type, no output)."""


def _iso(unix: float) -> str:
    return datetime.fromtimestamp(unix, tz=UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def _reason(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return (lines[0] if lines else type(exc).__name__)[:_MAX_REASON]


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
        self._session_id = session_id
        self._emit_callback = emit
        self._cli_path = cli_path
        self._base_env = dict(base_env) if base_env is not None else None
        self._config_dir = config_dir
        self._env_hook = env_hook
        self._tool_check = tool_check
        self._clock = clock
        self._max_restarts = max_restarts
        self._adapter = Adapter(diff_allowed=diff_allowed or (lambda: False))
        self._broker = PermissionBroker()
        self._inputs = InputHandoff()
        self._controls = ControlChannel()
        self._phase = _Phase.NEW
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._state = "idle"
        self._tool_order = ToolOrder()
        self._stderr: deque[str] = deque(maxlen=5)
        self._spec: SessionSpec | None = None
        self._sdk_session_id: str | None = None
        self._previous_ids: list[str] = []
        self._lookup_dir: Path | None = config_dir
        self._server_info: dict[str, Any] | None = None
        self._pid: int | None = None
        self._mode = "plan"
        self._expected_mode: str | None = None
        self._model: str | None = None
        self._applied_model: str | None = None
        self._effort: str | None = None
        self._turn_completed = False

    # -- properties -----------------------------------------------------------------------------

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def sdk_session_id(self) -> str | None:
        """The SDK session id in use (None before the first connect)."""
        return self._sdk_session_id

    @property
    def previous_sdk_session_ids(self) -> tuple[str, ...]:
        """SDK session ids dropped because they could not be resumed, oldest first."""
        return tuple(self._previous_ids)

    @property
    def cli_pid(self) -> int | None:
        """The pid of the running CLI (from its initialize answer), if connected."""
        return self._pid

    @property
    def permission_mode(self) -> str:
        return self._mode

    @property
    def pending_permissions(self) -> tuple[str, ...]:
        """The request ids of the tool calls waiting for an answer."""
        return tuple(self._broker.pending)

    @property
    def server_info(self) -> Mapping[str, Any] | None:
        """The CLI's initialize answer (commands, models, version, …), once connected."""
        return self._server_info

    def models(self) -> list[ModelEntry]:
        """The models the CLI offers (``[]`` before the first connect)."""
        return models_from_server_info(self._server_info)

    # -- the Runner protocol --------------------------------------------------------------------

    async def start(self, spec: SessionSpec, *, resume: bool) -> None:
        """Start or resume; ``AgentReady`` or ``AgentFailed`` follows from the session task.

        Raises:
            RunnerError: already started or closed, or `spec` is for another session.
        """
        if self._phase is not _Phase.NEW:
            raise RunnerError(
                "the Claude Code session is closed"
                if self._phase is _Phase.CLOSED
                else "the Claude Code session was already started"
            )
        if spec.session_id != self._session_id:
            raise RunnerError("the session spec is for another session")
        self._spec = spec
        mode = "default" if spec.permission_mode == "bypassPermissions" else spec.permission_mode
        self._mode = mode if mode in PERMISSION_MODES else "plan"
        self._model = spec.model
        self._effort = spec.effort_level if spec.effort_level in EFFORT_LEVELS else None
        self._phase = _Phase.STARTING
        self._task = asyncio.create_task(self._run(spec, resume), name=f"claude-{self._sid}")

    async def send_input(self, uid: str, text: str) -> None:
        """Queue one input for the CLI (written in order by the session task).

        Cancel-safe: nothing is awaited. An input queued while the CLI restarts is written once it
        is back.

        Raises:
            RunnerError: the session is not running, or the arguments are not strings.
        """
        self._require_live()
        if not isinstance(uid, str) or not uid:
            raise RunnerError("the input uid must be a non-empty string")
        if not isinstance(text, str):
            raise RunnerError("the input text must be a string")
        self._adapter.authored(text)
        self._inputs.put(uid, text)

    async def received(self, uids: Collection[str]) -> set[str]:
        """The subset of `uids` that Claude Code recorded in this session's transcripts.

        Works before start and after close (it reads files only).

        Raises:
            RunnerError: a transcript exists but cannot be read.
        """
        try:
            found = await asyncio.to_thread(self._recorded)
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise RunnerError(f"the Claude Code transcript cannot be read: {reason}") from exc
        return {uid for uid in uids if input_uuid(uid) in found}

    async def interrupt(self) -> None:
        """Stop the current turn; pending tool calls are denied. A no-op when not connected."""
        if self._phase is _Phase.READY:
            with contextlib.suppress(RunnerError):
                await self._call(lambda client: client.interrupt())
        self._broker.deny_all(_INTERRUPT_DENY_MESSAGE)

    async def set_option(self, option: str, value: str) -> str | None:
        """Change ``mode`` / ``effort`` / ``model``; the value now in force, None if refused.

        ``bypassPermissions`` is coerced to ``default``; ``effort`` may come back clamped by the
        CLI (a level the model lacks); ``auto`` effort leaves the model's default.

        Raises:
            RunnerError: the session is not running.
        """
        self._require_live()
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
            logger.info("! %s change of %s refused: %s", option, self._sid, _reason(exc))
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
        self._broker.answer(
            request_id, allow, message=message, always=always, updated_input=updated_input
        )

    async def close(self) -> None:
        """Stop the CLI and the session task (idempotent); nothing is emitted from here on."""
        self._phase = _Phase.CLOSED
        self._broker.deny_all(_CLOSE_DENY_MESSAGE)
        self._stop.set()
        task = self._task
        if task is None or task.done():
            return
        done, _ = await asyncio.wait({task}, timeout=_CLOSE_TIMEOUT)
        if not done:
            task.cancel()
            await asyncio.wait({task}, timeout=_CLOSE_TIMEOUT)

    # -- options --------------------------------------------------------------------------------

    async def _set_mode(self, value: str) -> str | None:
        mode = "default" if value == "bypassPermissions" else value
        if mode not in PERMISSION_MODES:
            return None
        if mode != self._mode:
            self._expected_mode = mode  # the CLI's `status` frame about it is not news
        await self._call(lambda client: client.set_permission_mode(cast(Any, mode)))
        self._mode = mode
        return mode

    async def _set_effort(self, value: str) -> str | None:
        effort = await change_effort(self._call, value)
        if effort is not None:
            self._effort = effort
        return effort

    async def _set_model(self, value: str) -> str | None:
        model = await change_model(self._call, value)
        if model is not None:
            self._model = model
        return model

    async def _call(self, op: Callable[[ClaudeSDKClient], Awaitable[_T]]) -> _T:
        self._require_live()
        return await self._controls.call(op, _CONTROL_TIMEOUT)

    # -- the session task -----------------------------------------------------------------------

    async def _run(self, spec: SessionSpec, resume: bool) -> None:
        try:
            await self._lifecycle(spec, resume)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug here, or an emit that raised
            logger.error("x Claude session %s failed", self._sid, exc_info=exc)
            if self._phase is not _Phase.CLOSED:
                self._phase = _Phase.ENDED
                with contextlib.suppress(Exception):
                    self._emit(AgentEnded(self._session_id, f"runner failed: {type(exc).__name__}"))
        finally:
            if self._phase in _LIVE:
                self._phase = _Phase.ENDED
            self._broker.deny_all(_END_DENY_MESSAGE)
            self._controls.fail_pending("the Claude Code session has ended")

    async def _lifecycle(self, spec: SessionSpec, resume: bool) -> None:
        if not spec.cwd.is_dir():
            self._fail(f"working directory {spec.cwd} does not exist")
            return
        resume_id = spec.sdk_session_id if resume else None
        restarts = 0
        while not self._stop.is_set():
            client = await self._connect_or_fail(spec, resume_id)
            if client is None:
                return
            self._turn_completed = False
            reason: str | None = None
            try:
                if self._stop.is_set():
                    return
                self._phase = _Phase.READY
                model = self._model or self._applied_model
                self._emit(AgentReady(self._session_id, self._sdk_session_id, model, str(spec.cwd)))
                reason = await self._serve(client)
            finally:
                pid, self._pid = self._pid, None
                await stop_client(
                    client,
                    interrupt_first=reason is None and self._state != "idle",
                    pid=pid,
                    timeout=_CLOSE_TIMEOUT,
                    label=self._sid,
                )
            if reason is None:
                return
            if self._turn_completed:
                restarts = 0
            if not await self._restart(reason, restarts):
                return
            restarts += 1
            resume_id = self._sdk_session_id

    async def _restart(self, reason: str, restarts: int) -> bool:
        """After the CLI died: deny, mark, requeue; False when the restarts ran out."""
        self._broker.deny_all(RESTART_DENY_MESSAGE)
        self._set_state("idle")
        if restarts >= self._max_restarts:
            self._phase = _Phase.ENDED
            suffix = f" after {restarts} restart(s)" if restarts else ""
            self._emit(AgentEnded(self._session_id, f"Claude Code stopped ({reason}){suffix}"))
            return False
        self._phase = _Phase.RESTARTING
        count = f"{restarts + 1} of {self._max_restarts}"
        logger.warning("! Claude session %s: %s; restart %s", self._sid, reason, count)
        self._entry(
            "system",
            f"Claude Code stopped unexpectedly ({reason}) — restarting ({count})",
            {"special": "session_restart"},
        )
        try:
            recorded = await asyncio.to_thread(self._recorded)
        except OSError:
            logger.warning("! Claude session %s: transcript unreadable; nothing resent", self._sid)
            recorded = set(self._inputs.unanswered)
        if resent := self._inputs.requeue(recorded):
            logger.info("Claude session %s: resending %d input(s)", self._sid, resent)
        return True

    def _fail(self, reason: str) -> None:
        """Report that the CLI cannot run.

        Before ready this fails the session's creation; on a restart or a resume the engine ends
        the session ("Session could not be resumed").
        """
        if self._phase is not _Phase.CLOSED:
            self._phase = _Phase.FAILED if self._phase is _Phase.STARTING else _Phase.ENDED
        self._emit(AgentFailed(self._session_id, reason))

    async def _connect_or_fail(
        self, spec: SessionSpec, resume_id: str | None
    ) -> ClaudeSDKClient | None:
        """A connected client, or None after reporting why there is none."""
        try:
            return await self._connect(spec, resume_id)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if resume_id is None or not self._unresumable(exc, resume_id):
                logger.warning("! Claude session %s could not start: %s", self._sid, _reason(exc))
                self._fail(_reason(exc))
                return None
        # The conversation is gone (or was never written): start a new one.
        logger.warning("! Claude session %s: %s cannot be resumed", self._sid, resume_id[:8])
        self._previous_ids.append(resume_id)
        try:
            client = await self._connect(spec, None)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._fail(_reason(exc))
            return None
        self._adapter.last_total_cost = None
        self._entry(
            "system",
            "The previous conversation could not be resumed — this is a new conversation",
            {"special": "session_restart", "previous_sdk_session_id": resume_id},
        )
        return client

    def _unresumable(self, exc: Exception, resume_id: str) -> bool:
        if _UNRESUMABLE in str(exc) or any(_UNRESUMABLE in line for line in self._stderr):
            return True
        lookup = self._lookup_dir
        return lookup is not None and not transcript_paths(lookup, [resume_id])

    async def _environment(self, spec: SessionSpec) -> dict[str, str]:
        env = dict(os.environ) if self._base_env is None else dict(self._base_env)
        env.update(spec.env)
        if self._config_dir is not None:
            env["CLAUDE_CONFIG_DIR"] = str(self._config_dir)
        if self._env_hook is not None:
            env = dict(await self._env_hook(spec, env))
        return env

    async def _connect(self, spec: SessionSpec, resume_id: str | None) -> ClaudeSDKClient:
        env = await self._environment(spec)
        self._lookup_dir = claude_config_dir(env)
        self._stderr.clear()
        new_id = None if resume_id else str(uuid.uuid4())
        options = session_options(
            cwd=spec.cwd,
            cli_path=self._cli_path,
            env=env,
            mode=self._mode,
            model=self._model,
            effort=self._effort,
            can_use_tool=self._can_use_tool,
            pre_tool_use=(
                cast(HookCallback, self._pre_tool_use) if self._tool_check is not None else None
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
            async with asyncio.timeout(_CONTROL_TIMEOUT):
                settings = await control_request(client, {"subtype": "get_settings"})
        except BaseException:
            await stop_client(
                client,
                interrupt_first=False,
                pid=pid if isinstance(pid, int) else None,
                timeout=_CLOSE_TIMEOUT,
                label=self._sid,
            )
            raise
        self._server_info = dict(info) if isinstance(info, dict) else None
        self._pid = pid if isinstance(pid, int) else None
        applied = settings.get("applied")
        model = applied.get("model") if isinstance(applied, dict) else None
        self._applied_model = model if isinstance(model, str) and model else None
        self._sdk_session_id = resume_id or new_id
        if resume_id is not None and self._adapter.last_total_cost is None:
            paths = transcript_paths(self._lookup_dir, [resume_id])
            self._adapter.last_total_cost = await asyncio.to_thread(last_total_cost, paths)
        return client

    async def _serve(self, client: ClaudeSDKClient) -> str | None:
        """Run the helpers until one stops: the failure's reason, or None when asked to stop."""
        helpers = {
            asyncio.create_task(self._read(client), name=f"claude-read-{self._sid}"),
            asyncio.create_task(self._write(client), name=f"claude-write-{self._sid}"),
            asyncio.create_task(self._controls.serve(client), name=f"claude-ctl-{self._sid}"),
        }
        stopper = asyncio.create_task(self._stop.wait())
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
            if isinstance(exc, _StreamFailed):
                return str(exc)
            if exc is not None:
                raise exc
        return "Claude Code stopped"

    # -- reader and writer ----------------------------------------------------------------------

    async def _read(self, client: ClaudeSDKClient) -> None:
        stream: AsyncIterator[object] = client.receive_messages()
        while True:
            try:
                message = await anext(stream)
            except StopAsyncIteration:
                raise _StreamFailed("Claude Code exited") from None
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                raise _StreamFailed(crash_reason(exc)) from exc
            try:
                self._on_message(message)
            except Exception:
                logger.exception("x Claude session %s: a message could not be handled", self._sid)

    def _on_message(self, message: object) -> None:
        main_thread = isinstance(message, AssistantMessage) and not message.parent_tool_use_id
        if main_thread and self._state == "idle":
            self._set_state("running")
        entries = self._adapter.convert(message, _iso(self._clock()))
        if isinstance(message, ResultMessage):
            answered = list(message.user_message_uuids or [])
            if message.user_message_uuid and message.user_message_uuid not in answered:
                answered.append(message.user_message_uuid)
            self._inputs.answered(answered)
            self._turn_completed = True
            for entry in entries[:-1]:
                self._emit(AgentEntry(self._session_id, entry))
            if not self._inputs.waiting and not self._broker.pending:
                self._set_state("idle")
            entries = entries[-1:]  # the turn's stream_end comes after the state
        for entry in entries:
            self._emit(AgentEntry(self._session_id, entry))
        if isinstance(message, AssistantMessage):
            for block in message.content:
                if isinstance(block, ToolUseBlock):
                    self._tool_order.seen(block.id)
        elif isinstance(message, SystemMessage):
            self._mode_reported(message.data.get("permissionMode"))

    def _mode_reported(self, mode: object) -> None:
        """A permission mode in a ``status`` / ``init`` frame: report changes the CLI made."""
        if not isinstance(mode, str) or mode == self._mode:
            return
        self._mode = mode
        if mode == self._expected_mode:
            self._expected_mode = None
            return  # our own change: the runtime reports what `set_option` returned
        if mode in PERMISSION_MODES:
            self._emit(AgentOptionSet(self._session_id, "mode", mode, mode))

    async def _write(self, client: ClaudeSDKClient) -> None:
        while True:
            key, text = await self._inputs.take()
            message = {
                "type": "user",
                "message": {"role": "user", "content": text},
                "parent_tool_use_id": None,
                "session_id": "default",
                "uuid": key,
            }
            self._set_state("running")  # before the write: the answer can come at once
            try:
                await client.query(_one(message))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                raise _StreamFailed(crash_reason(exc)) from exc

    def _recorded(self) -> set[str]:
        """The input uuids in the transcripts of every SDK session id of this session (blocking)."""
        ids = [*self._previous_ids]
        if self._sdk_session_id:
            ids.append(self._sdk_session_id)
        stored = self._spec.sdk_session_id if self._spec is not None else None
        if stored and stored not in ids:
            ids.insert(0, stored)
        config_dir = self._lookup_dir or claude_config_dir(self._base_env or os.environ)
        return received_uuids(transcript_paths(config_dir, ids))

    # -- permissions ----------------------------------------------------------------------------

    async def _pre_tool_use(
        self, input_data: Any, tool_use_id: str | None, context: Any
    ) -> dict[str, Any]:
        """Every tool call passes here before Claude Code's own rules: the bridge's deny list
        blocks it in every mode, including calls Claude Code would allow without asking."""
        if self._tool_check is None or not isinstance(input_data, dict):
            return {}
        tool_input = input_data.get("tool_input")
        verdict = self._tool_check(
            self.session_id,
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

    async def _can_use_tool(
        self, tool_name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResult:
        request_id = context.tool_use_id or f"permission_{uuid.uuid4().hex}"
        await self._tool_order.wait(request_id, TOOL_USE_WAIT)
        if self._phase is _Phase.CLOSED or self._stop.is_set():
            return PermissionResultDeny(message=_CLOSE_DENY_MESSAGE)
        future = self._broker.open(request_id, tool_name, tool_input, context.suggestions)
        waiting = "waiting_question" if tool_name == "AskUserQuestion" else "waiting_permission"
        try:
            self._emit(
                PermissionRequested(
                    self._session_id,
                    request_id,
                    tool_name,
                    dict(tool_input),
                    description=context.title or context.description,
                    agent_id=context.agent_id,
                )
            )
            self._set_state(waiting)
            return await future
        finally:
            # Also when the CLI cancelled the request (an interrupt): nothing is left waiting.
            self._broker.discard(request_id, future)
            if not self._broker.pending and self._state.startswith("waiting_"):
                self._set_state("running")

    # -- helpers --------------------------------------------------------------------------------

    @property
    def _sid(self) -> str:
        return self._session_id[:8]

    def _on_stderr(self, line: str) -> None:
        self._stderr.append(line[:500])
        logger.info("  claude %s: %s", self._sid, line[:500])

    def _require_live(self) -> None:
        if self._phase not in _LIVE:
            raise RunnerError(_NOT_LIVE[self._phase])

    def _set_state(self, state: str) -> None:
        if state != self._state:
            self._state = state
            self._emit(AgentStateChanged(self._session_id, state))

    def _entry(self, entry_type: OutputEntryType, content: str, metadata: dict[str, Any]) -> None:
        timestamp = _iso(self._clock())
        entry = OutputEntry(
            entryType=entry_type, content=content, timestamp=timestamp, metadata=metadata
        )
        self._emit(AgentEntry(self._session_id, entry))

    def _emit(self, event: AgentEvent) -> None:
        if self._phase is not _Phase.CLOSED:
            self._emit_callback(event)


async def _one(message: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    yield message


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
