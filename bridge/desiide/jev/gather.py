"""The I/O behind the JEV packs: what git and the file system say about a workspace.

Everything here reads; nothing writes. What is gathered (:class:`WorkspaceFacts`):

* **branch**: ``git rev-parse --abbrev-ref HEAD`` (``HEAD`` when detached); on a branch with no
  commit yet, ``git symbolic-ref --short HEAD``; ``unknown`` outside git or when git fails.
* **changes**: ``git status --porcelain=v1 -z --untracked-files=all -- .`` run in the workspace
  root, so only files under it, with their sizes at HEAD (one ``git ls-tree -l`` for at most
  :data:`MAX_SIZED` paths) and on disk (``lstat``). Porcelain paths are relative to the
  repository's top, so the root's prefix (``git rev-parse --show-prefix``) is cut off.
* **diff lines** (``estimatedDiffSize``): added + deleted lines of ``git diff --numstat HEAD``
  (staged and unstaged; binary files count 0), plus the lines of untracked files (at most
  :data:`MAX_UNTRACKED_COUNTED` files, :data:`MAX_FILE_BYTES` each). Without a first commit:
  ``--cached`` plus the worktree's diff.
* **project lines** (``projectSizeLines``): newline count of ``git ls-files`` (outside git: a
  walk that skips dot directories, ``node_modules`` and virtualenvs). The work is capped —
  :data:`MAX_PROJECT_FILES` files, :data:`MAX_PROJECT_BYTES` read in all, files over
  :data:`MAX_FILE_BYTES` and binary files (a NUL in the first 8 KiB) skipped — so the number is a
  lower bound on huge trees. It is an order of magnitude for ``cost_route@1``, not an audit.
* **env**: ``ci`` when a CI variable is set (``CI`` not empty/0/false, ``GITHUB_ACTIONS``,
  ``GITLAB_CI``, ``BUILDKITE``, ``JENKINS_URL``, ``TF_BUILD``), else ``local``.

Git runs with ``GIT_OPTIONAL_LOCKS=0`` (``status`` must not take the index lock while the user
works), no prompt, ``core.fsmonitor=false`` (a repository's config must not make a preview run a
program) and ``--no-ext-diff --no-textconv`` for the same reason. Every git call has a timeout;
a failure degrades the fact (``unknown`` branch, no changes), never the preview.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from bridge.desiide.jev.packs import (
    AvailableModel,
    FileFacts,
    LastRunStatus,
    PackName,
    build_cost_route,
    build_risk_gate,
    build_workflow_select,
    has_pending_migrations,
)
from bridge.records import record

__all__ = [
    "GIT_TIMEOUT",
    "MAX_FILE_BYTES",
    "MAX_PROJECT_BYTES",
    "MAX_PROJECT_FILES",
    "MAX_SIZED",
    "MAX_UNTRACKED_COUNTED",
    "UNKNOWN_BRANCH",
    "WorkingTree",
    "WorkspaceFacts",
    "count_lines",
    "current_branch",
    "detect_env",
    "diff_lines",
    "gather_facts",
    "parse_numstat",
    "parse_porcelain",
    "preview_state",
    "project_size_lines",
    "working_tree_changes",
]

logger = logging.getLogger(__name__)

GIT_TIMEOUT: Final = 10.0
UNKNOWN_BRANCH: Final = "unknown"
MAX_SIZED: Final = 500
MAX_UNTRACKED_COUNTED: Final = 200
MAX_FILE_BYTES: Final = 1024 * 1024
MAX_PROJECT_FILES: Final = 20_000
MAX_PROJECT_BYTES: Final = 64 * 1024 * 1024
_MAX_GIT_OUTPUT: Final = 16 * 1024 * 1024
_SKIP_DIRS: Final = frozenset({"node_modules", "venv", "__pycache__", "target", "dist", "build"})
_CI_FLAGS: Final = ("GITHUB_ACTIONS", "GITLAB_CI", "BUILDKITE", "JENKINS_URL", "TF_BUILD")
_GIT_CONFIG: Final = ("-c", "core.fsmonitor=false", "-c", "core.quotepath=on")


@record
class WorkspaceFacts:
    """What :func:`gather_facts` found (see the module docstring)."""

    is_git: bool
    branch: str
    env: str
    changes: tuple[FileFacts, ...]
    diff_lines: int
    project_lines: int | None


async def _git(root: Path, *args: str, timeout: float = GIT_TIMEOUT) -> str | None:
    """Run git in `root`; its stdout, or None when it failed, timed out or is missing."""
    env = dict(os.environ)
    env.update(
        {"GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "GIT_PAGER": "cat"}
    )
    try:
        process = await asyncio.create_subprocess_exec(
            "git",
            *_GIT_CONFIG,
            *args,
            cwd=root,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
    except OSError as exc:
        logger.info("! git %s: cannot run git (%s)", args[0], type(exc).__name__)
        return None
    try:
        async with asyncio.timeout(timeout):
            out, _ = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.wait()
        logger.info("- git %s: no answer within %g s", args[0], timeout)
        return None
    finally:
        if process.returncode is None:  # cancelled: don't leave a git behind
            process.kill()
            await process.wait()
    if process.returncode != 0:
        return None
    return out[:_MAX_GIT_OUTPUT].decode("utf-8", "surrogateescape")


def detect_env(environ: Mapping[str, str]) -> str:
    """``ci`` or ``local`` (see the module docstring)."""
    ci = environ.get("CI", "").strip().lower()
    if ci not in ("", "0", "false", "no") or any(environ.get(flag) for flag in _CI_FLAGS):
        return "ci"
    return "local"


async def current_branch(root: Path) -> str:
    """The branch name, ``HEAD`` when detached, :data:`UNKNOWN_BRANCH` outside git."""
    out = await _git(root, "rev-parse", "--abbrev-ref", "HEAD")
    if out is None:
        out = await _git(root, "symbolic-ref", "--short", "HEAD")  # no commit yet
    name = out.strip() if out is not None else ""
    return name or UNKNOWN_BRANCH


def parse_porcelain(output: str, prefix: str) -> list[tuple[str, str]]:
    """``git status --porcelain=v1 -z`` → ``[(XY, path relative to the root)]``.

    Args:
        output: the NUL-separated records.
        prefix: ``git rev-parse --show-prefix`` of the root (``""`` at the top, else ``"a/b/"``).
    """
    records = output.split("\0")
    entries: list[tuple[str, str]] = []
    index = 0
    while index < len(records):
        record = records[index]
        index += 1
        if len(record) < 4 or record[2] != " ":
            continue
        code, path = record[:2], record[3:]
        if "R" in code or "C" in code:
            index += 1  # the source path follows the destination
        if prefix and not path.startswith(prefix):
            continue
        relative = path[len(prefix) :]
        if relative and not relative.endswith("/"):
            entries.append((code, relative))
    return entries


def parse_numstat(output: str) -> int:
    """Added + deleted lines of ``git diff --numstat`` (``-`` for a binary file counts 0)."""
    total = 0
    for line in output.splitlines():
        fields = line.split("\t", 2)
        if len(fields) < 3:
            continue
        for value in fields[:2]:
            if value.isdigit():
                total += int(value)
    return total


async def _head_sizes(root: Path, paths: Sequence[str]) -> dict[str, int]:
    if not paths:
        return {}
    out = await _git(root, "ls-tree", "-l", "-z", "HEAD", "--", *paths[:MAX_SIZED])
    sizes: dict[str, int] = {}
    for line in (out or "").split("\0"):
        meta, tab, path = line.partition("\t")
        fields = meta.split()
        if tab and len(fields) == 4 and fields[1] == "blob" and fields[3].isdigit():
            sizes[path] = int(fields[3])
    return sizes


def _disk_size(root: Path, path: str) -> int | None:
    try:
        return (root / path).lstat().st_size
    except OSError:
        return None


@record
class WorkingTree:
    """The changed and new files, and which of them git does not track yet."""

    files: tuple[FileFacts, ...] = ()
    untracked: tuple[str, ...] = ()


async def working_tree_changes(root: Path) -> WorkingTree:
    """The changed and new files under `root`, with their sizes (empty outside git)."""
    prefix = await _git(root, "rev-parse", "--show-prefix")
    out = await _git(root, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--", ".")
    if prefix is None or out is None:
        return WorkingTree()
    entries = parse_porcelain(out, prefix.strip())
    before = await _head_sizes(root, [path for code, path in entries if code != "??"])
    changes: list[FileFacts] = []
    for code, path in entries:
        deleted = "D" in code
        created = code == "??" or code[0] in "ARC"
        changes.append(
            FileFacts(
                path=path,
                bytes_before=None if created else before.get(path),
                bytes_after=None if deleted else _disk_size(root, path),
                created=created,
                deleted=deleted,
            )
        )
    untracked = tuple(path for code, path in entries if code == "??")
    return WorkingTree(tuple(changes), untracked)


def count_lines(path: Path, limit: int = MAX_FILE_BYTES) -> int | None:
    """Lines of a text file (a last line without newline counts); None for binary, too large,
    unreadable, a symlink or not a regular file."""
    counted = _lines_and_size(path, limit)
    return counted[0] if counted is not None else None


def _lines_and_size(path: Path, limit: int) -> tuple[int, int] | None:
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > limit:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0), len(data)


async def diff_lines(root: Path, untracked: Sequence[str]) -> int:
    """``estimatedDiffSize`` of the working tree (see the module docstring)."""
    flags = ("--numstat", "--no-ext-diff", "--no-textconv", "--no-color")
    tracked = await _git(root, "diff", *flags, "HEAD", "--", ".")
    if tracked is None:  # no commit yet: the index against nothing, then the worktree
        staged = await _git(root, "diff", *flags, "--cached", "--", ".")
        unstaged = await _git(root, "diff", *flags, "--", ".")
        tracked = (staged or "") + (unstaged or "")
    counted = list(untracked[:MAX_UNTRACKED_COUNTED])
    counts = await asyncio.to_thread(lambda: [count_lines(root / p) or 0 for p in counted])
    return parse_numstat(tracked) + sum(counts)


def _walk(root: Path) -> Iterator[Path]:
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith(".") and d not in _SKIP_DIRS)
        for name in sorted(files):
            yield Path(directory) / name


def _count_project(files: Iterator[Path]) -> int:
    total = 0
    read = 0
    for seen, path in enumerate(files):
        if seen >= MAX_PROJECT_FILES or read >= MAX_PROJECT_BYTES:
            break
        counted = _lines_and_size(path, MAX_FILE_BYTES)
        if counted is not None:
            total += counted[0]
            read += counted[1]
    return total


async def project_size_lines(root: Path, *, is_git: bool) -> int:
    """``projectSizeLines``: see the module docstring (a capped count)."""
    if is_git:
        out = await _git(root, "ls-files", "-z", "--cached")
        names = [n for n in (out or "").split("\0") if n]
        files: Iterator[Path] = (root / n for n in names)
    else:
        files = _walk(root)
    return await asyncio.to_thread(_count_project, files)


async def gather_facts(
    root: Path, *, environ: Mapping[str, str] | None = None, count_project: bool = True
) -> WorkspaceFacts:
    """Everything the packs need from the workspace at `root`.

    Args:
        root: the workspace root (absolute).
        environ: the environment for :func:`detect_env` (``os.environ`` when None).
        count_project: whether to count ``projectSizeLines`` (the slowest part).
    """
    inside = await _git(root, "rev-parse", "--is-inside-work-tree")
    is_git = inside is not None and inside.strip() == "true"
    branch = await current_branch(root) if is_git else UNKNOWN_BRANCH
    tree = await working_tree_changes(root) if is_git else WorkingTree()
    diff = await diff_lines(root, tree.untracked) if is_git else 0
    lines = await project_size_lines(root, is_git=is_git) if count_project else None
    return WorkspaceFacts(
        is_git=is_git,
        branch=branch,
        env=detect_env(os.environ if environ is None else environ),
        changes=tree.files,
        diff_lines=diff,
        project_lines=lines,
    )


async def preview_state(
    pack: PackName,
    root: Path,
    *,
    models: Sequence[AvailableModel] = (),
    environ: Mapping[str, str] | None = None,
    last_run_status: LastRunStatus = "none",
    recent_failures: int = 0,
) -> dict[str, Any]:
    """``jev.preview {pack}``: the state the pack would send now, from the real workspace.

    The sample task is an ``edit`` of the working tree's changes with the default preference;
    for ``risk_gate@1`` the call is a ``propose_edit`` of those files.
    """
    facts = await gather_facts(root, environ=environ, count_project=pack == "cost_route@1")
    paths = [c.path for c in facts.changes]
    if pack == "workflow_select@1":
        return build_workflow_select(
            task_type="edit",
            files=facts.changes,
            estimated_diff_size=facts.diff_lines,
            last_run_status=last_run_status,
            user_preference=None,
            available_models=models,
        )
    if pack == "risk_gate@1":
        return build_risk_gate(
            action_type="propose_edit",
            paths=paths,
            edit_file_count=len(paths),
            branch=facts.branch,
            env=facts.env,
            has_pending_migrations=has_pending_migrations(paths),
        )
    return build_cost_route(
        task_type="edit",
        files_touched_count=len(paths),
        project_size_lines=facts.project_lines or 0,
        user_cost_bias=None,
        recent_failures=recent_failures,
    )
