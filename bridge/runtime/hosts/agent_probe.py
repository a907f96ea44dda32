"""Does a configured ACP agent start? A short-lived run of it that answers ACP ``initialize``.

Used three ways: by the daemon once at start (in the background: the heartbeat goes out first,
and the agents it advertises join it when their check finished, :class:`AgentProbe` →
``AgentsChecked``), by ``codedeck-bridge doctor`` (one check per agent), and for the model list
of an agent no live session can answer for (:func:`list_agent_models`).

How a check runs:

1. **Spawn** the agent's command in an empty temporary directory (a project configuration in
   the daemon's working directory must not change what is checked; the directory goes
   afterwards) with the *complete* environment it is given plus the agent's ``env`` table — the
   ACP SDK alone would pass only ``HOME``, ``PATH`` and a few more, and an agent configured
   through its environment (``OPENCODE_CONFIG_CONTENT``) would then fail. It gets a process
   group of its own, so its helpers go when it goes. Its stderr goes to an unlinked temporary
   file, never an unread pipe (a chatty agent would block on a full pipe), and the file's last
   line explains an agent that exits.
2. **initialize** over its stdio with the official SDK (``acp.connect_to_agent``), raced
   against the agent's exit and bounded by :data:`PROBE_TIMEOUT` (OpenCode takes seconds).
   The answer gives ``agentInfo`` (name, version) and ``agentCapabilities`` (``loadSession``…).
   An agent answering another protocol version than the SDK's counts as not started.
3. **Stop** it: stdin closed, ``SIGTERM`` to its group, ``SIGKILL`` after :data:`STOP_WAIT`.

Each failure is one sentence a user can act on (:attr:`AgentProbe.reason`): not found, not
executable, exited (with its last stderr line), timed out, refused ``initialize``.

Models (:func:`list_agent_models`) add a ``session/new`` in that temporary directory and read
its ``configOptions``: the select option of category (or id) ``model`` lists the agent's models
(OpenCode: ``provider/model`` ids), its current value is the default. Agents that report models
only through ACP's unstable ``models`` field (which the pinned SDK does not parse) list none
this way; a live session's list covers them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from dataclasses import field
from typing import IO, TYPE_CHECKING, Any, Final, TypeVar

from bridge import __version__
from bridge.agent_config import AgentConfig
from bridge.protocol import ModelEntry
from bridge.records import record
from bridge.tasks import race

if TYPE_CHECKING:
    # The ACP SDK is imported where it is used: importing it builds every pydantic model of the
    # protocol, a CPU cost that a daemon whose agents are all Claude Code (or the scripted one)
    # would pay at every start, before it can answer a phone.
    from acp import schema

__all__ = [
    "PROBE_TIMEOUT",
    "STOP_WAIT",
    "AgentModels",
    "AgentProbe",
    "list_agent_models",
    "probe_agent",
    "probe_agents",
]

logger = logging.getLogger(__name__)

PROBE_TIMEOUT: Final = 15.0
"""Seconds an agent may take to answer ``initialize`` (and ``session/new``) from its start."""
STOP_WAIT: Final = 2.0
"""Seconds an agent has to exit after ``SIGTERM`` before it is killed."""
_STDOUT_LIMIT: Final = 16 * 1024 * 1024
"""One JSON-RPC line may be this long (a ``session/new`` answer lists every model)."""
_STDERR_TAIL: Final = 4096
_REASON_MAX: Final = 240

T = TypeVar("T")


@record
class AgentProbe:
    """Whether one agent started, and what it said about itself.

    Attributes:
        agent_id / label: the configured agent.
        started: it answered ``initialize`` with the protocol version the bridge speaks.
        reason: why not, one sentence for the user (None when it started).
        name / version: its ``agentInfo`` (None when it sent none).
        load_session: it can resume a conversation (``session/load``).
        capabilities: its ``agentCapabilities`` as JSON (wire names).
        seconds: from the spawn to the answer (or to the failure).
    """

    agent_id: str
    label: str
    started: bool
    reason: str | None = None
    name: str | None = None
    version: str | None = None
    load_session: bool = False
    capabilities: Mapping[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def describe(self) -> str:
        """One line: ``OpenCode 1.18.33 (loadSession) in 2.3 s``, or the reason."""
        if not self.started:
            return self.reason or "it did not start"
        who = " ".join(part for part in (self.name, self.version) if part) or self.label
        extras = [name for name in ("loadSession",) if self.load_session]
        extra = f" ({', '.join(extras)})" if extras else ""
        return f"{who}{extra}, answered in {self.seconds:.1f} s"


@record
class AgentModels:
    """The models one agent offers a new session (empty with a reason when it could not say)."""

    models: tuple[ModelEntry, ...] = ()
    default_model: str | None = None
    reason: str | None = None
    seconds: float = 0.0


class _ProbeFailed(Exception):
    """The agent did not do what the check needs; the text is the user-readable reason."""


class _ProbeClient:
    """The client side during a check: nothing to show, nothing to allow."""

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None

    async def request_permission(
        self, session_id: str, tool_call: Any, options: Any, **kwargs: Any
    ) -> schema.RequestPermissionResponse:
        from acp import schema

        return schema.RequestPermissionResponse(outcome=schema.DeniedOutcome(outcome="cancelled"))

    def on_connect(self, conn: Any) -> None:
        return None


async def probe_agents(
    agents: Sequence[AgentConfig], env: Mapping[str, str], *, timeout: float = PROBE_TIMEOUT
) -> list[AgentProbe]:
    """Check every agent at once; the results in the order of `agents`."""
    return list(await asyncio.gather(*(probe_agent(a, env, timeout=timeout) for a in agents)))


async def probe_agent(
    agent: AgentConfig, env: Mapping[str, str], *, timeout: float = PROBE_TIMEOUT
) -> AgentProbe:
    """Start `agent`, ask ``initialize``, stop it (see the module docstring).

    Args:
        agent: the configured agent.
        env: the environment it starts with (the daemon's, complete); its ``env`` table is
            added on top.
        timeout: seconds for the whole check.

    Never raises but ``CancelledError`` (the agent is stopped first).
    """
    started_at = time.monotonic()
    try:
        async with _running(agent, env) as run:
            answer = await run.call(_initialize(run.conn), "answer initialize", timeout)
    except _ProbeFailed as exc:
        seconds = time.monotonic() - started_at
        logger.warning("! agent %s does not start: %s", agent.agent_id, exc)
        return AgentProbe(agent.agent_id, agent.label, False, str(exc), seconds=seconds)
    seconds = time.monotonic() - started_at
    import acp
    from acp import schema

    info = answer.agent_info
    capabilities = answer.agent_capabilities or schema.AgentCapabilities()
    if answer.protocol_version != acp.PROTOCOL_VERSION:
        reason = (
            f"it speaks ACP version {answer.protocol_version}, this bridge speaks version "
            f"{acp.PROTOCOL_VERSION}; use a version of the agent made for ACP "
            f"v{acp.PROTOCOL_VERSION}"
        )
        logger.warning("! agent %s does not start: %s", agent.agent_id, reason)
        return AgentProbe(agent.agent_id, agent.label, False, reason, seconds=seconds)
    probe = AgentProbe(
        agent.agent_id,
        agent.label,
        True,
        name=(info.title or info.name) if info is not None else None,
        version=info.version if info is not None else None,
        load_session=bool(capabilities.load_session),
        capabilities=capabilities.model_dump(mode="json", by_alias=True, exclude_none=True),
        seconds=seconds,
    )
    logger.info("agent %s starts: %s", agent.agent_id, probe.describe())
    return probe


async def list_agent_models(
    agent: AgentConfig, env: Mapping[str, str], *, timeout: float = PROBE_TIMEOUT
) -> AgentModels:
    """The models a new session of `agent` offers: ``initialize``, then ``session/new``.

    Never raises but ``CancelledError``; a failure is an empty list with its reason.
    """
    started_at = time.monotonic()
    try:
        async with _running(agent, env) as run:
            deadline = started_at + timeout
            await run.call(_initialize(run.conn), "answer initialize", timeout)
            remaining = max(0.1, deadline - time.monotonic())
            session = await run.call(
                run.conn.new_session(cwd=run.cwd, mcp_servers=[]), "open a session", remaining
            )
    except _ProbeFailed as exc:
        return AgentModels(reason=str(exc), seconds=time.monotonic() - started_at)
    models, default = _model_option(session.config_options or [])
    reason = None if models else f"{agent.label} offers no model option on a new session"
    return AgentModels(models, default, reason, time.monotonic() - started_at)


def _model_option(options: Sequence[Any]) -> tuple[tuple[ModelEntry, ...], str | None]:
    """The entries and current value of the ``model`` select option (none: empty)."""
    from acp import schema

    for option in options:
        if not isinstance(option, schema.SessionConfigOptionSelect):
            continue
        if option.category != "model" and option.id != "model":
            continue
        entries: list[ModelEntry] = []
        for item in option.options:
            group = item.options if isinstance(item, schema.SessionConfigSelectGroup) else [item]
            entries.extend(ModelEntry(id=o.value, label=o.name) for o in group if o.value)
        return tuple(entries), option.current_value or None
    return (), None


def _initialize(conn: Any) -> Awaitable[schema.InitializeResponse]:
    import acp
    from acp import schema

    result: Awaitable[schema.InitializeResponse] = conn.initialize(
        protocol_version=acp.PROTOCOL_VERSION,
        client_capabilities=schema.ClientCapabilities(),
        client_info=schema.Implementation(name="codedeck-bridge", version=__version__),
    )
    return result


class _Run:
    """A running agent during a check: its connection, its process, its stderr file."""

    def __init__(
        self, conn: Any, process: asyncio.subprocess.Process, stderr: IO[bytes], cwd: str
    ) -> None:
        self.conn = conn
        self.process = process
        self.stderr = stderr
        self.cwd = cwd

    async def call(self, request: Awaitable[T], what: str, timeout: float) -> T:
        """`request`'s answer, raced against the agent's exit and `timeout`.

        Raises:
            _ProbeFailed: the agent exited, timed out or answered with an error.
        """
        import acp

        try:
            won = await race(request, self.process.wait(), timeout=timeout)
        except acp.RequestError as exc:
            raise _ProbeFailed(f"it refused to {what}: {_clip(str(exc))}") from None
        except (ConnectionError, OSError, RuntimeError, ValueError) as exc:
            await self._settle()
            if self.process.returncode is not None:
                raise _ProbeFailed(self._exited(what)) from None
            raise _ProbeFailed(f"its answer could not be read ({_clip(str(exc))})") from None
        if won is None:
            raise _ProbeFailed(f"it did not {what} within {timeout:g} s")
        index, value = won
        if index == 1:
            raise _ProbeFailed(self._exited(what))
        result: T = value
        return result

    async def _settle(self) -> None:
        """Give an agent whose stdout closed a moment to report its exit status."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.5):
                await self.process.wait()

    def _exited(self, what: str) -> str:
        code = self.process.returncode
        status = f"signal {-code}" if code is not None and code < 0 else f"status {code}"
        tail = _stderr_tail(self.stderr)
        said = f": {tail}" if tail else " (it wrote nothing to stderr)"
        return f"it exited with {status} before it could {what}{said}"


@contextlib.asynccontextmanager
async def _running(agent: AgentConfig, env: Mapping[str, str]) -> AsyncIterator[_Run]:
    """The agent running in a fresh temporary directory; stopped and cleaned up on exit."""
    with (
        tempfile.TemporaryDirectory(prefix=f"codedeck-{agent.agent_id}-") as cwd,
        tempfile.TemporaryFile() as stderr,
    ):
        process = await _spawn(agent, {**env, **agent.env}, cwd, stderr)
        conn: Any = None
        try:
            assert process.stdin is not None and process.stdout is not None
            import acp

            conn = acp.connect_to_agent(_ProbeClient(), process.stdin, process.stdout)  # type: ignore[arg-type]
            yield _Run(conn, process, stderr, cwd)
        finally:
            await _stop(process, conn)


async def _spawn(
    agent: AgentConfig, env: Mapping[str, str], cwd: str, stderr: IO[bytes]
) -> asyncio.subprocess.Process:
    program = agent.program
    try:
        return await asyncio.create_subprocess_exec(
            *agent.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
            limit=_STDOUT_LIMIT,
        )
    except FileNotFoundError:
        where = "not on the bridge's PATH" if "/" not in program else "no such file"
        raise _ProbeFailed(
            f"{program} was not found ({where}); install it, or set "
            f"agents.{agent.agent_id}.command in config.toml"
        ) from None
    except PermissionError:
        raise _ProbeFailed(f"{program} cannot be run (permission denied; chmod +x it?)") from None
    except OSError as exc:
        raise _ProbeFailed(f"{program} cannot be run ({exc.strerror or exc})") from None


async def _stop(process: asyncio.subprocess.Process, conn: Any) -> None:
    """Close the connection and stdin, then SIGTERM the agent's group, SIGKILL if it stays.

    Runs also when the check was cancelled: every await here is bounded.
    """
    if conn is not None:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(STOP_WAIT):
                await conn.close()
    if process.stdin is not None:
        with contextlib.suppress(Exception):
            process.stdin.close()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(STOP_WAIT):
                await process.wait()
        if process.returncode is not None:
            break
    # Helpers the agent left behind in its group (its own exit does not end them).
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _stderr_tail(stderr: IO[bytes]) -> str:
    """The last non-empty line the agent wrote to stderr, made printable and short."""
    try:
        stderr.seek(0, os.SEEK_END)
        size = stderr.tell()
        stderr.seek(max(0, size - _STDERR_TAIL))
        text = stderr.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return _clip(lines[-1]) if lines else ""


def _clip(text: str) -> str:
    printable = "".join(ch if ch.isprintable() else " " for ch in text).strip()
    return printable if len(printable) <= _REASON_MAX else printable[: _REASON_MAX - 1] + "…"
