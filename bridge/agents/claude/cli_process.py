"""One Claude Code CLI process: its argv and environment, how it is spawned, how it is stopped.

The argv and environment mirror what ``claude-agent-sdk`` 0.2.189 gives the CLI for the options a
session uses (``SubprocessCLITransport._build_command`` and ``connect``): stream-json in and out,
``--verbose``, the ``claude_code`` system-prompt preset (which is *no* prompt flag: ``None``
would be ``--system-prompt ''`` and strip Claude Code's instructions), the permission mode, the
model and effort, ``--permission-prompt-tool stdio`` (permission prompts come to us as
``can_use_tool`` control requests), ``--resume=<id>`` or ``--session-id=<id>`` (the ``=`` form, so
an id can never be read as a flag), the ``user`` and ``project`` setting sources, and for an
editor's task ``--tools ""`` and ``--mcp-config`` (measured in :mod:`.editor_tools`). The
environment is exactly the one the daemon gave (``DriverSpec.env``: nothing of ``os.environ`` is
added) plus the variables the SDK sets: ``CLAUDE_CODE_ENTRYPOINT=sdk-py``,
``CLAUDE_AGENT_SDK_VERSION``, ``CLAUDE_CODE_SDK_READS_SESSION_STATE=1`` and ``PWD``.

Why the process is spawned the way it is (:func:`spawn_cli`): the CLI is the session host's
child, and it must never outlive the host *nor see it die as an end of input*. When a process
dies the kernel closes its descriptors first and only then signals its children, so a CLI whose
stdin pipe had one writer (the host) would read EOF before any death signal, and an EOF while a
permission prompt or a hook waits makes it record a refusal nobody gave. Hence two measures:

- ``PR_SET_PDEATHSIG=SIGKILL`` in the child (:func:`bridge.agents.child_process.die_with_parent`,
  shared with the ACP agents' spawn): the CLI dies the moment the host does;
- the CLI holds an inherited duplicate of the *write* end of its own stdin pipe (``pass_fds``), so
  its stdin never reaches EOF while it lives: the SIGKILL always lands first.

The price: a normal stop cannot rely on EOF either. :meth:`CliProcess.stop` sends SIGTERM, waits,
then SIGKILLs, and always reaps. Only Linux has ``prctl``; elsewhere the CLI does not die with the
host (logged once).

The CLI's stderr is read line by line: every line is logged at INFO (truncated), and the last few
are kept (:attr:`CliProcess.stderr_tail`) for the driver's "No conversation found" check.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import os
import re
import signal
import sys
from collections import deque
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Final

from bridge.agents.child_process import exit_status, signal_agent, spawn_with_own_stdin
from bridge.records import record
from bridge.sandbox import SandboxPolicy
from bridge.tasks import TaskSet

from .environment import SDK_MANAGED_VARIABLES

__all__ = [
    "SDK_VERSION_FALLBACK",
    "STDERR_CHARS",
    "STDERR_LINES",
    "STDOUT_LIMIT",
    "CliOptions",
    "CliProcess",
    "PipeWriter",
    "build_argv",
    "bundled_cli_path",
    "cli_env",
    "exit_reason",
    "sdk_version",
    "spawn_cli",
]

logger = logging.getLogger(__name__)

STDOUT_LIMIT: Final = 32 * 1024 * 1024
"""The longest stdout line read (bytes); a longer one is skipped (logged)."""
STDERR_LINES: Final = 5
"""How many of the last stderr lines are kept."""
STDERR_CHARS: Final = 500
"""Characters of a stderr line that are logged and kept."""
SDK_VERSION_FALLBACK: Final = "0.2.189"
"""``CLAUDE_AGENT_SDK_VERSION`` when the installed SDK's version cannot be read."""

_SDK_PACKAGE: Final = "claude_agent_sdk"
_VERSION_LINE: Final = re.compile(r"""__version__\s*=\s*["']([^"']+)["']""")


@record
class CliOptions:
    """The options of one CLI process that become flags.

    Attributes:
        mode: ``--permission-mode``.
        model: ``--model`` (None: the CLI's default).
        effort: ``--effort`` (None: the model's default).
        resume: ``--resume=<id>``: continue this conversation…
        session_id: …or ``--session-id=<id>``: start a new one with this id.
        permission_prompt: ``--permission-prompt-tool stdio`` (prompts come to us).
        tools: ``--tools``: the built-in tools offered (``""``: none; None: the CLI's default).
        mcp_config: ``--mcp-config`` (JSON) with ``--strict-mcp-config``: these MCP servers and
            no configured one (see :mod:`.editor_tools`).
    """

    mode: str
    model: str | None = None
    effort: str | None = None
    resume: str | None = None
    session_id: str | None = None
    permission_prompt: bool = True
    tools: str | None = None
    mcp_config: str | None = None


