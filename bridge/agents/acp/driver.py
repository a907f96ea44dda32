"""One ACP agent (OpenCode, Gemini CLI, …) for the lifetime of one session host.

The agent is a child process speaking the Agent Client Protocol on its stdio; the official SDK
(``acp``, PyPI ``agent-client-protocol``) frames and types the JSON-RPC. This driver is the ACP
*client*: it sends ``initialize``, ``session/new`` or ``session/load``, one ``session/prompt`` per
input, ``session/cancel``, and ``session/set_mode`` / ``session/set_config_option``; it answers the
agent's ``session/request_permission`` and turns its ``session/update`` notifications into
transcript entries (:mod:`.updates`).

Theory of operation:

- **Start.** ``run`` spawns the command with the daemon's environment plus the profile's asking
  variables (:mod:`.profiles`), stderr into the host's log, and gives the agent
  :data:`START_TIMEOUT` to answer ``initialize`` and open its session. A resume (``spec.resume``
  with a conversation id) uses ``session/load`` when the agent can load sessions; the replayed
  history is not shown again (the transcript has it) but its user messages are counted, which is
  how :meth:`AcpDriver.received` knows what an earlier agent took. ``Ready`` carries the ACP
  session id (kept as the session's ``sdk_session_id``) and the agent's models.
- **Inputs, exactly once.** ``send_input`` appends ``(uid, text)`` to the session's input log
  (:mod:`bridge.agents.input_log`, fsync'd, kept across hosts) and queues it, with no await between.
  The serving task prompts one input at a time (ACP allows one prompt in flight), journals
  ``InputTaken`` once the prompt is on its way, and ``Answered`` when the prompt's response
  arrives. After a crash, an input is *received* when it was taken, or when the agent's replayed
  history holds its text at its place in the log (:func:`matched_inputs`). An agent that cannot
  load a session cannot be asked: its logged inputs count as received (reported as interrupted
  rather than run twice).
- **The gate sees every call.** Each ``session/request_permission`` is first put to the daemon's
  pre-tool check (:meth:`HostServices.check_tool`: the deny list blocks, whatever the agent's own
  configuration allows), then to :meth:`HostServices.ask_permission`, where the daemon's broker
  auto-allows by the mode's rules or raises a card. Answers are chosen by option kind
  (:func:`.tools.choose_option`). A phone's "always" is remembered here for calls with the same
  tool and input; they still pass the pre-tool check first.
- **Interrupt** sends ``session/cancel`` and withdraws the permission waits; ACP then wants those
  requests answered ``cancelled``, and the prompt ends with ``stopReason: cancelled``.
- **Its process** dies with the host (``PR_SET_PDEATHSIG``) and never reads EOF while it lives
  (:mod:`bridge.agents.child_process`): a host killed while the agent waits on a permission must
  not make the agent record a refusal.
- **Death.** When the agent exits (or its pipe closes), ``run`` returns the reason; the host
  journals ``Exited`` and the daemon starts a new host with ``resume``. ``close`` stops the agent
  (``session/cancel`` first when `interrupt`); with ``interrupt=False`` nothing is answered, so
  that no refusal is recorded that nobody gave.

Not lean: the SDK loads pydantic, heavy in memory and import time, in the hosts of ACP sessions
only; a Claude Code host never imports this package.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import subprocess
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import acp
from acp import schema

from bridge.agents.child_process import exit_status, signal_agent, spawn_agent_process
from bridge.agents.input_log import InputLog, inputs_path, read_logged_inputs
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
    ModelChoice,
    OptionSet,
    PermissionAsked,
    Ready,
    StateChanged,
)
from bridge.host.vocabulary import iso_timestamp, make_entry
from bridge.tasks import TaskSet, race

from .profiles import AgentProfile, agent_mode, profile_for
from .sdk_client import SdkClient, error_text, to_json
from .session_state import Replayed, SessionOptions, matched_inputs, user_messages
from .tools import choose_option
from .updates import UpdateMapper

__all__ = [
    "RECORD_DIR_OPTION",
    "START_TIMEOUT",
    "STOP_TIMEOUT",
    "AcpDriver",
    "acp_driver_factory",
]

logger = logging.getLogger(__name__)

START_TIMEOUT: Final = 60.0
"""Seconds an agent has to answer ``initialize`` and open its session."""
STOP_TIMEOUT: Final = 3.0
"""Seconds between SIGTERM and SIGKILL when the agent is stopped."""
RECORD_DIR_OPTION: Final = "record_dir"
"""The ``DriverSpec.options`` key of the directory that keeps the sessions' input logs."""
_LINE_LIMIT: Final = 64 * 1024 * 1024  # a session/load replay can be one long line
_CLIENT_NAME: Final = "codedeck-bridge"


