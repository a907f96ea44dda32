"""The Desiide editor's tools as the gate judges them: one call in our vocabulary per tool.

A Desiide task gives its agent five tools through an in-process MCP server named ``desiide``
(Claude Code calls them ``mcp__desiide__<tool>``; the tool contract is in ``DESIIDE.md``). The
gate's rules are written for Claude Code's own tools — ``Bash{command}``, ``Read{file_path}``,
``Glob``/``Grep{path}``, ``Write{file_path}`` — so each editor call is judged as the call it
amounts to:

=================  =====================================  =================================
editor tool        judged as                              why
=================  =====================================  =================================
``read_file``      ``Read{file_path: path}``              a read; outside the workspace is a floor
``list_files``     ``Glob{path}``                         a read of a directory listing
``search``         ``Grep{path}``                         a read of file contents
``run_command``    ``Bash{command}``                      the full shell check (deny list, floors)
``propose_edit``   one ``Write{file_path}`` per file      the write checks of every file
=================  =====================================  =================================

Paths stay as the model wrote them (workspace-relative): the gate resolves them against the
session's cwd, so ``../x`` and absolute paths reach the ``outside_workspace`` floor or a deny rule
as they would for Claude Code's own tools. The card the user sees keeps the editor's tool and
arguments; only the verdict comes from the translated call.

Pure; never raises for any input (a missing or non-string field becomes a call the gate cannot
resolve, which is a floor, never an allow).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "EDITOR_SERVER",
    "EDITOR_TOOLS",
    "EDITOR_TOOL_PREFIX",
    "JUDGE_LABEL",
    "PROPOSE_EDIT",
    "STRICT_LABEL",
    "editor_tool",
    "judged_calls",
]

EDITOR_SERVER: Final = "desiide"
"""The name of the MCP server that serves the editor's tools to the agent."""
EDITOR_TOOL_PREFIX: Final = f"mcp__{EDITOR_SERVER}__"
EDITOR_TOOLS: Final = ("read_file", "list_files", "search", "propose_edit", "run_command")
PROPOSE_EDIT: Final = "propose_edit"
JUDGE_LABEL: Final = "jev:pending"
"""On a card of a task whose judge is on: the rules would allow the call, and the editor's judge
(JEV ``risk_gate@1``) decides whether it stays a card (only ever raising a call)."""
STRICT_LABEL: Final = "policy_override:strict_mode"
"""On a card raised by the editor's strict mode (the rules alone would allow the call)."""


def editor_tool(tool_name: str) -> str | None:
    """The editor tool a call names (``mcp__desiide__search`` → ``search``), else None.

    A name under the prefix that is not one of the five (a model inventing ``write_file``) is
    returned as it is: the task policy refuses it as ``tool_not_allowed``.
    """
    if not tool_name.startswith(EDITOR_TOOL_PREFIX):
        return None
    return tool_name[len(EDITOR_TOOL_PREFIX) :]


def _text(fields: Mapping[str, Any], key: str) -> object:
    value = fields.get(key)
    return value if isinstance(value, str) else None


def judged_calls(tool: str, tool_input: Mapping[str, Any]) -> list[tuple[str, dict[str, object]]]:
    """The calls of our own vocabulary that one editor call is judged as (see the table).

    ``propose_edit`` gives one ``Write`` per proposed file (none when the proposal lists no
    file: the review card still shows it). An unknown editor tool gives an empty list: the
    caller refuses it before it is judged.
    """
    if tool == "read_file":
        return [("Read", {"file_path": _text(tool_input, "path")})]
    if tool == "list_files":
        path = _text(tool_input, "path") if "path" in tool_input else "."
        return [("Glob", {"path": path, "pattern": "*"})]
    if tool == "search":
        path = _text(tool_input, "path") if "path" in tool_input else "."
        return [("Grep", {"path": path, "pattern": "x"})]
    if tool == "run_command":
        return [("Bash", {"command": _text(tool_input, "command")})]
    if tool == PROPOSE_EDIT:
        files = tool_input.get("files")
        if not isinstance(files, list):
            return [("Write", {"file_path": None})]
        return [
            ("Write", {"file_path": _text(item, "path") if isinstance(item, Mapping) else None})
            for item in files
        ]
    return []
