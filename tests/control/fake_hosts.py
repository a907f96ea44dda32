"""Processes that pass for session hosts: what ``status`` and ``sessions close`` look for.

:func:`bridge.host.layout.host_alive` trusts a host when ``host.json``'s pid runs, started at the
recorded time, with ``bridge.host`` as a word of its command line. A sleeping Python whose last
argument is ``bridge.host`` is all that takes; SIGTERM ends it, as it ends a real host.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from pathlib import Path

from bridge.host.layout import (
    HOST_MODULE,
    HostInfo,
    host_alive,
    host_paths,
    process_start_time,
    write_info,
)

__all__ = ["FakeHosts"]

_SLEEP = "import time; time.sleep(300)"


class FakeHosts:
    """Fake hosts under one home; `close()` kills whatever is left."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, session_id: str, *, info: bool = True) -> int:
        """A live "host" of `session_id` (with its ``host.json`` unless `info` is False); its pid."""
        paths = host_paths(self.home, session_id)
        paths.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        proc = subprocess.Popen([sys.executable, "-c", _SLEEP, HOST_MODULE])
        self.procs[session_id] = proc
        deadline = time.monotonic() + 10
        while True:  # until the child has exec'd (before, its command line is still ours)
            started = process_start_time(proc.pid)
            host = HostInfo(session_id, "scripted", proc.pid, started or 0)
            if started is not None and host_alive(host):
                break
            assert time.monotonic() < deadline, "the fake host did not start"
            time.sleep(0.01)
        if info:
            write_info(paths, host)
        paths.log.write_text("a host log\n")
        return proc.pid

    def stop(self, session_id: str) -> None:
        """The host exits (as when a daemon closed it), its directory removed."""
        proc = self.procs[session_id]
        proc.terminate()
        proc.wait(10)
        paths = host_paths(self.home, session_id)
        for file in paths.root.iterdir():
            file.unlink()
        paths.root.rmdir()

    def alive(self, session_id: str) -> bool:
        return self.procs[session_id].poll() is None

    def reap(self) -> None:
        """Collect the exit status of hosts something else stopped (so they stop being zombies)."""
        for proc in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(0.01)

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
