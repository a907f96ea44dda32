"""The engine's own rules, beyond single commands: the marks fold, one SessionState per session
(closing drops all of it), the routers' reach, and sync's ack wait counted from the real send."""

from __future__ import annotations

import inspect
import typing

import pytest

from bridge.engine import core
from bridge.engine.admission import fold_marks
from bridge.engine.effects import (
    AdvanceCursor,
    Commit,
    DeleteSession,
    Dropped,
    Effect,
    MarkProcessed,
    Publish,
    SendSyncChunk,
    SendToRunner,
)
from bridge.engine.inputs import (
    AgentEnded,
    AgentEntry,
    Input,
    PermissionRequested,
    PhoneUnpaired,
    SyncChunkSent,
)
from bridge.engine.state import Liveness
from bridge.engine.sync import SYNC_ACK_TIMEOUT_SECONDS
from bridge.protocol import (
    CloseSessionCommand,
    InputCommand,
    OutputEntry,
    PhoneToBridge,
    SyncRequestCommand,
    UsageRequestCommand,
)
from tests.engine.test_core import NOW, PHONE, command_event, make_engine, ready_session
from tests.support.upload_builders import chunk, chunks_of

MARK = MarkProcessed("e1", 1)
CURSOR = AdvanceCursor(1)
SAVE = DeleteSession("s-1")
LATER = Dropped("later")

FOLD_CASES = [
    ("no effects", [], [Commit((MARK, CURSOR))]),
    ("a first commit takes the marks in front", [Commit((SAVE,))], [Commit((MARK, CURSOR, SAVE))]),
    (
        "the first commit's outbox stays with it",
        [Commit((), outbox=(LATER,)), LATER],  # type: ignore[arg-type]
        [Commit((MARK, CURSOR), outbox=(LATER,)), LATER],  # type: ignore[arg-type]
    ),
    ("a non-commit first gets a commit before it", [LATER], [Commit((MARK, CURSOR)), LATER]),
    (
        "only the first commit, never a later one",
        [LATER, Commit((SAVE,))],
        [Commit((MARK, CURSOR)), LATER, Commit((SAVE,))],
    ),
]


@pytest.mark.parametrize(
    ("effects", "folded"), [c[1:] for c in FOLD_CASES], ids=[c[0] for c in FOLD_CASES]
)
def test_fold_marks(effects: list[Effect], folded: list[Effect]) -> None:
    assert fold_marks((MARK, CURSOR), effects) == folded


def test_fold_without_marks_is_identity() -> None:
    effects: list[Effect] = [LATER]
    assert fold_marks((), effects) is effects


def every_command_commits_its_marks_first(effects: list[Effect]) -> None:
    first = effects[0]
    assert isinstance(first, Commit), effects
    assert isinstance(first.ops[0], MarkProcessed), first.ops
    assert (
        sum(isinstance(op, MarkProcessed) for e in effects if isinstance(e, Commit) for op in e.ops)
        == 1
    )


@pytest.mark.parametrize(
    "command",
    [
        InputCommand(sessionId="nope", text="hi", inputId="i"),
        CloseSessionCommand(sessionId="nope"),
        UsageRequestCommand(sessionId="nope"),
        SyncRequestCommand(sessionId="nope", haveRanges=[]),
    ],
    ids=lambda c: c.type,
)
def test_commands_about_unknown_sessions_still_commit_their_marks_first(
    command: PhoneToBridge,
) -> None:
    engine = make_engine()
    every_command_commits_its_marks_first(engine.handle(command_event(command), NOW))


# --- one SessionState per session ------------------------------------------------------------


def test_closing_a_session_drops_all_of_its_state() -> None:
    engine = make_engine()
    session = ready_session(engine)
    meta = OutputEntry(
        entryType="text",
        content="hello",
        timestamp="2027-01-15T08:00:00.000Z",
        metadata={"session_meta": {"topic": "Topic", "project": "proj"}},
    )
    result = OutputEntry(
        entryType="system",
        content="done",
        timestamp="2027-01-15T08:00:01.000Z",
        metadata={"subtype": "result", "total_cost_usd": 0.25},
    )
    engine.handle(AgentEntry(session, meta), NOW)
    engine.handle(AgentEntry(session, result), NOW)
    engine.handle(PermissionRequested(session, "tu-1", "Bash", {"command": "sudo ls"}), NOW)
    pieces = chunks_of(b"\x89PNG" + b"x" * 200, 2)
    engine.handle(command_event(chunk(session, "up-1", 0, 2, pieces[0]), created_at=NOW), NOW)
    state = engine.sessions.get(session)
    assert state is not None
    assert (state.meta_applied, state.cost_usd) == (True, 0.25)
    assert [c.request_id for c in engine.pending_cards(session)] == ["tu-1"]
    assert len(engine.attachments.uploads) == 1

    engine.handle(
        command_event(CloseSessionCommand(sessionId=session), created_at=NOW + 1), NOW + 1
    )

    assert engine.sessions.get(session) is None and engine.session(session) is None
    assert engine.pending_cards(session) == [] and engine.cards.next_deadline() is None
    assert len(engine.attachments.uploads) == 0  # the upload in flight was aborted
    # The rest of the image cannot complete a dead upload into a later session's input.
    late = engine.handle(
        command_event(chunk(session, "up-1", 1, 2, pieces[1]), created_at=NOW + 2), NOW + 2
    )
    assert not any(isinstance(e, SendToRunner) for e in late)


