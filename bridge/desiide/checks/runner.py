"""Running a task's success checks (``success.testsPass`` / ``lintClean``) in the workspace.

The commands come from the project (:mod:`bridge.desiide.checks.commands`); the orchestrator runs them
itself, in order, when the agent's turn ends and the task is ``verifying``, and hands the outcome
to the task book. Each runs in the workspace root in its own process group with stdin closed, so
that a hung test suite is ended whole at the time limit (and at cancel), never left behind. The
output kept for the model is the tail: the end of a failing run is where the failure is.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from bridge.gate import GateContext, Outcome, describe_decision, evaluate
from bridge.records import record

__all__ = ["CHECK_TIMEOUT", "OUTPUT_TAIL", "CheckOutcome", "blocked_check", "run_checks"]

CHECK_TIMEOUT: Final = 600.0
"""The longest one check may run, in seconds."""
OUTPUT_TAIL: Final = 16_384
"""The characters of output kept (the end of it)."""


@record
class CheckOutcome:
    """All checks' outcome: ``ok`` when every command exited 0; ``output`` their tail."""

    ok: bool
    output: str
    seconds: float


def blocked_check(
    root: Path, commands: Sequence[Sequence[str]], secrets: Sequence[str]
) -> str | None:
    """Why the gate's deny list blocks one of `commands` (run in `root`), or None.

    A check is a command line like any other: ``make test`` is fine, a Makefile target the
    project named ``rm -rf ~`` is not, nor one that names a hidden path of `secrets` (the
    bridge home, ``~/.ssh``, …). Floors do not stop a check (the task asked for it); only a deny
    rule does.
    """
    context = GateContext(
        "default", str(root), (str(root),), str(Path.home()), secrets=tuple(secrets)
    )
    for argv in commands:
        decision = evaluate("Bash", {"command": shlex.join(argv)}, context)
        if decision.outcome is Outcome.BLOCK:
            return f"{shlex.join(argv)}: {describe_decision(decision)}"
    return None


async def run_checks(
    root: Path, commands: Sequence[Sequence[str]], *, timeout: float = CHECK_TIMEOUT
) -> CheckOutcome:
    """Run `commands` in `root`, in order, stopping at the first that fails."""
    started = time.monotonic()
    parts: list[str] = []
    ok = True
    for argv in commands:
        code, output = await _run(root, argv, timeout)
        parts.append(f"$ {' '.join(argv)}\n{output}\n(exit {code})")
        if code != 0:
            ok = False
            break
    text = "\n".join(parts)
    return CheckOutcome(ok, text[-OUTPUT_TAIL:], time.monotonic() - started)


async def _run(root: Path, argv: Sequence[str], timeout: float) -> tuple[int, str]:
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=root,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        return 127, f"cannot run {argv[0]}: {exc.strerror or exc}"
    try:
        out, _ = await asyncio.wait_for(process.communicate(), timeout)
    except (TimeoutError, asyncio.CancelledError) as exc:
        _kill_group(process.pid)
        with contextlib.suppress(Exception):
            await process.wait()
        if isinstance(exc, asyncio.CancelledError):
            raise
        return 124, f"(stopped after {timeout:g} s)"
    text = out.decode("utf-8", "replace")
    return (process.returncode if process.returncode is not None else 1), text[-OUTPUT_TAIL:]


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
