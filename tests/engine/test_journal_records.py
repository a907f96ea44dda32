"""What a session host's journal does to the engine: each record once, by seq, committed with it.

Also the two inputs a restarted daemon needs for the asks still parked in a host
(``PermissionStillPending``) and the end of an input's turn (``AgentAnswered``), and the rule
that every answer to an ask is durable with the decision that made it (``SaveAnswer``).
"""

from __future__ import annotations

import dataclasses

from bridge.engine.effects import (
    AnswerPermission,
    AppendTranscript,
    Commit,
    Dropped,
    Effect,
    MarkInboxTaken,
    RemoveInbox,
    SaveAgentCursor,
    SaveAnswer,
    SaveSession,
)
from bridge.engine.inputs import (
    AgentAnswered,
    AgentEntry,
    AgentReady,
    AgentRestarted,
    AgentStateChanged,
    AgentTookInput,
    JournalRecord,
    PermissionRequested,
    PermissionStillPending,
)
from bridge.protocol import ModeCommand, OutputEntry, PermissionResCommand
from tests.engine.test_core import NOW, ROOT, command_event, make_engine, ready_session


def entry(text: str) -> AgentEntry:
    return AgentEntry("s-1", OutputEntry(entryType="text", content=text, timestamp="t"))


def ops(effects: list[Effect]) -> list[object]:
    return [op for e in effects if isinstance(e, Commit) for op in e.ops]


def transcript_lines(effects: list[Effect]) -> list[str]:
    return [op.entry.content for op in ops(effects) if isinstance(op, AppendTranscript)]


def test_a_record_commits_its_seq_first_with_its_own_effects() -> None:
    engine = make_engine()
    session = ready_session(engine)
    record = JournalRecord(session, 7, dataclasses.replace(entry("hello"), session_id=session))
    effects = engine.handle(record, NOW)
    first = effects[0]
    assert isinstance(first, Commit)
    assert first.ops[0] == SaveAgentCursor(session, 7)
    assert transcript_lines(effects) == ["hello"]
    assert engine.session(session).agent_seq == 7  # type: ignore[union-attr]


def test_a_replayed_record_is_dropped_and_a_gap_is_not_refused() -> None:
    engine = make_engine()
    session = ready_session(engine)
    say = dataclasses.replace(entry("once"), session_id=session)
    engine.handle(JournalRecord(session, 3, say), NOW)
    for seq in (1, 3):  # at or below the cursor: applied already
        again = engine.handle(JournalRecord(session, seq, say), NOW)
        assert [type(e) for e in again] == [Dropped]
    later = engine.handle(JournalRecord(session, 9, say), NOW)  # records 4..8 were counted only
    assert transcript_lines(later) == ["once"]


def test_a_record_the_engine_only_counts_still_commits_its_seq() -> None:
    engine = make_engine()
    session = ready_session(engine)
    assert engine.handle(JournalRecord(session, 4, None), NOW) == [
        Commit((SaveAgentCursor(session, 4),))
    ]
    state = engine.handle(JournalRecord(session, 5, AgentStateChanged(session, "idle")), NOW)
    assert state == [Commit((SaveAgentCursor(session, 5),))]  # no change, yet counted


def test_every_save_of_the_record_carries_the_new_seq() -> None:
    engine = make_engine()
    session = ready_session(engine)
    effects = engine.handle(JournalRecord(session, 2, AgentStateChanged(session, "running")), NOW)
    saves = [op for op in ops(effects) if isinstance(op, SaveSession)]
    assert saves and all(save.record.agent_seq == 2 for save in saves)


def test_records_of_an_unknown_session_are_dropped() -> None:
    engine = make_engine()
    effects = engine.handle(JournalRecord("gone", 1, AgentReady("gone")), NOW)
    assert [type(e) for e in effects] == [Dropped]


def test_answered_inputs_leave_the_inbox() -> None:
    engine = make_engine()
    session = ready_session(engine)
    effects = engine.handle(JournalRecord(session, 1, AgentAnswered(session, ("u-1",))), NOW)
    assert ops(effects) == [SaveAgentCursor(session, 1), RemoveInbox(("u-1",))]
    assert engine.handle(AgentAnswered(session, ()), NOW) == []


def ask(session: str, request_id: str = "toolu_1") -> PermissionRequested:
    return PermissionRequested(session, request_id, "Bash", {"command": "make build"})


