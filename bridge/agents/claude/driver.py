"""The Claude Code driver of a session host: one CLI process, from start to exit.

Theory of operation. :class:`ClaudeDriver` is the :class:`~bridge.host.driver.Driver` of Claude
Code: the host calls its methods, it reports through :class:`~bridge.host.driver.HostServices`.
It drives the CLI over the stream-json protocol itself (:mod:`.cli_protocol`; the SDK is far too
heavy for a host) and owns three tasks, all in one :class:`~bridge.tasks.TaskSet`:

- the **reader**: the CLI's stdout, frame by frame. Control frames go to the protocol; every other
  frame goes through the :class:`~bridge.agents.claude.adapter.Adapter` and out as ``Entry``
  events, in order. ``running`` when the main thread speaks while idle; on a ``result``: the
  inputs it answers (``user_message_uuids``) as ``Answered``, then ``idle`` when nothing written
  is unanswered and no prompt waits — before the turn's final ``stream_end`` entry. Each
  ``tool_use`` it saw is reported to :class:`~bridge.agents.claude.permissions.ToolOrder`. Mode
  changes the CLI makes itself (ExitPlanMode approved, EnterPlanMode) show in its ``status`` /
  ``init`` frames and go out as ``OptionSet("mode", m, m)``, unless we asked for that mode.
- the **writer**: queued inputs, in order, as user messages whose ``uuid`` is
  :func:`~bridge.agents.claude.transcript.input_uuid` (uid), which Claude Code records in its
  transcript; ``running`` goes out *before* the write (the answer can come at once).
- the **handlers** of the CLI's own requests (:mod:`.tool_calls`), one task per request, run by
  the protocol.

Lifecycle (:meth:`ClaudeDriver.run`): the working directory must exist (else ``Failed``); the CLI
is spawned (:mod:`.cli_process`) with the options coerced as :mod:`.options` says, a new
conversation with ``--session-id`` (the spec's id, or a new one), a resumed one with
``--resume``; an editor's task (``editor_tools``) gets its tools instead of the CLI's own
(:mod:`.editor_tools`). Then ``initialize`` (with the ``PreToolUse`` hook when the spec's options say
``check_tools``; a CLI that cannot make a failing hook block is refused) and ``get_settings``
(the model in force), and ``Ready``. A conversation the CLI cannot resume ("No conversation
found" in its error or last stderr lines, or no transcript file) is started afresh under a new id,
announced by a ``system`` entry (``special: "session_restart"``) after ``Ready``; the dropped id
stays among those :meth:`ClaudeDriver.received` reads. The driver never restarts the CLI: when it
exits, :meth:`~ClaudeDriver.run` returns why (``exit code N`` / ``killed by signal N``, never its
output) and the host journals ``Exited``.

Stopping (:meth:`ClaudeDriver.close`): the CLI holds its own stdin open (see :mod:`.cli_process`),
so it is interrupted when a turn runs (at most :data:`INTERRUPT_BEFORE_STOP` s), then sent
SIGTERM, then SIGKILL, and reaped. Events that follow during the stop (the interrupted turn's
end) are still emitted; nothing is emitted once :meth:`~ClaudeDriver.run` returned.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import signal
import subprocess
import uuid
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, Final

from bridge.host.driver import DriverError, DriverSpec, DriverStatus, HostServices
from bridge.host.events import (
    OPTIONS,
    Answered,
    Entry,
    Failed,
    HostEvent,
    InputTaken,
    OptionSet,
    Ready,
    StateChanged,
)
from bridge.host.vocabulary import PERMISSION_MODES, iso_timestamp, make_entry
from bridge.records import record
from bridge.tasks import TaskSet

from .adapter import Adapter
from .cli_process import (
    CliOptions,
    CliProcess,
    build_argv,
    bundled_cli_path,
    cli_env,
    exit_reason,
    spawn_cli,
)
from .cli_protocol import ControlError, ControlProtocol, ProtocolClosed
from .editor_tools import EditorTools, editor_handlers, editor_tools, with_editor_tools
from .environment import claude_config_dir
from .handoff import InputHandoff
from .models import models_from_initialize
from .options import (
    CONTROL_TIMEOUT,
    applied_settings,
    change_effort,
    change_mode,
    change_model,
    requested_mode,
    start_effort,
    start_mode,
)
from .permissions import ToolOrder
from .tool_calls import ToolCalls, hooks_config
from .transcript import input_uuid, last_total_cost, received_uuids, transcript_paths

__all__ = [
    "EXIT_WAIT",
    "INTERRUPT_BEFORE_STOP",
    "STOP_TIMEOUT",
    "UNRESUMABLE_TEXT",
    "ClaudeDriver",
    "claude_driver_factory",
]

logger = logging.getLogger(__name__)

INTERRUPT_BEFORE_STOP: Final = 2.0
"""Seconds a stop lets an interrupt end the running turn before SIGTERM."""
STOP_TIMEOUT: Final = 5.0
"""Seconds the CLI gets to exit after SIGTERM before SIGKILL."""
EXIT_WAIT: Final = 5.0
"""Seconds the CLI gets to exit once its stdout ended, before it is killed."""
UNRESUMABLE_TEXT: Final = "No conversation found"
"""What the CLI says of a ``--resume`` id it has no conversation for."""
_INIT_TIMEOUT_FLOOR: Final = 60.0  # the SDK's: max(CLAUDE_CODE_STREAM_CLOSE_TIMEOUT, 60 s)
_FRESH_TEXT: Final = "The previous conversation could not be resumed — this is a new conversation"
_MAX_REASON: Final = 300


class _Phase(enum.Enum):
    NEW = "new"
    STARTING = "starting"
    LIVE = "live"
    CLOSING = "closing"
    ENDED = "ended"


class _StartFailed(Exception):
    """The CLI could not be brought up.

    Attributes:
        reason: user-readable (``Failed``).
        detail: what the CLI said (its error answer, its last stderr lines), for the
            unresumable check only.
        ran: the CLI ran (it was spawned); a spawn failure says nothing about the conversation.
    """

    def __init__(self, reason: str, *, detail: str = "", ran: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail
        self.ran = ran


class _Closed(Exception):
    """:meth:`ClaudeDriver.close` was called while the CLI was being started."""


@record
class _Cli:
    """One launched CLI and what serves it."""

    process: CliProcess
    protocol: ControlProtocol
    reader: asyncio.Task[None]


class ClaudeDriver:
    """Claude Code for one session host (see the module docstring).

    Args:
        spec: what to start; ``spec.options`` may hold ``cli_path`` (the ``claude`` executable;
            default: the SDK's bundled one) and ``check_tools`` (register the ``PreToolUse``
            hook: every call is checked by the daemon) and ``editor_tools`` (an editor's task:
            the Desiide tools only, see :mod:`.editor_tools`).
        services: the host's services.
    """

    def __init__(self, spec: DriverSpec, services: HostServices) -> None:
        self._spec = spec
        self._services = services
        self._label = spec.session_id[:8]
        self._adapter = Adapter(diff_allowed=services.diff_allowed)
        self._inputs = InputHandoff()
        self._order = ToolOrder()
        self._calls = ToolCalls(services, self._order, self._set_state, label=self._label)
        self._tasks = TaskSet(f"Claude driver {self._label}", logger=logger)
        self._config_dir = claude_config_dir(spec.env)
        self._phase = _Phase.NEW
        self._close_started = False
        self._stopped = asyncio.Event()
        self._cli: _Cli | None = None
        self._early: list[dict[str, Any]] = []  # frames read before Ready
        self._failure: str | None = None  # a handler failed: the session ends with this
        # The agent's state and options now.
        self._state = "idle"
        self._turn_completed = False
        self._mode = start_mode(spec.permission_mode)
        self._expected_mode: str | None = None  # asked for by us: the CLI's report is not news
        self._model = spec.model
        self._applied_model: str | None = None  # the CLI's own choice while `_model` is None
        self._effort = start_effort(spec.effort_level)
        self._sdk_session_id: str | None = None
        self._dropped: list[str] = []  # conversation ids that could not be resumed
        self._editor: EditorTools | None = None

    # -- the Driver protocol ---------------------------------------------------------------------

    async def run(self) -> str | None:
        """Start the CLI and serve it; why it exited, or None after :meth:`close`.

        Emits ``Ready`` or ``Failed`` first. Cancel-safe: a cancelled run kills the CLI.

        Raises:
            DriverError: run twice.
            Exception: what an emit raised (the journal failed): the CLI is killed.
        """
        if self._phase is not _Phase.NEW:
            if self._close_started:
                return None
            raise DriverError("the Claude Code session was started already")
        self._phase = _Phase.STARTING
        try:
            return await self._run()
        finally:
            await self._teardown()

    def send_input(self, uid: str, text: str) -> None:
        """Queue one input for the CLI (written in order by the writer; no await).

        Raises:
            DriverError: the CLI is not running, or the arguments are not strings.
        """
        if self._phase is not _Phase.LIVE:
            raise DriverError("the Claude Code session is not running")
        if not isinstance(uid, str) or not uid:
            raise DriverError("the input uid must be a non-empty string")
        if not isinstance(text, str):
            raise DriverError("the input text must be a string")
        self._inputs.put(uid, text)

    async def received(self, uids: Collection[str]) -> set[str]:
        """The `uids` this driver wrote to the CLI, or the CLI recorded in the transcript of any
        conversation id this driver knew (works in every phase: it reads files only).

        Raises:
            DriverError: a transcript exists but cannot be read.
        """
        taken = self._inputs.taken
        found: set[str] = set()
        if any(uid not in taken for uid in uids):
            ids = self._conversation_ids()
            try:
                found = await asyncio.to_thread(_recorded, self._config_dir, ids)
            except OSError as exc:
                reason = exc.strerror or type(exc).__name__
                raise DriverError(f"the Claude Code transcript cannot be read: {reason}") from exc
        return {uid for uid in uids if uid in taken or input_uuid(uid) in found}

    async def interrupt(self) -> None:
        """Stop the current turn (a no-op when idle). The CLI cancels its pending prompts itself,
        which withdraws the host's waits."""
        cli = self._cli
        if self._phase is not _Phase.LIVE or cli is None:
            return
        if self._state == "idle" and not cli.protocol.handling:
            return
        try:
            await cli.protocol.request({"subtype": "interrupt"}, CONTROL_TIMEOUT)
        except ControlError as exc:
            logger.info("! %s: the interrupt failed: %s", self._label, _short(str(exc)))

    async def set_option(self, option: str, value: str) -> None:
        """Change ``mode`` / ``effort`` / ``model``; emits ``OptionSet`` (result None: refused).

        Raises:
            DriverError: the CLI is not running, or `option` is not one of them.
        """
        cli = self._cli
        if self._phase is not _Phase.LIVE or cli is None:
            raise DriverError("the Claude Code session is not running")
        if option not in OPTIONS or not isinstance(value, str):
            raise DriverError(f"unknown option {str(option)[:20]!r}")

        async def request(payload: Mapping[str, Any]) -> dict[str, Any]:
            return await cli.protocol.request(payload, CONTROL_TIMEOUT)

        result: str | None = None
        try:
            if option == "mode":
                mode = requested_mode(value)
                if mode is not None and mode != self._mode:
                    self._expected_mode = mode  # set first: the CLI's status can come first
                result = await change_mode(request, value)
                if result is not None:
                    self._mode = result
            elif option == "effort":
                result = await change_effort(request, value)
                if result is not None:
                    self._effort = None if result == "auto" else result
            else:
                result = await change_model(request, value)
                if result is not None:
                    self._model = result
        except ControlError as exc:
            self._expected_mode = None if option == "mode" else self._expected_mode
            logger.info("! %s: %s change refused: %s", self._label, option, _short(str(exc)))
            result = None
        self._emit(OptionSet(option, value, result))

    async def close(self, *, interrupt: bool = True) -> None:
        """Stop the CLI for good (idempotent; see the module docstring).

        With `interrupt` a running turn is interrupted first (a user's close); without it the CLI
        gets SIGTERM at once, which records no refusal of a call it was waiting on.
        """
        if self._close_started:
            await self._stopped.wait()
            return
        self._close_started = True
        try:
            previous = self._phase
            if previous is _Phase.NEW or previous is _Phase.ENDED:
                self._phase = _Phase.ENDED
                return
            self._phase = _Phase.CLOSING
            cli = self._cli
            if cli is None or cli.process.returncode is not None:
                return
            busy = self._state != "idle" or cli.protocol.handling
            if interrupt and previous is _Phase.LIVE and busy:
                try:
                    await cli.protocol.request({"subtype": "interrupt"}, INTERRUPT_BEFORE_STOP)
                except ControlError as exc:
                    logger.info("! %s: no interrupt before the stop: %s", self._label, exc)
            await cli.process.stop(term_timeout=STOP_TIMEOUT)
        finally:
            self._stopped.set()

    def status(self) -> DriverStatus:
        """The agent's state now."""
        return DriverStatus(
            state=self._state,
            mode=self._mode,
            model=self._model or self._applied_model,
            effort=self._effort,
            sdk_session_id=self._sdk_session_id,
            turn_completed=self._turn_completed,
            taken=self._inputs.unanswered,
        )

    # -- start -----------------------------------------------------------------------------------

    async def _run(self) -> str | None:
        spec = self._spec
        if not Path(spec.cwd).is_dir():
            return self._fail(f"working directory {spec.cwd} does not exist")
        cli_path = _cli_path(spec.options)
        if cli_path is None:
            return self._fail("Claude Code is not installed (no bundled CLI was found)")
        try:
            self._editor = editor_tools(spec.options, spec.env, spec.sandbox)
        except ValueError as exc:
            return self._fail(f"the editor's tools cannot be set up: {exc}")
        resume_id = spec.sdk_session_id if spec.resume else None
        dropped: str | None = None
        try:
            try:
                info = await self._launch(cli_path, resume_id)
            except _StartFailed as failure:
                if (
                    resume_id is None
                    or not failure.ran
                    or not self._unresumable(failure, resume_id)
                ):
                    raise
                logger.warning("! %s: %s cannot be resumed", self._label, resume_id[:8])
                self._dropped.append(resume_id)
                dropped = resume_id
                info = await self._launch(cli_path, None)
        except _Closed:
            return None
        except _StartFailed as failure:
            return None if self._close_started else self._fail(failure.reason)
        self._phase = _Phase.LIVE
        model = self._model or self._applied_model
        self._emit(
            Ready(
                self._sdk_session_id,
                model,
                spec.cwd,
                models_from_initialize(info),
                sandboxed=spec.sandbox is not None,
            )
        )
        if dropped is not None:
            self._adapter.last_total_cost = None
            metadata = {"special": "session_restart", "previous_sdk_session_id": dropped}
            self._emit(Entry(make_entry("system", _FRESH_TEXT, self._timestamp(), metadata)))
        return await self._serve()

    async def _launch(self, cli_path: str, resume_id: str | None) -> dict[str, Any]:
        """Spawn, initialize, read the settings; the initialize answer.

        Raises:
            _StartFailed: the CLI cannot be started or did not come up (it is stopped).
            _Closed: :meth:`close` was called meanwhile (it is stopped).
        """
        spec = self._spec
        new_id: str | None = None
        if resume_id is None:
            given = spec.sdk_session_id if not spec.resume else None
            new_id = given or str(uuid.uuid4())
        options = CliOptions(self._mode, self._model, self._effort, resume_id, new_id)
        argv = build_argv(cli_path, with_editor_tools(options, self._editor))
        try:
            process = await spawn_cli(
                argv, cli_env(spec.env, spec.cwd), spec.cwd, label=self._label, sandbox=spec.sandbox
            )
        except (OSError, subprocess.SubprocessError) as exc:
            reason = getattr(exc, "strerror", None) or type(exc).__name__
            raise _StartFailed(f"Claude Code could not be started: {reason}", ran=False) from exc
        protocol = ControlProtocol(
            process.stdin,
            {**self._calls.handlers(), **editor_handlers(self._editor)},
            self._on_frame,
            self._on_handler_failure,
            on_cancel=self._calls.withdrawn,
            label=self._label,
        )
        reader = self._tasks.spawn(self._read(process, protocol), f"claude-read-{self._label}")
        assert reader is not None  # the set closes only in teardown
        self._cli = _Cli(process, protocol, reader)
        check_tools = bool(spec.options.get("check_tools"))
        try:
            if self._close_started:
                raise _Closed
            info = await protocol.request(
                {"subtype": "initialize", "hooks": hooks_config(check_tools)},
                _init_timeout(spec.env),
            )
            if check_tools and (
                not info.get("hook_on_failure_supported") or info.get("hooks_applied") is False
            ):
                raise _StartFailed("this Claude Code cannot hold tool calls for the check")
            settings = await protocol.request({"subtype": "get_settings"}, CONTROL_TIMEOUT)
        except (ControlError, _StartFailed, _Closed) as exc:
            await process.kill()
            await asyncio.wait({reader})
            if self._close_started:
                raise _Closed from None
            if isinstance(exc, ControlError):
                raise self._start_failure(process, exc) from None
            self._early.clear()
            raise
        model = applied_settings(settings).get("model")
        self._applied_model = model if isinstance(model, str) and model else None
        self._sdk_session_id = resume_id or new_id
        if resume_id is not None and self._adapter.last_total_cost is None:
            paths = transcript_paths(self._config_dir, [resume_id])
            self._adapter.last_total_cost = await asyncio.to_thread(last_total_cost, paths)
        return info

    def _start_failure(self, process: CliProcess, exc: ControlError) -> _StartFailed:
        early, self._early = self._early, []  # a dead CLI's frames are not the session's
        said = [_error_text(frame) for frame in early if frame.get("type") == "result"]
        detail = "\n".join([str(exc), *said, *process.stderr_tail])
        if process.returncode is not None and isinstance(exc, ProtocolClosed):
            reason = f"Claude Code stopped while starting ({exit_reason(process.returncode)})"
        else:
            reason = f"Claude Code did not start: {_short(str(exc))}"
        logger.warning("! %s: %s", self._label, reason)
        return _StartFailed(reason, detail=detail)

    def _unresumable(self, failure: _StartFailed, resume_id: str) -> bool:
        if UNRESUMABLE_TEXT in failure.detail:
            return True
        return not transcript_paths(self._config_dir, [resume_id])

    def _fail(self, reason: str) -> str:
        logger.warning("! %s could not start: %s", self._label, reason)
        self._emit(Failed(reason))
        return reason

    # -- serving ---------------------------------------------------------------------------------

    async def _serve(self) -> str | None:
        cli = self._cli
        assert cli is not None
        early, self._early = self._early, []
        for frame in early:
            self._on_frame(frame)
        self._tasks.spawn(self._write(cli.protocol), f"claude-write-{self._label}")
        await asyncio.wait({cli.reader})
        cli.reader.result()  # an emit that failed ends the session here
        if self._phase is _Phase.LIVE:
            self._phase = _Phase.ENDED
        try:
            async with asyncio.timeout(EXIT_WAIT):
                returncode: int | None = await cli.process.wait()
        except TimeoutError:
            logger.warning(
                "! %s: Claude Code closed its output but runs on; killing it", self._label
            )
            returncode = await cli.process.kill()
        if self._close_started:
            return None
        for entry in self._adapter.flush():
            self._emit(Entry(entry))
        if self._failure is not None:
            return self._failure
        reason = exit_reason(returncode) if returncode is not None else "Claude Code did not stop"
        logger.info("= %s: Claude Code is gone (%s)", self._label, reason)
        return reason

    async def _read(self, process: CliProcess, protocol: ControlProtocol) -> None:
        try:
            await protocol.read(process.stdout)
        finally:
            await protocol.close()

    async def _write(self, protocol: ControlProtocol) -> None:
        """Write queued inputs, in order, until cancelled or the CLI's stdin breaks."""
        while True:
            _, key, text = await self._inputs.take()
            self._set_state("running")  # before the write: the answer can come at once
            self._adapter.authored(text)
            message = {
                "type": "user",
                "message": {"role": "user", "content": text},
                "parent_tool_use_id": None,
                "session_id": "default",
                "uuid": key,
            }
            try:
                await protocol.send(message)
            except ProtocolClosed:
                logger.info("! %s: an input could not be written (the CLI is gone)", self._label)
                self._inputs.unwritten(key)
                return

    def _on_frame(self, frame: dict[str, Any]) -> None:
        """One conversation frame of the CLI (see the module docstring)."""
        if self._phase is _Phase.STARTING:
            self._early.append(frame)
            return
        kind = frame.get("type")
        if kind == "command_lifecycle":
            self._command_lifecycle(frame)
            return
        if (
            kind == "assistant"
            and frame.get("parent_tool_use_id") is None
            and self._state == "idle"
        ):
            self._set_state("running")
        try:
            entries = self._adapter.convert(frame, self._timestamp())
        except Exception:  # one bad frame must not end the session
            logger.exception("x %s: a %s frame could not be converted", self._label, kind)
            entries = []
        if kind == "result":
            self._turn_completed = True
            answered = self._inputs.answered(_answered_uuids(frame))
            for entry in entries[:-1]:
                self._emit(Entry(entry))
            if answered:
                self._emit(Answered(answered))
            if not self._inputs.waiting and not self._calls.pending:
                self._set_state("idle")
            entries = entries[-1:]  # the turn's stream_end comes after the state
        for entry in entries:
            self._emit(Entry(entry))
        if kind == "assistant":
            for tool_use_id in _tool_use_ids(frame):
                self._order.seen(tool_use_id)
        elif kind == "system":
            self._mode_reported(frame.get("permissionMode"))

    def _command_lifecycle(self, frame: dict[str, Any]) -> None:
        """``started``: the CLI took one of our inputs into the conversation (journaled at once,
        so a restart never sends it again, even before the CLI's session file has it)."""
        key = frame.get("command_uuid")
        if frame.get("state") != "started" or not isinstance(key, str):
            return
        uid = self._inputs.uid_of(key)
        if uid is not None:
            self._emit(InputTaken(uid))

    def _mode_reported(self, mode: object) -> None:
        """A permission mode in a ``status`` / ``init`` frame: report changes the CLI made."""
        if not isinstance(mode, str) or mode == self._mode:
            return
        self._mode = mode
        if mode == self._expected_mode:
            self._expected_mode = None
            return
        if mode in PERMISSION_MODES:
            self._emit(OptionSet("mode", mode, mode))

    def _on_handler_failure(self, subtype: str, exc: Exception) -> None:
        """A handler failed (a bug, or the journal): no answer can be given, the CLI goes."""
        self._failure = f"the bridge failed on a {subtype} request of Claude Code"
        cli = self._cli
        if cli is not None:
            cli.process.signal(signal.SIGKILL)

    async def _teardown(self) -> None:
        cli = self._cli
        try:
            if cli is not None and cli.process.returncode is None:
                await cli.process.kill()
        finally:
            if cli is not None:
                await cli.protocol.close()
            await self._tasks.close()
            self._phase = _Phase.ENDED

    # -- helpers ---------------------------------------------------------------------------------

    def _set_state(self, state: str) -> None:
        if state != self._state:
            self._state = state
            self._emit(StateChanged(state))

    def _emit(self, event: HostEvent) -> None:
        self._services.emit(event)

    def _timestamp(self) -> str:
        return iso_timestamp(self._services.now())

    def _conversation_ids(self) -> list[str]:
        ids: list[str] = []
        for candidate in (self._spec.sdk_session_id, *self._dropped, self._sdk_session_id):
            if candidate and candidate not in ids:
                ids.append(candidate)
        return ids


