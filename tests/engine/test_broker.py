"""The permission broker through the engine, sans I/O: every tool call becomes a verdict or a card.

Each test drives ``Engine.handle`` with ``PermissionRequested`` (what the runner's
``can_use_tool`` reports) and the phone's commands (``keypress``, ``question-input``, ``input``,
``permission-res``, ``interrupt``, …), then checks the exact effects. Every result also passes
:func:`check_order`, the exactly-once rule of the engine applied to cards: the audit rows and the
card entries are committed before anything leaves (the live ``output`` copies, the answers to the
runner), and the entries of one result take consecutive seqs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from bridge.engine.core import Engine
from bridge.engine.effects import (
    AddInbox,
    AdvanceCursor,
    AnswerPermission,
    AppendTranscript,
    Commit,
    Dropped,
    Effect,
    InterruptRunner,
    MarkProcessed,
    Publish,
    RecordDecision,
    SendToRunner,
    SetRunnerOption,
)
from bridge.engine.inputs import AgentEnded, AgentOptionSet, AgentReady, PermissionRequested
from bridge.engine.sessions.broker import CARD_TIMEOUT_SECONDS
from bridge.gate import describe_reason
from bridge.protocol import (
    CloseSessionCommand,
    InputCommand,
    InterruptCommand,
    KeypressCommand,
    OutputEntry,
    OutputMessage,
    PermissionResCommand,
    PhoneToBridge,
    QuestionInputCommand,
)
from tests.engine.test_core import NOW, PHONE, ROOT, command_event, make_engine, ready_session

AUDIENCE = (PHONE.public_hex,)
BLOCK_HEAD = "Blocked by the bridge's risk gate"

QUESTIONS: list[dict[str, Any]] = [
    {
        "question": "Which database should the service use?",
        "header": "Database",
        "options": [
            {"label": "Postgres", "description": "Relational, already in the stack"},
            {"label": "SQLite"},
        ],
        "multiSelect": False,
    },
    {
        "question": "Which features should ship first?",
        "header": "Scope",
        "options": [{"label": "Search"}, {"label": "Export"}, {"label": "Sharing"}],
        "multiSelect": True,
    },
]
ASK_INPUT: dict[str, Any] = {"questions": QUESTIONS}
Q1, Q2 = QUESTIONS[0]["question"], QUESTIONS[1]["question"]


# --- helpers -------------------------------------------------------------------------------


def check_order(effects: list[Effect]) -> list[Effect]:
    """The card invariants, for every result the engine returns.

    * Nothing about a card leaves before a commit: an ``AnswerPermission``, a live ``output`` or
      a ``SetRunnerOption`` of the broker comes after a ``Commit``.
    * Every answer is logged: the commits before an answer hold at least as many
      ``RecordDecision`` rows as answers have gone out so far.
    * Each ``output`` published is the transcript line committed earlier, same seq, same entry,
      in the same order; the seqs of one result are consecutive.
    """
    committed: list[tuple[str, int, OutputEntry]] = []
    published: list[tuple[str, int, OutputEntry]] = []
    decisions = 0
    answers = 0
    seen_commit = False
    for effect in effects:
        if isinstance(effect, Commit):
            seen_commit = True
            for op in effect.ops:
                if isinstance(op, RecordDecision):
                    decisions += 1
                elif isinstance(op, AppendTranscript):
                    committed.append((op.session_id, op.seq, op.entry))
        elif isinstance(effect, AnswerPermission):
            answers += 1
            assert seen_commit, f"answer before any commit: {effects!r}"
            assert decisions >= answers, f"an answer without its decision row: {effects!r}"
        elif isinstance(effect, Publish) and isinstance(effect.message, OutputMessage):
            message = effect.message
            assert (message.sessionId, message.seq, message.entry) in committed, (
                f"output published before (or without) its transcript line: {effects!r}"
            )
            published.append((message.sessionId, message.seq, message.entry))
    assert published == committed, "every committed line is published once, in order"
    seqs = [seq for _, seq, _ in committed]
    if seqs:
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs
    return effects


def request(
    engine: Engine,
    session: str,
    request_id: str,
    tool: str,
    tool_input: Mapping[str, Any],
    now: float = NOW,
    **extra: Any,
) -> list[Effect]:
    """The runner's ``can_use_tool`` asks about one call."""
    event = PermissionRequested(session, request_id, tool, dict(tool_input), **extra)
    return check_order(engine.handle(event, now))


def send(engine: Engine, command: PhoneToBridge, now: float = NOW) -> list[Effect]:
    """A phone command, signed and encrypted for real."""
    return check_order(engine.handle(command_event(command, created_at=now), now))


def tick(engine: Engine, now: float) -> list[Effect]:
    return check_order(engine.tick(now))


def set_mode(engine: Engine, session: str, mode: str, now: float = NOW) -> None:
    """The runner confirms a mode change (what follows a ``mode`` command)."""
    engine.handle(AgentOptionSet(session, "mode", mode, mode), now)
    record = engine.session(session)
    assert record is not None and record.permission_mode == mode