def test_unpairing_a_phone_drops_its_uploads_in_flight() -> None:
    engine = make_engine()
    session = ready_session(engine)
    pieces = chunks_of(b"\x89PNG" + b"y" * 200, 2)
    engine.handle(command_event(chunk(session, "up-2", 0, 2, pieces[0]), created_at=NOW), NOW)
    assert len(engine.attachments.uploads) == 1
    engine.handle(PhoneUnpaired(PHONE.public_hex), NOW + 1)
    assert len(engine.attachments.uploads) == 0


def test_liveness_follows_the_runner() -> None:
    engine = make_engine()
    session = ready_session(engine)
    state = engine.sessions.get(session)
    assert state is not None and state.liveness is Liveness.ALIVE and engine.is_alive(session)
    engine.handle(AgentEnded(session, "gone"), NOW)
    assert state.liveness is Liveness.ENDED and not engine.is_alive(session)
    effects = engine.handle(
        command_event(InputCommand(sessionId=session, text="hi", inputId="x")), NOW
    )
    [commit] = [e for e in effects if isinstance(e, Commit)]
    assert [p.message.reason for p in commit.outbox] == ["error"]  # type: ignore[attr-defined]


# --- routing is exhaustive -------------------------------------------------------------------


def union_members(union: object) -> set[type]:
    return set(typing.get_args(union))


def test_every_input_type_is_routed() -> None:
    source = inspect.getsource(core)
    missing = [t.__name__ for t in union_members(Input) if f"case {t.__name__}()" not in source]
    assert missing == []


def test_every_command_type_is_routed() -> None:
    source = inspect.getsource(core)
    missing = [t.__name__ for t in union_members(PhoneToBridge) if f"{t.__name__}()" not in source]
    assert missing == []


# --- sync: the ack wait starts when the chunks really left -------------------------------------


def test_the_ack_wait_counts_from_the_real_send() -> None:
    engine = make_engine()
    session = ready_session(engine)
    for n in range(3):
        engine.handle(
            AgentEntry(
                session,
                OutputEntry(
                    entryType="text", content=f"l{n}", timestamp="2027-01-15T08:00:00.000Z"
                ),
            ),
            NOW,
        )
    effects = engine.handle(
        command_event(SyncRequestCommand(sessionId=session, haveRanges=[])), NOW
    )
    [send] = [e for e in effects if isinstance(e, SendSyncChunk)]
    # The relay was slow: the chunk left 8 s after it was queued.
    assert engine.handle(SyncChunkSent(PHONE.public_hex, send.sync_id), NOW + 8) == []
    resent_at = NOW + 8 + SYNC_ACK_TIMEOUT_SECONDS
    assert not any(isinstance(e, SendSyncChunk) for e in engine.tick(resent_at - 0.1))
    assert any(isinstance(e, SendSyncChunk) for e in engine.tick(resent_at))


def test_a_late_sent_report_for_an_ended_sync_changes_nothing() -> None:
    engine = make_engine()
    before = engine.next_deadline()
    assert engine.handle(SyncChunkSent(PHONE.public_hex, "no-such-sync"), NOW) == []
    assert engine.next_deadline() == before


def test_publishes_of_one_command_all_go_to_every_phone() -> None:
    engine = make_engine()
    session = ready_session(engine)
    effects = engine.handle(
        command_event(InputCommand(sessionId=session, text="go", inputId="i1")), NOW
    )
    audiences = {
        p.audience
        for e in effects
        for p in ([e] if isinstance(e, Publish) else e.outbox if isinstance(e, Commit) else [])
    }
    assert audiences == {(PHONE.public_hex,)}
