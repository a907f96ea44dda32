"""Tool summaries, tool-result texts and diff cards (PROTOCOL-v10-wire.md §4.3 caps)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bridge.agents.claude import (
    DIFF_LINE_CHARS,
    DIFF_MAX_LINES,
    build_diff,
    diff_fallback_text,
    tool_result_text,
    tool_summary,
)

SUMMARY_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("Bash", {"command": "npm test", "description": "Run tests"}, "Bash: npm test"),
    ("Bash", {"command": "cd a &&\nmake"}, "Bash: cd a && make"),
    ("Write", {"file_path": "/w/a.txt", "content": "x"}, "Write: /w/a.txt"),
    ("Edit", {"file_path": "/w/a.py", "old_string": "a", "new_string": "b"}, "Edit: /w/a.py"),
    ("Read", {"file_path": "/w/r.md"}, "Read: /w/r.md"),
    ("Grep", {"pattern": "TODO", "path": "."}, "Grep: TODO"),
    ("WebFetch", {"url": "https://example.org"}, "WebFetch: https://example.org"),
    ("Bash", {"command": ""}, 'Bash: {"command": ""}'),
    ("mcp__db__query", {"sql": "select 1"}, 'mcp__db__query: {"sql": "select 1"}'),
]


@pytest.mark.parametrize(("name", "tool_input", "expected"), SUMMARY_CASES)
def test_tool_summary(name: str, tool_input: dict[str, Any], expected: str) -> None:
    assert tool_summary(name, tool_input) == expected


def test_long_inputs_are_cut() -> None:
    big = {"data": "y" * 1000}
    assert tool_summary("Custom", big) == "Custom: " + json.dumps(big)[:200]
    command = tool_summary("Bash", {"command": "z" * 300})
    assert len(command) == len("Bash: ") + 200 and command.endswith("…")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("plain", "plain"),
        (None, ""),
        ([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "a\nb"),
        ([{"type": "image", "source": {}}], "[image]"),
        ([{"type": "tool_reference", "tool_name": "ExitPlanMode"}], "[loaded tool ExitPlanMode]"),
        ([{"type": "other", "n": 1}], '{"type": "other", "n": 1}'),
        ({"odd": True}, '{"odd": true}'),
        ("x" * 2001, "x" * 2000 + "...[truncated]"),
        ("x" * 2000, "x" * 2000),
    ],
    ids=["str", "none", "texts", "image", "tool-ref", "other", "dict", "cut", "edge"],
)
def test_tool_result_text(content: Any, expected: str) -> None:
    assert tool_result_text(content) == expected


def _lines(name: str, tool_input: dict[str, Any]) -> list[tuple[str, str]]:
    diff = build_diff(name, tool_input)
    assert diff is not None
    return [(line.type, line.text) for line in diff.lines]


def test_edit_gives_deletions_then_additions() -> None:
    tool_input = {"file_path": "/w/a", "old_string": "one\ntwo\n", "new_string": "three"}
    assert _lines("Edit", tool_input) == [("del", "one"), ("del", "two"), ("add", "three")]


def test_write_gives_additions_only() -> None:
    assert _lines("Write", {"file_path": "/w/a", "content": "a\nb\n"}) == [
        ("add", "a"),
        ("add", "b"),
    ]
    assert _lines("Write", {"file_path": "/w/a", "content": ""}) == []


def test_multi_edit_separates_edits() -> None:
    tool_input = {
        "file_path": "/w/a",
        "edits": [
            {"old_string": "a", "new_string": "b"},
            "not an edit",
            {"old_string": "c", "new_string": "d"},
        ],
    }
    assert _lines("MultiEdit", tool_input) == [
        ("del", "a"),
        ("add", "b"),
        ("context", "⋯"),
        ("del", "c"),
        ("add", "d"),
    ]


def test_caps() -> None:
    content = "\n".join(f"line {n}" for n in range(DIFF_MAX_LINES + 5))
    diff = build_diff("Write", {"file_path": "/w/big", "content": content})
    assert diff is not None and diff.truncated is True and len(diff.lines) == DIFF_MAX_LINES
    assert diff_fallback_text(diff).endswith("\n…")
    wide = build_diff("Write", {"file_path": "/w/wide", "content": "w" * 900})
    assert wide is not None and wide.truncated is None
    assert wide.lines[0].text == "w" * (DIFF_LINE_CHARS - 1) + "…"


@pytest.mark.parametrize(
    ("name", "tool_input"),
    [("Bash", {"command": "ls"}), ("Write", {"content": "x"}), ("Edit", {"file_path": ""})],
)
def test_no_diff(name: str, tool_input: dict[str, Any]) -> None:
    assert build_diff(name, tool_input) is None


def test_fallback_text() -> None:
    diff = build_diff("Edit", {"file_path": "/w/a", "old_string": "x", "new_string": "y"})
    assert diff is not None
    assert diff_fallback_text(diff) == "/w/a\n-x\n+y"
    empty = build_diff("Write", {"file_path": "/w/e", "content": ""})
    assert empty is not None and diff_fallback_text(empty) == "/w/e"