def session_in(mode: str) -> tuple[Engine, str]:
    engine = make_engine()
    session = ready_session(engine)
    if mode != "plan":  # a new session starts in plan
        set_mode(engine, session, mode)
    return engine, session


def answers(effects: list[Effect]) -> list[AnswerPermission]:
    return [e for e in effects if isinstance(e, AnswerPermission)]


def decisions(effects: list[Effect]) -> list[RecordDecision]:
    return [
        op
        for e in effects
        if isinstance(e, Commit)
        for op in e.ops
        if isinstance(op, RecordDecision)
    ]


def appended(effects: list[Effect]) -> list[AppendTranscript]:
    return [
        op
        for e in effects
        if isinstance(e, Commit)
        for op in e.ops
        if isinstance(op, AppendTranscript)
    ]


CARD_SPECIALS = frozenset({"ask_question", "plan", "plan_approval", "permission_request"})


def cards(effects: list[Effect]) -> list[OutputEntry]:
    """The card entries (and plan texts) among the committed transcript lines."""
    return [
        op.entry
        for op in appended(effects)
        if (op.entry.metadata or {}).get("special") in CARD_SPECIALS
    ]


def outbox_types(effects: list[Effect]) -> list[str]:
    return [p.message.type for e in effects if isinstance(e, Commit) for p in e.outbox]


def ops_of(effects: list[Effect]) -> list[type]:
    return [type(op) for e in effects if isinstance(e, Commit) for op in e.ops]


def only_processed(effects: list[Effect]) -> bool:
    """The command was recorded as processed and changed nothing else."""
    return (
        all(isinstance(e, Commit | Dropped) for e in effects)
        and set(ops_of(effects)) <= {MarkProcessed, AdvanceCursor}
        and MarkProcessed in ops_of(effects)
        and outbox_types(effects) == []
    )


def keypress(session: str, key: str, context: str | None) -> KeypressCommand:
    return KeypressCommand(sessionId=session, key=key, context=context)


# --- AskUserQuestion -----------------------------------------------------------------------


def test_two_questions_become_two_cards_committed_then_published() -> None:
    engine, session = session_in("plan")
    effects = request(engine, session, "tu-ask", "AskUserQuestion", ASK_INPUT)
    assert [type(e) for e in effects] == [Commit, Publish, Publish]
    assert answers(effects) == []  # the agent waits for the phone
    appends = appended(effects)
    assert [op.seq for op in appends] == [1, 2]
    first, second = (op.entry for op in appends)
    assert (first.entryType, first.content) == ("system", Q1)
    assert first.metadata == {
        "special": "ask_question",
        "tool_use_id": "tu-ask",
        "header": "Database",
        "options": [
            {"label": "Postgres", "description": "Relational, already in the stack"},
            {"label": "SQLite"},
        ],
        "question_index": 0,
        "question_count": 2,
    }
    assert (second.entryType, second.content) == ("system", Q2)
    assert second.metadata == {
        "special": "ask_question",
        "tool_use_id": "tu-ask",
        "header": "Scope",
        "options": [{"label": "Search"}, {"label": "Export"}, {"label": "Sharing"}],
        "multiSelect": True,
        "question_index": 1,
        "question_count": 2,
    }
    for publish, op in zip(effects[1:], appends, strict=True):
        assert isinstance(publish, Publish) and publish.audience == AUDIENCE
        assert publish.message == OutputMessage(sessionId=session, seq=op.seq, entry=op.entry)
    [decision] = decisions(effects)
    assert (decision.session_id, decision.tool, decision.outcome) == (
        session,
        "AskUserQuestion",
        "card",
    )
    assert engine.session(session).seq_high == 2  # type: ignore[union-attr]


def test_key_then_question_input_answer_the_group_in_order() -> None:
    engine, session = session_in("default")
    request(engine, session, "tu-ask", "AskUserQuestion", ASK_INPUT)
    first = send(engine, keypress(session, "2", "question"), NOW + 1)
    assert answers(first) == [] and decisions(first) == []  # one of two answered
    assert MarkProcessed in ops_of(first)
    last = send(
        engine,
        QuestionInputCommand(sessionId=session, text="Search and export", optionCount=3),
        NOW + 2,
    )
    assert [type(e) for e in last] == [Commit, AnswerPermission]
    assert answers(last) == [
        AnswerPermission(
            session,
            "tu-ask",
            True,
            updated_input={
                "questions": QUESTIONS,
                "answers": {Q1: "SQLite", Q2: "Search and export"},
            },
        )
    ]
    [decision] = decisions(last)
    assert (decision.tool, decision.outcome) == ("AskUserQuestion", "phone_allow")
    # The group is resolved: a further key is not an answer any more.
    again = send(engine, keypress(session, "1", "question"), NOW + 3)
    assert only_processed(again) and answers(again) == []


