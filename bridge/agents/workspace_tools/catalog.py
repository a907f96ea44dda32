"""The five Desiide tools as the model sees them: names, descriptions, JSON Schema inputs.

The descriptions are written for the model: what the tool does, its caps, and what it will not
do. Argument names are camelCase like the Desiide protocol's. ``propose_edit``'s ``report`` is in
the schema because the editor's answer arrives there (the bridge puts it into the call's input
when it allows the call); the description tells the model never to set it, and the bridge
overwrites whatever the model put there.

All five are always listed, whatever a task allows: a call outside the task's tools must reach the
bridge's gate, which refuses it with ``tool_not_allowed`` (a tool the model never saw would only
make it guess).
"""

from __future__ import annotations

from typing import Any, Final

from bridge.records import record

__all__ = [
    "LIST_FILES",
    "MAX_TIMEOUT_MS",
    "PROPOSE_EDIT",
    "READ_FILE",
    "RUN_COMMAND",
    "SEARCH",
    "TOOL_NAMES",
    "TOOL_SPECS",
    "ToolSpec",
]

READ_FILE: Final = "read_file"
LIST_FILES: Final = "list_files"
SEARCH: Final = "search"
PROPOSE_EDIT: Final = "propose_edit"
RUN_COMMAND: Final = "run_command"
TOOL_NAMES: Final = (READ_FILE, LIST_FILES, SEARCH, PROPOSE_EDIT, RUN_COMMAND)
MAX_TIMEOUT_MS: Final = 600_000


@record
class ToolSpec:
    """One tool as it is listed to the model."""

    name: str
    description: str
    input_schema: dict[str, Any]


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


_PATH = {
    "type": "string",
    "description": "A path relative to the workspace root, with '/' separators (no leading '/', "
    "no '..').",
}
_GLOB = {
    "type": "string",
    "description": "Only files matching this glob (ripgrep --glob syntax, e.g. '*.py' or "
    "'src/**/*.ts'; a leading '!' excludes).",
}

TOOL_SPECS: Final = (
    ToolSpec(
        READ_FILE,
        "Read a text file of the workspace. Returns its text (at most 256 KiB; the result says "
        "where it was cut and how to read on). Give startLine/endLine (1-based, inclusive) to read "
        "part of a long file.",
        _object(
            {
                "path": _PATH,
                "startLine": {"type": "integer", "minimum": 1, "description": "First line."},
                "endLine": {"type": "integer", "minimum": 1, "description": "Last line."},
            },
            ["path"],
        ),
    ),
    ToolSpec(
        LIST_FILES,
        "List the files under a directory of the workspace, one relative path per line (ripgrep "
        "--files: files ignored by .gitignore and hidden files are left out). At most 2,000 "
        "paths; the result says how many more there are.",
        _object(
            {"path": {**_PATH, "description": "The directory (default: the root)."}, "glob": _GLOB},
            [],
        ),
    ),
    ToolSpec(
        SEARCH,
        "Search the workspace's files for text (ripgrep). Returns 'path:line:text' lines, at most "
        "500 matches. The query is a plain string unless regex is true.",
        _object(
            {
                "query": {"type": "string", "minLength": 1, "description": "What to look for."},
                "path": {**_PATH, "description": "A directory or file (default: the root)."},
                "glob": _GLOB,
                "regex": {
                    "type": "boolean",
                    "description": "Read the query as a regular expression (Rust regex syntax).",
                },
            },
            ["query"],
        ),
    ),
    ToolSpec(
        PROPOSE_EDIT,
        "Propose changes to files. Nothing is written by this tool: the user reviews the proposal "
        "in the editor and applies or rejects each file; the result tells you what happened to "
        "each file (applied, rejected with a reason, or stale). Give the full new text of every "
        "file; content null deletes the file.",
        _object(
            {
                "summary": {"type": "string", "description": "What the change does, for the user."},
                "files": {
                    "type": "array",
                    "minItems": 1,
                    "items": _object(
                        {
                            "path": _PATH,
                            "content": {
                                "type": ["string", "null"],
                                "description": "The file's full new text; null deletes it.",
                            },
                        },
                        ["path", "content"],
                    ),
                },
                "report": {
                    "type": "array",
                    "description": "Set by the editor once the user reviewed the proposal; never "
                    "set it yourself (it is replaced).",
                    "items": {"type": "object"},
                },
            },
            ["summary", "files"],
        ),
    ),
    ToolSpec(
        RUN_COMMAND,
        "Run a shell command (/bin/sh -c) in the workspace root, with no input. Returns 'exit code "
        "N' and its combined stdout and stderr (the last 64 KiB). The command is killed, with "
        "everything it started, after timeoutMs (default 120000, at most 600000).",
        _object(
            {
                "command": {"type": "string", "minLength": 1, "description": "The command line."},
                "timeoutMs": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_TIMEOUT_MS,
                    "description": "Milliseconds before it is killed.",
                },
            },
            ["command"],
        ),
    ),
)
