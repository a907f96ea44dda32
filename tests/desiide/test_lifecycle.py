"""The task lifecycle (bridge.desiide.lifecycle.machine): the queue, the editor's requests, the ends.

Exact actions for each input; no clock, no I/O. What the session's reports become is
test_lifecycle_session's.
"""

from __future__ import annotations

import pytest

from bridge.desiide.budgets import Budget
from bridge.desiide.lifecycle.machine import DEFAULT_TOOLS, TaskBook
from bridge.desiide.lifecycle.types import (
    FAILURE_REASONS,
    MODEL_ERROR_KINDS,
    Action,
    AnswerCard,
    ApprovalNotFound,
    CardView,
    Emit,
    FileReport,
    InvalidReport,
    Judge,
    Log,
    RunChecks,
    SendInput,
    StartSession,
    StopSession,
    Success,
    TaskNotFound,
    TaskState,
)
from tests.desiide.lifecycle_builders import (
    MODEL_ERRORS,
    PYTEST,
    T0,
    Feed,
    describe,
    entry,
    events,
    kinds,
    permission,
    result,
    review,
    started,
    stream_end,
    text,
    tool_result,
    tool_use,
)

# --- creation and the queue ------------------------------------------------------------------


def test_create_starts_at_once_with_the_default_tools() -> None:
    book = TaskBook()
    actions = book.create("t1", "edit", "Rename foo", None, None, None, T0)
    assert kinds(actions) == ["→queued", "→planning", "StartSession"]
    first, second, start = actions
    assert isinstance(first, Emit) and isinstance(second, Emit)
    assert first.event == {
        "taskId": "t1",
        "seq": 0,
        "ts": "2030-03-17T17:46:40.000Z",
        "type": "state_changed",
        "from": None,
        "to": "queued",
    }
    assert second.event["from"] == "queued" and second.event["seq"] == 1
    assert isinstance(start, StartSession)
    assert start.allowed_tools == DEFAULT_TOOLS and start.max_tool_calls == 40
    assert "Rename foo" in start.prompt and "propose_edit" in start.prompt


PROMPT_CASES = [
    ("ask", "read-only", False),
    ("edit", "proposing edits with propose_edit", True),
    ("fix", "until the project's checks pass", True),
]


@pytest.mark.parametrize(("kind", "job", "edits"), PROMPT_CASES, ids=[c[0] for c in PROMPT_CASES])
def test_the_prompt_says_the_kinds_job_and_the_tools(kind: str, job: str, edits: bool) -> None:
    book = TaskBook()
    context = {
        "files": ["src/a.py"],
        "selection": {"path": "src/a.py", "startLine": 3, "endLine": 9},
    }
    actions = book.create(
        "t1", kind, "Why is x None?", None, None, None, T0, context=context, check_commands=[PYTEST]
    )
    start = actions[-1]
    assert isinstance(start, StartSession)
    assert job in start.prompt
    assert "Why is x None?" in start.prompt
    assert "src/a.py, lines 3-9" in start.prompt
    assert "at most 40 tool calls" in start.prompt
    assert ("propose_edit" in start.allowed_tools) is edits  # ask is read-only by definition
    assert ("python -m pytest -q" in start.prompt) is (kind == "fix")


def test_create_refuses_a_taken_id_an_unknown_kind_or_tool() -> None:
    book = TaskBook()
    book.create("t1", "ask", "x", None, None, None, T0)
    with pytest.raises(ValueError, match="exists already"):
        book.create("t1", "ask", "x", None, None, None, T0)
    with pytest.raises(ValueError):
        book.create("t2", "refactor", "x", None, None, None, T0)
    with pytest.raises(ValueError, match="unknown tools"):
        book.create("t3", "ask", "x", ["write_file"], None, None, T0)


def test_two_run_and_the_rest_wait_in_fifo_order() -> None:
    book = TaskBook()
    for task_id in ("a", "b", "c", "d"):
        book.create(task_id, "ask", "q", None, None, None, T0)
    assert [s["state"] for s in book.summaries()] == ["planning", "planning", "queued", "queued"]
    # b ends first: c (the oldest waiting) takes its slot, d still waits.
    actions = Feed(book, "b")(text("answer"), stream_end())
    assert [describe(a) for a in actions[-3:]] == ["stop b", "emit c state_changed", "start c"]
    assert [book.state(t) for t in "abcd"] == [
        TaskState.PLANNING,
        TaskState.DONE,
        TaskState.PLANNING,
        TaskState.QUEUED,
    ]
    actions = book.cancel("a", T0)
    assert [describe(a) for a in actions] == [
        "emit a state_changed",
        "stop a",
        "emit d state_changed",
        "start d",
    ]