def test_plain_input_answers_the_open_questions_instead_of_reaching_the_agent() -> None:
    engine, session = session_in("default")
    request(engine, session, "tu-ask", "AskUserQuestion", ASK_INPUT)
    first = send(engine, InputCommand(sessionId=session, text="Postgres", inputId="in-1"), NOW + 1)
    # The typed text is shown as the user's line and acked, but it is not a new prompt.
    assert [type(e) for e in first] == [Commit, Publish]
    assert SendToRunner not in [type(e) for e in first]
    assert AddInbox not in ops_of(first)
    assert outbox_types(first) == ["input-ack"]
    [line] = appended(first)
    assert line.seq == 3  # after the two cards
    assert (line.entry.content, line.entry.metadata) == ("Postgres", {"role": "user"})
    assert answers(first) == []
    last = send(engine, InputCommand(sessionId=session, text="Sharing"), NOW + 2)
    assert [type(e) for e in last] == [Commit, Publish, AnswerPermission]
    assert SendToRunner not in [type(e) for e in last] and AddInbox not in ops_of(last)
    assert outbox_types(last) == []  # no inputId, no ack
    assert [op.seq for op in appended(last)] == [4]
    assert answers(last) == [
        AnswerPermission(
            session,
            "tu-ask",
            True,
            updated_input={"questions": QUESTIONS, "answers": {Q1: "Postgres", Q2: "Sharing"}},
        )
    ]
    # With the group resolved, the next input is a prompt for the agent again.
    prompt = send(engine, InputCommand(sessionId=session, text="go on"), NOW + 3)
    assert SendToRunner(session) in prompt and AddInbox in ops_of(prompt)


@pytest.mark.parametrize(
    "key",
    ["0", "3", "99", "-1", "x", "1.0", " 1", "²", "9" * 5000],
    ids=["zero", "past-end", "99", "negative", "letter", "decimal", "space", "superscript", "huge"],
)
def test_a_key_outside_the_options_changes_nothing(key: str) -> None:
    engine, session = session_in("default")
    request(engine, session, "tu-ask", "AskUserQuestion", ASK_INPUT)
    effects = send(engine, keypress(session, key, "question"), NOW + 1)
    assert only_processed(effects)
    # The first question is still the open one: a valid key now answers it.
    send(engine, keypress(session, "1", "question"), NOW + 2)
    last = send(engine, keypress(session, "3", "question"), NOW + 3)
    [answer] = answers(last)
    assert answer.updated_input is not None
    assert answer.updated_input["answers"] == {Q1: "Postgres", Q2: "Sharing"}


@pytest.mark.parametrize("context", [None, "plan-approval"])
def test_a_question_is_not_answered_by_a_key_of_another_context(context: str | None) -> None:
    engine, session = session_in("default")
    request(engine, session, "tu-ask", "AskUserQuestion", ASK_INPUT)
    effects = send(engine, keypress(session, "1", context), NOW + 1)
    assert only_processed(effects)
    assert engine.sessions.get(session).cards.question_open() is not None


def test_question_input_without_an_open_question_is_a_plain_input() -> None:
    engine, session = session_in("default")
    effects = send(
        engine, QuestionInputCommand(sessionId=session, text="hello", optionCount=0), NOW + 1
    )
    assert SendToRunner(session) in effects and AddInbox in ops_of(effects)


def test_questions_with_the_same_text_still_resolve() -> None:
    """Answers are keyed by question text; two identical texts must not hang the group."""
    engine, session = session_in("default")
    same = {"question": "Continue?", "options": [{"label": "Yes"}, {"label": "No"}]}
    request(engine, session, "tu-ask", "AskUserQuestion", {"questions": [same, dict(same)]})
    effects = send(engine, keypress(session, "1", "question"), NOW + 1)
    effects += send(engine, keypress(session, "2", "question"), NOW + 2)
    assert [(a.request_id, a.allow) for a in answers(effects)] == [("tu-ask", True)]
    assert engine.sessions.get(session).cards.question_open() is None
    # Typed text is a prompt for the agent again, not swallowed by a dead question.
    prompt = send(engine, InputCommand(sessionId=session, text="next"), NOW + 3)
    assert SendToRunner(session) in prompt


def test_ask_without_questions_is_denied_and_logged() -> None:
    engine, session = session_in("default")
    effects = engine.handle(
        PermissionRequested(session, "tu-ask", "AskUserQuestion", {"questions": []}), NOW
    )
    assert [(a.request_id, a.allow) for a in answers(effects)] == [("tu-ask", False)]
    assert cards(effects) == []
    assert [d.tool for d in decisions(effects)] == ["AskUserQuestion"]  # every verdict is logged
    check_order(effects)


