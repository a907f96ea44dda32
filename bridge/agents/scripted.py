"""The scripted agent: a :class:`~bridge.agents.base.Runner` that needs no Claude Code.

The daemon's integration tests, chaos runs and benchmarks drive sessions through it, so from the
outside it behaves like a real runner: it runs on its own task per session, reports everything
through ``emit`` (never synchronously inside the call that caused it), keeps a durable record of
what it received (:mod:`bridge.agents.scripted_log`) and answers :meth:`ScriptedRunner.received`
from that record alone, which is what lets a test prove "executed exactly once" across a
``kill -9`` of the daemon. What it does with each text is the grammar of
:mod:`bridge.agents.scripted_directives`.

Theory of operation:

- ``start`` decides at once whether the agent can run (the cwd exists and holds no failure marker;
  the log directory and the SDK session id file are usable) and spawns the session task, whose
  first act is to emit ``AgentReady`` or ``AgentFailed``. Tests make create-session fail with a
  file ``.scripted-fail-start`` in the cwd (its first line, if any, is the reason), and make only a
  resume fail with ``.scripted-fail-resume``.
- ``send_input`` appends the input to the log and fsyncs it, then queues the text, with no await in
  between: an input is logged if and only if it is queued, whatever gets cancelled when. The queue
  is unbounded because its producer, the daemon's inbox, is the bound.
- The session task takes one text at a time and emits one turn:
  ``AgentStateChanged(running)`` → entries → ``AgentStateChanged(idle)`` → a ``system`` entry
  ``""`` with ``{"stream_end": true}``. ``crash`` emits ``running`` then ``AgentEnded`` instead, and
  the agent is gone: inputs still queued are dropped (they stay logged as received, as a real agent
  that died with them in its stdin), and ``send_input`` raises :class:`RunnerError`.
- ``interrupt`` ends the current turn early (the wait of ``slow S``, or the rest of ``lines N``)
  with a ``system`` entry ``Interrupted``, then the usual idle + stream_end. Queued inputs run next.
- Any exception inside the session task (a clock or an ``emit`` that raises) is logged with its
  traceback and reported as ``AgentEnded`` with the exception's type name, never its message.
- ``close`` cancels and awaits the session task (owned by a :class:`~bridge.tasks.TaskSet`) and
  releases the log; from the moment it is called nothing more is emitted, not even
  ``AgentEnded``: the caller asked for the end and knows it.

Entries carry ``timestamp`` from the injected clock (unix seconds, rendered like JavaScript's
``toISOString``). ``slow S`` waits on the event loop's own clock, so a frozen test clock cannot
freeze a turn.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Collection
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, assert_never

from bridge.engine.inputs import AgentEnded, AgentEntry, AgentFailed, AgentReady, AgentStateChanged
from bridge.protocol import OutputEntry
from bridge.protocol.enums import EFFORT_LEVELS, PERMISSION_MODES, OutputEntryType
from bridge.tasks import TaskSet

from .base import (
    AgentEvent,
    Emit,
    Phase,
    Runner,
    RunnerError,
    RunnerFactory,
    SessionSpec,
    check_live,
    check_start,
)
from .scripted_directives import (
    THINKING_TEXT,
    THOUGHT_TEXT,
    Big,
    Crash,
    Directive,
    Echo,
    Invalid,
    Lines,
    Slow,
    Status,
    Think,
    big_content,
    parse_directive,
)
from .scripted_log import (
    InputLog,
    count_executions,
    inputs_path,
    load_or_create_sdk_session_id,
    read_logged_uids,
    validate_session_id,
)

__all__ = [
    "CRASH_REASON",
    "FAIL_RESUME_MARKER",
    "FAIL_START_MARKER",
    "INTERRUPTED_TEXT",
    "SCRIPTED_MODEL",
    "Clock",
    "ScriptedRunner",
    "big_content",
    "count_executions",
    "iso_timestamp",
    "scripted_runner_factory",
]

logger = logging.getLogger(__name__)

FAIL_START_MARKER = ".scripted-fail-start"
"""A file of this name in the cwd makes ``start`` (and resume) emit ``AgentFailed``."""
FAIL_RESUME_MARKER = ".scripted-fail-resume"
"""A file of this name in the cwd makes only ``start(resume=True)`` emit ``AgentFailed``."""
SCRIPTED_MODEL = "scripted"
"""The model the agent reports when the spec names none."""
CRASH_REASON = "scripted crash"
"""The ``AgentEnded.reason`` of the ``crash`` directive."""
INTERRUPTED_TEXT = "Interrupted"
"""The content of the ``system`` entry that ends an interrupted turn."""

Clock = Callable[[], float]
"""Unix time in seconds (``time.time``), injected so tests can pin entry timestamps."""

_YIELD_EVERY = 64  # entries between two yields to the loop in `lines N`: fairness, interruptibility
_MAX_MODEL_LENGTH = 200
_MAX_REASON_LENGTH = 200
_AGENT = "the scripted agent"  # how RunnerError messages name it


def iso_timestamp(unix: float) -> str:
    """`unix` seconds as ISO-8601 UTC with milliseconds, ``2023-11-14T22:13:20.123Z``."""
    moment = datetime.fromtimestamp(unix, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _new_sdk_session_id() -> str:
    return str(uuid.uuid4())


class ScriptedRunner:
    """One scripted agent session (see the module docstring for the behaviour).

    Args:
        session_id: the bridge's session id; it names the files in `log_dir`.
        emit: where agent events go, in order, from the session task.
        log_dir: the directory of the durable logs (created on start).
        clock: unix seconds for entry timestamps and the log's ``at``.
        new_id: makes the SDK session id on first start.

    Raises:
        RunnerError: `session_id` is not safe as a file name.
    """

    def __init__(
        self,
        session_id: str,
        emit: Emit,
        *,
        log_dir: Path,
        clock: Clock = time.time,
        new_id: Callable[[], str] = _new_sdk_session_id,
    ) -> None:
        self._session_id = validate_session_id(session_id)
        self._emit_callback = emit
        self._log_dir = log_dir
        self._clock = clock
        self._new_id = new_id
        self._log = InputLog(inputs_path(log_dir, session_id))
        self._phase = Phase.NEW  # READY from a successful start: the agent never restarts
        self._tasks = TaskSet(f"scripted agent {self._session_id[:8]}", logger=logger)
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._interrupted = asyncio.Event()
        self._in_turn = False
        self._sdk_session_id: str | None = None
        self._mode = "plan"
        self._effort: str | None = None
        self._model = SCRIPTED_MODEL

    @property
    def session_id(self) -> str:
        """The bridge's session id."""
        return self._session_id

    @property
    def sdk_session_id(self) -> str | None:
        """The id reported in ``AgentReady`` (None before a successful start)."""
        return self._sdk_session_id

    async def start(self, spec: SessionSpec, *, resume: bool) -> None:
        """Start or resume; ``AgentReady`` or ``AgentFailed`` follows from the session task.

        Raises:
            RunnerError: already started or closed, or `spec` is for another session.
        """
        check_start(_AGENT, self._phase, self._session_id, spec)
        self._mode = spec.permission_mode
        self._effort = spec.effort_level
        self._model = spec.model or SCRIPTED_MODEL
        failure = self._prepare(spec.cwd, resume=resume)
        first: AgentEvent
        if failure is None:
            assert self._sdk_session_id is not None
            self._phase = Phase.READY
            first = AgentReady(self._session_id, self._sdk_session_id, self._model)
        else:
            self._phase = Phase.FAILED
            first = AgentFailed(self._session_id, failure)
        self._tasks.spawn(self._run(first), f"scripted-agent-{self._session_id[:8]}")

    async def send_input(self, uid: str, text: str) -> None:
        """Log `text` under `uid` (write + fsync), then queue it for the session task.

        Cancel-safe: nothing is awaited, so the input is either logged and queued, or neither.

        Raises:
            RunnerError: the agent is not running, the arguments are not strings (or `uid` is
                empty), or the log could not be written (then nothing was queued).
        """
        check_live(_AGENT, self._phase)
        if not isinstance(uid, str) or not uid:
            raise RunnerError("the input uid must be a non-empty string")
        if not isinstance(text, str):
            raise RunnerError("the input text must be a string")
        try:
            self._log.append(uid, text, iso_timestamp(self._clock()))
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise RunnerError(f"the scripted agent could not record the input: {reason}") from exc
        self._queue.put_nowait(text)

    async def received(self, uids: Collection[str]) -> set[str]:
        """The subset of `uids` in the durable log (works before start and after close).

        Raises:
            RunnerError: the log exists but cannot be read.
        """
        try:
            logged = set(read_logged_uids(self._log.path))
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise RunnerError(f"the scripted agent's log cannot be read: {reason}") from exc
        return {uid for uid in uids if uid in logged}

    async def interrupt(self) -> None:
        """End the current turn early; a no-op when idle, not started, ended or closed."""
        if self._phase is Phase.READY and self._in_turn:
            self._interrupted.set()

    async def set_option(self, option: str, value: str) -> str | None:
        """Set ``mode`` (a permission mode), ``effort`` (an effort level) or ``model``.

        Returns:
            `value` when applied (later entries and ``status`` show it); None for an unknown
            option or a value outside the option's vocabulary.

        Raises:
            RunnerError: the agent is not running.
        """
        check_live(_AGENT, self._phase)
        if option == "mode" and value in PERMISSION_MODES:
            self._mode = value
        elif option == "effort" and value in EFFORT_LEVELS:
            self._effort = value
        elif (
            option == "model"
            and isinstance(value, str)
            and value.strip()
            and len(value) <= _MAX_MODEL_LENGTH
            and value.isprintable()
        ):
            self._model = value
        else:
            return None
        return value

    async def answer_permission(
        self,
        request_id: str,
        allow: bool,
        *,
        message: str = "",
        always: bool = False,
        updated_input: dict[str, Any] | None = None,
    ) -> None:
        """The scripted agent never asks for permission, so every id is unknown: ignored."""
        return None

    async def close(self) -> None:
        """Cancel and await the session task, release the log; idempotent, silent from here on.

        Cancelling the caller while it waits leaves the session task cancelled all the same.
        """
        self._phase = Phase.CLOSED
        try:
            await self._tasks.close()
        finally:
            self._log.close()

    # -- the session task ---------------------------------------------------------------------

    def _prepare(self, cwd: Path, *, resume: bool) -> str | None:
        """Why the agent cannot start, or None (and the SDK session id is loaded)."""
        if not cwd.is_dir():
            return f"working directory {cwd} does not exist"
        markers = [(FAIL_START_MARKER, "scripted start failure")]
        if resume:
            markers.append((FAIL_RESUME_MARKER, "scripted resume failure"))
        for name, default in markers:
            if (cwd / name).exists():
                return _marker_reason(cwd / name, default)
        try:
            self._log_dir.mkdir(parents=True, exist_ok=True)
            self._sdk_session_id = load_or_create_sdk_session_id(
                self._log_dir, self._session_id, self._new_id()
            )
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            return f"the scripted agent cannot use its log directory {self._log_dir}: {reason}"
        return None

    async def _run(self, first: AgentEvent) -> None:
        """The session task: announce, then one turn per queued text until crash or close."""
        try:
            self._emit(first)
            if self._phase is not Phase.READY:
                return
            while await self._turn(await self._queue.get()):
                pass
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._report_failure(exc)

    async def _turn(self, text: str) -> bool:
        """Run one input; False when the agent ended (``crash``)."""
        directive = parse_directive(text)
        self._interrupted.clear()
        self._in_turn = True
        try:
            self._emit(AgentStateChanged(self._session_id, "running"))
            if isinstance(directive, Crash):
                self._phase = Phase.ENDED
                self._emit(AgentEnded(self._session_id, CRASH_REASON))
                return False
            if await self._perform(directive):
                self._emit_entry("system", INTERRUPTED_TEXT)
        finally:
            self._in_turn = False
        self._emit(AgentStateChanged(self._session_id, "idle"))
        self._emit_entry("system", "", {"stream_end": True})
        return True

    async def _perform(self, directive: Directive) -> bool:
        """Emit the entries of `directive`; True when the turn was interrupted."""
        match directive:
            case Echo(text=text):
                self._emit_reply(f"echo: {text}")
            case Lines(count=count):
                for number in range(1, count + 1):
                    if number % _YIELD_EVERY == 0:
                        await asyncio.sleep(0)
                    if self._interrupted.is_set():
                        return True
                    self._emit_reply(f"line {number} of {count}")
            case Big(size=size):
                self._emit_reply(big_content(size))
            case Think():
                self._emit_entry("thinking", THINKING_TEXT, self._assistant())
                self._emit_reply(THOUGHT_TEXT)
            case Slow(seconds=seconds):
                try:
                    async with asyncio.timeout(seconds):
                        await self._interrupted.wait()
                except TimeoutError:
                    return False
                return True
            case Status():
                effort = self._effort or "default"
                self._emit_reply(f"mode={self._mode} effort={effort} model={self._model}")
            case Invalid(message=message):
                self._emit_entry("error", message, {"error_type": "invalid_directive"})
            case Crash():  # handled by `_turn`, which ends the agent instead
                raise AssertionError("crash is not performed")
            case _:
                assert_never(directive)
        return False

    def _assistant(self) -> dict[str, Any]:
        return {"role": "assistant", "model": self._model}

    def _emit_reply(self, content: str) -> None:
        self._emit_entry("text", content, self._assistant())

    def _emit_entry(
        self, entry_type: OutputEntryType, content: str, metadata: dict[str, Any] | None = None
    ) -> None:
        timestamp = iso_timestamp(self._clock())
        entry = OutputEntry(
            entryType=entry_type, content=content, timestamp=timestamp, metadata=metadata
        )
        self._emit(AgentEntry(self._session_id, entry))

    def _emit(self, event: AgentEvent) -> None:
        if self._phase is not Phase.CLOSED:
            self._emit_callback(event)

    def _report_failure(self, exc: Exception) -> None:
        """A bug or a broken ``emit``: log it, end the agent, tell the daemon if it can hear."""
        logger.error("x scripted agent %s failed", self._session_id[:8], exc_info=exc)
        if self._phase is Phase.CLOSED:
            return
        self._phase = Phase.ENDED
        try:
            self._emit(AgentEnded(self._session_id, f"scripted agent failed: {type(exc).__name__}"))
        except Exception:
            logger.error("x scripted agent %s: emit failed", self._session_id[:8], exc_info=True)


def _marker_reason(path: Path, default: str) -> str:
    """The first line of a failure marker file, or `default` when it is empty or unreadable."""
    try:
        with path.open(encoding="utf-8", errors="replace") as file:
            text = file.read(4 * _MAX_REASON_LENGTH)
    except OSError:
        return default
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first[:_MAX_REASON_LENGTH] or default


def scripted_runner_factory(
    log_dir: Path,
    *,
    clock: Clock = time.time,
    new_id: Callable[[], str] = _new_sdk_session_id,
) -> RunnerFactory:
    """A :data:`~bridge.agents.base.RunnerFactory` of :class:`ScriptedRunner` logging to `log_dir`.

    Every runner of the factory shares `log_dir`, one file pair per session, so one
    :func:`count_executions` call covers every session of a daemon run, and of its restarts when
    they are given the same directory.
    """
    directory = Path(log_dir)

    def make(session_id: str, emit: Emit) -> Runner:
        return ScriptedRunner(session_id, emit, log_dir=directory, clock=clock, new_id=new_id)

    return make