def test_a_queued_task_only_has_its_first_event() -> None:
    book = TaskBook(max_running=1)
    book.create("a", "ask", "q", None, None, None, T0)
    assert kinds(book.create("b", "ask", "q", None, None, None, T0)) == ["→queued"]


# --- approvals -------------------------------------------------------------------------------


def test_a_permission_card_waits_for_the_editor_and_approve_once_answers_it() -> None:
    book, feed = started(tools=["run_command"])
    card = CardView(
        "tu1",
        "permission",
        "mcp__desiide__run_command",
        {"command": "make deploy"},
        ("command_substitution",),
        decision_id=42,
    )
    actions = feed(tool_use("tu1", "run_command", command="make deploy"), cards=[card])
    assert kinds(actions) == ["tool_call_started", "approval_required", "→awaiting_approval"]
    required = events(actions)[1]
    assert required | {"seq": 0, "ts": ""} == {
        "taskId": "t1",
        "seq": 0,
        "ts": "",
        "type": "approval_required",
        "approvalId": "tu1",
        "call": {"id": "tu1", "tool": "run_command", "args": {"command": "make deploy"}},
        "outcome": "confirm",
        "reasons": ["command_substitution"],
        "decisionId": 42,
        "paths": [],
    }
    assert events(actions)[2]["reason"] == "approval"
    assert feed(cards=[card]) == []  # the card is repeated by every watch: read once
    actions = book.approve("t1", "tu1", "once", T0)
    assert actions[0] == AnswerCard("t1", "tu1", True)
    assert kinds(actions) == ["AnswerCard", "decision_made", "→running"]
    decision = events(actions)[0]["decision"]
    assert decision == {
        "at": "2030-03-17T17:46:40.000Z",
        "taskId": "t1",
        "approvalId": "tu1",
        "tool": "run_command",
        "outcome": "approved",
        "reasons": ["command_substitution"],
        "id": 42,
        "detail": "scope: once",
    }
    with pytest.raises(ApprovalNotFound) as caught:
        book.approve("t1", "tu1", "once", T0)
    assert caught.value.code == -32005


def test_scope_task_allows_the_exact_same_call_later_key_order_ignored() -> None:
    book, feed = started(tools=["run_command"])
    feed(cards=[permission("c1", "run_command", command="make test", timeoutMs=1000)])
    book.approve("t1", "c1", "task", T0)
    same = CardView(
        "c2", "permission", "mcp__desiide__run_command", {"timeoutMs": 1000, "command": "make test"}
    )
    actions = feed(cards=[same])
    assert kinds(actions) == ["AnswerCard", "decision_made"]  # no approval_required, no wait
    assert actions[0] == AnswerCard("t1", "c2", True)
    assert events(actions)[0]["decision"]["outcome"] == "auto"
    other = permission("c3", "run_command", command="make test", timeoutMs=2000)
    assert kinds(feed(cards=[other])) == ["approval_required", "→awaiting_approval"]


def test_scope_task_also_answers_the_same_call_already_waiting() -> None:
    book, feed = started(tools=["read_file"])
    feed(
        cards=[
            permission("c1", "read_file", path="../x"),
            permission("c2", "read_file", path="../x"),
        ]
    )
    actions = book.approve("t1", "c1", "task", T0)
    assert kinds(actions) == [
        "AnswerCard",
        "decision_made",
        "AnswerCard",
        "decision_made",
        "→running",
    ]
    assert actions[2] == AnswerCard("t1", "c2", True)


def test_reject_sends_the_reason_to_the_model_and_the_result_is_rejected() -> None:
    book, feed = started(tools=["run_command"])
    feed(
        tool_use("tu1", "run_command", command="rm x"),
        cards=[permission("tu1", "run_command", command="rm x")],
    )
    actions = book.reject("t1", "tu1", "not that file", T0)
    assert actions[0] == AnswerCard(
        "t1", "tu1", False, "The user rejected this call: not that file"
    )
    assert events(actions)[0]["decision"]["outcome"] == "rejected"
    finished = events(
        feed(tool_result("tu1", "The user rejected this call: not that file", True), cards=[])
    )
    assert finished[0]["result"]["error"] == {
        "kind": "rejected",
        "message": "The user rejected this call: not that file",
        "reasons": [],
    }