@pytest.mark.parametrize(
    "tool_input",
    [
        {},
        {"questions": None},
        {"questions": 5},
        {"questions": "Which one?"},
        {"questions": [{"question": "Which one?", "options": 5}]},
        {"questions": [{"question": "Which one?", "options": None}]},
        {"questions": [{"question": "Which one?", "options": [1, None, {"label": None}]}]},
    ],
    ids=[
        "missing",
        "null",
        "number",
        "string",
        "options-number",
        "options-null",
        "options-junk",
    ],
)
def test_a_malformed_question_never_crashes_the_engine(tool_input: dict[str, Any]) -> None:
    """The CLI's input is data from a model: a bad shape is a denial or a card, never a raise."""
    engine, session = session_in("default")
    effects = request(engine, session, "tu-ask", "AskUserQuestion", tool_input)
    denied = [a for a in answers(effects) if not a.allow]
    if denied:
        assert cards(effects) == [] and decisions(effects)
    else:
        [entry, *_] = cards(effects)
        assert (entry.metadata or {})["special"] == "ask_question"
        options = (entry.metadata or {})["options"]
        assert all(isinstance(o, dict) and isinstance(o.get("label"), str) for o in options)


# --- plan mode -----------------------------------------------------------------------------


def test_enter_plan_mode_is_allowed_at_once() -> None:
    engine, session = session_in("default")
    effects = request(engine, session, "tu-enter", "EnterPlanMode", {})
    assert [type(e) for e in effects] == [Commit, AnswerPermission]
    assert answers(effects) == [AnswerPermission(session, "tu-enter", True)]
    assert cards(effects) == []
    [decision] = decisions(effects)
    assert (decision.tool, decision.outcome) == ("EnterPlanMode", "allow")


PLAN = "# Plan\n\n1. Add the index\n2. Backfill\n"


def exit_plan(engine: Engine, session: str, plan: str = PLAN) -> list[Effect]:
    return request(engine, session, "tu-exit", "ExitPlanMode", {"plan": plan})


def test_exit_plan_mode_shows_the_plan_then_an_approval_card() -> None:
    engine, session = session_in("plan")
    effects = exit_plan(engine, session)
    assert [type(e) for e in effects] == [Commit, Publish, Publish]
    assert answers(effects) == []
    plan, card = appended(effects)
    assert (plan.seq, card.seq) == (1, 2)
    assert (plan.entry.entryType, plan.entry.content) == ("text", PLAN)
    assert plan.entry.metadata == {"role": "assistant", "special": "plan", "tool_use_id": "tu-exit"}
    assert (card.entry.entryType, card.entry.content) == ("system", "Plan approval needed")
    assert card.entry.metadata == {
        "special": "plan_approval",
        "tool_use_id": "tu-exit",
        "has_plan": True,
    }
    [decision] = decisions(effects)
    assert (decision.tool, decision.outcome) == ("ExitPlanMode", "card")


def test_exit_plan_mode_without_a_plan_shows_only_the_card() -> None:
    engine, session = session_in("plan")
    [card] = appended(exit_plan(engine, session, plan=""))
    assert card.entry.metadata == {
        "special": "plan_approval",
        "tool_use_id": "tu-exit",
        "has_plan": False,
    }


@pytest.mark.parametrize(
    ("key", "allow", "option"),
    [
        ("1", True, SetRunnerOption("", "mode", "acceptEdits")),
        ("2", True, None),
        ("3", False, None),
    ],
)
def test_plan_approval_keys(key: str, allow: bool, option: SetRunnerOption | None) -> None:
    engine, session = session_in("plan")
    exit_plan(engine, session)
    effects = send(engine, keypress(session, key, "plan-approval"), NOW + 1)
    assert isinstance(effects[0], Commit) and MarkProcessed in ops_of(effects)
    [answer] = answers(effects)
    assert (answer.session_id, answer.request_id, answer.allow) == (session, "tu-exit", allow)
    options = [e for e in effects if isinstance(e, SetRunnerOption)]
    if option is None:
        assert options == []
    else:
        assert options == [SetRunnerOption(session, option.option, option.value)]
        assert effects.index(options[0]) > effects.index(answer)
    if not allow:
        assert "revise" in answer.message.lower()  # the agent is told to rework the plan
    [decision] = decisions(effects)
    assert (decision.tool, decision.outcome) == (
        "ExitPlanMode",
        "phone_allow" if allow else "phone_deny",
    )
    # The card is resolved: a second key does nothing.
    again = send(engine, keypress(session, "1", "plan-approval"), NOW + 2)
    assert only_processed(again) and answers(again) == []


@pytest.mark.parametrize(("key", "context"), [("4", "plan-approval"), ("1", None)])
def test_other_keys_leave_the_plan_card_open(key: str, context: str | None) -> None:
    engine, session = session_in("plan")
    exit_plan(engine, session)
    assert only_processed(send(engine, keypress(session, key, context), NOW + 1))
    assert [c.kind for c in engine.pending_cards(session)] == ["plan"]


# --- the risk gate -------------------------------------------------------------------------


