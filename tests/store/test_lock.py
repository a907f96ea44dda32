"""The home lock: one holder, its pid readable, a second acquire refused after its retries.

Holders in other processes (and the kernel releasing a dead one): tests/integration/store.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time
from pathlib import Path

import pytest

from store.errors import AlreadyRunning, StoreError
from store.lock import LOCK_FILENAME, BridgeLock, LockHolder, acquire_lock, read_lock_holder


@pytest.fixture
def retries_without_waiting(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """A refused acquire still makes every attempt; the pauses between them are only counted.

    Here the lock's holder is this very process: no pause can let it go, so waiting for real
    would only slow the tier down.
    """
    pauses: list[float] = []
    monkeypatch.setattr(time, "sleep", pauses.append)
    return pauses


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


@pytest.mark.usefixtures("retries_without_waiting")
def test_second_acquire_in_the_same_process_is_refused(home: Path) -> None:
    with acquire_lock(home):
        with pytest.raises(AlreadyRunning) as info:
            acquire_lock(home)
        assert info.value.pid == os.getpid()


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
@pytest.mark.usefixtures("retries_without_waiting")
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