def test_a_card_answered_elsewhere_is_a_decision_and_the_task_runs_on() -> None:
    book, feed = started(tools=["run_command"])
    feed(cards=[permission("c1", "run_command", command="ls -la ~")])
    actions = feed(cards=[])  # a phone answered first
    assert kinds(actions) == ["decision_made", "→running"]
    assert events(actions)[0]["decision"]["outcome"] == "answered_elsewhere"
    with pytest.raises(ApprovalNotFound):
        book.reject("t1", "c1", None, T0)


def test_unknown_task_and_approval_errors_carry_their_codes() -> None:
    book, _ = started()
    with pytest.raises(TaskNotFound) as caught:
        book.approve("nope", "c1", "once", T0)
    assert caught.value.code == -32004
    with pytest.raises(ApprovalNotFound, match="no pending approval 'c9'"):
        book.reject("t1", "c9", None, T0)
    with pytest.raises(ValueError, match="unknown scope"):
        book.approve("t1", "c1", "forever", T0)


def test_a_question_card_is_refused_in_an_editor_task() -> None:
    _, feed = started()
    actions = feed(cards=[CardView("q1", "question", "AskUserQuestion", {})])
    assert kinds(actions) == ["Log", "AnswerCard"]
    answer = actions[1]
    assert isinstance(answer, AnswerCard) and not answer.allow


# --- edit proposals --------------------------------------------------------------------------


def proposing() -> tuple[TaskBook, Feed, list[Action]]:
    book, feed = started()
    files: dict[str, str | None] = {"src/a.py": "x = 1\n", ".env": "K=v\n", "old.txt": None}
    actions = feed(tool_use("p1", "propose_edit", summary="Fix it"), cards=[review("p1", files)])
    return book, feed, actions


def test_a_review_card_is_an_edit_proposal_with_file_metadata() -> None:
    book, _, actions = proposing()
    assert kinds(actions) == ["tool_call_started", "edit_proposed", "→awaiting_approval"]
    proposed = events(actions)[1]
    assert proposed["proposal"] == {
        "id": "p1",
        "taskId": "t1",
        "summary": "Fix it",
        "files": [
            {"path": "src/a.py", "content": "x = 1\n"},
            {"path": ".env", "content": "K=v\n"},
            {"path": "old.txt", "content": None},
        ],
    }
    assert proposed["files"] == [
        {"path": "src/a.py", "sensitive": False, "bytesAfter": 6},
        {"path": ".env", "sensitive": True, "bytesAfter": 4},
        {"path": "old.txt", "sensitive": False, "deleted": True},
    ]
    assert events(actions)[2]["reason"] == "edit_review"
    with pytest.raises(ApprovalNotFound):
        book.approve("t1", "p1", "once", T0)  # a proposal is answered by edits.report


def test_a_complete_report_answers_the_call_with_the_report() -> None:
    book, _, _ = proposing()
    report = [
        FileReport("old.txt", "applied"),
        FileReport("src/a.py", "applied"),
        FileReport(".env", "rejected", "no secrets"),
    ]
    actions = book.report_edits("t1", "p1", report, T0)
    assert actions[0] == AnswerCard(
        "t1",
        "p1",
        True,
        report=(
            {"path": "src/a.py", "status": "applied"},
            {"path": ".env", "status": "rejected", "reason": "no secrets"},
            {"path": "old.txt", "status": "applied"},
        ),
    )
    assert kinds(actions) == ["AnswerCard", "→running"]
    with pytest.raises(ApprovalNotFound, match="reported already") as caught:
        book.report_edits("t1", "p1", report, T0)
    assert caught.value.code == -32005


def test_the_task_waits_until_every_file_is_reported() -> None:
    book, _, _ = proposing()
    assert book.report_edits("t1", "p1", [FileReport("src/a.py", "stale")], T0) == []
    assert book.state("t1") is TaskState.AWAITING_APPROVAL
    with pytest.raises(InvalidReport, match="reported already"):
        book.report_edits("t1", "p1", [FileReport("src/a.py", "applied")], T0)
    assert book.report_edits("t1", "p1", [FileReport(".env", "rejected")], T0) == []
    actions = book.report_edits("t1", "p1", [FileReport("old.txt", "applied")], T0)
    answer = actions[0]
    assert isinstance(answer, AnswerCard) and answer.report is not None
    assert [f["status"] for f in answer.report] == ["stale", "rejected", "applied"]
    assert book.state("t1") is TaskState.RUNNING