def claude_driver_factory(spec: DriverSpec, services: HostServices) -> ClaudeDriver:
    """The :class:`~bridge.host.driver.DriverFactory` of Claude Code."""
    return ClaudeDriver(spec, services)


def _cli_path(options: Mapping[str, Any]) -> str | None:
    given = options.get("cli_path")
    if isinstance(given, str) and given:
        return given
    bundled = bundled_cli_path()
    return str(bundled) if bundled is not None else None


def _init_timeout(env: Mapping[str, str]) -> float:
    try:
        milliseconds = int(env.get("CLAUDE_CODE_STREAM_CLOSE_TIMEOUT", "60000"))
    except ValueError:
        milliseconds = 60000
    return max(milliseconds / 1000.0, _INIT_TIMEOUT_FLOOR)


def _recorded(config_dir: Path, ids: list[str]) -> set[str]:
    return received_uuids(transcript_paths(config_dir, ids))


def _answered_uuids(result: Mapping[str, Any]) -> list[str]:
    listed = result.get("user_message_uuids")
    uuids = [u for u in listed if isinstance(u, str)] if isinstance(listed, list) else []
    single = result.get("user_message_uuid")
    if isinstance(single, str) and single not in uuids:
        uuids.append(single)
    return uuids


def _tool_use_ids(frame: Mapping[str, Any]) -> list[str]:
    message = frame.get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    return [
        block["id"]
        for block in (content if isinstance(content, list) else [])
        if isinstance(block, Mapping)
        and block.get("type") == "tool_use"
        and isinstance(block.get("id"), str)
    ]


def _error_text(result: Mapping[str, Any]) -> str:
    """What an error ``result`` says (``errors`` and ``result``), for the unresumable check."""
    errors = result.get("errors")
    parts = [e for e in errors if isinstance(e, str)] if isinstance(errors, list) else []
    text = result.get("result")
    if isinstance(text, str):
        parts.append(text)
    return "\n".join(parts)


def _short(text: str) -> str:
    lines = text.strip().splitlines()
    return (lines[0] if lines else "")[:_MAX_REASON]
