"""What a task's session reports, as events (bridge.desiide.lifecycle.session), through the book.

Exact actions for each report; no clock, no I/O.
"""

from __future__ import annotations

from typing import Any

import pytest

from bridge.desiide.budgets import Budget
from bridge.desiide.lifecycle.machine import TaskBook
from bridge.desiide.lifecycle.types import (
    CardView,
    TaskState,
)
from tests.desiide.lifecycle_builders import (
    MODEL_ERRORS,
    T0,
    TS,
    Feed,
    call_usage,
    entry,
    events,
    kinds,
    permission,
    result,
    started,
    stream_end,
    text,
    tool_result,
    tool_use,
)

# --- the session's report --------------------------------------------------------------------


def test_entries_become_events_with_one_seq_per_task() -> None:
    book = TaskBook()
    book.create("a", "ask", "q", None, None, None, T0)
    book.create("b", "ask", "q", None, None, None, T0)
    feed_a, feed_b = Feed(book, "a"), Feed(book, "b")
    actions = feed_a(text("Looking."), tool_use("tu1", "read_file", path="src/a.py"))
    actions += feed_b(text("Hm."))
    actions += feed_a(tool_result("tu1", "print('hi')\n"), text("Done."))
    actions += feed_a(result(), stream_end())
    by_task: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}
    for event in events(actions):
        by_task[event["taskId"]].append(event)
        assert TS.match(event["ts"])
    assert [e["seq"] for e in by_task["a"]] == list(range(2, 2 + len(by_task["a"])))
    assert [e["seq"] for e in by_task["b"]] == [2, 3]
    a = by_task["a"]
    assert [e["type"] for e in a] == [
        "state_changed",
        "text_delta",
        "tool_call_started",
        "tool_call_finished",
        "text_delta",
        "usage",
        "state_changed",
    ]
    assert a[1]["messageId"] == "msg-0" and a[1]["delta"] == "Looking."
    assert a[2]["call"] == {"id": "tu1", "tool": "read_file", "args": {"path": "src/a.py"}}
    assert a[3]["result"] == {"callId": "tu1", "ok": True, "output": "print('hi')\n"}
    assert a[5]["modelId"] == "claude-test-1"
    assert a[5]["usage"] == {
        "inputTokens": 100,
        "outputTokens": 20,
        "costUsd": 0.01,
        "cacheReadTokens": 7,
    }
    assert a[6]["to"] == "done"
    assert book.summary("a")["state"] == "done"


def test_entries_already_seen_are_ignored_and_order_is_by_seq() -> None:
    book, _ = started("ask")
    late = [(3, text("three")), (2, text("two")), (1, text("one"))]
    first = book.on_session("t1", late, [], True, T0)
    again = book.on_session("t1", [(2, text("two")), (3, text("three"))], [], True, T0)
    assert [e["delta"] for e in events(first)] == ["one", "two", "three"]
    assert again == []


def test_user_text_and_non_editor_tools_show_nothing() -> None:
    _, feed = started()
    own = entry("tool_use", "Bash", tool_name="Bash", tool_use_id="x1", tool_input={})
    actions = feed(entry("text", "hello", role="user"), own, tool_result("x1", "out"))
    assert kinds(actions) == ["Log"]


# --- budgets ---------------------------------------------------------------------------------


def test_the_wall_clock_pauses_while_the_task_waits_on_the_user() -> None:
    budget = Budget(wall_clock_ms=600_000)
    book, feed = started(tools=["run_command"], budget=budget)
    assert book.next_deadline() == T0 + 600
    feed(cards=[permission("c1", "run_command", command="x")], now=T0 + 300)
    assert book.next_deadline() is None  # waiting: no deadline
    assert book.tick(T0 + 3600) == []
    book.approve("t1", "c1", "once", T0 + 4000)
    assert book.next_deadline() == T0 + 4000 + 300
    assert book.tick(T0 + 4299.999) == []
    actions = book.tick(T0 + 4300)
    assert kinds(actions) == ["error", "→failed", "StopSession"]
    assert events(actions)[1]["reason"] == "budget:wallClockMs"
    assert book.next_deadline() is None