BAD_REPORTS = [
    ("outside", [FileReport("src/b.py", "applied")], "is not in proposal"),
    (
        "twice in one call",
        [FileReport(".env", "applied"), FileReport(".env", "rejected")],
        "reported already",
    ),
    ("status", [FileReport(".env", "merged")], "unknown status"),
    ("empty", [], "names no file"),
    ("partly outside", [FileReport(".env", "applied"), FileReport("x", "applied")], "is not in"),
]


@pytest.mark.parametrize(
    ("reports", "message"), [c[1:] for c in BAD_REPORTS], ids=[c[0] for c in BAD_REPORTS]
)
def test_a_report_that_does_not_fit_is_refused_whole(
    reports: list[FileReport], message: str
) -> None:
    book, _, _ = proposing()
    with pytest.raises(InvalidReport, match=message) as caught:
        book.report_edits("t1", "p1", reports, T0)
    assert caught.value.code == -32602
    # Nothing was recorded: the whole proposal can still be reported.
    every = [FileReport(p, "applied") for p in ("src/a.py", ".env", "old.txt")]
    assert kinds(book.report_edits("t1", "p1", every, T0)) == ["AnswerCard", "→running"]


def test_an_unknown_proposal_is_not_found() -> None:
    book, _, _ = proposing()
    with pytest.raises(ApprovalNotFound, match="no pending proposal"):
        book.report_edits("t1", "p2", [FileReport("x", "applied")], T0)


BAD_PROPOSALS = [
    ("climbs", "../secrets.txt", "must not contain '..' segments"),
    ("absolute", "/etc/hosts", "must be relative to the workspace root"),
    ("not plain", "./src//a.py", "write the path of file 2 as 'src/a.py'"),
]


@pytest.mark.parametrize(
    ("path", "problem"), [c[1:] for c in BAD_PROPOSALS], ids=[c[0] for c in BAD_PROPOSALS]
)
def test_a_proposal_with_a_path_the_editor_cannot_take_is_refused(path: str, problem: str) -> None:
    book, feed = started()
    actions = feed(cards=[review("p1", {"ok.txt": "x", path: "y"})])
    assert len(actions) == 1
    answer = actions[0]
    assert isinstance(answer, AnswerCard) and not answer.allow and answer.message is not None
    assert problem in answer.message
    assert book.state("t1") is TaskState.RUNNING


def test_a_proposal_without_files_is_answered_at_once() -> None:
    _, feed = started()
    actions = feed(cards=[CardView("p1", "review", "mcp__desiide__propose_edit", {"summary": "x"})])
    assert actions == [AnswerCard("t1", "p1", True, report=())]


# --- turns, checks and the end ---------------------------------------------------------------


def test_a_fix_task_verifies_and_retries_until_the_iterations_run_out() -> None:
    book, feed = started("fix", budget=Budget(max_iterations=2), checks=[PYTEST])
    actions = feed(result(), stream_end())
    assert kinds(actions) == ["usage", "→verifying", "RunChecks"]
    assert actions[-1] == RunChecks("t1", (tuple(PYTEST),))
    actions = book.on_checks("t1", False, "x" * 7000 + "\nFAILED test_a.py::test_x", T0)
    assert kinds(actions) == ["→running", "SendInput"]
    follow_up = actions[1]
    assert isinstance(follow_up, SendInput)
    assert follow_up.text.startswith("The checks failed (python -m pytest -q):")
    assert "FAILED test_a.py::test_x" in follow_up.text and "x" * 6001 not in follow_up.text
    feed(text("Fixed."), stream_end())
    actions = book.on_checks("t1", False, "still failing", T0)
    assert kinds(actions) == ["error", "→failed", "StopSession"]
    assert book.summary("t1")["failureReason"] == "budget:maxIterations"


def test_passing_checks_finish_the_task() -> None:
    book, feed = started("edit", success=Success(lint_clean=True), checks=[["ruff", "check", "."]])
    feed(stream_end())
    actions = book.on_checks("t1", True, "All checks passed!", T0)
    assert kinds(actions) == ["→done", "StopSession"]
    assert book.on_checks("t1", True, "", T0) == [
        Log("debug", "checks reported outside verifying", {"taskId": "t1"})
    ]


