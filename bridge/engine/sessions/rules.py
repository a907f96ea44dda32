"""The small rules around sessions: titles, the wire view of a record, folder paths.

The table of sessions itself (listed, pending, tombstones) is :mod:`bridge.engine.state`.

Pure: timestamps are passed in as ISO strings.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence

from bridge.engine.agents import backend_of
from bridge.engine.effects import SessionRecord
from bridge.protocol import RemoteSessionInfo

__all__ = [
    "MAX_CWD_LENGTH",
    "PENDING_STATE",
    "check_folder_path",
    "session_cwd_problem",
    "shown_path",
    "title_from_input",
    "to_remote_info",
]

PENDING_STATE = "starting"
"""The record state of a session whose runner has not reported ready yet (never on the wire)."""

TITLE_MAX = 80
MAX_CWD_LENGTH = 4096
"""The longest ``create-session`` cwd taken (Linux's ``PATH_MAX``: no longer path can be opened)."""
MAX_NAME_BYTES = 255
"""The longest folder name a filesystem takes (``NAME_MAX``)."""
_SLASH_COMMAND = re.compile(r"^/[A-Za-z][\w:-]*(\s|$)")


def title_from_input(text: str) -> str | None:
    """The session title a first message gives, or None when it gives none.

    Newlines become spaces; empty messages, messages starting with ``[`` and
    ``Request interrupted`` give none; the title is at most 80 characters (77 + ``...``).
    """
    flat = " ".join(text.split())
    if not flat or flat.startswith("[") or flat.startswith("Request interrupted"):
        return None
    if len(flat) > TITLE_MAX:
        return flat[: TITLE_MAX - 3] + "..."
    return flat


def is_slash_command(text: str) -> bool:
    return _SLASH_COMMAND.match(text) is not None


def to_remote_info(
    record: SessionRecord, *, offline: bool = False, provider_label: str | None = None
) -> RemoteSessionInfo:
    """The wire view of a record (``lineCount`` = ``seqHigh``, ``slug`` = first 8 of the id).

    ``backend`` is the late-v10 word for the agent (``opencode``; absent for Claude Code, which
    v10 says an absent one means); ``agent`` (additive) is the agent's id for any agent.
    """
    state = "offline" if offline else record.state
    percentage = record.context_percentage
    return RemoteSessionInfo(
        id=record.session_id,
        slug=record.session_id[:8],
        cwd=record.cwd,
        lastActivity=record.last_activity,
        lineCount=record.seq_high,
        title=record.title,
        project=record.project or posixpath.basename(record.cwd.rstrip("/")) or record.cwd,
        permissionMode=record.permission_mode,
        effortLevel=record.effort_level,
        model=record.model,
        contextWindow=record.context_window,
        contextPercentage=round(percentage) if percentage is not None else None,
        committed=True if record.committed else None,
        state=state,
        seqHigh=record.seq_high,
        providerId=record.provider_id,
        providerLabel=provider_label if record.provider_id else None,
        backend=backend_of(record.agent),
        agent=record.agent,
        sandboxed=record.sandboxed,
    )


def check_folder_path(path: str, root: str | None, roots: Sequence[str]) -> tuple[str, str] | str:
    """Validate a ``create-folder`` request: ``(root, relative path)`` or the error text.

    The error texts are the reference bridge's (REFERENCE-BEHAVIOUR §1.13).
    """
    if not roots:
        return "no workspace root is configured"
    if root is None:
        chosen = roots[0]
    else:
        wanted = posixpath.normpath(root)
        matches = [r for r in roots if posixpath.normpath(r) == wanted]
        if not matches:
            return "unknown workspace root"
        chosen = matches[0]
    rel = path.strip()
    if not rel:
        return "folder name is empty"
    if rel.startswith("/") or rel.startswith("~"):
        return "folder path must be relative to the workspace root"
    normalized = posixpath.normpath(rel)
    if normalized in (".", "..") or normalized.startswith("../") or "\x00" in normalized:
        return "folder path escapes the workspace root"
    return chosen, normalized


def session_cwd_problem(
    cwd: str, roots: Sequence[str], home: str, secrets: Sequence[str]
) -> str | None:
    """Why a ``create-session`` cwd can never work, for ``session-failed.reason``; None if it may.

    What is decided here needs no disk: a NUL byte, a path or a folder name too long for any
    filesystem, and a folder inside a hidden path (the bridge home, ``~/.ssh``, …: an agent must
    never run there). Whether the folder exists and lies inside a root is the runtime's to tell
    (symlinks resolved), and it fails the session the same way. A relative cwd is checked under
    every root, as the runtime tries each.
    """
    if "\x00" in cwd:
        return "the folder path contains a NUL byte"
    if len(cwd) > MAX_CWD_LENGTH:
        return f"the folder path is too long ({len(cwd)} characters; at most {MAX_CWD_LENGTH})"
    if any(len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES for name in cwd.split("/")):
        return f"a folder name in the path is longer than {MAX_NAME_BYTES} bytes"
    text = cwd.strip()
    if not text:
        return None
    if text == "~" or text.startswith("~/"):
        text = home + text[1:]
    candidates = [text] if text.startswith("/") else [posixpath.join(root, text) for root in roots]
    for candidate in candidates:
        path = posixpath.normpath(candidate)
        if any(path == secret or path.startswith(secret.rstrip("/") + "/") for secret in secrets):
            return (
                f"{shown_path(cwd)} is hidden from agents: it holds the bridge's own data or "
                "credentials"
            )
    return None


def shown_path(path: str, limit: int = 120) -> str:
    """A path as an error message quotes it: at most `limit` characters."""
    return path if len(path) <= limit else path[: limit - 1] + "…"
