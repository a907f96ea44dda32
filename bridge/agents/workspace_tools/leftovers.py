"""Commands a killed session host left running: recorded while they run, killed afterwards.

``run_command`` runs its shell in a process group of its own, and the shell dies with the host
(``PR_SET_PDEATHSIG``). What the shell started does not: a ``kill -9`` of the host would leave a
test server or a ``sleep 600`` running with no one to end it. So each command's group is
recorded as a file in the session's host directory (``<host dir>/commands/<pgid>``, holding the
leader's start time) *before* the shell may run the command (the record is written while the
shell waits at its gate) and removed when the command ends; whoever finds a host dead — the next
host of the session when it starts, the daemon when it removes a dead host's files — calls
:func:`reap`, which kills what is left of each recorded group.

A group id is a pid, and pids are reused. A group is killed only if its processes are in the
session the shell created (``sid == pgid``) and none of them started before the recorded shell
did: a later, unrelated group with the same id would need the pid to wrap around and be handed
out again while our record was kept — and even then its processes started later, so the check
stops at the strongest test ``/proc`` allows without the leader.

Linux only (``/proc``); elsewhere nothing is recorded and nothing is reaped. Standard library
only: a session host imports this.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
from pathlib import Path
from typing import Final

__all__ = ["COMMANDS_DIR", "forget", "reap", "reap_host", "record"]

COMMANDS_DIR: Final = "commands"
"""The directory, under a session's host directory, of the running commands' records."""
_PROC: Final = Path("/proc")


def _stat(pid: int) -> tuple[int, int, int] | None:
    """(process group, session, start time in clock ticks) of a live `pid`, or None."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    try:
        return int(fields[2]), int(fields[3]), int(fields[19])
    except (IndexError, ValueError):
        return None


def record(directory: Path | None, pgid: int) -> Path | None:
    """Note a command's group before its leader may start anything (``run_command`` holds the
    shell at a gate until this returns); the path to :func:`forget` when it ends.

    None: nothing is to be kept — no directory, or no ``/proc`` to reap with. A record that is
    wanted but fails raises instead of returning None, so the caller can refuse the command: a
    silent None here once meant a command that nobody would reap after a host's ``kill -9``.
    No fsync: the record must survive the host's death, not the machine's (which takes the
    processes too).

    Raises:
        OSError: the record could not be written; ProcessLookupError: the leader is gone.
    """
    if directory is None or not (_PROC / "self" / "stat").exists():
        return None
    stat = _stat(pgid)
    if stat is None:
        raise ProcessLookupError(errno.ESRCH, f"no process {pgid} to record")
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = directory / str(pgid)
    path.write_text(str(stat[2]))
    return path


def forget(path: Path | None) -> None:
    """The command ended and its group was killed: drop its record."""
    if path is not None:
        with contextlib.suppress(OSError):
            path.unlink()


def _members(pgid: int) -> list[tuple[int, int, int]]:
    """(pid, session, start) of every live process in group `pgid`."""
    members = []
    with contextlib.suppress(OSError):
        for entry in _PROC.iterdir():
            if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
                group, session, start = stat
                if group == pgid:
                    members.append((int(entry.name), session, start))
    return members


def reap(directory: Path) -> int:
    """Kill what is left of every recorded group (see the module docstring); how many groups
    were killed. The records are removed."""
    killed = 0
    try:
        records = list(directory.iterdir())
    except OSError:
        return 0
    for path in records:
        try:
            pgid, started = int(path.name), int(path.read_text())
        except (OSError, ValueError):
            forget(path)
            continue
        members = _members(pgid)
        if members and all(session == pgid and start >= started for _, session, start in members):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
                killed += 1
        forget(path)
    return killed


def reap_host(host_dir: Path) -> int:
    """:func:`reap` the commands a session's host directory records (before it is removed)."""
    return reap(host_dir / COMMANDS_DIR)
