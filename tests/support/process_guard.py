"""The unit tier starts no process: a test outside the process tiers that starts one fails.

``make unit`` is the loop to keep while changing code, and it stays under a minute only while
every test in it stays in this interpreter. A process (an agent, the CLI, git, bwrap, a fresh
interpreter) costs tens of milliseconds to seconds and brings timing of its own: such a test
belongs in ``tests/integration/``. The guard wraps the calls every way of starting a program goes
through (``subprocess`` and asyncio's subprocesses, ``os.fork``/``forkpty``, ``os.posix_spawn``)
once per run, and is armed only while a unit-tier test runs (its setup, call and teardown), so a
module that probes a tool when it is imported, and every other tier, are left alone.
"""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Callable
from typing import Any

__all__ = ["ProcessInUnitTier", "arm", "disarm", "install", "take_attempts"]

_armed: list[str] = []
_attempts: list[str] = []
_installed: list[bool] = []


class ProcessInUnitTier(RuntimeError):
    """A unit-tier test tried to start a program; raised in place of starting it."""


def _guarded(name: str, real: Callable[..., Any], argv_at: int) -> Callable[..., Any]:
    @functools.wraps(real)
    def start(*args: Any, **kwargs: Any) -> Any:
        if not _armed:
            return real(*args, **kwargs)
        what = f"{name} {args[argv_at]!r}"[:200] if len(args) > argv_at else name
        _attempts.append(what)
        raise ProcessInUnitTier(
            f"{_armed[0]} starts a process ({what}): the unit tier stays in this interpreter; "
            "move the test into tests/integration/ (the same path below it)"
        )

    return start


def install() -> None:
    """Wrap the process-starting calls (once; they behave as before while disarmed)."""
    if _installed:
        return
    _installed.append(True)
    # Popen._execute_child(self, args, ...): every subprocess, asyncio's included, goes through it.
    popen: Any = subprocess.Popen
    popen._execute_child = _guarded("subprocess", popen._execute_child, 1)
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp"):
        real = getattr(os, name, None)
        if real is not None:
            setattr(os, name, _guarded(f"os.{name}", real, 0))


def arm(nodeid: str) -> None:
    """From now on, starting a process fails and is recorded against ``nodeid``."""
    _armed[:] = [nodeid]
    _attempts.clear()


def disarm() -> None:
    """Processes may start again (the other tiers, collection, the session's end)."""
    _armed.clear()
    _attempts.clear()


def take_attempts() -> list[str]:
    """The starts refused since the last call (a test may have caught the error and gone on)."""
    taken = list(_attempts)
    _attempts.clear()
    return taken
