"""The recording ACP client (answers by option kind, holds asks) and the /proc descendant walk."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from tests.support.acp_recorder import descendants


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")
def test_descendants_finds_grandchildren() -> None:
    shell = subprocess.Popen(["sh", "-c", "sleep 30 & wait"])
    try:
        found: dict[int, str] = {}
        for _ in range(100):  # until the shell has started its sleep (at most 5 s)
            found = descendants(os.getpid())
            if len(descendants(shell.pid)) >= 1:
                break
            time.sleep(0.05)
        assert shell.pid in found
        (sleep,) = descendants(shell.pid)
        assert sleep in descendants(os.getpid())
    finally:
        for pid in descendants(shell.pid):
            os.kill(pid, 9)
        shell.kill()
        shell.wait()
