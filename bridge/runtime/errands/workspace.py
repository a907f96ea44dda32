"""The workspace roots on disk: where sessions may run, what folders the phone is offered.

- :func:`resolve_session_cwd`: a ``create-session`` cwd must lie inside a workspace root, by path
  *segments* (``/ws/app-2`` is not inside ``/ws/app``), and symlinks are resolved first so a link
  cannot lead out. A relative cwd is taken relative to each root in turn. With ``createCwd`` the
  directory is created (``mkdir -p``) and ``git init``-ed under the first root that contains it.
  Unlike the reference bridge, a cwd outside every root is an error, not a silent fallback to
  the first root: the phone asked for a place, and running somewhere else would surprise it.
  No cwd at all means the first root. A folder inside a hidden path (the bridge home, ``~/.ssh``,
  …), spelled or reached through a symlink, is refused; so is a path the system cannot open (a
  NUL byte, a name too long): every refusal is a :class:`WorkspaceError` whose message the
  phone reads in ``session-failed``.
- :func:`scan_folders`: the heartbeat's ``folders`` (REFERENCE-BEHAVIOUR §1.6).
- :func:`create_folder`: ``create-folder`` (mkdir + git init), errors in the reference's words.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from bridge.engine.sessions.rules import shown_path
from bridge.sandbox.hidden import is_hidden

__all__ = [
    "MAX_FOLDERS",
    "WorkspaceError",
    "create_folder",
    "git_init",
    "is_inside",
    "resolve_session_cwd",
    "scan_folders",
]

MAX_FOLDERS = 200
SKIPPED = frozenset(
    {"node_modules", "target", "dist", "build", "out", "venv", "__pycache__", "vendor"}
)
MARKERS = (
    ".planning",
    "package.json",
    "Cargo.toml",
    "go.mod",
    "pyproject.toml",
    "pubspec.yaml",
    "build.gradle",
    "build.gradle.kts",
    "composer.json",
    "Gemfile",
)


class WorkspaceError(Exception):
    """A path request cannot be honoured; the message is shown to the phone."""


def is_inside(path: Path, root: Path) -> bool:
    """Whether `path` is `root` or below it, comparing whole path segments."""
    return path == root or root in path.parents


def git_init(directory: Path) -> None:
    """``git init`` quietly; a missing git is not an error (the folder still exists)."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(
            ["git", "init", "--quiet"],
            cwd=directory,
            check=False,
            capture_output=True,
            timeout=30,
        )


def resolve_session_cwd(
    roots: Sequence[Path], requested: str | None, *, create: bool, hidden: Sequence[str] = ()
) -> Path:
    """The directory a new session runs in (see the module docstring).

    Args:
        roots: the workspace roots.
        requested: the ``create-session`` cwd (absolute, ``~``, or relative to a root).
        create: make the directory (and ``git init`` it) when it does not exist.
        hidden: the paths an agent must never see (absolute): a cwd at or below one is refused.

    Raises:
        WorkspaceError: with a message fit for ``session-failed.reason``.
    """
    try:
        return _resolve_session_cwd(roots, requested, create=create, hidden=hidden)
    except (OSError, ValueError) as exc:
        # A path the system cannot take: a NUL byte, a name too long, a loop of links, …
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise WorkspaceError(
            f"cannot use {shown_path(requested or '')} as a folder: {reason}"
        ) from None


def _refuse_hidden(spelled: Path, target: Path, requested: str, hidden: Sequence[str]) -> None:
    """Refuse a cwd at or below a hidden path, as spelled or with its symlinks resolved."""
    if is_hidden(os.path.normpath(spelled), hidden) or is_hidden(str(target), hidden):
        raise WorkspaceError(
            f"{shown_path(requested)} is hidden from agents: it holds the bridge's own data or "
            "credentials"
        )


def _resolve_session_cwd(
    roots: Sequence[Path], requested: str | None, *, create: bool, hidden: Sequence[str]
) -> Path:
    if not roots:
        raise WorkspaceError("no workspace root is configured on the bridge")
    resolved_roots = [root.resolve() for root in roots]
    if not requested or not requested.strip():
        _refuse_hidden(resolved_roots[0], resolved_roots[0], str(resolved_roots[0]), hidden)
        return resolved_roots[0]
    text = os.path.expanduser(requested.strip())
    candidates = [Path(text)] if os.path.isabs(text) else [root / text for root in resolved_roots]
    for candidate in candidates:
        target = candidate.resolve()
        _refuse_hidden(candidate, target, requested, hidden)  # before anything is created
        containing = [root for root in resolved_roots if is_inside(target, root)]
        if not containing:
            continue
        if target.is_dir():
            return target
        if create:
            try:
                target.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise WorkspaceError(f"cannot create {target}: {exc.strerror}") from None
            git_init(target)
            return target
    if any(any(is_inside(c.resolve(), root) for root in resolved_roots) for c in candidates):
        raise WorkspaceError(
            f"{shown_path(requested)} does not exist (ask to create it with createCwd)"
        )
    raise WorkspaceError(f"{shown_path(requested)} is outside the bridge's workspace roots")


def _has_marker(directory: Path) -> bool:
    return any((directory / marker).exists() for marker in MARKERS)


def _children(directory: Path) -> list[Path]:
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return []
    out = []
    for entry in entries:
        if entry.name.startswith(".") or entry.name in SKIPPED:
            continue
        try:
            if entry.is_dir():
                out.append(Path(entry.path))
        except OSError:
            continue
    return out


def scan_folders(roots: Sequence[Path]) -> tuple[str, ...]:
    """Project folders under the roots, relative to their root, sorted case-insensitively.

    Each immediate child directory of each root; plus a grandchild when the child has no
    self-contained marker and the grandchild has a marker or ``.git``. At most 200, deduplicated
    across roots.
    """
    found: dict[str, None] = {}
    for root in roots:
        for child in _children(root):
            found[child.name] = None
            if _has_marker(child):
                continue
            for grandchild in _children(child):
                if _has_marker(grandchild) or (grandchild / ".git").exists():
                    found[f"{child.name}/{grandchild.name}"] = None
    return tuple(sorted(found, key=lambda name: (name.lower(), name))[:MAX_FOLDERS])


def create_folder(root: Path, relative: str) -> str:
    """Create `relative` under `root` (already validated as relative and non-escaping).

    Returns:
        The path relative to the root, as the ``folder-ack`` carries it.

    Raises:
        WorkspaceError: the reference bridge's error texts.
    """
    base = root.resolve()
    target = (base / relative).resolve()
    if not is_inside(target, base) or target == base:
        raise WorkspaceError("folder path escapes the workspace root")
    if target.exists() and not target.is_dir():
        raise WorkspaceError("a file with that name already exists")
    if not target.is_dir():
        try:
            target.mkdir(parents=True)
        except OSError as exc:
            raise WorkspaceError(f"cannot create the folder: {exc.strerror}") from None
        git_init(target)
    return str(target.relative_to(base))
