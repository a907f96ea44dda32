"""How a session host starts its agent process: it dies with the host and never sees it die as EOF.

An agent (the Claude Code CLI, an ACP agent such as OpenCode) is the session host's child, and it
must never outlive the host *nor see it die as an end of input*. When a process dies the kernel
closes its descriptors first and only then signals its children, so an agent whose stdin pipe had
one writer (the host) would read EOF before any death signal, and an EOF while a permission prompt
waits makes an agent record a refusal nobody gave (measured with Claude Code: the turn then ends
unseen). Hence two measures, both applied by :func:`spawn_agent_process`:

- ``PR_SET_PDEATHSIG=SIGKILL`` in the child (:func:`die_with_parent`, a ``preexec_fn``; it is bound
  to the thread that forks, which for asyncio's subprocesses is the event loop's thread, the host's
  main thread): the agent dies the moment the host does;
- the agent holds an inherited duplicate of the *write* end of its own stdin pipe (``pass_fds``),
  so its stdin never reaches EOF while it lives: the SIGKILL always lands first.

The price: a normal stop cannot rely on EOF either; the caller stops the agent with SIGTERM, then
SIGKILL, and reaps it. Only Linux has ``prctl``; elsewhere the agent does not die with the host
(logged once). Lean: the standard library and :mod:`bridge.sandbox` only.

**The sandbox.** Given a :class:`~bridge.sandbox.SandboxPolicy`, the agent's argv runs under
bubblewrap (:func:`~bridge.sandbox.bwrap_argv`) with a private temporary directory (``TMPDIR``,
0700 under the host's temp dir, removed once the process object is gone or the host exits).
The host's child is then bwrap: it carries the death signal, and its ``--die-with-parent``
passes the host's death on to the sandbox, whose pid namespace dies with its first process.
bwrap does not forward signals, so :func:`signal_agent` sends a stop signal to the agent itself
(found through ``/proc/<bwrap>/task/<bwrap>/children``: bwrap, its init in the sandbox, the
agent); SIGKILL goes to bwrap, which ends the whole sandbox. The agent's exit status comes back
as bwrap's (a death by signal N as ``128 + N``): :func:`exit_status` gives the usual form.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import shutil
import signal
import sys
import tempfile
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from bridge.sandbox import SandboxPolicy, bwrap_argv

__all__ = [
    "agent_pid",
    "confine",
    "die_with_parent",
    "exit_status",
    "is_sandboxed",
    "release_tmp",
    "signal_agent",
    "spawn_agent_process",
    "spawn_with_own_stdin",
]

logger = logging.getLogger(__name__)

_PR_SET_PDEATHSIG: Final = 1

_libc: ctypes.CDLL | None = None
if sys.platform == "linux":
    try:
        _libc = ctypes.CDLL(None, use_errno=True)  # loaded here: nothing may load after fork
    except OSError:  # pragma: no cover - a Linux without a C library
        _libc = None


def die_with_parent(parent: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child die by SIGKILL when `parent` (this thread) does."""
    libc = _libc
    if libc is None:
        logger.warning("! no prctl here: an agent process will outlive its session host")
        return None

    def preexec() -> None:  # runs in the child, between fork and exec
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


_sandboxed: weakref.WeakSet[asyncio.subprocess.Process] = weakref.WeakSet()
"""The processes started under bubblewrap (the key of :func:`signal_agent`'s choice)."""


def confine(
    argv: Sequence[str], env: Mapping[str, str], sandbox: SandboxPolicy | None
) -> tuple[list[str], dict[str, str], str | None]:
    """`argv` and `env` as spawned under `sandbox` (unchanged without one), and the private
    directory made for it (the caller removes it: :func:`release_tmp`): its ``tmp`` is the
    agent's ``TMPDIR``, its ``empty`` the file mounted over hidden files.

    Raises:
        OSError: the temporary directory cannot be made.
    """
    if sandbox is None:
        return list(argv), dict(env), None
    base = tempfile.mkdtemp(prefix="codedeck-agent-")  # 0700: the agent's TMPDIR and the
    tmp, empty = os.path.join(base, "tmp"), os.path.join(base, "empty")  # file over hidden ones
    try:
        os.mkdir(tmp, 0o700)
        with open(empty, "x"):
            pass
        os.chmod(empty, 0o444)
    except BaseException:
        release_tmp(base)
        raise
    return bwrap_argv(sandbox, argv, tmp=tmp, empty_file=empty), {**env, "TMPDIR": tmp}, base


