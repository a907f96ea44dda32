"""``read_file`` and ``propose_edit``: the two tools that deal in whole files.

``read_file`` returns a text file's text, or the lines ``startLine..endLine`` of it (1-based,
inclusive), at most :data:`READ_CAP` bytes; where it cut, the result says so and names the line to
read on from. Nothing is read past what is returned (a line is read in pieces of at most the cap,
so a one-line minified file of a gigabyte costs 256 KiB). Only regular files are read (a FIFO
would block the host), and only text: a NUL byte in the first 8 KiB is taken for a binary file.
Bytes that are not UTF-8 are replaced, not refused.

``propose_edit`` never writes. The user reviews a proposal in the editor; the bridge answers the
agent's permission request for the call with the call's input plus ``report`` (one entry per file:
``path``, ``status`` = ``applied`` | ``rejected`` | ``stale``, ``reason?``), and this tool only
turns that report into the text the model reads. A call that arrives without a report was never
reviewed (a bridge that allowed it without the editor): it is an error, ``not_reviewed``, and
nothing happened. The proposal's paths are checked by the workspace's rule all the same, so a
proposal the editor could never apply is refused as such. The result is an error when no file was
applied, so the model cannot mistake a rejection for success.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import IO, Final

from .paths import Workspace
from .results import INVALID_ARGUMENTS, ToolError, ToolResult, check_keys, int_arg, text_arg

__all__ = [
    "BINARY_PROBE",
    "NOT_REVIEWED",
    "READ_CAP",
    "REPORT_STATUSES",
    "propose_edit",
    "read_file",
]

READ_CAP: Final = 256 * 1024
"""Bytes of text one ``read_file`` returns at most."""
BINARY_PROBE: Final = 8 * 1024
"""Bytes looked at for a NUL (a binary file)."""
NOT_REVIEWED: Final = "not_reviewed"
REPORT_STATUSES: Final = ("applied", "rejected", "stale")

_STATUS_HINTS: Final = {
    "applied": "applied",
    "rejected": "rejected by the user",
    "stale": "stale: the file changed since the proposal was made; read it again and propose anew",
}
_SUMMARY_CHARS: Final = 200


def _required_path(workspace: Workspace, arguments: Mapping[str, object]) -> tuple[str, Path]:
    raw = text_arg(arguments, "path", path=True)
    if raw is None:
        raise ToolError(INVALID_ARGUMENTS, "'path' is required")
    return workspace.resolve(raw)


def read_file(workspace: Workspace, arguments: Mapping[str, object]) -> ToolResult:
    """The ``read_file`` tool (blocking file I/O: run it in a thread).

    Raises:
        ToolError: bad arguments, a refused path, not a readable text file.
    """
    check_keys(arguments, ("path", "startLine", "endLine"))
    relative, path = _required_path(workspace, arguments)
    start = int_arg(arguments, "startLine", low=1) or 1
    end = int_arg(arguments, "endLine", low=1)
    if end is not None and end < start:
        raise ToolError(INVALID_ARGUMENTS, f"'endLine' ({end}) is before 'startLine' ({start})")
    if not path.exists():
        raise ToolError("not_found", f"{relative!r} does not exist (list_files shows what does)")
    if path.is_dir():
        raise ToolError("not_a_file", f"{relative!r} is a directory; list_files lists it")
    if not path.is_file():
        raise ToolError("not_a_file", f"{relative!r} is not a regular file")
    try:
        with path.open("rb") as stream:
            if b"\x00" in stream.read(BINARY_PROBE):
                raise ToolError("not_text", f"{relative!r} looks binary (it holds NUL bytes)")
            stream.seek(0)
            return ToolResult(_read_lines(stream, start, end))
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ToolError("unreadable", f"{relative!r} cannot be read: {reason}") from None


def _read_lines(stream: IO[bytes], start: int, end: int | None) -> str:
    """Lines `start`..`end` of `stream`, at most :data:`READ_CAP` bytes, with the notes."""
    number = 1  # the line the next piece belongs to
    kept: list[bytes] = []
    size = 0
    open_line = False  # the last piece read did not end its line
    while end is None or number <= end:
        room = READ_CAP - size if number >= start else READ_CAP
        piece = stream.readline(room + 1)
        if not piece:
            break
        open_line = not piece.endswith(b"\n")
        if number >= start:
            if len(piece) > room:
                kept.append(piece[:room])
                text = b"".join(kept).decode("utf-8", "replace")
                separator = "" if text.endswith("\n") else "\n"
                return f"{text}{separator}[cut at 256 KiB; read on with startLine={number}]"
            kept.append(piece)
            size += len(piece)
        if not open_line:
            number += 1
    if kept:
        return b"".join(kept).decode("utf-8", "replace")
    lines = number if open_line else number - 1
    if lines == 0:
        return "(the file is empty)"
    return f"(nothing from line {start}: the file has {lines} line{'s' if lines != 1 else ''})"


def propose_edit(workspace: Workspace, arguments: Mapping[str, object]) -> ToolResult:
    """The ``propose_edit`` tool: the editor's report as text (see the module docstring).

    Raises:
        ToolError: bad arguments or paths, ``not_reviewed``, or a malformed report.
    """
    check_keys(arguments, ("summary", "files", "report"))
    summary = text_arg(arguments, "summary")
    if summary is None or not summary.strip():
        raise ToolError(INVALID_ARGUMENTS, "'summary' is required: say what the change does")
    paths = _proposed_paths(workspace, arguments.get("files"))
    report = arguments.get("report")
    if report is None:
        raise ToolError(
            NOT_REVIEWED,
            "the editor has not reviewed this proposal; nothing was changed",
        )
    outcomes = _report(workspace, report)
    lines: list[str] = []
    applied = 0
    for relative in paths:
        outcome = outcomes.get(relative)
        if outcome is None:
            lines.append(f"{relative}: not reported by the editor (treat it as not applied)")
            continue
        status, reason = outcome
        applied += status == "applied"
        line = f"{relative}: {_STATUS_HINTS[status]}"
        if reason:
            line += f" (reason: {reason})"
        lines.append(line)
    title = summary.strip().splitlines()[0][:_SUMMARY_CHARS]
    head = f"Proposal {title!r}: {applied} of {len(paths)} file{'s' if len(paths) != 1 else ''} applied."
    return ToolResult("\n".join([head, *lines]), is_error=applied == 0)


def _proposed_paths(workspace: Workspace, files: object) -> list[str]:
    """The proposal's files, checked; their normalized paths in order."""
    if not isinstance(files, list) or not files:
        raise ToolError(INVALID_ARGUMENTS, "'files' must be a non-empty list of {path, content}")
    seen: list[str] = []
    for index, item in enumerate(files):
        if not isinstance(item, dict):
            raise ToolError(
                INVALID_ARGUMENTS, f"files[{index}] must be an object {{path, content}}"
            )
        check_keys(item, ("path", "content"))
        if "content" not in item:
            raise ToolError(
                INVALID_ARGUMENTS,
                f"files[{index}] needs 'content': the full new text, or null to delete the file",
            )
        text_arg(item, "content")
        raw = text_arg(item, "path", path=True)
        if raw is None:
            raise ToolError(INVALID_ARGUMENTS, f"files[{index}] needs a 'path'")
        relative, path = workspace.resolve(raw, name=f"files[{index}].path")
        if relative == "." or path.is_dir():
            raise ToolError(INVALID_ARGUMENTS, f"files[{index}].path {relative!r} is a directory")
        if relative in seen:
            raise ToolError(INVALID_ARGUMENTS, f"{relative!r} is proposed twice; merge the changes")
        seen.append(relative)
    return seen


def _report(workspace: Workspace, report: object) -> dict[str, tuple[str, str]]:
    """The editor's report by normalized path: (status, reason)."""
    invalid = ToolError("invalid_report", "the editor's report of this proposal is malformed")
    if not isinstance(report, list):
        raise invalid
    outcomes: dict[str, tuple[str, str]] = {}
    for entry in report:
        if not isinstance(entry, dict):
            raise invalid
        path, status, reason = entry.get("path"), entry.get("status"), entry.get("reason")
        if not isinstance(path, str) or status not in REPORT_STATUSES:
            raise invalid
        if reason is not None and not isinstance(reason, str):
            raise invalid
        try:
            relative, _ = workspace.resolve(path)
        except ToolError:
            raise invalid from None
        outcomes[relative] = (str(status), (reason or "").strip())
    return outcomes
