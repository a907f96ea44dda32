"""An ACP tool call in the gate's vocabulary, and the permission option that carries an answer.

The gate (:mod:`bridge.gate`), the cards and the phone's renderers know Claude Code's tools:
``Bash`` with a ``command``, ``Write`` / ``Edit`` with a ``file_path``, ``Read``, ``Grep``, … Every
ACP agent names its tools its own way (OpenCode ``bash`` with ``command``, Gemini CLI
``run_shell_command``, …) but classifies each call with ACP's ``ToolKind``; :func:`gate_call` maps
kind + raw input onto Claude Code's vocabulary so that the same rules judge every agent's calls:

===========================  ===================================================================
``execute``                  ``Bash`` ``{command}`` (an argv list is joined as a shell line; with
                             no raw input, the title, which is Gemini CLI's command line)
``edit``                     ``Edit`` ``{file_path, old_string, new_string}`` when the call names
                             the text it replaces, else ``Write`` ``{file_path, content}``
``delete`` / ``move``        ``Write`` ``{file_path}``: the path rules (outside the workspace,
                             system directories) judge where it lands
``read``                     ``Read`` ``{file_path}``
``search``                   ``Grep`` ``{pattern, path}``
``fetch``                    ``WebFetch`` ``{url}``
``think`` / ``switch_mode``  ``Task`` (changes nothing by itself)
anything else                the agent's own title as the tool name: the gate's rule for tools it
                             does not know (never auto-allowed outside ``default``)
===========================  ===================================================================

A call whose kind says it changes something but whose target cannot be found (no command, no
path) keeps its kind's tool name with an empty input: the gate cannot judge it and asks.

Answers are chosen by the option's ``kind``, never by its id (ids differ between agents:
OpenCode's ``once``, Gemini CLI's ``proceed_once``). ``allow_always`` is never chosen: it would
make the agent skip asking for later calls, and then those calls would skip the bridge's gate (its
deny list included). A phone's "always" is kept by the driver instead, which still checks every
call against the gate first.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any, Final

from bridge.records import record

__all__ = ["GateCall", "choose_option", "gate_call"]

_PATH_KEYS: Final = ("file_path", "filePath", "path", "absolute_path", "absolutePath", "file")
_COMMAND_KEYS: Final = ("command", "cmd", "commandLine", "script")
_OLD_KEYS: Final = ("old_string", "oldString", "old_str", "oldText")
_NEW_KEYS: Final = ("new_string", "newString", "new_str", "newText")
_CONTENT_KEYS: Final = ("content", "text", "new_content", "newContent")
_PATTERN_KEYS: Final = ("pattern", "query", "regex", "glob")
_NAME_CHARS: Final = 64


@record
class GateCall:
    """One call as the gate and the phone read it."""

    tool_name: str
    tool_input: Mapping[str, Any] = field(default_factory=dict)


def gate_call(call: Mapping[str, Any]) -> GateCall:
    """`call` (an ACP ``ToolCall``/``ToolCallUpdate`` as JSON, fields merged) in the gate's terms.

    Pure and total: any JSON maps onto some call.
    """
    raw = call.get("rawInput")
    raw_input: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    kind = call.get("kind")
    path = _first_str(raw_input, _PATH_KEYS) or _location(call) or _diff_path(call)
    if kind == "execute":
        # Gemini CLI sends no raw input: the call's title is its command line.
        command = _command(raw_input) or _title(call, limit=None) or None
        return GateCall("Bash", {"command": command} if command else {})
    if kind == "edit":
        if path is None:
            return GateCall("Edit", {})
        old, new = _first_str(raw_input, _OLD_KEYS), _first_str(raw_input, _NEW_KEYS)
        if old is not None and new is not None:
            return GateCall("Edit", {"file_path": path, "old_string": old, "new_string": new})
        diff = _diff(call)
        if diff is not None and diff[0]:
            return GateCall(
                "Edit", {"file_path": path, "old_string": diff[0], "new_string": diff[1]}
            )
        content = _first_str(raw_input, _CONTENT_KEYS)
        if content is None and diff is not None:
            content = diff[1]
        return GateCall("Write", {"file_path": path, "content": content or ""})
    if kind in ("delete", "move"):
        return GateCall("Write", {"file_path": path} if path else {})
    if kind == "read":
        return GateCall("Read", {"file_path": path} if path else {})
    if kind == "search":
        search: dict[str, Any] = {}
        if (pattern := _first_str(raw_input, _PATTERN_KEYS)) is not None:
            search["pattern"] = pattern
        if path is not None:
            search["path"] = path
        return GateCall("Grep", search)
    if kind == "fetch":
        url = _first_str(raw_input, ("url", "uri"))
        return GateCall("WebFetch", {"url": url} if url else {})
    if kind in ("think", "switch_mode"):
        return GateCall("Task", {"description": _title(call)})
    return GateCall(_title(call) or "tool", dict(raw_input))


def choose_option(options: Sequence[Mapping[str, Any]], allow: bool) -> str | None:
    """The ``optionId`` that says `allow` (``allow_once``) or not (``reject_once``, else
    ``reject_always``); None when the agent offered no such option (the driver then answers
    ``cancelled``, which refuses too)."""
    kinds = ("allow_once",) if allow else ("reject_once", "reject_always")
    for kind in kinds:
        for option in options:
            option_id = option.get("optionId")
            if option.get("kind") == kind and isinstance(option_id, str):
                return option_id
    return None


def _command(raw_input: Mapping[str, Any]) -> str | None:
    for key in _COMMAND_KEYS:
        value = raw_input.get(key)
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return shlex.join(value)
    return None


def _first_str(raw_input: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    for key in keys:
        value = raw_input.get(key)
        if isinstance(value, str):
            return value
    return None


def _location(call: Mapping[str, Any]) -> str | None:
    locations = call.get("locations")
    if isinstance(locations, list):
        for location in locations:
            if isinstance(location, Mapping) and isinstance(path := location.get("path"), str):
                return path
    return None


def _diff(call: Mapping[str, Any]) -> tuple[str, str] | None:
    """(old text, new text) of the call's first ``diff`` content."""
    content = call.get("content")
    if isinstance(content, list):
        for item in content:
            if isinstance(item, Mapping) and item.get("type") == "diff":
                new = item.get("newText")
                old = item.get("oldText")
                if isinstance(new, str):
                    return (old if isinstance(old, str) else "", new)
    return None


def _diff_path(call: Mapping[str, Any]) -> str | None:
    content = call.get("content")
    if isinstance(content, list):
        for item in content:
            if isinstance(item, Mapping) and item.get("type") == "diff":
                path = item.get("path")
                if isinstance(path, str):
                    return path
    return None


def _title(call: Mapping[str, Any], limit: int | None = _NAME_CHARS) -> str:
    title = call.get("title")
    return title.strip()[:limit] if isinstance(title, str) else ""
