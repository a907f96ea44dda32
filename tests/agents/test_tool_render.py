"""Tool summaries, tool-result texts and diff cards (PROTOCOL-v10-wire.md §4.3 caps)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bridge.agents.tool_render import (
    DIFF_LINE_CHARS,
    DIFF_MAX_LINES,
    build_diff,
    diff_fallback_text,
    tool_result_text,
    tool_summary,
)
from bridge.host.vocabulary import DIFF_LINE_TYPES
from bridge.protocol import DiffData

SUMMARY_CASES: list[tuple[str, dict[Any, Any], str]] = [
    ("Bash", {"command": "npm test", "description": "Run tests"}, "Bash: npm test"),
    ("Bash", {"command": "cd a &&\nmake"}, "Bash: cd a && make"),
    ("Write", {"file_path": "/w/a.txt", "content": "x"}, "Write: /w/a.txt"),
    ("Edit", {"file_path": "/w/a.py", "old_string": "a", "new_string": "b"}, "Edit: /w/a.py"),
    ("Read", {"file_path": "/w/r.md"}, "Read: /w/r.md"),
    ("Grep", {"pattern": "TODO", "path": "."}, "Grep: TODO"),
    ("WebFetch", {"url": "https://example.org"}, "WebFetch: https://example.org"),
    ("Bash", {"command": ""}, 'Bash: {"command": ""}'),
    ("mcp__db__query", {"sql": "select 1"}, 'mcp__db__query: {"sql": "select 1"}'),
    ("Custom", {(1, 2): "x"}, "Custom: {(1, 2): 'x'}"),  # a key JSON cannot write
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
        (["bare", 3], "bare\n3"),
        ({"odd": True}, '{"odd": true}'),
        ("x" * 2001, "x" * 2000 + "...[truncated]"),
        ("x" * 2000, "x" * 2000),
    ],
    ids=["str", "none", "texts", "image", "tool-ref", "other", "not-blocks", "dict", "cut", "edge"],
)
def test_tool_result_text(content: Any, expected: str) -> None:
    assert tool_result_text(content) == expected


def _diff(name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    """The card, held to the wire's ``DiffData`` (every card an entry carries must validate)."""
    diff = build_diff(name, tool_input)
    assert diff is not None
    DiffData.model_validate(diff)
    assert {line["type"] for line in diff["lines"]} <= set(DIFF_LINE_TYPES)
    return diff


def _lines(name: str, tool_input: dict[str, Any]) -> list[tuple[str, str]]:
    return [(line["type"], line["text"]) for line in _diff(name, tool_input)["lines"]]


def test_edit_gives_deletions_then_additions() -> None:
    tool_input = {"file_path": "/w/a", "old_string": "one\ntwo\n", "new_string": "three"}
    assert _lines("Edit", tool_input) == [("del", "one"), ("del", "two"), ("add", "three")]


def test_write_gives_additions_only() -> None:
    assert _lines("Write", {"file_path": "/w/a", "content": "a\nb\n"}) == [
        ("add", "a"),
        ("add", "b"),
    ]
    assert _lines("Write", {"file_path": "/w/a", "content": ""}) == []
    assert _lines("Write", {"file_path": "/w/a", "content": 3}) == []


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
    assert _lines("MultiEdit", {"file_path": "/w/a", "edits": "not a list"}) == []


def test_a_card_is_the_wire_shape_with_truncated_only_when_lines_were_dropped() -> None:
    assert _diff("Edit", {"file_path": "/w/a", "old_string": "x", "new_string": "y"}) == {
        "path": "/w/a",
        "lines": [{"type": "del", "text": "x"}, {"type": "add", "text": "y"}],
    }


def test_caps() -> None:
    content = "\n".join(f"line {n}" for n in range(DIFF_MAX_LINES + 5))
    diff = _diff("Write", {"file_path": "/w/big", "content": content})
    assert diff["truncated"] is True and len(diff["lines"]) == DIFF_MAX_LINES
    assert diff_fallback_text(diff).endswith("\n…")
    exact = "\n".join(f"line {n}" for n in range(DIFF_MAX_LINES))
    assert "truncated" not in _diff("Write", {"file_path": "/w/full", "content": exact})
    wide = _diff("Write", {"file_path": "/w/wide", "content": "w" * 900})
    assert "truncated" not in wide
    assert wide["lines"][0]["text"] == "w" * (DIFF_LINE_CHARS - 1) + "…"
    fits = _diff("Write", {"file_path": "/w/fits", "content": "f" * DIFF_LINE_CHARS})
    assert fits["lines"][0]["text"] == "f" * DIFF_LINE_CHARS


@pytest.mark.parametrize(
    ("name", "tool_input"),
    [
        ("Bash", {"command": "ls"}),
        ("Write", {"content": "x"}),
        ("Edit", {"file_path": ""}),
        ("Edit", {"file_path": ["/w/a"]}),
    ],
    ids=["not-a-file-tool", "no-path", "empty-path", "path-not-a-string"],
)
def test_no_diff(name: str, tool_input: dict[str, Any]) -> None:
    assert build_diff(name, tool_input) is None


def test_fallback_text() -> None:
    diff = _diff("Edit", {"file_path": "/w/a", "old_string": "x", "new_string": "y"})
    assert diff_fallback_text(diff) == "/w/a\n-x\n+y"
    multi = _diff("MultiEdit", {"file_path": "/w/m", "edits": [{"new_string": "a"}] * 2})
    assert diff_fallback_text(multi) == "/w/m\n+a\n ⋯\n+a"
    empty = _diff("Write", {"file_path": "/w/e", "content": ""})
    assert diff_fallback_text(empty) == "/w/e"
