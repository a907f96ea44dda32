"""The home lock: one holder, its pid readable, released by the kernel when the holder dies."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.errors import AlreadyRunning
from store.lock import LOCK_FILENAME, LockHolder, acquire_lock, read_lock_holder

REPO = Path(__file__).resolve().parents[3]


# Takes the lock, optionally starts a long-lived grandchild (as an agent CLI would be), reports
# "<pid> [<grandchild pid>]", then holds the lock until killed or until stdin closes.
HOLDER = """
import subprocess, sys
from store.lock import acquire_lock
lock = acquire_lock(sys.argv[1])
line = str(lock.pid)
if len(sys.argv) > 2:
    child = subprocess.Popen(["sleep", "60"], close_fds=False)
    line += f" {child.pid}"
print(line, flush=True)
sys.stdin.read()
"""


class Holder:
    """A separate process holding a home's lock."""

    def __init__(self, home: Path, *, grandchild: bool = False) -> None:
        args = [sys.executable, "-c", HOLDER, str(home)] + (["grandchild"] if grandchild else [])
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        assert self.proc.stdout is not None
        fields = self.proc.stdout.readline().split()
        assert fields, "the holder process exited before taking the lock"
        self.pid = int(fields[0])
        self.grandchild = int(fields[1]) if len(fields) > 1 else None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def cleanup(self) -> None:
        self.kill()
        if self.grandchild is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.grandchild, signal.SIGKILL)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    started: list[Holder] = []
    yield started
    for holder in started:
        holder.cleanup()


def test_second_process_gets_already_running_with_the_pid(
    home: Path, holders: list[Holder]
) -> None:
    holder = Holder(home)
    holders.append(holder)
    assert holder.pid == holder.proc.pid
    with pytest.raises(AlreadyRunning) as info:
        acquire_lock(home)
    assert str(info.value) == (
        f"another codedeck-bridge (pid {holder.pid}) is using {home}; stop it first, "
        "or use --home for a second bridge"
    )
    assert info.value.pid == holder.pid
    assert info.value.path == home / LOCK_FILENAME
    assert read_lock_holder(home) == LockHolder(pid=holder.pid)
    # Probing did not disturb the holder's lock.
    with pytest.raises(AlreadyRunning):
        acquire_lock(home)


def test_lock_is_released_when_the_holder_is_killed(home: Path, holders: list[Holder]) -> None:
    holder = Holder(home)
    holders.append(holder)
    holder.kill()
    # The stale pid is still in the file, but nobody holds the lock.
    assert (home / LOCK_FILENAME).read_text() == f"{holder.pid}\n"
    assert read_lock_holder(home) is None
    with acquire_lock(home) as lock:
        assert (home / LOCK_FILENAME).read_text() == f"{os.getpid()}\n"
        assert lock.held


def test_subprocesses_of_a_killed_holder_do_not_keep_the_lock(
    home: Path, holders: list[Holder]
) -> None:
    holder = Holder(home, grandchild=True)
    holders.append(holder)
    assert holder.grandchild is not None
    holder.kill()
    os.kill(holder.grandchild, 0)  # still alive
    with acquire_lock(home) as lock:
        assert lock.held