@pytest.mark.parametrize("refused", ["rejected", "blocked"])
def test_a_refused_check_fails_verification(refused: str) -> None:
    book, feed = started("fix", checks=[PYTEST])
    feed(stream_end())
    book.on_checks("t1", False, "", T0, refused=refused)
    assert book.summary("t1")["failureReason"] == f"verification_{refused}"


def test_no_check_command_fails_before_any_session() -> None:
    book = TaskBook()
    actions = book.create("t1", "fix", "make it pass", None, None, None, T0, check_commands=None)
    assert kinds(actions) == ["→queued", "error", "→failed"]
    assert events(actions)[1]["kind"] == "no_check_command"
    assert book.summary("t1")["failureReason"] == "no_check_command"
    book.create("t2", "ask", "q", None, None, None, T0)
    book.create("t3", "ask", "q", None, None, None, T0)
    assert book.state("t3") is TaskState.PLANNING  # the failed task held no slot


def test_an_ask_task_is_done_at_the_end_of_its_turn() -> None:
    _, feed = started("ask")
    actions = feed(text("42."), result(), stream_end())
    assert kinds(actions) == ["text_delta", "usage", "→done", "StopSession"]


def test_an_interrupted_turn_cancels_the_task() -> None:
    _, feed = started()
    actions = feed(entry("system", "Interrupted", subtype="interrupted"), stream_end())
    assert kinds(actions) == ["→cancelled", "StopSession"]
    assert events(actions)[0]["reason"] == "interrupted"


MODEL_ERROR_ENTRIES = {kind: error for kind, error, _ in MODEL_ERRORS}


def reach(reason: str) -> TaskBook:
    """A book whose task ``t1`` failed with `reason`, reached the way a real task would."""
    if reason == "no_check_command":
        book = TaskBook()
        book.create("t1", "fix", "x", None, None, None, T0)
        return book
    if reason.startswith("model_error:"):
        book, feed = started()
        feed(MODEL_ERROR_ENTRIES[reason.removeprefix("model_error:")])
        return book
    tight = Budget(max_iterations=1, max_tool_calls=1, max_tokens=10, wall_clock_ms=1000)
    book, feed = started("fix", budget=tight, checks=[PYTEST])
    match reason:
        case "budget:maxIterations":
            feed(stream_end())
            book.on_checks("t1", False, "F", T0)
        case "budget:maxToolCalls":
            feed(tool_use("a", "read_file", path="a"), tool_use("b", "read_file", path="b"))
        case "budget:maxTokens":
            feed(result(tokens_in=10, tokens_out=1))
        case "budget:wallClockMs":
            book.tick(T0 + 1)
        case "loop_detected":
            feed(cards=[permission("c", "read_file", ("loop_detected",), path="a")])
        case "verification_rejected" | "verification_blocked":
            feed(stream_end())
            book.on_checks("t1", False, "", T0, refused=reason.removeprefix("verification_"))
        case "ripgrep_missing":
            feed(tool_use("a", "list_files"), tool_result("a", "ripgrep_missing", True))
        case _:  # model_unavailable, no_workspace, internal_error: the runtime finds them
            book.fail("t1", reason, "runtime", T0)
    return book


@pytest.mark.parametrize("reason", FAILURE_REASONS)
def test_every_failure_reason_of_the_seed_is_reachable(reason: str) -> None:
    book = reach(reason)
    assert book.state("t1") is TaskState.FAILED
    assert book.summary("t1")["failureReason"] == reason


def test_the_failure_reasons_are_the_seeds() -> None:
    assert set(FAILURE_REASONS) == {
        "budget:maxIterations",
        "budget:maxToolCalls",
        "budget:maxTokens",
        "budget:wallClockMs",
        "loop_detected",
        "model_unavailable",
        "verification_rejected",
        "verification_blocked",
        "no_check_command",
        "ripgrep_missing",
        "no_workspace",
        "internal_error",
        *(f"model_error:{kind}" for kind in MODEL_ERROR_KINDS),
    }
    assert set(MODEL_ERROR_ENTRIES) == set(MODEL_ERROR_KINDS)


# --- cancel ----------------------------------------------------------------------------------


def test_cancel_a_queued_task_never_starts_it() -> None:
    book = TaskBook(max_running=1)
    book.create("a", "ask", "q", None, None, None, T0)
    book.create("b", "ask", "q", None, None, None, T0)
    actions = book.cancel("b", T0)
    assert kinds(actions) == ["→cancelled"]
    assert events(actions)[0]["reason"] == "cancelled"
    actions = Feed(book, "a")(text("x"), stream_end())
    assert "StartSession" not in kinds(actions)
    assert book.cancel("b", T0) == []


