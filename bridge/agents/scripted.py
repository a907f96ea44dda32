"""The scripted agent: a :class:`~bridge.host.driver.Driver` that needs no Claude Code.

The daemon's integration tests, chaos runs and benchmarks drive sessions through it, inside a
session host like the real agent, so from the outside it behaves like a real driver: it reports
everything through the host's services, keeps a durable record of what it received
(:mod:`bridge.agents.scripted_log`) and answers :meth:`ScriptedDriver.received` from that record
alone, which is what lets a test prove "executed exactly once" across a ``kill -9`` of the daemon
or of the host. What it does with each text is the grammar of
:mod:`bridge.agents.scripted_directives`. Lean, as host-side code must be: the standard library,
``orjson``, :mod:`bridge.host` and :mod:`bridge.tasks` only (a test checks).

Theory of operation:

- ``run`` decides at once whether the agent can run (the cwd exists and holds no failure marker;
  the log directory and the SDK session id file are usable) and emits ``Ready`` or ``Failed``
  before it awaits anything. Tests make a start fail with a file ``.scripted-fail-start`` in the
  cwd (its first line, if any, is the reason), and make only a resume fail with
  ``.scripted-fail-resume``. After ``Failed``, ``run`` returns the reason.
- ``send_input`` appends the input to the log and fsyncs it, then queues ``(uid, text)``, with no
  await in between: an input is logged if and only if it is queued (and in ``status().taken``),
  whatever gets cancelled when. The queue is unbounded because its producer, the daemon's inbox,
  is the bound.
- The serving task takes one input at a time and emits one turn: ``StateChanged(running)`` →
  entries → ``StateChanged(idle)`` → a ``system`` entry ``""`` with ``{"stream_end": true}`` →
  ``Answered((uid,))``. ``crash`` emits ``running`` and the agent is gone: ``run`` returns
  :data:`CRASH_REASON` (the host journals ``Exited``), inputs still queued are dropped (they stay
  logged as received and listed in ``status().taken``, as with a real agent that died with them in
  its stdin), and ``send_input`` raises :class:`~bridge.host.driver.DriverError`.
- ``ask`` waits in :meth:`HostServices.ask_permission` (state ``waiting_permission``, or
  ``waiting_question`` for ``AskUserQuestion``, then ``running`` again) and ``check`` in
  :meth:`HostServices.check_tool`, for as long as the host takes: the daemon may be restarting.
- ``interrupt`` ends the current turn early (the wait of ``slow S``, the rest of ``lines N``, or the
  wait of ``ask`` / ``check``, which is cancelled: that withdraws it) with a ``system`` entry
  ``Interrupted``, then the usual idle + stream_end + answered. Queued inputs run next.
- Any exception inside the serving task (a clock or an ``emit`` that raises) is logged with its
  traceback and ends the agent: ``run`` returns ``scripted agent failed: <type name>``, never the
  exception's message.
- ``close`` cancels and awaits the serving task (owned by a :class:`~bridge.tasks.TaskSet`;
  a wait in ``ask`` / ``check`` is withdrawn with it) and releases the log; from the moment it is
  called nothing more is emitted, and ``run`` returns None. The agent never restarts: the daemon
  starts a new host with ``resume``.

Entries carry ``timestamp`` from :meth:`HostServices.now` (unix seconds, rendered like
JavaScript's ``toISOString``), as does the log's ``at``. ``slow S`` waits on the event loop's own
clock, so a frozen test clock cannot freeze a turn.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import uuid
from collections.abc import Awaitable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar, assert_never, cast

from bridge.host.driver import (
    DriverError,
    DriverFactory,
    DriverSpec,
    DriverStatus,
    HostServices,
)
from bridge.host.events import (
    OPTIONS,
    Answered,
    Entry,
    Failed,
    HostEvent,
    InputTaken,
    OptionSet,
    PermissionAsked,
    Ready,
    StateChanged,
)
from bridge.host.vocabulary import EFFORT_LEVELS, PERMISSION_MODES, iso_timestamp, make_entry
from bridge.tasks import TaskSet, race

from .scripted_directives import (
    THINKING_TEXT,
    THOUGHT_TEXT,
    Ask,
    Big,
    Check,
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
    permission_reply,
    verdict_reply,
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
    "LOG_DIR_OPTION",
    "SCRIPTED_MODEL",
    "ScriptedDriver",
    "big_content",
    "count_executions",
    "iso_timestamp",
    "scripted_driver_factory",
]

logger = logging.getLogger(__name__)

FAIL_START_MARKER: Final = ".scripted-fail-start"
"""A file of this name in the cwd makes ``run`` (start and resume) emit ``Failed``."""
FAIL_RESUME_MARKER: Final = ".scripted-fail-resume"
"""A file of this name in the cwd makes only a resume (``spec.resume``) emit ``Failed``."""
SCRIPTED_MODEL: Final = "scripted"
"""The model the agent reports when the spec names none."""
CRASH_REASON: Final = "scripted crash"
"""What ``run`` returns after the ``crash`` directive (the host's ``Exited.reason``)."""
INTERRUPTED_TEXT: Final = "Interrupted"
"""The content of the ``system`` entry that ends an interrupted turn."""
LOG_DIR_OPTION: Final = "log_dir"
"""The key of ``DriverSpec.options`` that names the log directory (a string path)."""

_T = TypeVar("_T")

_YIELD_EVERY = 64  # entries between two yields to the loop in `lines N`: fairness, interruptibility
_MAX_MODEL_LENGTH = 200
_MAX_REASON_LENGTH = 200
_AGENT = "the scripted agent"  # how DriverError messages name it


class _Phase(enum.Enum):
    """Where the agent is in its one lifetime."""

    NEW = "has not been started"
    READY = "is running"
    FAILED = "failed to start"
    ENDED = "has ended"
    CLOSED = "is closed"


class ScriptedDriver:
    """One scripted agent for the lifetime of one host (see the module docstring).

    Args:
        spec: what to start; ``spec.session_id`` names the files in `log_dir`, and
            ``spec.sdk_session_id`` (or a fresh UUID) becomes the SDK session id on first start.
        services: the host: events, permission asks, pre-tool checks, the clock.
        log_dir: the directory of the durable logs (created by ``run``).

    Raises:
        DriverError: ``spec.session_id`` is not safe as a file name.
    """

    def __init__(self, spec: DriverSpec, services: HostServices, *, log_dir: Path) -> None:
        self._session_id = validate_session_id(spec.session_id)
        self._spec = spec
        self._services = services
        self._log_dir = Path(log_dir)
        self._log = InputLog(inputs_path(self._log_dir, self._session_id))
        self._phase = _Phase.NEW
        self._tasks = TaskSet(f"scripted agent {self._session_id[:8]}", logger=logger)
        self._queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._interrupted = asyncio.Event()
        self._in_turn = False
        self._state = "idle"
        self._taken: list[str] = []
        self._turn_completed = False
        self._sdk_session_id: str | None = None
        self._mode = spec.permission_mode
        self._effort = spec.effort_level
        self._model = spec.model or SCRIPTED_MODEL

    async def run(self) -> str | None:
        """Start the agent and serve it until ``crash``, a failure or :meth:`close`.

        Returns:
            The reason after ``Failed``, :data:`CRASH_REASON` after ``crash``, ``scripted agent
            failed: <type>`` after an exception, None after :meth:`close` (also when cancelled,
            which closes the agent, then re-raises).

        Raises:
            DriverError: ``run`` was called before.
        """
        if self._phase is _Phase.CLOSED:
            return None
        if self._phase is not _Phase.NEW:
            raise DriverError(f"{_AGENT} was already started")
        failure = self._prepare()
        if failure is not None:
            self._phase = _Phase.FAILED
            self._emit(Failed(failure))
            return failure
        assert self._sdk_session_id is not None
        self._phase = _Phase.READY
        self._emit(Ready(self._sdk_session_id, self._model, self._spec.cwd))
        serving = self._tasks.spawn(self._serve(), f"scripted-agent-{self._session_id[:8]}")
        if serving is None:  # unreachable: close() sets CLOSED before it closes the task set
            return None
        try:
            await asyncio.wait((serving,))
        except asyncio.CancelledError:
            await self.close()
            raise
        return None if serving.cancelled() else serving.result()

    def send_input(self, uid: str, text: str) -> None:
        """Log `text` under `uid` (write + fsync), then queue it for the serving task.

        Nothing is awaited, so the input is either logged, queued and taken, or none of these.

        Raises:
            DriverError: the agent is not running, the arguments are not strings (or `uid` is
                empty), or the log could not be written (then nothing was queued).
        """
        self._check_live()
        if not isinstance(uid, str) or not uid:
            raise DriverError("the input uid must be a non-empty string")
        if not isinstance(text, str):
            raise DriverError("the input text must be a string")
        try:
            self._log.append(uid, text, iso_timestamp(self._services.now()))
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise DriverError(f"{_AGENT} could not record the input: {reason}") from exc
        self._queue.put_nowait((uid, text))
        self._taken.append(uid)
        # Logged is taken, for the scripted agent: the daemon never sends it again.
        self._services.emit(InputTaken(uid))

    async def received(self, uids: Collection[str]) -> set[str]:
        """The subset of `uids` in the durable log, whichever host logged them.

        Works in every phase, before ``run`` and after :meth:`close` included.

        Raises:
            DriverError: the log exists but cannot be read.
        """
        try:
            logged = set(read_logged_uids(self._log.path))
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise DriverError(f"{_AGENT}'s log cannot be read: {reason}") from exc
        return {uid for uid in uids if uid in logged}

    async def interrupt(self) -> None:
        """End the current turn early; a no-op when idle, not started, ended or closed."""
        if self._phase is _Phase.READY and self._in_turn:
            self._interrupted.set()

    async def set_option(self, option: str, value: str) -> None:
        """Set ``mode`` (a permission mode), ``effort`` (an effort level) or ``model``.

        Emits ``OptionSet(option, value, result)``: `result` is `value` when applied (later
        entries and :meth:`status` show it), None when `value` is outside the option's vocabulary.

        Raises:
            DriverError: the agent is not running, `option` is none of
                :data:`~bridge.host.events.OPTIONS`, or `value` is not a string.
        """
        self._check_live()
        if option not in OPTIONS:
            raise DriverError(f"unknown option {option!r}")
        if not isinstance(value, str):
            raise DriverError("the option value must be a string")
        applied = True
        if option == "mode" and value in PERMISSION_MODES:
            self._mode = value
        elif option == "effort" and value in EFFORT_LEVELS:
            self._effort = value
        elif option == "model" and _acceptable_model(value):
            self._model = value
        else:
            applied = False
        self._emit(OptionSet(option, value, value if applied else None))

    async def close(self, *, interrupt: bool = True) -> None:
        """Cancel and await the serving task, release the log; idempotent, silent from here on.

        `interrupt` makes no difference here: a scripted turn leaves nothing behind to refuse.

        Cancelling the caller while it waits leaves the serving task cancelled all the same.
        """
        self._phase = _Phase.CLOSED
        try:
            await self._tasks.close()
        finally:
            self._log.close()

    def status(self) -> DriverStatus:
        """The agent's state, options, conversation id and the inputs it owes a turn."""
        return DriverStatus(
            state=self._state,
            mode=self._mode,
            model=self._model,
            effort=self._effort,
            sdk_session_id=self._sdk_session_id,
            turn_completed=self._turn_completed,
            taken=tuple(self._taken),
        )

    # -- the serving task ---------------------------------------------------------------------

    def _check_live(self) -> None:
        if self._phase is not _Phase.READY:
            raise DriverError(f"{_AGENT} {self._phase.value}")

    def _prepare(self) -> str | None:
        """Why the agent cannot start, or None (and the SDK session id is loaded)."""
        cwd = Path(self._spec.cwd)
        if not cwd.is_dir():
            return f"working directory {cwd} does not exist"
        markers = [(FAIL_START_MARKER, "scripted start failure")]
        if self._spec.resume:
            markers.append((FAIL_RESUME_MARKER, "scripted resume failure"))
        for name, default in markers:
            if (cwd / name).exists():
                return _marker_reason(cwd / name, default)
        try:
            self._log_dir.mkdir(parents=True, exist_ok=True)
            self._sdk_session_id = load_or_create_sdk_session_id(
                self._log_dir, self._session_id, self._spec.sdk_session_id or str(uuid.uuid4())
            )
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            return f"{_AGENT} cannot use its log directory {self._log_dir}: {reason}"
        return None

    async def _serve(self) -> str:
        """One turn per queued input until ``crash`` or a failure; why the agent ended."""
        try:
            while await self._turn(*await self._queue.get()):
                pass
        except Exception as exc:
            logger.error("x scripted agent %s failed", self._session_id[:8], exc_info=exc)
            if self._phase is _Phase.READY:
                self._phase = _Phase.ENDED
            return f"scripted agent failed: {type(exc).__name__}"
        return CRASH_REASON

    async def _turn(self, uid: str, text: str) -> bool:
        """Run one input; False when the agent ended (``crash``)."""
        directive = parse_directive(text)
        self._interrupted.clear()
        self._in_turn = True
        try:
            self._set_state("running")
            if isinstance(directive, Crash):
                self._phase = _Phase.ENDED
                return False
            if await self._perform(directive):
                self._emit_entry("system", INTERRUPTED_TEXT)
        finally:
            self._in_turn = False
        self._set_state("idle")
        self._emit_entry("system", "", {"stream_end": True})
        self._taken.remove(uid)  # the first occurrence: inputs run in the order they were taken
        self._turn_completed = True
        self._emit(Answered((uid,)))
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
            case Ask(tool_name=tool_name, tool_input=tool_input):
                request = PermissionAsked(uuid.uuid4().hex, tool_name, tool_input)
                waiting = (
                    "waiting_question" if tool_name == "AskUserQuestion" else "waiting_permission"
                )
                # The state goes first: the card is emitted inside the host's wait, after which
                # nothing can be emitted until the answer comes.
                self._set_state(waiting)
                answer = await self._unless_interrupted(self._services.ask_permission(request))
                self._set_state("running")
                if answer is None:
                    return True
                self._emit_reply(permission_reply(tool_name, answer))
            case Check(tool_name=tool_name, tool_input=tool_input):
                verdict = await self._unless_interrupted(
                    self._services.check_tool(uuid.uuid4().hex, tool_name, tool_input)
                )
                if verdict is None:
                    return True
                self._emit_reply(verdict_reply(verdict))
            case Invalid(message=message):
                self._emit_entry("error", message, {"error_type": "invalid_directive"})
            case Crash():  # handled by `_turn`, which ends the agent instead
                raise AssertionError("crash is not performed")
            case _:
                assert_never(directive)
        return False

    async def _unless_interrupted(self, waiting: Awaitable[_T]) -> _T | None:
        """What `waiting` gives, or None when an interrupt came first.

        An interrupt cancels `waiting`, which withdraws the host's wait (its ask or check); so
        does a cancellation of the serving task (close), which is re-raised. Both tasks are
        awaited here before it returns or raises: nothing is left running.
        """
        first = await race(waiting, self._interrupted.wait())  # the answer wins a tie
        if first is None or first[0] != 0:
            return None
        return cast(_T, first[1])

    def _assistant(self) -> dict[str, Any]:
        return {"role": "assistant", "model": self._model}

    def _emit_reply(self, content: str) -> None:
        self._emit_entry("text", content, self._assistant())

    def _emit_entry(
        self, entry_type: str, content: str, metadata: dict[str, Any] | None = None
    ) -> None:
        timestamp = iso_timestamp(self._services.now())
        self._emit(Entry(make_entry(entry_type, content, timestamp, metadata)))

    def _set_state(self, state: str) -> None:
        self._state = state
        self._emit(StateChanged(state))

    def _emit(self, event: HostEvent) -> None:
        if self._phase is not _Phase.CLOSED:
            self._services.emit(event)


def _acceptable_model(value: str) -> bool:
    """A model name the agent takes: printable, not blank, at most 200 characters."""
    return bool(value.strip()) and len(value) <= _MAX_MODEL_LENGTH and value.isprintable()


def _marker_reason(path: Path, default: str) -> str:
    """The first line of a failure marker file, or `default` when it is empty or unreadable."""
    try:
        with path.open(encoding="utf-8", errors="replace") as file:
            text = file.read(4 * _MAX_REASON_LENGTH)
    except OSError:
        return default
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first[:_MAX_REASON_LENGTH] or default


def scripted_driver_factory(spec: DriverSpec, services: HostServices) -> ScriptedDriver:
    """The :class:`~bridge.host.driver.DriverFactory` of the scripted agent.

    The log directory is ``spec.options["log_dir"]``. Every session of a daemon shares it, one
    file pair per session, so one :func:`count_executions` call covers every session of a daemon
    run, and of its restarts and their hosts when they are given the same directory.

    Raises:
        DriverError: the ``log_dir`` option is missing or not a non-empty string, or the session
            id is not safe as a file name.
    """
    log_dir = spec.options.get(LOG_DIR_OPTION)
    if not isinstance(log_dir, str) or not log_dir:
        raise DriverError(f"{_AGENT} needs the option {LOG_DIR_OPTION!r}: a directory path")
    return ScriptedDriver(spec, services, log_dir=Path(log_dir))


if TYPE_CHECKING:
    _FACTORY: DriverFactory = scripted_driver_factory  # mypy proves ScriptedDriver is a Driver