class AcpDriver:
    """One ACP agent for the lifetime of one host (see the module docstring).

    Args:
        spec: what to start; ``spec.sdk_session_id`` is the ACP session to load on a resume.
        services: the host.
        agent_id / label: which agent (its profile) and how messages name it.
        command: the argv that starts the agent in ACP mode.
        record_dir: where the session's input log lives (kept across hosts).
    """

    def __init__(
        self,
        spec: DriverSpec,
        services: HostServices,
        *,
        agent_id: str,
        label: str,
        command: Sequence[str],
        record_dir: Path,
    ) -> None:
        self._spec = spec
        self._services = services
        self._agent_id = agent_id
        self._label = label
        self._command = list(command)
        self._profile: AgentProfile = profile_for(agent_id)
        self._log = InputLog(inputs_path(record_dir, spec.session_id))
        self._tasks = TaskSet(f"{agent_id} agent {spec.session_id[:8]}", logger=logger)
        self._queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._mapper = UpdateMapper(services.diff_allowed)
        self._options = SessionOptions()
        self._process: asyncio.subprocess.Process | None = None
        self._conn: acp.ClientSideConnection | None = None
        self._stdin: asyncio.StreamWriter | None = None
        self._acp_session: str | None = None
        self._live = False
        self._closed = False
        self._loading = False
        self._replayed: list[Replayed] = []
        self._resume_lost: str | None = None
        self._state = "idle"
        self._mode = spec.permission_mode
        self._effort = spec.effort_level
        self._taken: list[str] = []
        self._turn_completed = False
        self._always: set[str] = set()
        self._withdraw = asyncio.Event()
        self._asked: dict[str, int] = {}

    # -- the Driver interface -------------------------------------------------------------------

    async def run(self) -> str | None:
        """Start the agent and serve it; why it ended, or None after :meth:`close`."""
        if self._closed:
            return None
        if self._process is not None:
            raise DriverError(f"{self._label} was already started")
        try:
            failure = await self._start()
        except asyncio.CancelledError:
            await self.close(interrupt=False)
            raise
        if failure is not None:
            if self._closed:
                return None
            await self._stop_process()
            self._emit(Failed(failure))
            return failure
        serving = self._tasks.spawn(self._serve(), f"acp-serve-{self._spec.session_id[:8]}")
        exited = self._tasks.spawn(self._watch_exit(), f"acp-exit-{self._spec.session_id[:8]}")
        if serving is None or exited is None:
            return None
        try:
            await asyncio.wait((serving, exited), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            await self.close(interrupt=False)
            raise
        if self._closed:
            return None
        self._live = False
        done = serving if serving.done() else exited
        reason = done.result() if not done.cancelled() else "the agent stopped"
        await self._stop_process()
        return reason

    def send_input(self, uid: str, text: str) -> None:
        """Log `text` under `uid` (write + fsync), then queue it for the serving task."""
        if not self._live:
            raise DriverError(f"{self._label} is not running")
        if not isinstance(uid, str) or not uid or not isinstance(text, str):
            raise DriverError("an input needs a non-empty uid and a text")
        try:
            self._log.append(uid, text, iso_timestamp(self._services.now()))
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise DriverError(f"{self._label}: the input could not be recorded: {reason}") from exc
        self._queue.put_nowait((uid, text))

    async def received(self, uids: Collection[str]) -> set[str]:
        """The subset of `uids` this agent took, or an earlier one did (its replayed history)."""
        try:
            logged = read_logged_inputs(self._log.path)
        except OSError as exc:
            raise DriverError(f"{self._label}'s input log cannot be read: {exc}") from exc
        got = set(self._taken)
        if self._options.can_load and self._resume_lost is None:
            got |= matched_inputs(logged, user_messages(self._replayed))
        else:
            got |= {record.uid for record in logged}
        return {uid for uid in uids if uid in got}

    async def interrupt(self) -> None:
        """Cancel the running prompt (``session/cancel``) and withdraw its permission waits."""
        if self._conn is None or self._acp_session is None or self._state == "idle":
            return
        self._withdraw.set()
        try:
            await self._conn.cancel(session_id=self._acp_session)
        except Exception as exc:  # the agent is gone: its exit is reported by run()
            logger.info("%s: cancel not sent: %s", self._label, exc)

    async def set_option(self, option: str, value: str) -> None:
        """``mode`` (the gate applies it; the agent plans in ``plan``), ``model`` (one of the
        agent's), ``effort`` (not an ACP option: acknowledged with what applies)."""
        if not self._live:
            raise DriverError(f"{self._label} is not running")
        if option not in OPTIONS:
            raise DriverError(f"unknown option {option!r}")
        if not isinstance(value, str):
            raise DriverError("the option value must be a string")
        result: str | None = None
        if option == "mode":
            await self._apply_mode(value)
            self._mode = value
            result = value
        elif option == "model" and await self._apply_model(value):
            result = value
        self._emit(OptionSet(option, value, result))

    async def close(self, *, interrupt: bool = True) -> None:
        """Stop the agent for good (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._live = False
        if interrupt and self._state != "idle":
            await self.interrupt()  # the user's: pending asks are answered `cancelled`
        else:
            # Not the user's: the agent is killed before anything can answer what it waits on.
            await self._stop_process(kill=True)
        self._withdraw.set()
        try:
            await self._tasks.close()
        finally:
            await self._stop_process()
            self._log.close()

    def status(self) -> DriverStatus:
        return DriverStatus(
            state=self._state,
            mode=self._mode,
            model=self._options.model,
            effort=self._effort,
            sdk_session_id=self._acp_session,
            turn_completed=self._turn_completed,
            taken=tuple(self._taken),
        )

    # -- callbacks from the SDK -----------------------------------------------------------------

    def on_update(self, session_id: str, update: Mapping[str, Any]) -> None:
        """One ``session/update``: replay counting during a load, entries otherwise."""
        if session_id != self._acp_session or self._closed:
            return
        kind = update.get("sessionUpdate")
        if kind == "config_option_update":
            self._options.read_config(update.get("configOptions"))
            return
        if kind == "current_mode_update":
            mode = update.get("currentModeId")
            self._options.current_mode = mode if isinstance(mode, str) else None
            return
        if self._loading:
            self._replayed.append(_replayed(update))
            return
        self._emit_entries(self._mapper.feed(update, self._ts()))

    async def on_permission(
        self, session_id: str, tool_call: Mapping[str, Any], options: list[Mapping[str, Any]]
    ) -> str | None:
        """The option that answers one permission request, or None for ``cancelled``."""
        if self._closed:
            await asyncio.Event().wait()  # no answer: the agent is being stopped without a word
        if session_id != self._acp_session or self._withdraw.is_set():
            return None
        tool = self._mapper.tool_state(tool_call)
        if tool is None:
            return choose_option(options, allow=False)
        self._emit_entries(self._mapper.show_call(tool, self._ts()))
        call = tool.call
        # The card's id is the call's, as for Claude Code (the phone links them); a second ask
        # about the same call (OpenCode asks `external_directory`, then the edit) gets a suffix.
        asked = self._asked[tool.tool_call_id] = self._asked.get(tool.tool_call_id, 0) + 1
        request_id = tool.tool_call_id if asked == 1 else f"{tool.tool_call_id}#{asked}"
        checked = await race(
            self._services.check_tool(request_id, call.tool_name, call.tool_input),
            self._withdraw.wait(),
        )
        if checked is None or checked[0] != 0:
            return None
        if checked[1].decision == "deny":
            reason = checked[1].reason or "blocked by the bridge's deny list"
            self._emit_entries(self._mapper.refuse(tool, f"Blocked: {reason}", self._ts()))
            return choose_option(options, allow=False)
        key = _call_key(call.tool_name, call.tool_input)
        if key in self._always:
            return choose_option(options, allow=True)
        asking = PermissionAsked(
            request_id, call.tool_name, dict(call.tool_input), description=_title(tool_call)
        )
        self._set_state("waiting_permission")
        try:
            answered = await race(self._services.ask_permission(asking), self._withdraw.wait())
        finally:
            if not self._closed:
                self._set_state("running")
        if answered is None or answered[0] != 0:
            return None
        answer = answered[1]
        if answer.allow and answer.always:
            self._always.add(key)
        if not answer.allow:
            text = f"Denied: {answer.message}" if answer.message else "Denied from the phone"
            self._emit_entries(self._mapper.refuse(tool, text, self._ts()))
        return choose_option(options, allow=answer.allow)

    # -- start ----------------------------------------------------------------------------------

    async def _start(self) -> str | None:
        """Spawn, initialize and open the session; why not, or None (``Ready`` emitted)."""
        cwd = Path(self._spec.cwd)
        if not cwd.is_dir():
            return f"working directory {cwd} does not exist"
        if not self._command:
            return f"{self._label} has no command"
        env = {**self._spec.env, **self._profile.ask_env}
        try:
            # stderr: the host's own, which is its log file.
            self._process, stdin = await spawn_agent_process(
                self._command, env, str(cwd), limit=_LINE_LIMIT, sandbox=self._spec.sandbox
            )
        except (OSError, subprocess.SubprocessError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            return f"{self._label} cannot start ({self._command[0]}): {reason}"
        self._stdin = stdin
        assert self._process.stdout is not None
        self._conn = acp.connect_to_agent(
            SdkClient(self),  # type: ignore[arg-type]  # the Client protocol's optional methods
            stdin,
            self._process.stdout,
        )
        try:
            opened = await asyncio.wait_for(self._open(str(cwd), env), START_TIMEOUT)
        except TimeoutError:
            return f"{self._label} did not start within {START_TIMEOUT:.0f} s"
        except acp.RequestError as exc:
            return f"{self._label} refused to start: {error_text(exc)}"
        except (ConnectionError, OSError, EOFError) as exc:
            return f"{self._label} stopped while starting: {self._exit_text() or exc}"
        if opened is not None:
            return opened
        self._live = True
        if self._resume_lost is not None:
            text = (
                f"{self._label} could not resume the conversation ({self._resume_lost}); "
                "this session goes on in a new one"
            )
            self._emit(Entry(make_entry("system", text, self._ts(), {"special": "resume_lost"})))
        self._emit(
            Ready(
                self._acp_session,
                self._options.model,
                str(cwd),
                tuple(ModelChoice(m, label) for m, label in self._options.models),
                sandboxed=self._spec.sandbox is not None,
            )
        )
        return None

    async def _open(self, cwd: str, env: Mapping[str, str]) -> str | None:
        conn = self._conn
        assert conn is not None
        init = await conn.initialize(
            protocol_version=acp.PROTOCOL_VERSION,
            client_capabilities=schema.ClientCapabilities(
                fs=schema.FileSystemCapabilities(read_text_file=False, write_text_file=False),
                terminal=False,
            ),
            client_info=schema.Implementation(name=_CLIENT_NAME, version="1"),
        )
        self._options.can_load = bool(
            init.agent_capabilities and init.agent_capabilities.load_session
        )
        offered = {m.id for m in init.auth_methods or []}
        for method, variable in self._profile.auth_methods:
            if method in offered and env.get(variable):
                await conn.authenticate(method_id=method)
                break
        resume_id = self._spec.sdk_session_id if self._spec.resume else None
        if resume_id and self._options.can_load:
            self._acp_session = resume_id
            self._loading = True
            try:
                loaded = await conn.load_session(cwd=cwd, session_id=resume_id, mcp_servers=[])
            except acp.RequestError as exc:
                # Gemini CLI 0.61 cannot load its sessions over ACP ("No previous sessions
                # found"): the conversation is lost, the session goes on in a new one.
                self._resume_lost = error_text(exc)
            else:
                self._options.read_session(to_json(loaded))
            finally:
                self._loading = False
        if self._acp_session is None or self._resume_lost is not None:
            if resume_id:
                self._resume_lost = self._resume_lost or "the agent cannot load sessions"
                logger.warning(
                    "%s could not resume session %s (%s): a new conversation starts",
                    self._label,
                    self._spec.session_id[:8],
                    self._resume_lost,
                )
            created = await conn.new_session(cwd=cwd, mcp_servers=[])
            self._acp_session = created.session_id
            self._options.read_session(to_json(created))
        self._mapper.model = self._options.model
        if self._spec.model and self._spec.model != self._options.model:
            await self._apply_model(self._spec.model)
        await self._apply_mode(self._spec.permission_mode)
        return None

    # -- serving --------------------------------------------------------------------------------

    async def _serve(self) -> str:
        while True:
            uid, text = await self._queue.get()
            await self._turn(uid, text)

    async def _turn(self, uid: str, text: str) -> None:
        conn, session = self._conn, self._acp_session
        assert conn is not None and session is not None
        self._withdraw.clear()
        self._set_state("running")
        # Owned by the driver's task set: a close while the request is being written cancels it
        # with the turn, nothing is left behind.
        prompt = self._tasks.spawn(
            conn.prompt(session_id=session, prompt=[acp.text_block(text)]), "acp-prompt"
        )
        if prompt is None:  # closing
            return
        await asyncio.sleep(0)  # the request is written before the input counts as taken
        self._taken.append(uid)
        self._emit(InputTaken(uid))
        try:
            response = await prompt
        except acp.RequestError as exc:
            entries = self._mapper.end_turn(None, None, self._ts(), error=error_text(exc))
        except (ConnectionError, OSError, EOFError):
            await asyncio.Event().wait()  # the agent is gone: _watch_exit reports it
            raise  # unreachable
        else:
            usage = to_json(response.usage) if response.usage is not None else None
            entries = self._mapper.end_turn(response.stop_reason, usage, self._ts())
        self._emit_entries(entries)
        self._turn_completed = True
        self._asked.clear()  # asks belong to their turn
        self._taken.remove(uid)
        self._set_state("idle")
        self._emit(Answered((uid,)))

    async def _watch_exit(self) -> str:
        process = self._process
        assert process is not None
        code = await process.wait()
        return self._exit_text() or f"{self._label} exited with code {code}"

    # -- options --------------------------------------------------------------------------------

    async def _apply_mode(self, v10_mode: str) -> None:
        wanted = agent_mode(
            self._profile, v10_mode, self._options.modes, self._options.initial_mode
        )
        if wanted is None or wanted == self._options.current_mode or self._conn is None:
            return
        assert self._acp_session is not None
        try:
            if self._options.mode_config_id is not None:
                await self._conn.set_config_option(
                    config_id=self._options.mode_config_id,
                    session_id=self._acp_session,
                    value=wanted,
                )
            else:
                await self._conn.set_session_mode(session_id=self._acp_session, mode_id=wanted)
            self._options.current_mode = wanted
        except acp.RequestError as exc:
            logger.warning("%s refused mode %s: %s", self._label, wanted, error_text(exc))

    async def _apply_model(self, model: str) -> bool:
        if self._conn is None or self._options.model_config_id is None:
            return False
        if model not in {m for m, _ in self._options.models}:
            return False
        assert self._acp_session is not None
        try:
            await self._conn.set_config_option(
                config_id=self._options.model_config_id,
                session_id=self._acp_session,
                value=model,
            )
        except acp.RequestError as exc:
            logger.warning("%s refused model %s: %s", self._label, model, error_text(exc))
            return False
        self._options.model = model
        self._mapper.model = model
        return True

    # -- helpers --------------------------------------------------------------------------------

    def _emit(self, event: HostEvent) -> None:
        self._services.emit(event)

    def _emit_entries(self, entries: list[dict[str, Any]]) -> None:
        for entry in entries:
            self._emit(Entry(entry))

    def _ts(self) -> str:
        return iso_timestamp(self._services.now())

    def _set_state(self, state: str) -> None:
        if state != self._state:
            self._state = state
            self._emit(StateChanged(state))

    def _exit_text(self) -> str | None:
        process = self._process
        if process is None or process.returncode is None:
            return None
        code = exit_status(process)
        assert code is not None
        if code < 0:
            return f"{self._label} was killed by signal {-code}"
        return f"{self._label} exited with code {code}"

    async def _stop_process(self, *, kill: bool = False) -> None:
        """Stop the agent: SIGTERM, then SIGKILL after :data:`STOP_TIMEOUT` (at once with
        `kill`), and reap it; then release the connection."""
        process = self._process
        if kill and process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await conn.close()
            except Exception as exc:
                logger.debug("%s: closing the connection: %s", self._label, exc)
        if process is None or process.returncode is not None:
            self._close_stdin()
            return
        try:
            signal_agent(process, signal.SIGTERM)  # inside its sandbox, if any
            await asyncio.wait_for(process.wait(), STOP_TIMEOUT)
        except ProcessLookupError:
            return
        except TimeoutError:
            try:
                process.kill()
            except ProcessLookupError:
                return
            await process.wait()
        finally:
            self._close_stdin()

    def _close_stdin(self) -> None:
        # Only once the agent is gone: our end closing must never be its EOF (it holds its own
        # copy of the write end anyway, see bridge.agents.child_process).
        stdin, self._stdin = self._stdin, None
        if stdin is not None:
            stdin.close()


def _replayed(update: Mapping[str, Any]) -> Replayed:
    """A replayed update, reduced to what :func:`user_messages` needs."""
    if update.get("sessionUpdate") != "user_message_chunk":
        return Replayed(user=False)
    content = update.get("content")
    text = content.get("text") if isinstance(content, Mapping) else None
    message_id = update.get("messageId")
    return Replayed(
        True,
        message_id if isinstance(message_id, str) else None,
        text if isinstance(text, str) else "",
    )


def _title(tool_call: Mapping[str, Any]) -> str | None:
    title = tool_call.get("title")
    return title if isinstance(title, str) and title else None


def _call_key(tool_name: str, tool_input: Mapping[str, Any]) -> str:
    return tool_name + "\x00" + json.dumps(tool_input, sort_keys=True, default=str)


def acp_driver_factory(spec: DriverSpec, services: HostServices) -> AcpDriver:
    """The :class:`~bridge.host.driver.DriverFactory` of ACP agents.

    Options: ``agent_id`` (its profile), ``label``, ``command`` (argv list) and ``record_dir``.

    Raises:
        DriverError: an option is missing or of the wrong type, or the session id is not safe as
            a file name.
    """
    options = spec.options
    agent_id, label = options.get("agent_id"), options.get("label")
    command, record_dir = options.get("command"), options.get(RECORD_DIR_OPTION)
    if not isinstance(agent_id, str) or not agent_id:
        raise DriverError("the ACP driver needs the option 'agent_id'")
    if not isinstance(command, list) or not command or not all(isinstance(c, str) for c in command):
        raise DriverError("the ACP driver needs the option 'command': a non-empty argv list")
    if not isinstance(record_dir, str) or not record_dir:
        raise DriverError(f"the ACP driver needs the option {RECORD_DIR_OPTION!r}: a directory")
    directory = Path(record_dir)
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise DriverError(f"the input log directory cannot be made: {exc.strerror}") from exc
    return AcpDriver(
        spec,
        services,
        agent_id=agent_id,
        label=label if isinstance(label, str) and label else agent_id,
        command=command,
        record_dir=directory,
    )


if TYPE_CHECKING:
    _FACTORY: DriverFactory = acp_driver_factory  # mypy proves AcpDriver is a Driver
