"""The bridge home directory and the private files in it.

The home (default `~/.codedeck`) holds the bridge's secret key and the phones' credentials, so it
must be readable by its owner only. The rules, chosen once here:

- A missing home is created with mode 0700 (parents with the usual umask, as `mkdir -p` would).
- An existing home that is group/world accessible is **tightened** to 0700 with a WARNING, the
  same way the reference bridge tightens its `config.json` to 0600 when it reads it: refusing to
  start would only teach users to `chmod` by hand, and fixing it silently would hide that the
  directory was exposed (for some time, to someone).
- A home owned by another user is **refused** (`InsecureHome`): we could not trust what is in it,
  and tightening it would take it away from its owner. The same applies to a path that is not a
  directory. A symlink to a directory is followed (people keep state on other disks).
- A home the daemon cannot write to is refused too, naming the cause, because the two causes
  have different fixes: a read-only file system (a ``ro`` mount or bind mount: chmod cannot help,
  only another --home or a remount can) and a directory without write permission for us (chmod
  can). `read_only_reason` tells them apart; the CLI and the doctor use the same words.
- Files that may hold secrets are created with `os.open(..., 0o600)` *before* anything else
  writes to them, then `fchmod`-ed to exactly 0600 (a umask like 0277 would otherwise leave them
  unwritable). Existing files with looser bits are tightened with a WARNING, like the home.

The caller decides where the home is (flag, environment, config); only the default lives here.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from pathlib import Path
from typing import Final

from store.errors import DatabaseUnreadable, InsecureHome

__all__ = [
    "DEFAULT_HOME",
    "FILE_MODE",
    "HOME_MODE",
    "blocking_file",
    "create_private_file",
    "ensure_home",
    "not_a_directory_message",
    "read_only_reason",
    "resolve_home",
    "tighten_file_mode",
    "unwritable_fix",
    "unwritable_message",
]

logger = logging.getLogger(__name__)

DEFAULT_HOME: Final = Path("~/.codedeck")
"""Where the bridge keeps its state when the caller names no other place."""

HOME_MODE: Final = 0o700
FILE_MODE: Final = 0o600


def resolve_home(home: str | os.PathLike[str] | None = None) -> Path:
    """Turn a user-supplied home (or None for the default) into an absolute path.

    `~` is expanded; the path is made absolute without resolving symlinks, so messages show the
    path the user gave.

    Raises:
        InsecureHome: `~` cannot be expanded (no HOME and no passwd entry).
    """
    raw = Path(home) if home is not None else DEFAULT_HOME
    try:
        expanded = raw.expanduser()
    except RuntimeError as exc:
        raise InsecureHome(
            f"cannot find your home directory to expand {raw}: set HOME or pass --home",
            path=raw,
        ) from exc
    return expanded.absolute()


def blocking_file(path: Path) -> Path | None:
    """The first of `path` and its parents (from ``/`` down) that exists but is not a directory.

    A home that is a file, or lies below one (``--home notes.txt/bridge``), fails with ENOTDIR
    deep inside whatever opens it first; naming the file is what lets the user fix it. Symlinks
    are followed, as they are for the home. None when there is no such file (the path, or a
    part of it, may still be missing).
    """
    for candidate in (*reversed(path.parents), path):
        try:
            info = candidate.stat()
        except OSError:
            return None
        if not stat.S_ISDIR(info.st_mode):
            return candidate
    return None


def not_a_directory_message(home: Path, blocker: Path) -> str:
    """What to say when `blocker` (the home, or one of its parents) is not a directory."""
    kind = "a file" if blocker.is_file() else "not a regular file"
    fix = "pass --home with a directory (or move the file away)"
    if blocker == home:
        return f"the bridge home {home} is {kind}, not a directory: {fix}"
    return f"{blocker} is {kind}, not a directory, so it cannot hold the bridge home {home}: {fix}"


def read_only_reason(directory: Path) -> str | None:
    """Why no file can be created in `directory`, or None when one can (or it does not exist).

    ``"is on a read-only file system"`` (a ``ro`` mount; no chmod can change that) or ``"is not
    writable by you (mode 0500)"`` (a chmod can). Checked with the effective ids, as the opens
    that would fail are; a superuser passes the permission test, as the kernel lets them write.
    """
    try:
        if os.statvfs(directory).f_flag & os.ST_RDONLY:
            return "is on a read-only file system"
        info = directory.stat()
    except OSError:
        return None
    effective = os.access in os.supports_effective_ids
    if os.access(directory, os.W_OK | os.X_OK, effective_ids=effective):
        return None
    return f"is not writable by you (mode {stat.S_IMODE(info.st_mode):04o})"


def unwritable_fix(directory: Path, reason: str, *, elsewhere: str = "pass --home with") -> str:
    """What to do about `read_only_reason`'s finding: a fix that can work for that cause.

    `elsewhere` starts the "use another directory" half: ``--home`` for the bridge home, other
    words for a file whose folder comes from another setting.
    """
    if "read-only" in reason:
        return (
            f"{elsewhere} a directory on a writable file system, or remount that file system "
            "read-write"
        )
    try:
        ours = directory.stat().st_uid == os.geteuid()
    except OSError:
        ours = False
    if ours:
        return f"run `chmod u+w {directory}`, or {elsewhere} a writable directory"
    return f"{elsewhere} a directory of yours"


def unwritable_message(
    directory: Path,
    reason: str,
    *,
    what: str = "the bridge home",
    elsewhere: str = "pass --home with",
) -> str:
    """`read_only_reason`'s finding about `directory` as one message, with its fix."""
    return f"{what} {directory} {reason}: {unwritable_fix(directory, reason, elsewhere=elsewhere)}"


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(path.anchor or "/")


