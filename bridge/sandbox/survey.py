"""What the planner needs to know of the disk: which hidden paths exist, and the git repositories.

The I/O half of planning a sandbox (:mod:`.policy` is the pure half), run by the daemon in a
worker thread before each agent spawn:

- each hidden path that exists, by kind (directory or file); a symlink's resolved target is
  hidden as well (a mount over the link lands on the target, and the target may be reachable
  by another spelling);
- the ``.git`` directories of the repositories in the session folder, by a bounded walk
  (:data:`WALK_LIMIT` directories, :data:`WALK_DEPTH` levels, skipping dependency and build
  trees that never hold a repository of the user's: :data:`SKIPPED`), with the git directories
  of their submodules (``.git/modules/…``);
- the repository enclosing the folder, when the folder is below its top.

:func:`make_state_dirs` makes the agents' own state directories that are missing (see
:data:`~.policy.MADE_WHEN_MISSING`). A ``hooks`` directory missing from a git directory found is
created (empty, as ``git init`` makes it): an absent one could be created by the agent, and a hook
in it would run outside. A repository the bounded walk does not reach keeps writable hooks in the
sandbox; the gate still makes a card of any write into ``.git/hooks``.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
from collections.abc import Iterable
from typing import Final

from .policy import DiskFacts

__all__ = ["SKIPPED", "WALK_DEPTH", "WALK_LIMIT", "find_git_dirs", "make_state_dirs", "survey"]

WALK_LIMIT: Final = 4000
"""Directories the walk for repositories visits at most."""
WALK_DEPTH: Final = 5
"""Levels below the session folder the walk descends at most."""
SKIPPED: Final = frozenset(
    {
        "node_modules",
        ".venv",
        "venv",
        "__pycache__",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        "target",
        "build",
        "dist",
        ".gradle",
        ".next",
        ".cache",
    }
)
"""Directory names the walk does not enter."""


def survey(hidden: Iterable[str], cwd: str) -> DiskFacts:
    """The facts of :class:`~.policy.DiskFacts` for `hidden` and the session folder `cwd`."""
    dirs: list[str] = []
    files: list[str] = []
    for path in hidden:
        spellings = [path]
        with contextlib.suppress(OSError, ValueError):
            if os.path.islink(path):
                spellings.append(os.path.realpath(path))
        for spelling in spellings:
            try:
                is_dir = os.path.isdir(spelling)
                exists = is_dir or os.path.lexists(spelling)
            except (OSError, ValueError):
                continue
            if is_dir:
                dirs.append(spelling)
            elif exists and not os.path.islink(spelling):
                files.append(spelling)
    git_dirs = find_git_dirs(cwd)
    enclosing = _enclosing_git(cwd)
    for git_dir in (*git_dirs, *([enclosing] if enclosing else [])):
        with contextlib.suppress(OSError):
            os.mkdir(os.path.join(git_dir, "hooks"), 0o755)
    return DiskFacts(
        hidden_dirs=tuple(dict.fromkeys(dirs)),
        hidden_files=tuple(dict.fromkeys(files)),
        git_dirs=tuple(git_dirs),
        enclosing_git=enclosing,
    )


def make_state_dirs(paths: Iterable[str]) -> None:
    """Make the agent state directories that are missing (0700, parents as needed), so that
    they can be bound writable; one that cannot be made is left out (the agent may then fail
    to write there, which it reports)."""
    for path in paths:
        with contextlib.suppress(OSError):
            os.makedirs(path, mode=0o700, exist_ok=True)


def find_git_dirs(cwd: str) -> list[str]:
    """The git directories of the repositories at and below `cwd` (a bounded walk)."""
    found: list[str] = []
    visited = 0
    stack = [(cwd, 0)]
    while stack and visited < WALK_LIMIT:
        folder, depth = stack.pop()
        visited += 1
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if not is_dir:
                continue
            if entry.name == ".git":
                found.append(entry.path)
                found.extend(_module_git_dirs(entry.path))
            elif entry.name not in SKIPPED and depth < WALK_DEPTH:
                stack.append((entry.path, depth + 1))
    return found


def _module_git_dirs(git_dir: str) -> list[str]:
    """The git directories of a repository's submodules (``.git/modules/<name>``, nested)."""
    out: list[str] = []
    stack = [os.path.join(git_dir, "modules")]
    while stack and len(out) < 200:
        folder = stack.pop()
        try:
            entries = [e for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        for entry in entries:
            if os.path.isfile(os.path.join(entry.path, "HEAD")):
                out.append(entry.path)
                stack.append(os.path.join(entry.path, "modules"))
            else:
                stack.append(entry.path)  # a submodule named with a slash
    return out


def _enclosing_git(cwd: str) -> str | None:
    """The ``.git`` directory of the repository above `cwd` (not at it), or None."""
    folder = posixpath.dirname(posixpath.normpath(cwd))
    while True:
        candidate = posixpath.join(folder, ".git")
        if os.path.isdir(candidate):
            return candidate
        if os.path.lexists(candidate):
            return None  # a worktree's or submodule's .git file: its git dir lies elsewhere
        parent = posixpath.dirname(folder)
        if parent == folder:
            return None
        folder = parent
