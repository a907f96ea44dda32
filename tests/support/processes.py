"""Whether a test's process is still running, from ``/proc`` (Linux).

A killed child stays a zombie until its parent (or a subreaper) reaps it, and ``os.kill(pid, 0)``
succeeds on a zombie; a zombie runs nothing, so it counts as gone here.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

__all__ = ["alive", "gone"]


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def gone(pid: int, within: float = 5.0, poll: float = 0.02) -> bool:
    """Whether `pid` stops running within `within` s."""
    deadline = time.monotonic() + within
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(poll)
    return True
