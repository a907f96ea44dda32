"""The home lock: one holder, its pid readable, released by the kernel when the holder dies."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.errors import AlreadyRunning, StoreError
from store.lock import LOCK_FILENAME, BridgeLock, LockHolder, acquire_lock, read_lock_holder

REPO = Path(__file__).resolve().parents[2]

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


def test_acquire_writes_our_pid_and_release_clears_it(home: Path) -> None:
    lock = acquire_lock(home)
    path = home / LOCK_FILENAME
    assert isinstance(lock, BridgeLock)
    assert lock.held and lock.path == path and lock.pid == os.getpid()
    assert path.read_text() == f"{os.getpid()}\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert read_lock_holder(home) == LockHolder(pid=os.getpid())
    assert repr(lock) == f"<BridgeLock {path} pid={os.getpid()} held>"
    lock.release()
    lock.release()
    assert not lock.held
    assert path.exists() and path.read_text() == ""  # never unlinked
    assert read_lock_holder(home) is None
    with acquire_lock(home) as again:
        assert again.held
    assert not again.held


def test_second_acquire_in_the_same_process_is_refused(home: Path) -> None:
    with acquire_lock(home):
        with pytest.raises(AlreadyRunning) as info:
            acquire_lock(home)
        assert info.value.pid == os.getpid()


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


def test_acquire_retries_past_a_status_probe(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `status` probe holds LOCK_SH for an instant; a starting daemon must not give up on it."""
    acquire_lock(home).release()
    probe = os.open(home / LOCK_FILENAME, os.O_RDONLY)
    fcntl.flock(probe, fcntl.LOCK_SH)
    sleeps: list[float] = []

    def probe_ends(seconds: float) -> None:
        sleeps.append(seconds)
        fcntl.flock(probe, fcntl.LOCK_UN)

    monkeypatch.setattr(time, "sleep", probe_ends)
    try:
        with acquire_lock(home) as lock:
            assert lock.held
    finally:
        os.close(probe)
    assert len(sleeps) == 1


def test_read_lock_holder_without_a_home(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    assert read_lock_holder(missing) is None
    assert not missing.exists()  # reading creates nothing


@pytest.mark.parametrize("content", ["", "garbage\n", "-5\n", "0\n", "١٢٣\n"], ids=repr)
def test_unreadable_pid_is_reported_as_unknown(home: Path, content: str) -> None:
    with acquire_lock(home) as lock:
        (home / LOCK_FILENAME).write_text(content)
        assert read_lock_holder(home) == LockHolder(pid=None)
        with pytest.raises(AlreadyRunning) as info:
            acquire_lock(home)
        assert info.value.pid is None
        assert str(info.value).startswith("another codedeck-bridge (pid unknown) is using ")
        assert lock.held


def test_lock_file_that_cannot_be_opened(home: Path) -> None:
    home.mkdir(mode=0o700)
    (home / LOCK_FILENAME).mkdir()
    with pytest.raises(StoreError, match=r"cannot open the lock file .*bridge\.lock: "):
        acquire_lock(home)
    (home / LOCK_FILENAME).rmdir()
    (home / LOCK_FILENAME).symlink_to(home / "elsewhere")
    with pytest.raises(StoreError, match=r"cannot read the lock file .*bridge\.lock: "):
        read_lock_holder(home)


def test_a_lock_file_that_cannot_be_opened_says_what_to_do(tmp_path: Path) -> None:
    home = tmp_path / "h"
    (home / LOCK_FILENAME).mkdir(parents=True)
    with pytest.raises(StoreError) as info:
        acquire_lock(home)
    path = home / LOCK_FILENAME
    assert str(info.value) == (
        f"cannot open the lock file {path}: Is a directory. It must be a file of yours "
        f"(see `ls -l {path}`); move it away and the bridge makes a new one"
    )


def test_a_lock_file_on_a_home_gone_read_only_names_the_file_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The home passed ensure_home, then its file system went read-only (a remount under us).
    import store.lock

    home = tmp_path / "h"
    home.mkdir(mode=0o700)
    monkeypatch.setattr(store.lock, "ensure_home", lambda path: Path(path))
    monkeypatch.setattr(store.lock, "read_only_reason", lambda d: "is on a read-only file system")
    real_open = os.open

    def refuse(path: str | os.PathLike[str], flags: int, mode: int = 0o777) -> int:
        if Path(path).parent == home:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(StoreError) as info:
        acquire_lock(home)
    assert str(info.value) == (
        f"cannot create the lock file {home / LOCK_FILENAME}: the bridge home {home} is on a "
        "read-only file system: pass --home with a directory on a writable file system, or "
        "remount that file system read-write"
    )
