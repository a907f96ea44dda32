"""One daemon per home: an OS lock on `<home>/bridge.lock`.

The reference bridge used an exclusive-create pid file and reclaimed it when the pid looked dead,
which races (pid reuse, two starters reclaiming at once). Like the Rust bridge, we take an OS
lock instead: `flock(LOCK_EX | LOCK_NB)` on the file, held for the life of the process. The
kernel drops it when the process dies, however it dies (SIGKILL included), so there is no stale
lock to clean up. The pid is written into the file only to tell the *next* opener who holds it.

Details that matter:

- The file descriptor is close-on-exec, so agent subprocesses (the Claude Code CLI) that outlive
  a killed daemon do not keep its lock.
- The file is never unlinked: unlinking a lock file lets two processes lock two different inodes.
- `read_lock_holder` (for `status`) probes with `LOCK_SH | LOCK_NB` on a separate descriptor and
  releases it at once; it never takes the lock for longer than that probe. A daemon starting
  during that instant would see the lock busy, so `acquire_lock` retries for a short moment
  before it concludes that another bridge runs.
- `flock` locks belong to the open file description, so a process probing its own lock sees it
  held (and closing the probe does not release the real one, unlike POSIX `fcntl` locks).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final

from store.errors import AlreadyRunning, StoreError
from store.home import FILE_MODE, ensure_home, read_only_reason, resolve_home, unwritable_message

__all__ = ["LOCK_FILENAME", "BridgeLock", "LockHolder", "acquire_lock", "read_lock_holder"]

logger = logging.getLogger(__name__)

LOCK_FILENAME: Final = "bridge.lock"
_ATTEMPTS: Final = 5
_RETRY_DELAY: Final = 0.05
_MAX_PID_BYTES: Final = 32


@dataclass(frozen=True, slots=True)
class LockHolder:
    """Who holds a home's lock.

    Attributes:
        pid: the pid the holder wrote into the lock file, or None when it has not written it
            yet (it is starting) or the file content is not a pid.
    """

    pid: int | None


class BridgeLock:
    """A held home lock. Release it with `release()` or by leaving a `with` block.

    Attributes:
        path: the lock file.
        pid: our pid, as written into the file.
    """

    def __init__(self, path: Path, fd: int, pid: int) -> None:
        self.path = path
        self.pid = pid
        self._fd: int | None = fd

    def __repr__(self) -> str:
        state = "held" if self._fd is not None else "released"
        return f"<BridgeLock {self.path} pid={self.pid} {state}>"

    def __enter__(self) -> BridgeLock:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    @property
    def held(self) -> bool:
        """True until `release()`."""
        return self._fd is not None

    def release(self) -> None:
        """Empty the pid, unlock and close. Idempotent."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
        logger.debug("released %s", self.path)


def acquire_lock(home: str | os.PathLike[str]) -> BridgeLock:
    """Take the home's lock for this process (making the home private first).

    Blocks for at most `_ATTEMPTS` × `_RETRY_DELAY`, a quarter of a second (see the module
    docstring on probes).

    Args:
        home: the bridge home.

    Returns:
        The held lock; keep a reference to it for as long as the daemon runs.

    Raises:
        AlreadyRunning: another process holds it; the message names its pid.
        StoreError: the lock file cannot be opened or locked (permissions, filesystem).
    """
    home_path = ensure_home(home)
    path = home_path / LOCK_FILENAME
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, FILE_MODE)
    except OSError as exc:
        reason = read_only_reason(home_path)
        if reason is not None:
            message = f"cannot create the lock file {path}: " + unwritable_message(
                home_path, reason
            )
            raise StoreError(message, path=path) from exc
        raise StoreError(
            f"cannot open the lock file {path}: {exc.strerror}. It must be a file of yours "
            f"(see `ls -l {path}`); move it away and the bridge makes a new one",
            path=path,
        ) from exc
    try:
        for attempt in range(_ATTEMPTS):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if attempt == _ATTEMPTS - 1:
                    pid = _read_pid(fd)
                    raise AlreadyRunning(
                        f"another codedeck-bridge (pid {pid if pid is not None else 'unknown'}) "
                        f"is using {home_path}; stop it first, or use --home for a second bridge",
                        path=path,
                        pid=pid,
                    ) from None
                time.sleep(_RETRY_DELAY)
            except OSError as exc:
                raise StoreError(f"cannot lock {path}: {exc.strerror}", path=path) from exc
        pid = os.getpid()
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{pid}\n".encode(), 0)
    except BaseException:
        os.close(fd)
        raise
    logger.debug("locked %s (pid %d)", path, pid)
    return BridgeLock(path, fd, pid)


def read_lock_holder(home: str | os.PathLike[str]) -> LockHolder | None:
    """Who holds the home's lock, or None when no daemon runs there. Takes no lasting lock.

    Args:
        home: the bridge home (not created if missing).

    Raises:
        StoreError: the lock file exists but cannot be opened (permissions).
    """
    path = resolve_home(home) / LOCK_FILENAME
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(f"cannot read the lock file {path}: {exc.strerror}", path=path) from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return LockHolder(pid=_read_pid(fd))
        except OSError as exc:
            raise StoreError(f"cannot probe {path}: {exc.strerror}", path=path) from exc
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _read_pid(fd: int) -> int | None:
    """The pid in the lock file, or None when it is empty or not a pid."""
    try:
        raw = os.pread(fd, _MAX_PID_BYTES, 0)
    except OSError:
        return None
    text = raw.decode("ascii", errors="replace").strip()
    if not text.isdigit() or not text.isascii():
        return None
    pid = int(text)
    return pid if pid > 0 else None