def test_queued_time_does_not_count() -> None:
    book = TaskBook(max_running=1)
    book.create("a", "ask", "q", None, None, Budget(wall_clock_ms=60_000), T0)
    book.create("b", "ask", "q", None, None, Budget(wall_clock_ms=60_000), T0)
    Feed(book, "a")(text("x"), stream_end(), now=T0 + 3600)
    assert book.state("a") is TaskState.FAILED  # its own minute ran out while it ran
    assert book.state("b") is TaskState.PLANNING  # started now, not an hour ago
    assert book.next_deadline() == T0 + 3600 + 60


def test_a_report_after_the_deadline_fails_the_task_first() -> None:
    _, feed = started(budget=Budget(wall_clock_ms=1000))
    actions = feed(text("late"), now=T0 + 2)
    assert kinds(actions) == ["error", "→failed", "StopSession"]


def test_tool_calls_past_the_budget_fail_the_task() -> None:
    _, feed = started(budget=Budget(max_tool_calls=2))
    feed(tool_use("a", "read_file", path="a"), tool_use("b", "read_file", path="b"))
    actions = feed(tool_use("c", "read_file", path="c"), tool_result("c", "never read"))
    assert kinds(actions) == [
        "tool_call_started",
        "tool_call_finished",  # the calls still open finish cancelled, before the error
        "tool_call_finished",
        "tool_call_finished",
        "error",
        "→failed",
        "StopSession",
    ]
    closed = events(actions)[1:4]
    assert [e["result"]["callId"] for e in closed] == ["a", "b", "c"]
    assert {e["result"]["error"]["kind"] for e in closed} == {"cancelled"}
    assert events(actions)[-1]["reason"] == "budget:maxToolCalls"


def test_a_block_for_the_tool_budget_fails_the_task() -> None:
    book, feed = started()
    text_ = "Blocked: budget:maxToolCalls — the task used its 40 tool calls."
    actions = feed(tool_use("a", "read_file", path="a"), tool_result("a", text_, True))
    assert kinds(actions) == [
        "tool_call_started",
        "tool_call_finished",
        "error",
        "→failed",
        "StopSession",
    ]
    assert events(actions)[1]["result"]["error"]["reasons"] == ["budget:maxToolCalls"]
    assert book.summary("t1")["failureReason"] == "budget:maxToolCalls"


BLOCKS = [
    (
        "policy",
        "Blocked: tool_not_allowed — run_command is not allowed in this task.",
        ["tool_not_allowed"],
    ),
    (
        "gate",
        "Blocked by the bridge's risk gate: deny_list:rm_rf — Recursive delete of /.",
        ["deny_list:rm_rf"],
    ),
]


@pytest.mark.parametrize(
    ("message", "reasons"), [c[1:] for c in BLOCKS], ids=[c[0] for c in BLOCKS]
)
def test_a_blocked_call_is_reported_and_the_task_goes_on(message: str, reasons: list[str]) -> None:
    book, feed = started()
    actions = feed(
        tool_use("a", "run_command", command="rm -rf /"), tool_result("a", message, True)
    )
    assert events(actions)[1]["result"] == {
        "callId": "a",
        "ok": False,
        "error": {"kind": "blocked", "message": message, "reasons": reasons},
    }
    assert book.state("t1") is TaskState.RUNNING


def test_a_failed_tool_is_not_a_refusal() -> None:
    _, feed = started()
    actions = feed(
        tool_use("a", "read_file", path="nope"), tool_result("a", "no such file: nope", True)
    )
    assert events(actions)[1]["result"]["error"] == {
        "kind": "failed",
        "message": "no such file: nope",
    }


def test_tokens_count_per_call_and_the_turns_result_replaces_them() -> None:
    _, feed = started(budget=Budget(max_tokens=1000))
    assert feed(call_usage(500, 100)) == []
    assert feed(result(tokens_in=300, tokens_out=100)) != []  # the turn's total: 400, not 1000
    actions = feed(call_usage(500, 101))  # 400 + 601
    assert kinds(actions) == ["error", "→failed", "StopSession"]
    assert events(actions)[1]["reason"] == "budget:maxTokens"


# --- loops -----------------------------------------------------------------------------------


