"""Saving an uploaded image under ``<root>/.codedeck/uploads/`` (REFERENCE-BEHAVIOUR §1.13).

The directory is created 0700 and the file 0600: a screenshot can hold anything. Every step is
taken relative to an open directory descriptor with ``O_NOFOLLOW``, so a symlink planted at
``.codedeck``, ``uploads`` or the file name can never redirect the write outside the directory
(the call fails instead), and the file is created with ``O_EXCL`` (an existing file is never
overwritten: a clash gets a ``-1``, ``-2``… suffix). The name must already be safe
(:func:`bridge.engine.sessions.uploads.safe_image_name`); it is checked again here.

Blocking: call :func:`save_image` through ``asyncio.to_thread`` (:func:`save_image_async`).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import stat
from pathlib import Path
from typing import Final

__all__ = [
    "UPLOADS_DIR",
    "ImageSaveError",
    "save_image",
    "save_image_async",
]

UPLOADS_DIR: Final = (".codedeck", "uploads")
DIR_MODE: Final = 0o700
FILE_MODE: Final = 0o600
MAX_NAME_BYTES: Final = 255
_CLASH_ATTEMPTS: Final = 100


class ImageSaveError(Exception):
    """The image could not be saved; the message says where and why."""


def _check_name(name: str) -> None:
    encoded = name.encode("utf-8", "surrogateescape")
    if (
        not name
        or name.startswith(".")
        or "/" in name
        or "\\" in name
        or "\x00" in name
        or len(encoded) > MAX_NAME_BYTES
    ):
        raise ImageSaveError("refusing an unsafe image file name")


def _open_dir(parent_fd: int, name: str, *, label: str) -> int:
    """Open (creating 0700 if needed) the directory `name` under `parent_fd`, never a symlink."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, DIR_MODE, dir_fd=parent_fd)
    try:
        fd = os.open(name, flags, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise ImageSaveError(f"{label} is not a plain directory (a symlink?)") from None
        raise ImageSaveError(f"cannot open {label}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) != DIR_MODE:
            os.fchmod(fd, DIR_MODE)
    except OSError as exc:
        os.close(fd)
        raise ImageSaveError(f"cannot secure {label}: {exc.strerror}") from None
    return fd


def _candidates(name: str) -> list[str]:
    stem, dot, ext = name.rpartition(".")
    if not dot:
        stem, ext = name, ""
    suffix = f".{ext}" if dot else ""
    return [name] + [f"{stem}-{n}{suffix}" for n in range(1, _CLASH_ATTEMPTS)]


def save_image(root: Path, name: str, data: bytes) -> Path:
    """Write `data` to ``<root>/.codedeck/uploads/<name>`` (or a ``-N`` variant) and return it.

    Args:
        root: the workspace root (an existing directory).
        name: a safe file name (one component, no leading dot).
        data: the image bytes.

    Returns:
        The absolute path of the new file.

    Raises:
        ImageSaveError: the name is unsafe, a path component is a symlink or not a directory,
            or the file system refused.
    """
    _check_name(name)
    root = Path(os.path.abspath(root))
    try:
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise ImageSaveError(f"cannot open the workspace root {root}: {exc.strerror}") from None
    fds = [root_fd]
    try:
        for depth, part in enumerate(UPLOADS_DIR):
            label = str(root.joinpath(*UPLOADS_DIR[: depth + 1]))
            fds.append(_open_dir(fds[-1], part, label=label))
        directory = root.joinpath(*UPLOADS_DIR)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        for candidate in _candidates(name):
            try:
                fd = os.open(candidate, flags, FILE_MODE, dir_fd=fds[-1])
            except FileExistsError:
                continue
            except OSError as exc:
                raise ImageSaveError(
                    f"cannot create a file in {directory}: {exc.strerror}"
                ) from None
            try:
                with os.fdopen(fd, "wb") as out:
                    out.write(data)
                    out.flush()
                    os.fsync(out.fileno())
            except OSError as exc:
                with contextlib.suppress(OSError):
                    os.unlink(candidate, dir_fd=fds[-1])
                raise ImageSaveError(
                    f"cannot write {directory / candidate}: {exc.strerror}"
                ) from None
            return directory / candidate
        raise ImageSaveError(f"too many files named like {name} in {directory}")
    finally:
        for fd in reversed(fds):
            os.close(fd)


async def save_image_async(root: Path, name: str, data: bytes) -> Path:
    """:func:`save_image` in a worker thread (the event loop never blocks on the disk)."""
    return await asyncio.to_thread(save_image, root, name, data)
