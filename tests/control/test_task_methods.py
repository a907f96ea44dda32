"""The ``tasks.*`` control methods' params: strict at the edge, clean values for the handler."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.control.methods import METHODS
from bridge.control.rpc import INVALID_PARAMS, RpcError

START = {
    "session_id": "task-1",
    "cwd": "/home/dev/p/",
    "instruction": "fix it",
    "allowed_tools": ["read_file", "read_file", "search"],
    "max_tool_calls": 40,
}


def validate(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return METHODS[method].validate(params)


def test_start_cleans_its_params() -> None:
    assert validate("tasks.start", START) == {
        "session_id": "task-1",
        "cwd": "/home/dev/p",
        "instruction": "fix it",
        "allowed_tools": ("read_file", "search"),
        "max_tool_calls": 40,
        "title": None,
        "model": None,
        "strict": False,
        "judge": False,
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"cwd": "relative/path"}, "absolute"),
        ({"instruction": ""}, "instruction"),
        ({"allowed_tools": "read_file"}, "allowed_tools"),
        ({"max_tool_calls": 0}, "max_tool_calls"),
        ({"max_tool_calls": True}, "max_tool_calls"),
        ({"session_id": "a b"}, "session_id"),
        ({"extra": 1}, "unknown param"),
    ],
)
def test_start_refuses_bad_params(change: dict[str, Any], message: str) -> None:
    with pytest.raises(RpcError) as caught:
        validate("tasks.start", {**START, **change})
    assert caught.value.code == INVALID_PARAMS and message in str(caught.value)


def test_watch_takes_cursors_and_a_bounded_timeout() -> None:
    cleaned = validate(
        "tasks.watch",
        {"sessions": {"task-1": {"after_seq": 3, "cards": ["c1"], "state": "idle"}}, "timeout": 5},
    )
    assert cleaned == {"cursors": {"task-1": (3, frozenset({"c1"}), "idle")}, "timeout": 5.0}
    for bad in ({"sessions": {}}, {"sessions": {"t": {}}, "timeout": 61}):
        with pytest.raises(RpcError):
            validate("tasks.watch", bad)
    with pytest.raises(RpcError):
        validate("tasks.watch", {"sessions": {"t": {"after_seq": -1}}})


def test_answer_report_input_stop() -> None:
    assert validate(
        "tasks.answer", {"session_id": "t", "card_id": "c", "allow": False, "reason": "no"}
    ) == {"session_id": "t", "card_id": "c", "allow": False, "scope": None, "reason": "no"}
    with pytest.raises(RpcError):
        validate("tasks.answer", {"session_id": "t", "card_id": "c", "allow": True, "scope": "x"})
    report = [
        {"path": "a.py", "status": "applied"},
        {"path": "b", "status": "rejected", "reason": "no"},
    ]
    assert validate("tasks.report", {"session_id": "t", "card_id": "c", "report": report}) == {
        "session_id": "t",
        "card_id": "c",
        "report": (
            {"path": "a.py", "status": "applied"},
            {"path": "b", "status": "rejected", "reason": "no"},
        ),
    }
    with pytest.raises(RpcError):
        validate(
            "tasks.report",
            {"session_id": "t", "card_id": "c", "report": [{"path": "a", "status": "maybe"}]},
        )
    assert validate("tasks.input", {"session_id": "t", "text": "more"}) == {
        "session_id": "t",
        "text": "more",
    }
    assert validate("tasks.stop", {"session_id": "t"}) == {"session_id": "t"}
