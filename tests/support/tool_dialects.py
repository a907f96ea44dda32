"""Each agent's name and input fields for the tool calls the mock model APIs script (pure).

The directive language of :mod:`tests.support.mock_anthropic_script` speaks Claude Code's tools
(``[[bash: …]]`` → ``Bash{command, description}``, ``[[write: p | c]]`` → ``Write{file_path,
content}``, …). Other agents offer the same tools under other names and field names, and a model
reply naming a tool the request did not offer is dropped by the agent (measured with OpenCode: a
``Bash`` tool_use gets no tool call at all). :func:`adapt_tool_call` therefore rewrites a scripted
call into the dialect of the agent that sent the request, recognised by the tool names the
request offers:

=========  ===========================================  =========================================
Claude     OpenCode 1.18.33 (Anthropic ``tools``)       Gemini CLI 0.61 (``functionDeclarations``)
=========  ===========================================  =========================================
``Bash``   ``bash{command}``                            ``run_shell_command{command, description}``
``Write``  ``write{filePath, content}``                 ``write_file{file_path, content}``
``Edit``   ``edit{filePath, oldString, newString}``     ``replace{file_path, instruction,
           ..                                           old_string, new_string}``
``Read``   ``read{filePath}``                           ``read_file{file_path}``
=========  ===========================================  =========================================

(Gemini's ``replace`` requires an ``instruction``, which Claude's ``Edit`` lacks: the alias adds
one. OpenCode 1.18.33's ``bash`` has no ``description`` field: its required list is just
``command``, properties ``command``, ``timeout``, ``workdir``, measured from a recorded request.)

Rules: a request that offers the Claude Code name itself, or offers no tools at all (the unit
tests' bodies), keeps the call unchanged, so Claude Code behaves exactly as before. Otherwise the
first dialect whose name is offered wins; fields are renamed, and a field the offered schema does
not list is dropped (a field it requires but we lack is left out: the agent's own validation
error is then the test's evidence). A call with no alias offered is left as is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DIALECTS", "Alias", "adapt_tool_call", "offered_tools"]


@dataclass(frozen=True, slots=True)
class Alias:
    """One agent's name for a Claude Code tool, and its field names (Claude's → the agent's)."""

    name: str
    fields: Mapping[str, str]
    defaults: Mapping[str, Any] = field(default_factory=dict)
    """Fields the agent requires that Claude's tool lacks (added when the schema lists them)."""


DIALECTS: Mapping[str, tuple[Alias, ...]] = {
    "Bash": (
        Alias("bash", {"command": "command", "description": "description"}),
        Alias("run_shell_command", {"command": "command", "description": "description"}),
    ),
    "Write": (
        Alias("write", {"file_path": "filePath", "content": "content"}),
        Alias("write_file", {"file_path": "file_path", "content": "content"}),
    ),
    "Edit": (
        Alias(
            "edit",
            {"file_path": "filePath", "old_string": "oldString", "new_string": "newString"},
        ),
        Alias(
            "replace",
            {"file_path": "file_path", "old_string": "old_string", "new_string": "new_string"},
            {"instruction": "Replace the text as the user asked."},
        ),
    ),
    "Read": (
        Alias("read", {"file_path": "filePath"}),
        Alias("read_file", {"file_path": "file_path"}),
    ),
}
"""Claude Code tool → the other agents' aliases, in the order they are tried."""


def _properties(schema: Any) -> frozenset[str] | None:
    if not isinstance(schema, dict):
        return None
    props = schema.get("properties")
    return frozenset(props) if isinstance(props, dict) else None


def offered_tools(body: Mapping[str, Any]) -> dict[str, frozenset[str] | None]:
    """Tool name → its input property names (None if unknown), from a request body.

    Reads both the Anthropic shape (``tools: [{name, input_schema}]``) and the Gemini one
    (``tools: [{functionDeclarations: [{name, parametersJsonSchema | parameters}]}]``).
    """
    offered: dict[str, frozenset[str] | None] = {}
    tools = body.get("tools")
    if not isinstance(tools, list):
        return offered
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        declarations = tool.get("functionDeclarations")
        if isinstance(declarations, list):
            for decl in declarations:
                if isinstance(decl, dict) and isinstance(decl.get("name"), str):
                    schema = decl.get("parametersJsonSchema", decl.get("parameters"))
                    offered[decl["name"]] = _properties(schema)
        elif isinstance(tool.get("name"), str):
            offered[tool["name"]] = _properties(tool.get("input_schema"))
    return offered


def adapt_tool_call(
    name: str, tool_input: Mapping[str, Any], offered: Mapping[str, frozenset[str] | None]
) -> tuple[str, dict[str, Any]]:
    """The scripted call `name(tool_input)` in the dialect of the agent that offered `offered`.

    Args:
        name: a Claude Code tool name (``Bash``, ``Write``, ``Edit``, ``Read``; others pass).
        tool_input: its input, with Claude Code's field names.
        offered: what the request offers (:func:`offered_tools`).

    Returns:
        The tool name and input to put in the reply (see the module docstring for the rules).
    """
    if not offered or name in offered:
        return name, dict(tool_input)
    for alias in DIALECTS.get(name, ()):
        if alias.name not in offered:
            continue
        known = offered[alias.name]
        adapted = {alias.fields.get(key, key): value for key, value in tool_input.items()}
        for key, value in alias.defaults.items():
            adapted.setdefault(key, value)
        if known is not None:
            adapted = {key: value for key, value in adapted.items() if key in known}
        return alias.name, adapted
    return name, dict(tool_input)
