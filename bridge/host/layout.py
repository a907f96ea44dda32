"""Where a session host keeps its files, and how to tell that a host is alive.

Every session has one directory, ``<home>/hosts/<key>/`` (0700), whoever runs it now::

    journal        the events its agent produced (bridge.host.journal), 0600
    journal.lock   held with flock by the one host using the journal
    sock           the host's unix socket, 0600 (the daemon connects here)
    host.json      who runs it: session id, agent, pid and the pid's start time, 0600
    host.log       the host's own log (its stderr), 0600, cut back at each start

``<key>`` is a hash of the session id, not the id itself: the id comes from a phone, and a unix
socket path must stay under 108 bytes whatever the home's length.

A pid alone does not identify a host (pids are reused, also across reboots), so ``host.json``
records the pid's start time (``/proc/<pid>/stat`` field 22) and :func:`host_alive` checks both,
plus the command line; the daemon signals a host only when all three match.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path
from typing import Final

import orjson

from bridge.records import record

__all__ = [
    "HOSTS_DIR",
    "HOST_MODULE",
    "HostInfo",
    "HostPaths",
    "host_alive",
    "host_key",
    "host_paths",
    "list_host_dirs",
    "process_start_time",
    "read_info",
    "write_info",
]

HOSTS_DIR: Final = "hosts"
HOST_MODULE: Final = "bridge.host"
"""What a host process runs (``python -m bridge.host``), checked in its command line."""
_KEY_CHARS: Final = 16


def host_key(session_id: str) -> str:
    """The directory name of a session's host: 16 hex digits of SHA-256 of the id."""
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()[:_KEY_CHARS]


@record
class HostPaths:
    """The files of one session's host (see the module docstring)."""

    root: Path

    @property
    def journal(self) -> Path:
        return self.root / "journal"

    @property
    def socket(self) -> Path:
        return self.root / "sock"

    @property
    def info(self) -> Path:
        return self.root / "host.json"

    @property
    def log(self) -> Path:
        return self.root / "host.log"


def host_paths(home: Path, session_id: str) -> HostPaths:
    """The paths of `session_id`'s host under `home` (nothing is created)."""
    return HostPaths(Path(home) / HOSTS_DIR / host_key(session_id))


def list_host_dirs(home: Path) -> list[HostPaths]:
    """Every host directory under `home` (those of running, finished and dead hosts)."""
    root = Path(home) / HOSTS_DIR
    try:
        names = sorted(p for p in root.iterdir() if p.is_dir() and len(p.name) == _KEY_CHARS)
    except FileNotFoundError:
        return []
    return [HostPaths(p) for p in names]


@record
class HostInfo:
    """What ``host.json`` says about the process that runs (or ran) a session's host."""

    session_id: str
    agent: str
    pid: int
    start_time: int
    """The pid's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22)."""


def write_info(paths: HostPaths, info: HostInfo) -> None:
    """Write ``host.json`` atomically (0600)."""
    data = orjson.dumps(
        {
            "session_id": info.session_id,
            "agent": info.agent,
            "pid": info.pid,
            "start_time": info.start_time,
        }
    )
    temporary = paths.info.with_name(".host.json.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(temporary, paths.info)


def read_info(paths: HostPaths) -> HostInfo | None:
    """``host.json``, or None when it is missing or unreadable."""
    try:
        raw = orjson.loads(paths.info.read_bytes())
        return HostInfo(
            str(raw["session_id"]), str(raw["agent"]), int(raw["pid"]), int(raw["start_time"])
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def process_start_time(pid: int) -> int | None:
    """The start time of `pid` in clock ticks since boot, or None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[-1].split()
        return int(fields[19])  # field 22 of the whole line; 20 after "pid (comm)" and state
    except (OSError, ValueError, IndexError):
        return None


def host_alive(info: HostInfo) -> bool:
    """Whether the process `info` names still runs and is that host (pid, start time, command)."""
    if process_start_time(info.pid) != info.start_time:
        return False
    with contextlib.suppress(OSError), open(f"/proc/{info.pid}/cmdline", "rb") as cmdline:
        return HOST_MODULE.encode() in cmdline.read().split(b"\0")
    return False