def test_cancel_a_running_task_stops_its_session_and_closes_its_calls() -> None:
    book, feed = started()
    feed(tool_use("a", "read_file", path="a"), cards=[permission("a", "read_file", path="a")])
    actions = book.cancel("t1", T0)
    assert kinds(actions) == ["tool_call_finished", "→cancelled", "StopSession"]
    assert events(actions)[0]["result"]["error"]["kind"] == "cancelled"
    with pytest.raises(ApprovalNotFound):
        book.approve("t1", "a", "once", T0)
    assert feed(text("late")) == []  # late news of a finished task


def test_cancel_all_cancels_the_queue_first_and_starts_nothing() -> None:
    book = TaskBook()
    for task_id in "abc":
        book.create(task_id, "ask", "q", None, None, None, T0)
    actions = book.cancel_all(T0)
    assert [describe(a) for a in actions] == [
        "emit c state_changed",
        "emit a state_changed",
        "stop a",
        "emit b state_changed",
        "stop b",
    ]


def test_unknown_tasks_are_not_found() -> None:
    book = TaskBook()
    for call in (
        lambda: book.cancel("x", T0),
        lambda: book.on_session("x", [], [], True, T0),
        lambda: book.on_checks("x", True, "", T0),
        lambda: book.report_edits("x", "p", [], T0),
        lambda: book.summary("x"),
    ):
        with pytest.raises(TaskNotFound):
            call()


def test_summaries_have_the_task_summary_shape() -> None:
    book, feed = started()
    feed(entry("error", "API Error: 401"))
    assert book.summaries() == [
        {
            "id": "t1",
            "kind": "edit",
            "state": "failed",
            "createdAt": "2030-03-17T17:46:40.000Z",
            "updatedAt": "2030-03-17T17:46:40.000Z",
            "instruction": "Do the thing",
            "failureReason": "model_error:auth",
        }
    ]


def test_every_action_has_a_dispatch() -> None:
    actions: list[Action] = [
        Emit("t", {"type": "x"}),
        StartSession("t", "p", (), 1),
        AnswerCard("t", "c", True),
        SendInput("t", "x"),
        StopSession("t"),
        RunChecks("t", ()),
        Log("info", "m"),
    ]
    assert [describe(a).split()[0] for a in actions] == [
        "emit",
        "start",
        "answer",
        "input",
        "stop",
        "checks",
        "log",
    ]


# --- the judge -------------------------------------------------------------------------------


def test_a_call_held_for_the_judge_asks_it_and_its_low_risk_verdict_lets_it_go() -> None:
    book, feed = started(tools=["read_file"])
    card = permission("j1", "read_file", ("jev:pending",), path="a.py")
    actions = feed(cards=[card])
    assert actions == [Judge("t1", "j1", "read_file", {"path": "a.py"})]
    assert book.state("t1") is TaskState.RUNNING  # the judge is not the user: no wait
    assert feed(cards=[card]) == []  # asked once
    actions = book.on_judgement("t1", "j1", False, (), T0)
    assert kinds(actions) == ["AnswerCard", "decision_made"]
    assert actions[0] == AnswerCard("t1", "j1", True)
    assert events(actions)[0]["decision"]["outcome"] == "auto"


def test_a_raised_call_waits_for_the_user_with_the_judges_reason() -> None:
    book, feed = started(tools=["run_command"])
    feed(cards=[permission("j1", "run_command", ("jev:pending",), command="make deploy")])
    actions = book.on_judgement("t1", "j1", True, ("jev:risk_gate",), T0)
    assert kinds(actions) == ["approval_required", "→awaiting_approval"]
    assert events(actions)[0]["reasons"] == ["jev:risk_gate"]
    assert kinds(book.approve("t1", "j1", "once", T0))[:2] == ["AnswerCard", "decision_made"]


def test_a_judged_card_answered_elsewhere_meanwhile_is_left_alone() -> None:
    book, feed = started(tools=["read_file"])
    feed(cards=[permission("j1", "read_file", ("jev:pending",), path="a.py")])
    feed(cards=[])  # a phone answered first
    assert book.on_judgement("t1", "j1", True, ("jev:risk_gate",), T0) == []