def build_argv(cli_path: str, options: CliOptions) -> list[str]:
    """The CLI's argv, in the order the SDK builds it."""
    argv = [cli_path, "--output-format", "stream-json", "--verbose"]
    if options.tools is not None:
        argv += ["--tools", options.tools]
    if options.model:
        argv += ["--model", options.model]
    if options.permission_prompt:
        argv += ["--permission-prompt-tool", "stdio"]
    argv += ["--permission-mode", options.mode]
    if options.resume:
        argv.append(f"--resume={options.resume}")
    elif options.session_id:
        argv.append(f"--session-id={options.session_id}")
    if options.mcp_config is not None:
        argv += ["--mcp-config", options.mcp_config, "--strict-mcp-config"]
    argv.append("--setting-sources=user,project")
    if options.effort:
        argv += ["--effort", options.effort]
    argv += ["--input-format", "stream-json"]
    return argv


def cli_env(env: Mapping[str, str], cwd: str) -> dict[str, str]:
    """The CLI's environment: `env` (complete, as the daemon gave it) plus the SDK's variables."""
    result = {name: value for name, value in env.items() if name not in SDK_MANAGED_VARIABLES}
    result["CLAUDE_CODE_ENTRYPOINT"] = "sdk-py"
    result["CLAUDE_AGENT_SDK_VERSION"] = sdk_version()
    result["CLAUDE_CODE_SDK_READS_SESSION_STATE"] = "1"
    result["PWD"] = cwd
    return result


def _sdk_dir() -> Path | None:
    """Where ``claude_agent_sdk`` is installed, found without importing it (its import is heavy)."""
    try:
        spec = importlib.util.find_spec(_SDK_PACKAGE)
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return Path(locations[0]) if locations else None


def bundled_cli_path() -> Path | None:
    """The ``claude`` binary bundled with the installed ``claude-agent-sdk`` wheel, if any."""
    package = _sdk_dir()
    if package is None:
        return None
    path = package / "_bundled" / ("claude.exe" if sys.platform == "win32" else "claude")
    return path if path.is_file() else None


@cache
def sdk_version() -> str:
    """The installed SDK's version (read from its ``_version.py``, not imported)."""
    package = _sdk_dir()
    if package is not None:
        with contextlib.suppress(OSError):
            match = _VERSION_LINE.search((package / "_version.py").read_text(encoding="utf-8"))
            if match:
                return match.group(1)
    return SDK_VERSION_FALLBACK


def exit_reason(returncode: int) -> str:
    """``exit code N`` or ``killed by signal N`` (never the CLI's output)."""
    if returncode < 0:
        return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


# -- the stdin pipe ------------------------------------------------------------------------------


class _PipeProtocol(asyncio.Protocol):
    """Flow control of the write end of the CLI's stdin."""

    def __init__(self) -> None:
        self._resumed = asyncio.Event()
        self._resumed.set()
        self.lost: Exception | None = None
        self.closed = False

    def pause_writing(self) -> None:
        self._resumed.clear()

    def resume_writing(self) -> None:
        self._resumed.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.lost = exc
        self._resumed.set()

    async def wait_writable(self) -> None:
        await self._resumed.wait()


class PipeWriter:
    """Writes bytes to the CLI's stdin (our end of the pipe).

    Args:
        transport: the write-pipe transport.
        protocol: its flow control.
    """

    def __init__(self, transport: asyncio.WriteTransport, protocol: _PipeProtocol) -> None:
        self._transport = transport
        self._protocol = protocol

    def write(self, data: bytes) -> None:
        """Queue `data` whole (one call never interleaves with another).

        Raises:
            BrokenPipeError: the pipe is closed (the CLI is gone).
        """
        if self._protocol.closed or self._transport.is_closing():
            raise BrokenPipeError("the Claude Code process's input is closed")
        self._transport.write(data)

    async def drain(self) -> None:
        """Wait until the pipe takes more (cancel-safe: the data stays queued).

        Raises:
            BrokenPipeError: the pipe broke.
        """
        await self._protocol.wait_writable()
        if self._protocol.closed:
            raise BrokenPipeError("the Claude Code process's input is closed")

    def close(self) -> None:
        self._transport.close()


# -- the process ---------------------------------------------------------------------------------


