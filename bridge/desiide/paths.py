"""Workspace paths: the one rule every path from the editor or the model passes through.

The seed: "Paths are workspace-relative POSIX paths. Absolute paths and .. are rejected." This
module turns that sentence into checks, decided once:

- **Relative, POSIX, inside.** ``/etc/passwd``, ``C:/x`` and ``C:x`` (Windows drives), ``~/x`` (a
  shell would expand it), and any ``..`` segment are refused. ``..`` is refused even where it
  would stay inside (``a/../b``): a path is compared and displayed as given, and one spelling per
  file keeps ``edits.report`` matching the proposal it answers.
- **No ambiguous characters.** A backslash is refused rather than guessed at: on Windows it is a
  separator, on POSIX a legal file-name character, and the two readings name different files.
  NUL and the other control characters (newlines included) are refused: they cut C strings and
  forge the ``path:line:text`` lines of ``search``.
- **One spelling.** Empty and ``.`` segments are dropped (``./a//b/`` → ``a/b``) so that two
  spellings of a path compare equal. The workspace root itself (``.``) is only accepted where the
  caller asks for it (``list_files``' default directory), never as a file to edit.

`check_relative_path` is pure text. `resolve_in_root` is the only function here that touches the
file system: symlinks are the one way a checked relative path can still leave the root, and only
the file system can tell. `normalize_workspace_root` reads ``initialize``'s ``workspaceRoots``
(absolute paths or ``file://`` URIs).
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Final
from urllib.parse import unquote, urlsplit

__all__ = [
    "MAX_PATH_CHARS",
    "check_relative_path",
    "normalize_workspace_root",
    "resolve_in_root",
]

MAX_PATH_CHARS: Final = 4096
"""Linux's PATH_MAX: no real path is longer."""

_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
_DRIVE: Final = re.compile(r"^[A-Za-z]:")


def check_relative_path(text: str, *, allow_root: bool = False) -> str:
    """Check a workspace-relative POSIX path and return its one spelling.

    Args:
        text: the path as received.
        allow_root: accept the workspace root itself (``.``, ``./``), returned as ``"."``.

    Returns:
        The path without empty or ``.`` segments and without a trailing slash.

    Raises:
        ValueError: the path breaks a rule of the module docstring. The message names the rule
            and never repeats the path (the caller knows which one it passed).
    """
    if not text:
        raise ValueError("must not be empty")
    if len(text) > MAX_PATH_CHARS:
        raise ValueError(f"must be at most {MAX_PATH_CHARS} characters")
    if _CONTROL.search(text):
        raise ValueError("must not contain NUL or other control characters")
    if "\\" in text:
        raise ValueError("must use / as the separator (backslashes are refused)")
    if text.startswith("/") or _DRIVE.match(text):
        raise ValueError("must be relative to the workspace root, not absolute")
    segments = [segment for segment in text.split("/") if segment not in ("", ".")]
    if ".." in segments:
        raise ValueError("must not contain '..' segments")
    if segments and segments[0] == "~":
        raise ValueError("must not start with '~' (paths are relative to the workspace root)")
    if not segments:
        if allow_root:
            return "."
        raise ValueError("must name a file or directory inside the workspace, not its root")
    return "/".join(segments)


def resolve_in_root(root: Path, rel: str) -> Path:
    """The real path of ``rel`` under ``root``, refusing anything that resolves outside it.

    Symlinks are followed as far as they exist (a new file's missing tail is fine), so a link
    inside the workspace that points outside it is caught even when the final file does not exist
    yet. The workspace root itself is accepted (``"."``).

    Args:
        root: the workspace root (absolute; it must exist).
        rel: a workspace-relative path, checked with `check_relative_path` first.

    Returns:
        The resolved absolute path, inside the resolved root.

    Raises:
        ValueError: ``rel`` breaks the rules, or it resolves outside the root.
        OSError: the root does not exist or cannot be resolved (e.g. a symlink loop).
    """
    clean = check_relative_path(rel, allow_root=True)
    real_root = root.resolve(strict=True)
    resolved = (real_root / clean).resolve(strict=False)
    if not resolved.is_relative_to(real_root):
        raise ValueError("resolves outside the workspace (through a symlink)")
    return resolved


def normalize_workspace_root(text: str) -> str:
    """An ``initialize`` workspace root as a normalized absolute POSIX path.

    Accepts an absolute path or a ``file://`` URI (``file:///home/me/p`` or
    ``file://localhost/home/me/p``; percent-escapes decoded), the two forms VS Code hands out.
    ``..`` segments are folded (``/a/b/../c`` → ``/a/c``): unlike a relative path, an absolute
    root is the user's own folder and has no "inside" to escape from.

    Raises:
        ValueError: not absolute, another URI scheme or a remote host, a Windows path, or NUL and
            other control characters.
    """
    path = text
    if text.lower().startswith("file:"):
        parts = urlsplit(text)
        if parts.netloc not in ("", "localhost") or parts.query or parts.fragment:
            raise ValueError("must be a local file:// URI (no host, query or fragment)")
        path = unquote(parts.path)
    elif "://" in text:
        raise ValueError("must be an absolute path or a file:// URI")
    if not path or len(path) > MAX_PATH_CHARS:
        raise ValueError(f"must be a non-empty path of at most {MAX_PATH_CHARS} characters")
    if _CONTROL.search(path):
        raise ValueError("must not contain NUL or other control characters")
    if "\\" in path or _DRIVE.match(path.lstrip("/")):
        raise ValueError("must be a POSIX path (Windows paths are not supported)")
    if not path.startswith("/"):
        raise ValueError("must be an absolute path")
    normalized = posixpath.normpath(path)
    # POSIX lets "//x" mean something implementation-defined; normpath keeps it. We don't.
    return "/" + normalized.lstrip("/")
