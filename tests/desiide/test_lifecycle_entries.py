"""Reading transcript entries (bridge.desiide.lifecycle.entries): errors, refusals, paths."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.desiide.lifecycle.entries import (
    RETRYABLE_KINDS,
    Refusal,
    call_paths,
    file_meta,
    model_error_kind,
    proposal_files,
    refusal,
    ripgrep_missing,
)
from bridge.desiide.lifecycle.types import MODEL_ERROR_KINDS
from bridge.desiide.models.errors import ModelErrorKind

ERROR_CASES = [
    ("auth type", "whatever", "authentication_failed", "auth"),
    ("auth special", "Authentication failed: x", "auth_error", "auth"),
    ("billing", "Credit balance is too low", "billing_error", "auth"),
    ("401", 'API Error: 401 {"type":"authentication_error"}', None, "auth"),
    ("invalid key", "Invalid API key · Please run /login", None, "auth"),
    ("429", "API Error: 429", None, "rate_limit"),
    ("rate type", "x", "rate_limit", "rate_limit"),
    ("usage limit", "Claude AI usage limit reached|1760000000", None, "rate_limit"),
    ("529", "API Error: 529 Overloaded", None, "overloaded"),
    ("503", "API Error: 503 Service Unavailable", None, "overloaded"),
    ("refused", "API Error: connect ECONNREFUSED 127.0.0.1:9", None, "network"),
    ("fetch", "TypeError: fetch failed", None, "network"),
    ("timed out", "API Error: Request timed out.", None, "timeout"),
    ("504", "API Error: 504 Gateway Timeout", None, "timeout"),
    ("404", 'API Error: 404 {"type":"not_found_error","message":"model: x"}', None, "not_found"),
    ("400", 'API Error: 400 {"type":"invalid_request_error"}', None, "bad_request"),
    ("too long", "Prompt is too long", None, "bad_request"),
    ("invalid type", "x", "invalid_request", "bad_request"),
    ("500", "API Error: 500 Internal server error", None, "server"),
    ("api_error", '{"type":"api_error"}', None, "server"),
    ("server type", "x", "server_error", "server"),
    ("nothing", "error_max_turns", "error_max_turns", "unknown"),
    ("empty", "", None, "unknown"),
]


@pytest.mark.parametrize(
    ("text", "error_type", "kind"), [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES]
)
def test_model_error_kind(text: str, error_type: str | None, kind: str) -> None:
    assert model_error_kind(text, error_type) == kind


def test_the_kinds_and_which_are_retryable() -> None:
    assert {c[3] for c in ERROR_CASES} == set(MODEL_ERROR_KINDS)
    assert {"rate_limit", "overloaded", "network", "timeout", "server"} == RETRYABLE_KINDS


REFUSAL_CASES = [
    (
        "gate block",
        "Blocked by the bridge's risk gate: deny_list:rm_rf — Recursive delete …; "
        "outside_workspace — Touches a path outside",
        True,
        Refusal("blocked", ("deny_list:rm_rf", "outside_workspace")),
    ),
    ("policy", "Blocked: tool_not_allowed", True, Refusal("blocked", ("tool_not_allowed",))),
    ("budget", "budget:maxToolCalls reached", True, Refusal("blocked", ("budget:maxToolCalls",))),
    (
        "hook wording",
        "PreToolUse hook denied: deny_list:shutdown",
        True,
        Refusal("blocked", ("deny_list:shutdown",)),
    ),
    ("phone", "The user denied this tool call.", True, Refusal("rejected", ())),
    ("editor", "The user rejected this call: no", True, Refusal("rejected", ())),
    ("a tool error", "no such file: a.txt", True, None),
    ("not an error", "Blocked: tool_not_allowed", False, None),
    ("a label in a word", "xdeny_list:rm_rf2 failed", True, None),
]


@pytest.mark.parametrize(
    ("text", "is_error", "expected"),
    [c[1:] for c in REFUSAL_CASES],
    ids=[c[0] for c in REFUSAL_CASES],
)
def test_refusal(text: str, is_error: bool, expected: Refusal | None) -> None:
    assert refusal(text, is_error) == expected


def test_ripgrep_missing_is_the_first_line_of_an_error() -> None:
    assert ripgrep_missing("ripgrep_missing: install rg", True)
    assert not ripgrep_missing("ripgrep_missing: install rg", False)
    assert not ripgrep_missing("a.txt\nripgrep_missing", True)


PATH_CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("read_file", {"path": "src/a.py", "startLine": 3}, ["src/a.py"]),
    ("read_file", {"path": 3}, []),
    ("list_files", {}, ["."]),
    ("search", {"query": "x", "path": "src"}, ["src"]),
    ("run_command", {"command": "cat /etc/passwd"}, []),
    (
        "propose_edit",
        {"files": [{"path": "a", "content": "x"}, {"path": "b", "content": None}]},
        ["a", "b"],
    ),
]


@pytest.mark.parametrize(("tool", "args", "paths"), PATH_CASES)
def test_call_paths(tool: str, args: dict[str, Any], paths: list[str]) -> None:
    assert call_paths(tool, args) == paths


def test_proposal_files_keep_one_entry_per_path_its_last() -> None:
    args = {
        "files": [
            {"path": "a", "content": "1"},
            "junk",
            {"content": "x"},
            {"path": "b"},
            {"path": "a", "content": "2"},
        ]
    }
    assert proposal_files(args) == [("b", None), ("a", "2")]
    assert proposal_files({"files": "a"}) == []


def test_file_meta_is_metadata_only() -> None:
    assert file_meta("a.txt", "é\n", False) == {
        "path": "a.txt",
        "sensitive": False,
        "bytesAfter": 3,
    }
    assert file_meta(".env", None, True) == {"path": ".env", "sensitive": True, "deleted": True}


def test_the_kinds_are_the_orchestrators_model_error_kinds() -> None:
    assert set(MODEL_ERROR_KINDS) == {kind.value for kind in ModelErrorKind}