def test_a_card_labelled_loop_detected_fails_the_task() -> None:
    book, feed = started(tools=["run_command"])
    card = permission("c1", "run_command", ("loop_detected",), command="make")
    actions = feed(cards=[card])
    assert kinds(actions) == ["error", "→failed", "StopSession"]
    assert events(actions)[0]["kind"] == "loop_detected"
    assert book.summary("t1")["failureReason"] == "loop_detected"


def test_the_same_call_three_times_in_a_row_is_a_loop() -> None:
    book, feed = started()
    feed(tool_use("a", "search", query="x", regex=False), tool_result("a", "", False))
    feed(tool_use("b", "search", regex=False, query="x"), tool_result("b", "", False))
    feed(tool_use("c", "read_file", path="x"), tool_use("d", "search", query="x", regex=False))
    assert book.state("t1") is TaskState.RUNNING  # interrupted by another call
    feed(tool_use("e", "search", query="x", regex=False))
    actions = feed(tool_use("f", "search", regex=False, query="x"))
    assert events(actions)[-1]["reason"] == "loop_detected"


# --- model errors and other ends ------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "error", "retryable"), MODEL_ERRORS, ids=[c[0] for c in MODEL_ERRORS]
)
def test_an_error_entry_fails_the_task_with_its_model_error_kind(
    kind: str, error: dict[str, Any], retryable: bool
) -> None:
    book, feed = started()
    actions = feed(error, stream_end())
    assert kinds(actions) == ["error", "→failed", "StopSession"]
    assert events(actions)[0] | {"seq": 0, "ts": ""} == {
        "taskId": "t1",
        "seq": 0,
        "ts": "",
        "type": "error",
        "kind": kind,
        "message": error["content"],
        "retryable": retryable,
    }
    assert book.summary("t1")["failureReason"] == f"model_error:{kind}"


def test_a_missing_ripgrep_fails_the_task() -> None:
    book, feed = started()
    missing = "ripgrep_missing: list_files and search need rg on PATH"
    feed(tool_use("a", "search", query="x"), tool_result("a", missing, True))
    assert book.summary("t1")["failureReason"] == "ripgrep_missing"


def test_a_session_that_dies_mid_task_is_an_internal_error() -> None:
    _, feed = started()
    actions = feed(alive=False)
    assert kinds(actions) == ["Log", "error", "→failed", "StopSession"]
    assert events(actions)[0]["message"] == "The task's session ended unexpectedly."


def test_a_dead_session_is_read_to_its_end_before_it_fails_the_task() -> None:
    _, feed = started()
    assert kinds(feed(text("last words"), alive=False)) == ["text_delta"]  # maybe more to read
    assert kinds(feed(stream_end(), alive=False)) == ["→done", "StopSession"]
    assert feed(alive=False) == []


@pytest.mark.parametrize("reason", ["model_unavailable", "no_workspace", "internal_error"])
def test_the_runtime_can_fail_a_task_with_detail_for_the_log_only(reason: str) -> None:
    book = TaskBook()
    book.create("t1", "ask", "q", None, None, None, T0)
    actions = book.fail("t1", reason, "Something is missing.", T0, detail="Traceback …")
    assert kinds(actions) == ["Log", "error", "→failed", "StopSession"]
    assert "Traceback" not in str(events(actions))
    assert book.fail("t1", reason, "again", T0) == []
    with pytest.raises(ValueError, match="unknown failure reason"):
        book.fail("t1", "bored", "", T0)


def test_card_views_parse_from_the_watch_json() -> None:
    card = CardView.parse(
        {
            "id": "c1",
            "kind": "permission",
            "tool": "mcp__desiide__read_file",
            "input": {"path": "a"},
            "reasons": ["outside_workspace", 3],
            "reason_text": "Touches a path outside",
            "decision_id": 7,
        }
    )
    assert card == CardView(
        "c1",
        "permission",
        "mcp__desiide__read_file",
        {"path": "a"},
        ("outside_workspace",),
        "Touches a path outside",
        7,
    )
    with pytest.raises(ValueError):
        CardView.parse({"id": 1, "kind": "permission", "tool": "x"})