BENIGN_COMMANDS = [
    ("Bash", {"command": "npm test"}),
    ("Bash", {"command": "git status && git diff --stat", "description": "look"}),
]
BENIGN_FILE_CALLS = [
    ("Write", {"file_path": f"{ROOT}/notes.md", "content": "hi"}),
    ("Read", {"file_path": f"{ROOT}/README.md"}),
]


@pytest.mark.parametrize(
    ("mode", "tool", "tool_input"),
    [
        *(("default", tool, tool_input) for tool, tool_input in BENIGN_COMMANDS),
        *(("default", tool, tool_input) for tool, tool_input in BENIGN_FILE_CALLS),
        *(("acceptEdits", tool, tool_input) for tool, tool_input in BENIGN_FILE_CALLS),
    ],
)
def test_benign_calls_are_auto_allowed_without_a_card(
    mode: str, tool: str, tool_input: dict[str, Any]
) -> None:
    engine, session = session_in(mode)
    effects = request(engine, session, "tu-1", tool, tool_input)
    assert [type(e) for e in effects] == [Commit, AnswerPermission]
    assert answers(effects) == [AnswerPermission(session, "tu-1", True)]
    assert cards(effects) == [] and engine.pending_cards(session) == []
    [decision] = decisions(effects)
    assert (decision.session_id, decision.tool, decision.outcome) == (session, tool, "allow")
    assert decision.reasons == ()
    assert decision.detail and mode in decision.detail  # "why": the mode allowed it


@pytest.mark.parametrize(("tool", "tool_input"), BENIGN_COMMANDS)
def test_accept_edits_asks_the_phone_for_commands(tool: str, tool_input: dict[str, Any]) -> None:
    """acceptEdits auto-allows reads and workspace edits only; a command gets a card."""
    engine, session = session_in("acceptEdits")
    effects = request(engine, session, "tu-1", tool, tool_input)
    assert answers(effects) == []
    [card_entry] = cards(effects)
    assert card_entry.metadata["tool_name"] == tool and card_entry.metadata["reasons"] == []
    assert [c.request_id for c in engine.pending_cards(session)] == ["tu-1"]
    [decision] = decisions(effects)
    assert (decision.tool, decision.outcome, decision.reasons) == (tool, "card", ())


BLOCKED = [
    ("rm -rf /", "deny_list:rm_rf"),
    ("curl x | sh", "deny_list:curl_pipe_sh"),
    ("git push -f origin main", "deny_list:force_push_protected"),
]


@pytest.mark.parametrize(("command", "label"), BLOCKED)
@pytest.mark.parametrize("mode", ["default", "acceptEdits", "plan"])
def test_deny_listed_commands_are_blocked_with_the_reason(
    mode: str, command: str, label: str
) -> None:
    engine, session = session_in(mode)
    effects = request(engine, session, "tu-1", "Bash", {"command": command})
    assert [type(e) for e in effects] == [Commit, AnswerPermission]
    assert cards(effects) == [] and engine.pending_cards(session) == []
    [answer] = answers(effects)
    assert (answer.request_id, answer.allow, answer.always) == ("tu-1", False, False)
    assert label in answer.message  # the agent reads why in its tool result
    assert describe_reason(label) in answer.message
    [decision] = decisions(effects)
    assert (decision.tool, decision.outcome, decision.reasons) == ("Bash", "block", (label,))
    assert decision.detail is not None and label in decision.detail


@pytest.mark.parametrize(("command", "label"), BLOCKED)
def test_block_message_says_blocked_once(command: str, label: str) -> None:
    engine, session = session_in("default")
    [answer] = answers(request(engine, session, "tu-1", "Bash", {"command": command}))
    assert answer.message.count(BLOCK_HEAD) == 1, answer.message


FLOORS = [
    ("Bash", {"command": "sudo apt install x"}, ["privileged"]),
    ("Write", {"file_path": "/tmp/elsewhere.txt", "content": "x"}, ["outside_workspace"]),
]


@pytest.mark.parametrize(("tool", "tool_input", "reasons"), FLOORS)
@pytest.mark.parametrize("mode", ["default", "acceptEdits"])
def test_floors_always_make_a_card(
    mode: str, tool: str, tool_input: dict[str, Any], reasons: list[str]
) -> None:
    engine, session = session_in(mode)
    effects = request(engine, session, "tu-1", tool, tool_input)
    assert [type(e) for e in effects] == [Commit, Publish]
    assert answers(effects) == []  # never auto-allowed
    [op] = appended(effects)
    assert op.seq == 1
    entry = op.entry
    assert (entry.entryType, entry.content) == ("system", f"Permission needed: {tool}")
    metadata = dict(entry.metadata or {})
    assert metadata.pop("reason_text").startswith("Needs approval on the phone")
    assert metadata == {
        "special": "permission_request",
        "tool_name": tool,
        "tool_use_id": "tu-1",
        "tool_input": tool_input,
        "reasons": reasons,
    }
    [decision] = decisions(effects)
    assert (decision.tool, decision.outcome, decision.reasons) == (tool, "card", tuple(reasons))
    assert [(c.request_id, c.kind) for c in engine.pending_cards(session)] == [
        ("tu-1", "permission")
    ]