def release_tmp(tmp: str | None) -> None:
    """Remove a private temporary directory of :func:`confine` (nothing when None)."""
    if tmp is not None:
        shutil.rmtree(tmp, ignore_errors=True)


def is_sandboxed(process: asyncio.subprocess.Process) -> bool:
    """Whether `process` is a bubblewrap sandbox around an agent."""
    return process in _sandboxed


def agent_pid(sandbox_pid: int) -> int | None:
    """The agent's pid (in the host's namespace) inside the sandbox bwrap `sandbox_pid` runs:
    bwrap's child is the sandbox's init, whose first child is the agent. None when gone."""
    pid = sandbox_pid
    for _ in range(2):
        try:
            with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as listing:
                children = listing.read().split()
        except OSError:
            return None
        if not children:
            return None
        pid = int(children[0])
    return pid


def signal_agent(process: asyncio.subprocess.Process, signum: int) -> None:
    """Send `signum` to the agent of `process` unless it was reaped already.

    A sandboxed agent gets it itself (bwrap would die of it and SIGKILL the agent); SIGKILL, or
    a sandbox whose agent is not found, goes to bwrap, which ends the whole sandbox.
    """
    if process.returncode is not None:
        return
    target = None
    if signum != signal.SIGKILL and is_sandboxed(process):
        target = agent_pid(process.pid)
    try:
        if target is not None:
            os.kill(target, signum)
        else:
            process.send_signal(signum)
    except ProcessLookupError:
        pass


def exit_status(process: asyncio.subprocess.Process) -> int | None:
    """`process`'s return code, a sandboxed agent's death by signal N given as ``-N``."""
    code = process.returncode
    if code is not None and code > 128 and is_sandboxed(process):
        return 128 - code
    return code


async def spawn_with_own_stdin(
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: str,
    *,
    limit: int,
    stderr: int | None,
    sandbox: SandboxPolicy | None = None,
) -> tuple[asyncio.subprocess.Process, int]:
    """Start an agent as the module docstring says; the process and the write end of its stdin
    (a file descriptor the caller now owns). Its stdout is ``process.stdout``.

    Args:
        sandbox: run it under this policy (None: unconfined).

    Raises:
        OSError: it cannot be started (missing, not executable, bad cwd, no temp dir).
        subprocess.SubprocessError: the child could not arm its death signal.
    """
    argv, env, tmp = confine(argv, env, sandbox)
    read_end, write_end = os.pipe()
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=read_end,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            cwd=cwd,
            env=env,
            pass_fds=(write_end,),
            preexec_fn=die_with_parent(os.getpid()),
            limit=limit,
        )
    except BaseException:
        os.close(write_end)
        release_tmp(tmp)
        raise
    finally:
        os.close(read_end)
    if tmp is not None:
        _sandboxed.add(process)
        weakref.finalize(process, release_tmp, tmp)  # also at the host's exit
    return process, write_end


async def spawn_agent_process(
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: str,
    *,
    limit: int,
    stderr: int | None = None,
    sandbox: SandboxPolicy | None = None,
) -> tuple[asyncio.subprocess.Process, asyncio.StreamWriter]:
    """:func:`spawn_with_own_stdin`, with the stdin write end as an asyncio stream writer.

    Args:
        limit: the longest stdout line read (bytes).
        stderr: where its stderr goes (None: the host's own, which is the host's log file).
        sandbox: run it under this policy (None: unconfined).

    Raises:
        OSError: it cannot be started (missing, not executable, bad cwd).
        subprocess.SubprocessError: the child could not arm its death signal.
    """
    loop = asyncio.get_running_loop()
    process, write_end = await spawn_with_own_stdin(
        argv, env, cwd, limit=limit, stderr=stderr, sandbox=sandbox
    )
    pipe = os.fdopen(write_end, "wb", buffering=0)
    try:
        transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.streams.FlowControlMixin(loop=loop), pipe
        )
    except BaseException:
        pipe.close()
        process.kill()
        await process.wait()
        raise
    return process, asyncio.StreamWriter(transport, protocol, None, loop)