class CliProcess:
    """One running CLI (built by :func:`spawn_cli`).

    Attributes:
        pid: its process id.
        stdin: our end of its stdin.
        stdout: its stdout.
        stderr_tail: its last stderr lines (at most :data:`STDERR_LINES`, truncated).
    """

    def __init__(self, process: asyncio.subprocess.Process, stdin: PipeWriter, label: str) -> None:
        self._process = process
        self.pid = process.pid
        self.stdin = stdin
        assert process.stdout is not None
        self.stdout: asyncio.StreamReader = process.stdout
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_LINES)
        self._label = label
        self._tasks = TaskSet(f"Claude Code process {label}", logger=logger)
        if process.stderr is not None:
            self._tasks.spawn(self._read_stderr(process.stderr), f"claude-stderr-{label}")

    @property
    def returncode(self) -> int | None:
        """Its return code (a sandboxed CLI's death by signal N as ``-N`` too)."""
        if self._process.returncode is None:
            return None
        return exit_status(self._process)

    async def wait(self) -> int:
        """Wait for the process to exit; its return code (cancel-safe)."""
        await self._process.wait()
        code = exit_status(self._process)
        assert code is not None
        return code

    def signal(self, signum: int) -> None:
        """Send `signum` to the CLI (inside its sandbox, if any) unless it was reaped already."""
        signal_agent(self._process, signum)

    async def stop(self, term_timeout: float = 5.0, kill_timeout: float = 5.0) -> int | None:
        """SIGTERM, wait up to `term_timeout` s, then SIGKILL; reaped; its return code.

        Idempotent. Cancel-safe in the sense that matters: if cancelled while waiting, the
        process is SIGKILLed before the cancellation propagates. None only if even SIGKILL did
        not end it within `kill_timeout` s (logged).
        """
        try:
            if self._process.returncode is None:
                self.signal(signal.SIGTERM)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(term_timeout):
                        await self._process.wait()
            if self._process.returncode is None:
                logger.warning("! Claude Code %s ignored SIGTERM; killing it", self._label)
                self.signal(signal.SIGKILL)
                try:
                    async with asyncio.timeout(kill_timeout):
                        await self._process.wait()
                except TimeoutError:
                    logger.error("! Claude Code %s survived SIGKILL", self._label)
        except BaseException:
            self.signal(signal.SIGKILL)
            raise
        finally:
            await self._close_pipes()
        return self.returncode

    async def kill(self) -> int | None:
        """SIGKILL and reap (at most a few seconds); its return code."""
        return await self.stop(term_timeout=0.0)

    async def _close_pipes(self) -> None:
        # Only once the process is gone: our end closing must never be its EOF (it holds its own
        # copy of the write end anyway).
        if self._process.returncode is not None:
            self.stdin.close()
            await self._tasks.drain(timeout=1.0)  # its last stderr lines (a grandchild may hold
            await self._tasks.close(timeout=1.0)  # the pipe open: then they are cut short)

    async def _read_stderr(self, stream: asyncio.StreamReader) -> None:
        while True:
            try:
                raw = await stream.readline()
            except ValueError:  # a line over the limit: the rest of it is dropped
                continue
            if not raw:
                return
            line = raw.decode("utf-8", "replace").rstrip()[:STDERR_CHARS]
            if line:
                self.stderr_tail.append(line)
                logger.info("  claude %s: %s", self._label, line)


async def spawn_cli(
    argv: list[str],
    env: Mapping[str, str],
    cwd: str,
    *,
    label: str,
    sandbox: SandboxPolicy | None = None,
) -> CliProcess:
    """Start the CLI (see the module docstring for the pipe and the death signal), under
    `sandbox` when given (:mod:`bridge.agents.child_process`).

    Raises:
        OSError: it cannot be started (missing, not executable, bad cwd).
        subprocess.SubprocessError: the child could not arm its death signal.
    """
    loop = asyncio.get_running_loop()
    process, write_end = await spawn_with_own_stdin(
        argv, env, cwd, limit=STDOUT_LIMIT, stderr=asyncio.subprocess.PIPE, sandbox=sandbox
    )
    pipe = os.fdopen(write_end, "wb", buffering=0)
    try:
        transport, protocol = await loop.connect_write_pipe(_PipeProtocol, pipe)
    except BaseException:
        pipe.close()
        process.kill()
        await process.wait()
        raise
    logger.info(
        "> Claude Code %s started (pid %d%s)", label, process.pid, ", sandboxed" if sandbox else ""
    )
    return CliProcess(process, PipeWriter(transport, protocol), label)
