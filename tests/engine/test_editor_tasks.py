"""Desiide tasks in the engine: a session with a task policy, its calls, the editor's answers."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from bridge.engine.core import Engine
from bridge.engine.editor.tasks import TASK_MODE
from bridge.engine.effects import (
    AddInbox,
    AnswerPermission,
    AppendTranscript,
    Commit,
    Dropped,
    Effect,
    InterruptRunner,
    Publish,
    RecordDecision,
    SaveSession,
    SendToRunner,
    StartRunner,
    TaskPolicy,
)
from bridge.engine.inputs import (
    AgentReady,
    PermissionRequested,
    TaskCardAnswered,
    TaskEditsReported,
    TaskInputRequested,
    TaskStartRequested,
    TaskStopRequested,
)
from bridge.protocol import PermissionResCommand, SessionPendingMessage
from tests.engine.test_core import NOW, command_event, make_engine

WS = "/home/dev/project"
TASK = "task-0001"
ALL_TOOLS = ("read_file", "list_files", "search", "propose_edit", "run_command")


def started(
    engine: Engine, *, tools: Sequence[str] = ALL_TOOLS, max_calls: int = 40
) -> list[Effect]:
    effects = engine.handle(
        TaskStartRequested(TASK, WS, "fix the bug", TaskPolicy(tuple(tools), max_calls)), NOW
    )
    engine.handle(AgentReady(TASK, sdk_session_id="sdk-1", cwd=WS), NOW)
    return effects


def ask(engine: Engine, request_id: str, tool: str, tool_input: dict[str, object]) -> list[Effect]:
    event = PermissionRequested(TASK, request_id, f"mcp__desiide__{tool}", tool_input)
    return engine.handle(event, NOW + 1)


def answers(effects: Sequence[Effect]) -> list[AnswerPermission]:
    return [e for e in effects if isinstance(e, AnswerPermission)]


def decisions(effects: Sequence[Effect]) -> list[RecordDecision]:
    return [
        op
        for e in effects
        if isinstance(e, Commit)
        for op in e.ops
        if isinstance(op, RecordDecision)
    ]


def test_start_creates_the_session_with_its_policy_and_first_input() -> None:
    engine = make_engine()
    effects = started(engine)
    commit, start = effects
    assert isinstance(commit, Commit) and isinstance(start, StartRunner)
    record = start.record
    assert record.session_id == TASK and record.cwd == WS
    assert record.permission_mode == TASK_MODE
    assert record.task == TaskPolicy(ALL_TOOLS, 40)
    assert record.title == "fix the bug"
    kinds = [type(op) for op in commit.ops]
    assert kinds == [AppendTranscript, SaveSession, AddInbox]
    inbox = commit.ops[2]
    assert isinstance(inbox, AddInbox) and inbox.text == "fix the bug"
    assert [type(p.message) for p in commit.outbox] == [SessionPendingMessage]
    assert isinstance(commit.outbox[0], Publish)


def test_a_second_start_with_the_same_id_changes_nothing() -> None:
    engine = make_engine()
    started(engine)
    again = engine.handle(TaskStartRequested(TASK, WS, "again", TaskPolicy(ALL_TOOLS, 40)), NOW + 5)
    assert len(again) == 1 and isinstance(again[0], Dropped)


def test_reads_are_auto_allowed_and_logged_with_the_call() -> None:
    engine = make_engine()
    started(engine)
    effects = ask(engine, "r1", "read_file", {"path": "src/a.py"})
    assert answers(effects) == [AnswerPermission(TASK, "r1", True)]
    (row,) = decisions(effects)
    assert row.outcome == "allow"
    assert row.call == {"tool": "mcp__desiide__read_file", "input": {"path": "src/a.py"}}


def test_a_read_outside_the_workspace_is_a_card_with_the_floor() -> None:
    engine = make_engine()
    started(engine)
    effects = ask(engine, "r1", "read_file", {"path": "../../.ssh/id_rsa"})
    assert answers(effects) == []
    (card,) = engine.pending_cards(TASK)
    assert card.kind == "permission" and card.reasons == ("outside_workspace",)


def test_a_command_is_a_card_and_a_deny_rule_blocks() -> None:
    engine = make_engine()
    started(engine)
    ask(engine, "c1", "run_command", {"command": "make test"})
    (card,) = engine.pending_cards(TASK)
    assert card.tool_name == "mcp__desiide__run_command" and card.reasons == ()
    blocked = ask(engine, "c2", "run_command", {"command": "mkfs.ext4 /dev/sda1"})
    (answer,) = answers(blocked)
    assert not answer.allow and "mkfs" in answer.message
    assert decisions(blocked)[0].reasons == ("deny_list:mkfs",)


def test_a_tool_outside_allowed_tools_is_blocked_as_tool_not_allowed() -> None:
    engine = make_engine()
    started(engine, tools=("read_file", "propose_edit"))
    effects = ask(engine, "c1", "run_command", {"command": "ls"})
    (answer,) = answers(effects)
    assert not answer.allow and "tool_not_allowed" in answer.message
    assert decisions(effects)[0].reasons == ("tool_not_allowed",)
    invented = ask(engine, "c2", "write_file", {"path": "a"})
    assert decisions(invented)[0].reasons == ("tool_not_allowed",)


def test_the_call_after_the_budget_is_blocked() -> None:
    engine = make_engine()
    started(engine, max_calls=2)
    assert answers(ask(engine, "a", "read_file", {"path": "a"}))[0].allow
    assert answers(ask(engine, "b", "read_file", {"path": "b"}))[0].allow
    third = ask(engine, "c", "read_file", {"path": "c"})
    assert not answers(third)[0].allow
    assert decisions(third)[0].reasons == ("budget:maxToolCalls",)


def test_an_edit_proposal_is_a_review_the_editor_answers_with_its_report() -> None:
    engine = make_engine()
    started(engine)
    proposal = {"summary": "fix", "files": [{"path": "a.py", "content": "x = 1\n"}]}
    effects = ask(engine, "e1", "propose_edit", proposal)
    assert answers(effects) == []
    (card,) = engine.pending_cards(TASK)
    assert card.kind == "review"
    # A phone's permission-res cannot answer a review.
    phone = engine.handle(
        command_event(PermissionResCommand(sessionId=TASK, requestId="e1", allow=True)), NOW + 2
    )
    assert answers(phone) == []
    report = ({"path": "a.py", "status": "applied"},)
    done = engine.handle(TaskEditsReported(TASK, "e1", report), NOW + 3)
    (answer,) = answers(done)
    assert answer.allow and answer.updated_input == {**proposal, "report": [dict(report[0])]}
    assert decisions(done)[0].outcome == "editor_report"
    assert engine.pending_cards(TASK) == []
    twice = engine.handle(TaskEditsReported(TASK, "e1", report), NOW + 4)
    assert len(twice) == 1 and isinstance(twice[0], Dropped)


def test_an_edit_of_a_system_file_is_blocked_before_review() -> None:
    engine = make_engine()
    started(engine)
    effects = ask(engine, "e1", "propose_edit", {"files": [{"path": "/etc/passwd", "content": ""}]})
    (answer,) = answers(effects)
    assert not answer.allow
    assert "deny_list:system_write" in decisions(effects)[0].reasons


@pytest.mark.parametrize("by_phone_first", [True, False])
def test_the_first_answer_wins_phone_or_editor(by_phone_first: bool) -> None:
    engine = make_engine()
    started(engine)
    ask(engine, "c1", "run_command", {"command": "make test"})
    phone = command_event(PermissionResCommand(sessionId=TASK, requestId="c1", allow=True))
    editor = TaskCardAnswered(TASK, "c1", False, reason="not now")
    first, second = (phone, editor) if by_phone_first else (editor, phone)
    won = engine.handle(first, NOW + 2)
    lost = engine.handle(second, NOW + 3)
    assert len(answers(won)) == 1 and answers(lost) == []
    (answer,) = answers(won)
    if by_phone_first:
        assert answer.allow and decisions(won)[0].outcome == "phone_allow"
    else:
        assert not answer.allow and answer.message.endswith("not now")
        assert decisions(won)[0].outcome == "editor_deny"


def test_a_task_scoped_approval_is_logged_as_such() -> None:
    engine = make_engine()
    started(engine)
    ask(engine, "c1", "run_command", {"command": "make test"})
    effects = engine.handle(TaskCardAnswered(TASK, "c1", True, scope="task"), NOW + 2)
    (row,) = decisions(effects)
    assert row.outcome == "editor_allow" and row.detail == "allowed for the task"


def test_input_and_stop() -> None:
    engine = make_engine()
    started(engine)
    more = engine.handle(TaskInputRequested(TASK, "checks failed"), NOW + 2)
    assert isinstance(more[-1], SendToRunner)
    ask(engine, "c1", "run_command", {"command": "make test"})
    stop = engine.handle(TaskStopRequested(TASK), NOW + 3)
    assert [a.allow for a in answers(stop)] == [False]
    assert any(isinstance(e, InterruptRunner) for e in stop)
    assert engine.session(TASK) is not None  # the session stays, with its history


@pytest.mark.parametrize(
    ("policy", "label"),
    [
        (TaskPolicy(ALL_TOOLS, 40, strict=True), "policy_override:strict_mode"),
        (TaskPolicy(ALL_TOOLS, 40, judge=True), "jev:pending"),
    ],
)
def test_strict_mode_and_the_judge_turn_an_allow_into_a_card(
    policy: TaskPolicy, label: str
) -> None:
    engine = make_engine()
    engine.handle(TaskStartRequested(TASK, WS, "look", policy), NOW)
    engine.handle(AgentReady(TASK, sdk_session_id="sdk-1", cwd=WS), NOW)
    effects = ask(engine, "r1", "read_file", {"path": "a.py"})
    assert answers(effects) == []
    (card,) = engine.pending_cards(TASK)
    assert card.reasons == (label,)
    # Neither ever lowers: a deny rule still blocks.
    blocked = ask(engine, "c1", "run_command", {"command": "mkfs /dev/sda"})
    assert not answers(blocked)[0].allow


def test_a_policy_survives_the_record_round_trip() -> None:
    policy = TaskPolicy(("read_file",), 7, strict=True, judge=True)
    stored = {"allowed_tools": ["read_file"], "max_tool_calls": 7, "strict": True, "judge": True}
    assert TaskPolicy.from_json(stored) == policy
    assert TaskPolicy.from_json({"allowed_tools": "x", "max_tool_calls": 1}) is None


def test_stopping_a_finished_task_leaves_its_idle_agent_alone() -> None:
    engine = make_engine()
    started(engine)
    stop = engine.handle(TaskStopRequested(TASK), NOW + 3)
    assert not any(isinstance(e, InterruptRunner) for e in stop)
