"""Commands a killed host left running are recorded while they run and reaped afterwards."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from bridge.agents.workspace_tools import leftovers

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def orphaned_group() -> tuple[subprocess.Popen[bytes], int]:
    """A shell in a session of its own that started a background child, then died (as a
    shell does with its host): the child is left in the group."""
    shell = subprocess.Popen(
        ["/bin/sh", "-c", "sleep 300 & echo started; wait"],
        start_new_session=True,
        stdout=subprocess.PIPE,
    )
    assert shell.stdout is not None and shell.stdout.readline() == b"started\n"
    return shell, shell.pid


def test_a_recorded_group_whose_shell_died_is_reaped(tmp_path: Path) -> None:
    shell, pgid = orphaned_group()
    commands = tmp_path / leftovers.COMMANDS_DIR  # in the session's host directory
    path = leftovers.record(commands, pgid)
    assert path is not None and path.exists()
    shell.kill()  # the host's death takes the shell (PDEATHSIG); its child stays
    shell.wait()
    assert group_alive(pgid)
    assert leftovers.reap_host(tmp_path) == 1
    deadline = time.monotonic() + 5
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not group_alive(pgid)
    assert list(commands.iterdir()) == []


def test_a_group_that_is_not_ours_is_left_alone(tmp_path: Path) -> None:
    shell, pgid = orphaned_group()
    try:
        path = leftovers.record(tmp_path, pgid)
        assert path is not None
        path.write_text(str(int(path.read_text()) + 10**9))  # "our" shell started later
        assert leftovers.reap(tmp_path) == 0
        assert group_alive(pgid)
        assert list(tmp_path.iterdir()) == []  # the stale record is gone
    finally:
        os.killpg(pgid, signal.SIGKILL)
        shell.wait()


def test_a_finished_command_is_forgotten(tmp_path: Path) -> None:
    shell = subprocess.Popen(["/bin/sh", "-c", "sleep 300"], start_new_session=True)
    try:
        path = leftovers.record(tmp_path, shell.pid)
    finally:
        os.killpg(shell.pid, signal.SIGKILL)
        shell.wait()
    leftovers.forget(path)
    assert leftovers.reap(tmp_path) == 0
    assert leftovers.record(None, shell.pid) is None


def test_a_record_that_cannot_be_kept_raises(tmp_path: Path) -> None:
    """Not a silent None: ``run_command`` refuses a command it could not record."""
    blocker = tmp_path / "host"
    blocker.write_text("a file where the host directory should be")
    with pytest.raises(OSError):
        leftovers.record(blocker / leftovers.COMMANDS_DIR, os.getpid())
    shell = subprocess.Popen(["/bin/sh", "-c", "exit 0"], start_new_session=True)
    shell.wait()  # reaped: its pid names no process
    with pytest.raises(ProcessLookupError):
        leftovers.record(tmp_path, shell.pid)
    assert list(tmp_path.iterdir()) == [blocker]
