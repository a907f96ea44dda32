"""Session hosts as ``status`` and ``sessions close`` see them: read from files, never asked.

A session's host is a process of its own (``python -m bridge.host``) that outlives the daemon;
its ``<home>/hosts/<key>/host.json`` names its pid and the pid's start time, and
:func:`bridge.host.layout.host_alive` checks both and the command line against ``/proc``. So
these reads are cheap (one small file and two ``/proc`` reads per host), need no daemon and no
socket, and tell a live host from a dead one whose pid was reused.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from bridge.control.methods import HostStatus
from bridge.host.layout import HostInfo, host_alive, host_paths, list_host_dirs, read_info

__all__ = ["live_host_pids", "running_hosts", "session_host"]


def session_host(home: Path, session_id: str) -> HostStatus:
    """Whether the host of `session_id` under `home` is alive, and its pid when it is."""
    info = read_info(host_paths(home, session_id))
    if info is None or not host_alive(info):
        return {"alive": False, "pid": None}
    return {"alive": True, "pid": info.pid}


def running_hosts(home: Path) -> list[HostInfo]:
    """Every live host under `home`, also those of sessions the store no longer has."""
    infos = (read_info(paths) for paths in list_host_dirs(home))
    return [info for info in infos if info is not None and host_alive(info)]


def live_host_pids(home: Path, session_ids: Iterable[str]) -> dict[str, int]:
    """Session id → pid, for those of `session_ids` whose host is still alive."""
    alive: dict[str, int] = {}
    for session_id in session_ids:
        host = session_host(home, session_id)
        if host["pid"] is not None:
            alive[session_id] = host["pid"]
    return alive