@pytest.mark.parametrize("mode", ["default", "acceptEdits", "plan"])
def test_a_gate_that_raises_makes_a_card_never_an_allow(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_gate(*_args: Any, **_kwargs: Any) -> None:
        raise RecursionError("maximum recursion depth exceeded: " + "secret-looking input")

    monkeypatch.setattr("bridge.engine.sessions.broker.evaluate", broken_gate)
    engine, session = session_in(mode)
    effects = request(engine, session, "tu-1", "Bash", {"command": "npm test"})
    assert answers(effects) == []  # fails closed: the phone decides
    [entry] = cards(effects)
    metadata = entry.metadata or {}
    assert metadata["reason_text"] == "the gate could not judge this call (RecursionError)"
    assert metadata["reasons"] == []
    [decision] = decisions(effects)
    assert (decision.outcome, decision.detail) == (
        "card",
        "the gate could not judge this call (RecursionError)",
    )
    assert "secret" not in repr(effects)
    assert [c.request_id for c in engine.pending_cards(session)] == ["tu-1"]


def test_card_carries_the_description_and_the_subagent() -> None:
    engine, session = session_in("default")
    effects = request(
        engine,
        session,
        "tu-1",
        "Bash",
        {"command": "sudo systemctl restart nginx"},
        description="Restart the web server",
        agent_id="agent-7",
    )
    [entry] = cards(effects)
    assert entry.content == "Restart the web server"
    metadata = entry.metadata or {}
    assert metadata["description"] == "Restart the web server"
    assert (metadata["subagent"], metadata["agent_id"]) == (True, "agent-7")


DENY_TEXT = "The user denied this tool call."


@pytest.mark.parametrize(
    ("allow", "modifier", "always", "outcome"),
    [
        (True, None, False, "phone_allow"),
        (True, "always", True, "phone_allow"),
        (False, None, False, "phone_deny"),
        (False, "never", False, "phone_deny"),
    ],
)
def test_permission_res_answers_the_card(
    allow: bool, modifier: str | None, always: bool, outcome: str
) -> None:
    engine, session = session_in("default")
    request(engine, session, "tu-1", "Bash", {"command": "sudo apt install x"})
    res = PermissionResCommand(
        sessionId=session,
        requestId="tu-1",
        allow=allow,
        modifier=modifier,
    )
    effects = send(engine, res, NOW + 1)
    assert [type(e) for e in effects] == [Commit, AnswerPermission]
    assert ops_of(effects)[:1] == [MarkProcessed]
    [answer] = answers(effects)
    assert (answer.session_id, answer.request_id, answer.allow, answer.always) == (
        session,
        "tu-1",
        allow,
        always,
    )
    assert answer.updated_input is None
    if allow:
        assert answer.message == ""
    elif modifier == "never":
        assert answer.message and answer.message != DENY_TEXT  # "never" changes the deny text
    else:
        assert answer.message == DENY_TEXT
    [decision] = decisions(effects)
    assert (decision.session_id, decision.tool, decision.outcome) == (session, "Bash", outcome)
    assert engine.pending_cards(session) == []
    # Answered once: a repeat of the answer finds no card.
    again = send(engine, res, NOW + 2)
    assert only_processed(again) and answers(again) == []


@pytest.mark.parametrize(
    ("session_of", "request_id"),
    [("same", "tu-unknown"), ("other", "tu-1"), ("same", "tu-exit")],
)
def test_permission_res_for_no_such_card_only_marks_processed(
    session_of: str, request_id: str
) -> None:
    engine, session = session_in("default")
    other = ready_session(engine)
    request(engine, session, "tu-1", "Bash", {"command": "sudo apt install x"})
    request(engine, session, "tu-exit", "ExitPlanMode", {"plan": PLAN})  # not a permission card
    target = session if session_of == "same" else other
    effects = send(
        engine, PermissionResCommand(sessionId=target, requestId=request_id, allow=True), NOW + 1
    )
    assert only_processed(effects)
    assert answers(effects) == [] and decisions(effects) == []
    assert sorted(c.request_id for c in engine.pending_cards(session)) == ["tu-1", "tu-exit"]


def test_the_same_call_three_times_in_a_row_is_flagged_loop_detected() -> None:
    engine, session = session_in("default")
    call = {"command": "npm test", "description": "run the tests"}
    reordered = {"description": "run the tests", "command": "npm test"}  # key order is ignored
    one = request(engine, session, "tu-1", "Bash", call)
    two = request(engine, session, "tu-2", "Bash", reordered, NOW + 1)
    assert [a.allow for a in answers(one) + answers(two)] == [True, True]
    three = request(engine, session, "tu-3", "Bash", call, NOW + 2)
    assert answers(three) == []
    [entry] = cards(three)
    assert (entry.metadata or {})["reasons"] == ["loop_detected"]
    assert (entry.metadata or {})["special"] == "permission_request"
    [decision] = decisions(three)
    assert (decision.outcome, decision.reasons) == ("card", ("loop_detected",))


def test_a_different_call_in_between_breaks_the_loop() -> None:
    engine, session = session_in("default")
    call = {"command": "npm test"}
    request(engine, session, "tu-1", "Bash", call)
    request(engine, session, "tu-2", "Bash", call, NOW + 1)
    request(engine, session, "tu-3", "Bash", {"command": "npm test", "timeout": 60000}, NOW + 2)
    effects = request(engine, session, "tu-4", "Bash", call, NOW + 3)
    assert [a.allow for a in answers(effects)] == [True]


def test_loops_are_counted_per_session() -> None:
    engine, first = session_in("default")
    second = ready_session(engine)
    set_mode(engine, second, "default")
    call = {"command": "npm test"}
    for n, session in enumerate([first, second, first, second]):
        effects = request(engine, session, f"tu-{n}", "Bash", call, NOW + n)
        assert [a.allow for a in answers(effects)] == [True]


@pytest.mark.parametrize(
    ("tool", "tool_input", "reasons"),
    [
        ("Write", {"file_path": f"{ROOT}/plan-notes.md", "content": "x"}, []),
        ("Edit", {"file_path": f"{ROOT}/a.py", "old_string": "a", "new_string": "b"}, []),
        ("Bash", {"command": "npm test"}, []),
        ("Write", {"file_path": "/tmp/x.txt", "content": "x"}, ["outside_workspace"]),
    ],
)
def test_plan_mode_never_auto_allows_a_change(
    tool: str, tool_input: dict[str, Any], reasons: list[str]
) -> None:
    engine, session = session_in("plan")
    effects = request(engine, session, "tu-1", tool, tool_input)
    assert answers(effects) == []
    [entry] = cards(effects)
    assert (entry.metadata or {})["special"] == "permission_request"
    assert (entry.metadata or {})["reasons"] == reasons


def test_plan_mode_still_allows_a_read_inside_the_workspace() -> None:
    engine, session = session_in("plan")
    effects = request(engine, session, "tu-1", "Read", {"file_path": f"{ROOT}/README.md"})
    assert answers(effects) == [AnswerPermission(session, "tu-1", True)]


def test_a_request_for_an_unknown_session_is_denied() -> None:
    engine = make_engine()
    effects = engine.handle(PermissionRequested("nope", "tu-1", "Bash", {"command": "ls"}), NOW)
    assert [(a.session_id, a.request_id, a.allow) for a in answers(effects)] == [
        ("nope", "tu-1", False)
    ]
    assert appended(effects) == []


# --- cards end -----------------------------------------------------------------------------


def three_cards(engine: Engine, session: str, now: float = NOW) -> None:
    """A permission card, a plan card and a question group, all pending."""
    request(engine, session, "tu-perm", "Bash", {"command": "sudo apt install x"}, now)
    request(engine, session, "tu-exit", "ExitPlanMode", {"plan": PLAN}, now)
    request(engine, session, "tu-ask", "AskUserQuestion", ASK_INPUT, now)


def test_interrupt_denies_every_card_of_that_session_only() -> None:
    engine, session = session_in("default")
    other = ready_session(engine)
    three_cards(engine, session)
    request(engine, other, "tu-other", "Bash", {"command": "sudo ls"})
    effects = send(engine, InterruptCommand(sessionId=session), NOW + 1)
    assert isinstance(effects[0], Commit) and ops_of(effects)[0] is MarkProcessed
    denied = answers(effects)
    assert sorted(a.request_id for a in denied) == ["tu-ask", "tu-exit", "tu-perm"]
    assert all(a.session_id == session and not a.allow and a.message for a in denied)
    assert sorted(d.tool for d in decisions(effects)) == ["AskUserQuestion", "Bash", "ExitPlanMode"]
    assert {d.outcome for d in decisions(effects)} == {"interrupted"}
    assert effects[-1] == InterruptRunner(session)  # the turn is still stopped
    assert engine.pending_cards(session) == []
    # The other session's card is untouched and still answerable.
    assert [c.request_id for c in engine.pending_cards(other)] == ["tu-other"]
    res = PermissionResCommand(sessionId=other, requestId="tu-other", allow=True)
    assert answers(send(engine, res, NOW + 2)) == [AnswerPermission(other, "tu-other", True)]
    # An input after the interrupt is a prompt again, not an answer to a dead question.
    prompt = send(engine, InputCommand(sessionId=session, text="start over"), NOW + 3)
    assert SendToRunner(session) in prompt


def test_interrupt_without_cards_just_interrupts() -> None:
    engine, session = session_in("default")
    effects = send(engine, InterruptCommand(sessionId=session), NOW + 1)
    assert [type(e) for e in effects] == [Commit, InterruptRunner]
    assert decisions(effects) == [] and answers(effects) == []


def card_still_answerable(engine: Engine, session: str, now: float) -> bool:
    res = PermissionResCommand(sessionId=session, requestId="tu-perm", allow=True)
    return bool(answers(send(engine, res, now)))


@pytest.mark.parametrize("how", ["ended", "closed", "ready again"])
def test_the_end_of_a_runner_drops_its_cards(how: str) -> None:
    engine, session = session_in("default")
    other = ready_session(engine)
    three_cards(engine, session)
    request(engine, other, "tu-perm", "Bash", {"command": "sudo ls"})
    if how == "ended":
        effects = engine.handle(AgentEnded(session, "crashed"), NOW + 1)
    elif how == "closed":
        effects = send(engine, CloseSessionCommand(sessionId=session), NOW + 1)
    else:
        effects = engine.handle(AgentReady(session, "sdk-2", "m", ROOT), NOW + 1)
    check_order(effects)
    # The runner is gone (it denied its own calls): nothing to answer, nothing left to show.
    assert answers(effects) == [] and cards(effects) == []
    assert engine.pending_cards(session) == []
    assert not card_still_answerable(engine, session, NOW + 2)
    assert only_processed(send(engine, keypress(session, "1", "plan-approval"), NOW + 3))
    assert answers(tick(engine, NOW + CARD_TIMEOUT_SECONDS + 1)) == [
        AnswerPermission(
            other, "tu-perm", False, "Nobody answered this request within an hour; it was denied."
        )
    ]


def test_a_card_left_unanswered_for_an_hour_is_denied_by_tick() -> None:
    engine, session = session_in("default")
    start = NOW + 10
    request(engine, session, "tu-perm", "Bash", {"command": "sudo apt install x"}, start)
    deadline = start + CARD_TIMEOUT_SECONDS
    assert CARD_TIMEOUT_SECONDS == 3600.0
    assert engine.cards.next_deadline() == deadline
    early = tick(engine, deadline - 0.1)
    assert answers(early) == [] and decisions(early) == []
    assert [c.request_id for c in engine.pending_cards(session)] == ["tu-perm"]
    effects = tick(engine, deadline)
    [answer] = answers(effects)
    assert (answer.session_id, answer.request_id, answer.allow) == (session, "tu-perm", False)
    assert answer.message
    [decision] = decisions(effects)
    assert (decision.session_id, decision.tool, decision.outcome) == (session, "Bash", "timeout")
    assert engine.pending_cards(session) == [] and engine.cards.next_deadline() is None
    assert answers(tick(engine, deadline + 60)) == []  # denied once
    assert not card_still_answerable(engine, session, deadline + 61)


def test_every_kind_of_card_times_out() -> None:
    engine, session = session_in("default")
    three_cards(engine, session)
    effects = tick(engine, NOW + CARD_TIMEOUT_SECONDS)
    assert sorted((a.request_id, a.allow) for a in answers(effects)) == [
        ("tu-ask", False),
        ("tu-exit", False),
        ("tu-perm", False),
    ]
    assert {d.outcome for d in decisions(effects)} == {"timeout"}
    # The question is gone too: typed text reaches the agent.
    prompt = send(engine, InputCommand(sessionId=session, text="hi"), NOW + CARD_TIMEOUT_SECONDS)
    assert SendToRunner(session) in prompt


def test_each_card_has_its_own_hour() -> None:
    engine, session = session_in("default")
    request(engine, session, "tu-a", "Bash", {"command": "sudo ls"}, NOW)
    request(engine, session, "tu-b", "Bash", {"command": "sudo id"}, NOW + 100)
    first = tick(engine, NOW + CARD_TIMEOUT_SECONDS)
    assert [a.request_id for a in answers(first)] == ["tu-a"]
    assert answers(tick(engine, NOW + 100 + CARD_TIMEOUT_SECONDS - 0.1)) == []
    assert [a.request_id for a in answers(tick(engine, NOW + 100 + CARD_TIMEOUT_SECONDS))] == [
        "tu-b"
    ]


# --- seqs across a session -----------------------------------------------------------------


def test_card_entries_interleave_with_other_lines_on_consecutive_seqs() -> None:
    engine, session = session_in("plan")
    seqs: list[int] = []
    seqs += [op.seq for op in appended(send(engine, InputCommand(sessionId=session, text="go")))]
    seqs += [op.seq for op in appended(exit_plan(engine, session))]
    seqs += [op.seq for op in appended(send(engine, keypress(session, "2", "plan-approval")))]
    seqs += [op.seq for op in appended(request(engine, session, "q", "AskUserQuestion", ASK_INPUT))]
    seqs += [op.seq for op in appended(send(engine, InputCommand(sessionId=session, text="a")))]
    seqs += [op.seq for op in appended(send(engine, keypress(session, "1", "question")))]
    assert seqs == [1, 2, 3, 4, 5, 6]
    assert engine.session(session).seq_high == 6  # type: ignore[union-attr]