def ensure_home(home: str | os.PathLike[str] | None = None) -> Path:
    """Create the home directory, or check and tighten an existing one (see the module rules).

    Args:
        home: the home as the user gave it; None means `DEFAULT_HOME`.

    Returns:
        The absolute home path.

    Raises:
        InsecureHome: the path is not a directory, belongs to another user, cannot be made
            private, or cannot be written (a read-only file system, no write permission).
    """
    path = resolve_home(home)
    try:
        path.mkdir(parents=True, mode=HOME_MODE)
    except FileExistsError:
        pass
    except OSError as exc:
        blocker = blocking_file(path)
        if blocker is not None:
            raise InsecureHome(not_a_directory_message(path, blocker), path=path) from exc
        parent = _nearest_existing(path.parent)
        reason = read_only_reason(parent)
        if reason is not None:
            raise InsecureHome(
                f"cannot create the bridge home {path}: "
                + unwritable_message(parent, reason, what="its folder"),
                path=path,
            ) from exc
        raise InsecureHome(
            f"cannot create the bridge home {path}: {exc.strerror}. "
            "Create it yourself (mkdir -m 700) or pass another --home",
            path=path,
        ) from exc
    else:
        # mkdir applied the umask, which may have removed our own bits (umask 0277): set it.
        os.chmod(path, HOME_MODE)
        logger.info("created bridge home %s", path)
    try:
        info = path.stat()
    except OSError as exc:
        raise InsecureHome(
            f"cannot inspect the bridge home {path}: {exc.strerror}", path=path
        ) from exc
    if not stat.S_ISDIR(info.st_mode):
        raise InsecureHome(not_a_directory_message(path, path), path=path)
    _check_owner(
        path,
        info,
        what="the bridge home",
        fix="pass --home with a folder of yours",
        error=InsecureHome,
    )
    _tighten(path, info, HOME_MODE, what="bridge home", error=InsecureHome)
    reason = read_only_reason(path)
    if reason is not None:
        raise InsecureHome(unwritable_message(path, reason), path=path)
    return path


def create_private_file(path: Path) -> bool:
    """Make sure `path` exists as a regular file of ours with mode 0600, creating it empty if needed.

    Creating it ourselves, before SQLite (or anything else) opens it, is what guarantees that the
    secret-bearing file never exists with umask-derived permissions, not even for a moment.

    Returns:
        True if the file was created now, False if it already existed.

    Raises:
        DatabaseUnreadable: the folder is missing or not writable, the path is a directory or a
            special file, the file belongs to another user or cannot be tightened.
    """
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, FILE_MODE)
    except FileExistsError:
        pass
    except FileNotFoundError as exc:
        raise DatabaseUnreadable(
            f"cannot create {path}: the folder {path.parent} does not exist", path=path
        ) from exc
    except PermissionError as exc:
        raise DatabaseUnreadable(
            f"cannot create {path}: permission denied. The folder {path.parent} must belong "
            "to the user running this program",
            path=path,
        ) from exc
    else:
        try:
            os.fchmod(fd, FILE_MODE)
        finally:
            os.close(fd)
        logger.info("created %s (mode 0600)", path)
        return True
    tighten_file_mode(path)
    return False


def tighten_file_mode(path: Path) -> None:
    """Check an existing private file: a regular file of ours, tightened to 0600 if looser.

    Missing files are ignored (SQLite's `-wal`/`-shm` come and go). A symlink is refused rather
    than followed: nothing of ours creates one, and chmod-ing its target could hit any file.

    Raises:
        DatabaseUnreadable: not a regular file, another user's file, or chmod failed.
    """
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise DatabaseUnreadable(f"cannot inspect {path}: {exc.strerror}", path=path) from exc
    if not stat.S_ISREG(info.st_mode):
        raise DatabaseUnreadable(
            f"{path} is not a regular file (a directory, symlink or device?): move it away "
            "and let it be created",
            path=path,
        )
    _check_owner(
        path,
        info,
        what="the file",
        fix="chown it to yourself or move it away",
        error=DatabaseUnreadable,
    )
    _tighten(path, info, FILE_MODE, what="file", error=DatabaseUnreadable)


def _check_owner(
    path: Path,
    info: os.stat_result,
    *,
    what: str,
    fix: str,
    error: type[InsecureHome] | type[DatabaseUnreadable],
) -> None:
    """Refuse another user's file or folder (see the module rules)."""
    uid = os.geteuid()
    if info.st_uid != uid:
        raise error(
            f"{what} {path} belongs to uid {info.st_uid}, not to you (uid {uid}): {fix}",
            path=path,
        )


def _tighten(
    path: Path,
    info: os.stat_result,
    mode: int,
    *,
    what: str,
    error: type[InsecureHome] | type[DatabaseUnreadable],
) -> None:
    """chmod `path` to `mode` if it grants anything to group or others, with a WARNING."""
    current = stat.S_IMODE(info.st_mode)
    if current & 0o077 == 0:
        return
    try:
        os.chmod(path, mode)
    except OSError as exc:
        if exc.errno == errno.EROFS:
            raise error(
                unwritable_message(path, "is on a read-only file system", what=f"the {what}"),
                path=path,
            ) from exc
        raise error(
            f"the {what} {path} is accessible to other users (mode {current:04o}) and could not "
            f"be tightened to {mode:04o}: {exc.strerror}. Run `chmod {mode:o} {path}`",
            path=path,
        ) from exc
    logger.warning(
        "the %s %s was accessible to other users (mode %04o); tightened it to %04o",
        what,
        path,
        current,
        mode,
    )
