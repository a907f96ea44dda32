"""The processes of a run, found through ``/proc``: session hosts, their CLIs, leftovers.

A session host is found by its ``host.json`` (:func:`bridge.host.layout.read_info`, checked
alive by pid, start time and command line); its Claude Code CLI is a direct child whose command
line starts with a ``claude`` executable, or that child's inside the bwrap sandbox around it. Leftovers are found by the environment every process
of a run inherits from its daemon: ``CLAUDE_CONFIG_DIR`` names the run's own config directory,
so no process of another run (or of the user) is ever taken for one of ours.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from bridge.host.layout import host_alive, host_paths, read_info

__all__ = [
    "alive",
    "children",
    "cli_of",
    "command_line",
    "host_of",
    "kill",
    "processes_with_env",
]


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].decode().split()
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def command_line(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def children(parent: int) -> list[int]:
    """The live direct children of `parent`."""
    found = []
    for pid in _pids():
        fields = _stat_fields(pid)
        if fields is not None and fields[1] == str(parent) and fields[0] != "Z":
            found.append(pid)
    return found


def host_of(home: Path, session_id: str) -> int | None:
    """The pid of the live session host of `session_id`, or None."""
    info = read_info(host_paths(home, session_id))
    if info is None or not host_alive(info):
        return None
    return info.pid


def cli_of(host_pid: int) -> int | None:
    """The pid of the Claude Code CLI a host runs, or None.

    A sandboxed CLI is the host's grandchild's child (host → bwrap → the sandbox's init → the
    CLI): killing it is the agent's death the host sees, as for an unconfined one.
    """
    queue = children(host_pid)
    for _ in range(3):
        below: list[int] = []
        for pid in queue:
            argv = command_line(pid)
            if argv and Path(argv[0]).name == "claude":
                return pid
            if argv and Path(argv[0]).name == "bwrap":
                below.extend(children(pid))
        queue = below
    return None


def processes_with_env(name: str, value: str) -> list[int]:
    """Live processes of ours whose environment has ``name=value`` (this process excluded)."""
    needle = f"{name}={value}".encode()
    found = []
    for pid in _pids():
        if pid == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0") and alive(pid):
            found.append(pid)
    return found


def kill(pid: int) -> bool:
    """``kill -9`` one process by its id; False when it was already gone."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True
