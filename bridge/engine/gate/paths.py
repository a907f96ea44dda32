"""Where a path lies: inside the workspace, under a system directory, a device, or unknown.

Paths are judged lexically: ``~`` is already the home directory (the lexer did it), relative
paths are joined to the current directory, then ``..`` is folded (``posixpath.normpath``).
Symlinks are not followed — the gate is a pure function and cannot look at the disk — so a
symlink inside the workspace that points out of it is judged by where it sits. That is the
accepted limit of a lexical check; the phone still sees every card the floors raise.

A word with a glob or (in lenient mode) a run-time part names "something under" the directory
its static prefix ends in: ``/etc/pass*`` → a subtree of ``/etc``; ``*`` → a subtree of the cwd.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from .shell_lexer import Word

__all__ = [
    "SAFE_DEVICES",
    "SYSTEM_DIRS",
    "SYSTEM_EXEMPT",
    "Target",
    "Workspace",
    "is_device",
    "is_safe_device",
    "is_system",
    "is_under",
    "normalise",
    "resolve",
]

SYSTEM_DIRS: tuple[str, ...] = (
    "/etc",
    "/usr",
    "/boot",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/var",
    "/sys",
    "/proc",
    # macOS: /etc and /var are symlinks into /private; /System and /Library are the OS's.
    "/private/etc",
    "/private/var",
    "/system",
    "/library",
)
"""Directories whose writes are ``system_write`` (compared case-insensitively, for macOS)."""

SYSTEM_EXEMPT: tuple[str, ...] = (
    "/var/tmp",
    "/var/folders",
    "/private/var/tmp",
    "/private/var/folders",
)
"""Temp directories under /var: outside the workspace (a card), but not system writes.
macOS puts ``$TMPDIR`` under ``/var/folders``."""

SAFE_DEVICES = frozenset(
    {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/stdin",
     "/dev/stdout", "/dev/stderr", "/dev/tty"}
)  # fmt: skip
"""Pseudo-devices that are fine to read and write (``/dev/fd/N`` too)."""

_NOT_DEVICES = ("/dev/shm", "/dev/pts", "/dev/mqueue")


def normalise(path: str) -> str:
    """Fold ``.``, ``..`` and duplicate slashes of an absolute path (``//x`` → ``/x``)."""
    folded = posixpath.normpath(path)
    return "/" + folded.lstrip("/") if folded.startswith("//") else folded


def is_under(path: str, base: str) -> bool:
    """``path`` is ``base`` or lies below it, by whole segments (``/ws/app-2`` ∉ ``/ws/app``)."""
    return base == "/" or path == base or path.startswith(base + "/")


def is_safe_device(path: str) -> bool:
    """``/dev/null`` and friends, ``/dev/fd/N``."""
    return path in SAFE_DEVICES or path.startswith("/dev/fd/")


def is_device(path: str) -> bool:
    """A real device node (a disk, a partition, …): under /dev, neither safe nor a tmpfs."""
    if not is_under(path, "/dev") or path == "/dev" or is_safe_device(path):
        return False
    return not any(is_under(path, base) for base in _NOT_DEVICES)


def is_system(path: str, *, subtree: bool = False) -> bool:
    """``path`` (or, with ``subtree``, something below it) lies in a system directory."""
    lowered = path.lower()
    if any(is_under(lowered, exempt) for exempt in SYSTEM_EXEMPT):
        return False
    if any(is_under(lowered, base) for base in SYSTEM_DIRS):
        return True
    # A subtree of "/" or "/private" reaches into the system directories.
    return subtree and any(is_under(base, lowered) for base in SYSTEM_DIRS)


@dataclass(frozen=True, slots=True)
class Target:
    """A resolved path; ``subtree`` when the word names entries somewhere below ``path``."""

    path: str
    subtree: bool = False


@dataclass(frozen=True, slots=True)
class Workspace:
    """The session's workspace roots and the user's home, both normalised absolute paths."""

    roots: tuple[str, ...]
    home: str

    def within(self, path: str) -> bool:
        """``path`` is a workspace root or lies below one."""
        return any(is_under(path, root) for root in self.roots)

    def home_or_ancestor(self, path: str) -> bool:
        """``path`` is the home directory or contains it (``/``, ``/home``, …)."""
        return is_under(self.home, path)

    def protected(self, path: str) -> bool:
        """Never to be deleted whole: ``/``, the home or an ancestor, a root or an ancestor."""
        return (
            path == "/"
            or self.home_or_ancestor(path)
            or any(is_under(root, path) for root in self.roots)
        )


def resolve(word: Word, cwd: str | None, *, strict: bool) -> Target | None:
    """Where a (brace-expanded) word points.

    Args:
        word: the word, after brace expansion.
        cwd: the current directory, or None when a ``cd`` made it unknown.
        strict: a word with a run-time part is unknown (None) when strict; when lenient it is
            judged by its static prefix, and a word without one is not a path at all (None).

    Returns:
        The target, or None when it cannot be told.
    """
    text: list[str] = []
    subtree = False
    dynamic = False
    for part in word.parts:
        if part.kind in ("glob", "dyn"):
            subtree = True
            dynamic = part.kind == "dyn"
            break
        text.append(part.text)
    prefix = "".join(text)
    if (dynamic and (strict or not prefix)) or not (prefix or subtree):
        return None  # unknown, or "" (which names no file at all)
    if subtree:
        prefix = prefix[: prefix.rfind("/") + 1]
    if not prefix.startswith("/"):
        if cwd is None:
            return None
        prefix = posixpath.join(cwd, prefix) if prefix else cwd
    return Target(normalise(prefix), subtree)
