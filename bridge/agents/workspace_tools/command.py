"""``run_command``: one shell command in the workspace root, and nothing it started outlives it.

The command runs as ``/bin/sh -c <command>`` with the workspace root as its working directory,
stdin from ``/dev/null`` (a command that waits for input would otherwise hang until its timeout)
and stdout and stderr in one pipe, so the model reads them interleaved as a terminal shows them.
It is started in a session and process group of its own (``start_new_session``), and it dies
with the session host (``PR_SET_PDEATHSIG``, :func:`bridge.agents.child_process.die_with_parent`).
In a sandboxed session the shell runs in the agent's sandbox (:mod:`bridge.sandbox`, with a
private ``TMPDIR`` removed when the command ends): the group's leader is then bwrap, and ending
the group ends the sandbox and everything in it.

The shell starts *gated* (:data:`GATE`): it waits for a line on its stdin before it runs the
command, and the host writes that line only once the group is recorded for reaping
(:func:`.leftovers.record`) and the code that kills the group on every way out is in force. Without
the gate the command ran while asyncio was still connecting its pipes, and a background child
could exist before anyone answered for it: a call cancelled in that window had only the shell
killed (asyncio's cleanup kills the pid, not the group), and a host killed in it left no record
to reap — the child outlived both. Nothing is run if the record cannot be written (fail closed);
a host that dies at the gate takes the shell with it, and nothing else was started.

Ending it is always about the *group*, because ``sh -c`` forks and a test runner forks more:

- after ``timeoutMs`` (default :data:`DEFAULT_TIMEOUT_MS`, at most
  :data:`~.catalog.MAX_TIMEOUT_MS`) the group gets SIGTERM, then SIGKILL after
  :data:`KILL_GRACE` s; the result is an error that starts with ``timeout``;
- when the shell exits by itself, what it left running in the background still holds the pipe:
  its output is read for at most :data:`DRAIN_AFTER_EXIT` s more, then the group is SIGKILLed
  (a dev server started with ``&`` does not run on unseen);
- when the call is cancelled (the agent's turn was interrupted, the session stops) the group is
  SIGKILLed before the cancellation goes on.

The output keeps its *tail*: the last :data:`OUTPUT_CAP` bytes (a failing test prints its verdict
last); the result says how much was cut before it. The first line is ``exit code N`` (or ``killed
by signal N``); a non-zero exit is an error result, as the agent's own shell tool reports it.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from bridge.agents.child_process import confine, die_with_parent, release_tmp
from bridge.sandbox import SandboxPolicy

from . import leftovers
from .catalog import MAX_TIMEOUT_MS
from .paths import Workspace
from .results import INVALID_ARGUMENTS, ToolError, ToolResult, check_keys, int_arg, text_arg

__all__ = [
    "DEFAULT_TIMEOUT_MS",
    "DRAIN_AFTER_EXIT",
    "GATE",
    "KILL_GRACE",
    "OUTPUT_CAP",
    "SHELL",
    "OutputTail",
    "run_command",
]

SHELL: Final = "/bin/sh"
DEFAULT_TIMEOUT_MS: Final = 120_000
OUTPUT_CAP: Final = 64 * 1024
"""Bytes of output kept (the last ones)."""
KILL_GRACE: Final = 2.0
"""Seconds between SIGTERM and SIGKILL of a command that ran out of time."""
DRAIN_AFTER_EXIT: Final = 1.0
"""Seconds the output is still read once the shell exited (background children hold the pipe)."""
GATE: Final = 'IFS= read -r go && [ "$go" = go ] || exit 125; exec "$0" -c "$1" </dev/null'
"""The shell's script, run as ``sh -c GATE SHELL command``: wait for ``go`` on stdin (the gate
pipe; end of file, the host died, runs nothing), then become ``SHELL -c command`` in place (same
pid, so the same group and the recorded leader) with stdin from ``/dev/null``."""
_GO: Final = b"go\n"


class OutputTail:
    """The last `cap` bytes of a stream, and how many came before them."""

    def __init__(self, cap: int) -> None:
        self._cap = cap
        self._buffer = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self._buffer += chunk
        if len(self._buffer) > self._cap:
            del self._buffer[: len(self._buffer) - self._cap]

    @property
    def cut(self) -> int:
        """Bytes dropped from the front."""
        return self.total - len(self._buffer)

    def text(self) -> str:
        return self._buffer.decode("utf-8", "replace")


class _Command(asyncio.SubprocessProtocol):
    """The shell's output and its exit, as they happen.

    Not asyncio's ``Process``: its ``wait()`` also waits for the pipes to close, which a
    background child of the shell can hold open for as long as it runs.
    """

    def __init__(self) -> None:
        self.tail = OutputTail(OUTPUT_CAP)
        self.exited = asyncio.Event()
        self.closed = asyncio.Event()

    def pipe_data_received(self, fd: int, data: bytes | bytearray) -> None:
        self.tail.add(bytes(data))

    def process_exited(self) -> None:
        self.exited.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed.set()


async def run_command(
    workspace: Workspace,
    env: Mapping[str, str],
    arguments: Mapping[str, object],
    commands_dir: Path | None = None,
    sandbox: SandboxPolicy | None = None,
) -> ToolResult:
    """The ``run_command`` tool (see the module docstring). Cancel-safe: the group is killed.

    Raises:
        ToolError: bad arguments, the shell could not be started, or the command could not be
            recorded (it was not run).
    """
    check_keys(arguments, ("command", "timeoutMs"))
    command = text_arg(arguments, "command")
    if command is None or not command.strip():
        raise ToolError(INVALID_ARGUMENTS, "'command' is required (a shell command line)")
    timeout_ms = int_arg(arguments, "timeoutMs", low=1, high=MAX_TIMEOUT_MS) or DEFAULT_TIMEOUT_MS
    argv, env, tmp = confine([SHELL, "-c", GATE, SHELL, command], env, sandbox)
    try:
        transport, shell, gate = await _start(workspace, env, argv)
    except BaseException:
        release_tmp(tmp)
        raise
    group = transport.get_pid()  # a session leader: its pid is its group's id
    noted: Path | None = None
    timed_out = False
    try:
        with gate:  # closed on every way out: a shell still at the gate reads EOF, runs nothing
            noted = _record(commands_dir, group)  # reaped if the host dies from now on
            _open(gate)
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                await shell.exited.wait()
        except TimeoutError:
            timed_out = True
            await _end_group(group, shell)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(DRAIN_AFTER_EXIT):
                await shell.closed.wait()
    finally:
        _kill_group(group)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(KILL_GRACE):
                await shell.exited.wait()
        transport.close()
        leftovers.forget(noted)
        release_tmp(tmp)
    code = transport.get_returncode()
    if tmp is not None and code is not None and code > 128:
        code = 128 - code  # bwrap reports a death by signal N as 128 + N
    return _result(code, shell.tail, timed_out, timeout_ms)


async def _start(
    workspace: Workspace, env: Mapping[str, str], argv: list[str]
) -> tuple[asyncio.SubprocessTransport, _Command, io.FileIO]:
    """The shell, held at its :data:`GATE`, and the gate's write end (the caller's to close).

    Cancelled while asyncio connects the pipes, asyncio kills the shell alone; that is enough
    only because the gate keeps it from having started anything yet.

    Raises:
        ToolError: the shell could not be started.
    """
    loop = asyncio.get_running_loop()
    gate_out, gate_in = os.pipe()
    gate = os.fdopen(gate_in, "wb", buffering=0)
    try:
        transport, shell = await loop.subprocess_exec(
            _Command,
            *argv,
            cwd=workspace.root,
            env={**env, "PWD": str(workspace.root)},
            stdin=gate_out,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent(os.getpid()),
        )
    except BaseException as exc:
        gate.close()
        if isinstance(exc, OSError):
            reason = exc.strerror or type(exc).__name__
            raise ToolError("command_failed", f"the shell could not be started: {reason}") from None
        raise
    finally:
        os.close(gate_out)
    return transport, shell, gate


def _record(commands_dir: Path | None, group: int) -> Path | None:
    """:func:`.leftovers.record` the group, or refuse the command: one that a host's death could
    leave running unrecorded is not run.

    Raises:
        ToolError: the record could not be written.
    """
    try:
        return leftovers.record(commands_dir, group)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ToolError(
            "command_failed",
            f"not run: the command could not be recorded to be ended if the host dies: {reason}",
        ) from None


def _open(gate: io.FileIO) -> None:
    """Let the shell run the command. A shell already gone (killed from outside) is no error:
    its exit is reported as any other."""
    with contextlib.suppress(BrokenPipeError):
        gate.write(_GO)


async def _end_group(group: int, shell: _Command) -> None:
    """SIGTERM the group, SIGKILL it after :data:`KILL_GRACE` s if the shell still runs."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(KILL_GRACE):
            await shell.exited.wait()
    _kill_group(group)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _result(
    returncode: int | None, tail: OutputTail, timed_out: bool, timeout_ms: int
) -> ToolResult:
    if timed_out:
        head = f"timeout: the command ran longer than {timeout_ms} ms and was killed"
    elif returncode is not None and returncode < 0:
        head = f"killed by signal {-returncode}"
    else:
        head = f"exit code {returncode}"
    parts = [head]
    if tail.cut:
        parts.append(
            f"[the first {tail.cut} bytes of output are cut; the last {OUTPUT_CAP} follow]"
        )
    output = tail.text()
    parts.append(output if output else "(no output)")
    return ToolResult("\n".join(parts), is_error=timed_out or returncode != 0)