def test_every_answer_is_stored_with_the_decision_that_made_it() -> None:
    engine = make_engine()
    session = ready_session(engine)
    engine.handle(ask(session), NOW)  # a card
    effects = engine.handle(
        command_event(PermissionResCommand(sessionId=session, requestId="toolu_1", allow=True)),
        NOW,
    )
    answer = AnswerPermission(session, "toolu_1", True)
    assert SaveAnswer(answer) in ops(effects)
    assert effects.index(answer) > 0  # delivered after the commit that stores it


def test_a_parked_ask_gets_its_card_back_without_a_second_line() -> None:
    engine = make_engine()
    session = ready_session(engine)
    first = engine.handle(ask(session), NOW)
    assert transcript_lines(first)  # the card's line, once
    fresh = make_engine(sessions=[engine.session(session)])  # a restarted daemon
    fresh.handle(AgentReady(session, "sdk-1", "m", ROOT), NOW)
    restored = fresh.handle(PermissionStillPending(ask(session)), NOW)
    assert restored == []  # nothing written, nothing sent: the card is back in memory
    assert [c.request_id for c in fresh.pending_cards(session)] == ["toolu_1"]
    answered = fresh.handle(
        command_event(PermissionResCommand(sessionId=session, requestId="toolu_1", allow=False)),
        NOW,
    )
    answers = [(e.request_id, e.allow) for e in answered if isinstance(e, AnswerPermission)]
    assert answers == [("toolu_1", False)]  # the phone's answer after the restart is taken


def test_a_parked_ask_the_gate_now_decides_is_answered_at_once() -> None:
    engine = make_engine()
    session = ready_session(engine)
    engine.handle(command_event(ModeCommand(sessionId=session, mode="acceptEdits")), NOW)
    harmless = PermissionRequested(session, "toolu_2", "Read", {"file_path": f"{ROOT}/a.txt"})
    effects = engine.handle(PermissionStillPending(harmless), NOW)
    answers = [e for e in effects if isinstance(e, AnswerPermission)]
    assert answers == [AnswerPermission(session, "toolu_2", True)]
    assert SaveAnswer(answers[0]) in ops(effects)
    assert transcript_lines(effects) == []


def test_a_parked_ask_already_in_memory_changes_nothing() -> None:
    engine = make_engine()
    session = ready_session(engine)
    engine.handle(ask(session), NOW)
    assert engine.handle(PermissionStillPending(ask(session)), NOW) == []
    assert len(engine.pending_cards(session)) == 1


def test_a_parked_ask_of_a_session_gone_is_denied() -> None:
    engine = make_engine()
    effects = engine.handle(PermissionStillPending(ask("gone")), NOW)
    assert effects == [AnswerPermission("gone", "toolu_1", False, "No such session.")]


def test_cards_of_an_agent_that_restarted_are_withdrawn_on_the_phone() -> None:
    engine = make_engine()
    session = ready_session(engine)
    engine.handle(ask(session), NOW)
    effects = engine.handle(AgentReady(session, "sdk-1", "m", ROOT), NOW)  # a new host is up
    lines = [op.entry for op in ops(effects) if isinstance(op, AppendTranscript)]
    assert [line.metadata for line in lines] == [
        {"special": "card_withdrawn", "tool_use_id": "toolu_1"}
    ]
    assert "Bash" in lines[0].content and "did not run" in lines[0].content
    assert engine.pending_cards(session) == []
    late = engine.handle(
        command_event(PermissionResCommand(sessionId=session, requestId="toolu_1", allow=True)),
        NOW,
    )
    assert not [e for e in late if isinstance(e, AnswerPermission)]  # nothing left to answer
    again = engine.handle(AgentReady(session, "sdk-1", "m", ROOT), NOW)
    assert not [op for op in ops(again) if isinstance(op, AppendTranscript)]  # said once


def test_a_restart_line_and_the_end_of_its_interrupted_inputs_commit_together() -> None:
    engine = make_engine()
    session = ready_session(engine)
    line = OutputEntry(entryType="system", content="restarting", timestamp="t")
    effects = engine.handle(AgentRestarted(session, line, ("u-1",)), NOW)
    [commit] = [e for e in effects if isinstance(e, Commit)]
    assert [type(op) for op in commit.ops] == [AppendTranscript, RemoveInbox]
    assert engine.handle(AgentRestarted("gone", line), NOW)[0] == Dropped(
        "restart of unknown session gone"
    )


def test_an_input_the_agent_took_is_marked_taken_with_its_record() -> None:
    engine = make_engine()
    session = ready_session(engine)
    effects = engine.handle(JournalRecord(session, 3, AgentTookInput(session, "u-1")), NOW)
    assert ops(effects) == [SaveAgentCursor(session, 3), MarkInboxTaken("u-1")]
