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
(logged once). Lean: the standard library only.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Final

__all__ = ["die_with_parent", "spawn_agent_process", "spawn_with_own_stdin"]

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


async def spawn_with_own_stdin(
    argv: Sequence[str], env: Mapping[str, str], cwd: str, *, limit: int, stderr: int | None
) -> tuple[asyncio.subprocess.Process, int]:
    """Start an agent as the module docstring says; the process and the write end of its stdin
    (a file descriptor the caller now owns). Its stdout is ``process.stdout``.

    Raises:
        OSError: it cannot be started (missing, not executable, bad cwd).
        subprocess.SubprocessError: the child could not arm its death signal.
    """
    read_end, write_end = os.pipe()
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=read_end,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            cwd=cwd,
            env=dict(env),
            pass_fds=(write_end,),
            preexec_fn=die_with_parent(os.getpid()),
            limit=limit,
        )
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    return process, write_end


async def spawn_agent_process(
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: str,
    *,
    limit: int,
    stderr: int | None = None,
) -> tuple[asyncio.subprocess.Process, asyncio.StreamWriter]:
    """:func:`spawn_with_own_stdin`, with the stdin write end as an asyncio stream writer.

    Args:
        limit: the longest stdout line read (bytes).
        stderr: where its stderr goes (None: the host's own, which is the host's log file).

    Raises:
        OSError: it cannot be started (missing, not executable, bad cwd).
        subprocess.SubprocessError: the child could not arm its death signal.
    """
    loop = asyncio.get_running_loop()
    process, write_end = await spawn_with_own_stdin(argv, env, cwd, limit=limit, stderr=stderr)
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
