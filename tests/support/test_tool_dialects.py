"""The tool dialects of the mock model APIs (pure): ``Bash``, ``bash`` or ``run_shell_command``."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.mock_anthropic_script import plan_reply
from tests.support.tool_dialects import adapt_tool_call, offered_tools


def anthropic_tool(name: str, *props: str) -> dict[str, Any]:
    schema = {"type": "object", "properties": {p: {"type": "string"} for p in props}}
    return {"name": name, "description": "", "input_schema": schema}


def gemini_tools(**declarations: tuple[str, ...]) -> list[dict[str, Any]]:
    return [
        {
            "functionDeclarations": [
                {
                    "name": name,
                    "parametersJsonSchema": {"properties": {p: {} for p in props}},
                }
                for name, props in declarations.items()
            ]
        }
    ]


# What OpenCode 1.18.33 and Gemini CLI 0.61 offer (their recorded property lists, trimmed).
OPENCODE = [
    anthropic_tool("bash", "command", "timeout", "workdir"),
    anthropic_tool("write", "content", "filePath"),
    anthropic_tool("edit", "filePath", "oldString", "newString", "replaceAll"),
    anthropic_tool("read", "filePath", "offset", "limit"),
]
GEMINI = gemini_tools(
    run_shell_command=("command", "description", "dir_path", "is_background"),
    write_file=("file_path", "content"),
    replace=("file_path", "instruction", "old_string", "new_string", "allow_multiple"),
    read_file=("file_path", "start_line", "end_line"),
)
CLAUDE = [anthropic_tool("Bash", "command", "description"), anthropic_tool("bash", "command")]

BASH = {"command": "ls", "description": "Run a command"}
EDIT = {"file_path": "/w/a", "old_string": "o", "new_string": "n"}

ADAPT_CASES: list[tuple[str, str, dict[str, Any], Any, tuple[str, dict[str, Any]]]] = [
    ("no-tools", "Bash", BASH, [], ("Bash", BASH)),
    ("claude-offers-its-name", "Bash", BASH, CLAUDE, ("Bash", BASH)),
    ("opencode-bash-drops-description", "Bash", BASH, OPENCODE, ("bash", {"command": "ls"})),
    (
        "opencode-write",
        "Write",
        {"file_path": "/w/a", "content": "x"},
        OPENCODE,
        ("write", {"filePath": "/w/a", "content": "x"}),
    ),
    (
        "opencode-edit",
        "Edit",
        EDIT,
        OPENCODE,
        ("edit", {"filePath": "/w/a", "oldString": "o", "newString": "n"}),
    ),
    ("opencode-read", "Read", {"file_path": "/w/a"}, OPENCODE, ("read", {"filePath": "/w/a"})),
    ("gemini-shell", "Bash", BASH, GEMINI, ("run_shell_command", BASH)),
    (
        "gemini-write",
        "Write",
        {"file_path": "/w/a", "content": "x"},
        GEMINI,
        ("write_file", {"file_path": "/w/a", "content": "x"}),
    ),
    (
        "gemini-replace-gets-an-instruction",
        "Edit",
        EDIT,
        GEMINI,
        ("replace", {**EDIT, "instruction": "Replace the text as the user asked."}),
    ),
    ("gemini-read", "Read", {"file_path": "/w/a"}, GEMINI, ("read_file", {"file_path": "/w/a"})),
    ("unknown-tool-passes", "Grep", {"pattern": "x"}, OPENCODE, ("Grep", {"pattern": "x"})),
    ("no-alias-offered", "Bash", BASH, [anthropic_tool("glob", "pattern")], ("Bash", BASH)),
]


@pytest.mark.parametrize(
    ("name", "tool_input", "tools", "expected"),
    [case[1:] for case in ADAPT_CASES],
    ids=[case[0] for case in ADAPT_CASES],
)
def test_adapt_tool_call(
    name: str, tool_input: dict[str, Any], tools: Any, expected: tuple[str, dict[str, Any]]
) -> None:
    assert adapt_tool_call(name, tool_input, offered_tools({"tools": tools})) == expected


def test_offered_tools_reads_both_shapes_and_tolerates_junk() -> None:
    body = {
        "tools": [
            anthropic_tool("bash", "command"),
            {"name": "no_schema"},
            "junk",
            *gemini_tools(read_file=("file_path",)),
            {"functionDeclarations": [{"name": "bare", "parameters": {"type": "object"}}]},
        ]
    }
    assert offered_tools(body) == {
        "bash": frozenset({"command"}),
        "no_schema": None,
        "read_file": frozenset({"file_path"}),
        "bare": None,
    }
    assert offered_tools({"tools": "nope"}) == {}


def test_a_field_the_schema_lacks_is_dropped_only_when_the_schema_is_known() -> None:
    offered: dict[str, frozenset[str] | None] = {"bash": None}
    assert adapt_tool_call("Bash", BASH, offered) == ("bash", BASH)


def opencode_body(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": [{"type": "text", "text": text}]}]}


def test_plan_reply_speaks_opencode_when_the_request_offers_its_tools() -> None:
    body = {**opencode_body("[[say: On it.]] [[bash: echo hi]] [[write: /w/f | a\\nb]]")}
    body["tools"] = OPENCODE
    reply = plan_reply(body)
    assert [(b.type, b.name or b.text, b.input or None) for b in reply.blocks] == [
        ("text", "On it.", None),
        ("tool_use", "bash", {"command": "echo hi"}),
        ("tool_use", "write", {"filePath": "/w/f", "content": "a\nb"}),
    ]
    assert reply.stop_reason == "tool_use"


def test_plan_reply_keeps_claude_code_names_when_offered() -> None:
    body = {**opencode_body("[[edit: /w/a | o | n]]"), "tools": [anthropic_tool("Edit")]}
    (block,) = plan_reply(body).blocks
    assert (block.name, block.input) == ("Edit", EDIT)
