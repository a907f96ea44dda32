"""How tool calls read on a phone: one-line summaries, result texts and diff cards.

Pure functions over tool inputs and results in Claude Code's vocabulary (``Bash`` + ``command``,
``Write`` + ``file_path``, …; the ACP runner maps its agents' calls onto it first), with
nothing but the standard library and :mod:`bridge.host.vocabulary`, so that a session host can
use them (it must not import pydantic or the wire's models). The shapes follow
PROTOCOL-v10-wire.md §4.3:

- a ``tool_use`` entry reads ``"<Tool>: <summary>"``: the command of ``Bash``, the path of the file
  tools, the pattern of the search tools, …; any other tool shows up to 200 characters of its JSON
  input;
- a ``tool_result`` is cut to 2,000 characters plus ``...[truncated]``;
- a ``diff`` card is built from the *input* of ``Edit`` / ``Write`` / ``MultiEdit`` (the reference
  bridge does the same; real hunks would need the file before the edit): ``Edit`` gives ``del``
  lines then ``add`` lines, ``Write`` only ``add`` lines, ``MultiEdit`` separates its edits with a
  ``context`` line ``⋯``. At most 200 lines, each at most 500 characters (cut with ``…``).

A diff card is the wire's ``DiffData`` as a JSON object: ``{"path", "lines": [{"type", "text"}]}``
plus ``"truncated": true`` when lines were dropped (absent otherwise, as the wire's encoder
writes it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from bridge.host.vocabulary import DIFF_LINE_TYPES

__all__ = [
    "DIFF_LINE_CHARS",
    "DIFF_MAX_LINES",
    "DIFF_TOOLS",
    "JSON_SUMMARY_CHARS",
    "RESULT_MAX_CHARS",
    "TRUNCATED_MARK",
    "build_diff",
    "diff_fallback_text",
    "tool_result_text",
    "tool_summary",
]

JSON_SUMMARY_CHARS: Final = 200
RESULT_MAX_CHARS: Final = 2000
TRUNCATED_MARK: Final = "...[truncated]"
DIFF_MAX_LINES: Final = 200
DIFF_LINE_CHARS: Final = 500
DIFF_TOOLS: Final = frozenset({"Edit", "Write", "MultiEdit"})
_MULTI_EDIT_SEPARATOR: Final = "⋯"
_SUMMARY_CHARS: Final = 200
_ADD, _DEL, _CONTEXT = DIFF_LINE_TYPES  # "add", "del", "context": the wire's diff line types
_PREFIX: Final[Mapping[str, str]] = {_ADD: "+", _DEL: "-", _CONTEXT: " "}

# The input key whose value says best what a call does, per tool. A tool missing here (MCP tools,
# tools of a newer CLI) is summarised by its JSON input.
_SUMMARY_KEYS: Final[Mapping[str, str]] = {
    "Bash": "command",
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "Read": "file_path",
    "NotebookEdit": "notebook_path",
    "Glob": "pattern",
    "Grep": "pattern",
    "WebFetch": "url",
    "WebSearch": "query",
    "ToolSearch": "query",
    "Agent": "description",
    "Task": "description",
    "Skill": "skill",
}


def _one_line(text: str, limit: int) -> str:
    """`text` on one line (newlines → spaces) and at most `limit` characters."""
    flat = " ".join(text.split("\n")).strip()
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def tool_summary(name: str, tool_input: Mapping[str, Any]) -> str:
    """``"<Tool>: <summary>"`` for a ``tool_use`` entry (e.g. ``Bash: npm test``)."""
    key = _SUMMARY_KEYS.get(name)
    value = tool_input.get(key) if key is not None else None
    if isinstance(value, str) and value.strip():
        return f"{name}: {_one_line(value, _SUMMARY_CHARS)}"
    try:
        encoded = json.dumps(dict(tool_input), ensure_ascii=False, default=str)
    except (TypeError, ValueError):  # a key that is not a string: still say something
        encoded = str(dict(tool_input))
    return f"{name}: {encoded[:JSON_SUMMARY_CHARS]}"


def _content_text(content: Any) -> str:
    """The readable text of a tool result's ``content`` (a string or a list of blocks)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return json.dumps(content, ensure_ascii=False, default=str)
    parts: list[str] = []
    for item in content:
        if not isinstance(item, dict):
            parts.append(str(item))
        elif item.get("type") == "text" and isinstance(item.get("text"), str):
            parts.append(item["text"])
        elif item.get("type") == "image":
            parts.append("[image]")
        elif item.get("type") == "tool_reference":
            parts.append(f"[loaded tool {item.get('tool_name', '?')}]")
        else:
            parts.append(json.dumps(item, ensure_ascii=False, default=str))
    return "\n".join(parts)


def tool_result_text(content: Any) -> str:
    """A tool result as the content of a ``tool_result`` entry (cut to 2,000 characters)."""
    text = _content_text(content)
    if len(text) <= RESULT_MAX_CHARS:
        return text
    return text[:RESULT_MAX_CHARS] + TRUNCATED_MARK


def _lines(text: Any) -> list[str]:
    """`text` split into lines; a final newline does not make an extra empty line."""
    if not isinstance(text, str) or text == "":
        return []
    body: str = text[:-1] if text.endswith("\n") else text
    return body.split("\n")


def _edit_lines(edit: Mapping[str, Any]) -> list[tuple[str, str]]:
    removed = [(_DEL, t) for t in _lines(edit.get("old_string"))]
    added = [(_ADD, t) for t in _lines(edit.get("new_string"))]
    return removed + added


def build_diff(name: str, tool_input: Mapping[str, Any]) -> dict[str, Any] | None:
    """The diff card (``DiffData`` as JSON) of an ``Edit`` / ``Write`` / ``MultiEdit`` call.

    Returns:
        ``{"path", "lines": [{"type", "text"}], "truncated"?}``, or None for any other tool and
        for an input without a usable ``file_path`` (a malformed call is shown by its
        ``tool_use`` entry alone).
    """
    path = tool_input.get("file_path")
    if name not in DIFF_TOOLS or not isinstance(path, str) or not path:
        return None
    raw: list[tuple[str, str]] = []
    if name == "Write":
        raw = [(_ADD, t) for t in _lines(tool_input.get("content"))]
    elif name == "Edit":
        raw = _edit_lines(tool_input)
    else:
        edits = tool_input.get("edits")
        for index, edit in enumerate(edits if isinstance(edits, list) else []):
            if not isinstance(edit, Mapping):
                continue
            if index:
                raw.append((_CONTEXT, _MULTI_EDIT_SEPARATOR))
            raw.extend(_edit_lines(edit))
    diff: dict[str, Any] = {
        "path": path,
        "lines": [{"type": kind, "text": _cap(text)} for kind, text in raw[:DIFF_MAX_LINES]],
    }
    if len(raw) > DIFF_MAX_LINES:
        diff["truncated"] = True
    return diff


def _cap(text: str) -> str:
    return text if len(text) <= DIFF_LINE_CHARS else text[: DIFF_LINE_CHARS - 1] + "…"


def diff_fallback_text(diff: Mapping[str, Any]) -> str:
    """The plain-text ``+``/``-`` rendering of a :func:`build_diff` card, for the entry's
    ``content`` (what a phone without diff support shows)."""
    lines: list[Mapping[str, str]] = diff["lines"]
    body = "\n".join(f"{_PREFIX[line['type']]}{line['text']}" for line in lines)
    header = f"{diff['path']}\n" if body else str(diff["path"])
    suffix = "\n…" if diff.get("truncated") else ""
    return f"{header}{body}{suffix}"
