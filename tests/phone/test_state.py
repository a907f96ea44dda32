"""Heartbeat merge (bug-B), pending sessions and transcripts: the phone's pure state."""

from __future__ import annotations

from bridge.protocol.messages import (
    SessionFailedMessage,
    SessionPendingMessage,
    SessionReadyMessage,
)
from tests.phone.builders import make_entry, make_heartbeat, make_session
from tests.support.phone_state import (
    InsertResult,
    PendingSession,
    SessionBook,
    SessionView,
    TranscriptBook,
)

# --- heartbeat merge ----------------------------------------------------------------------------


def test_a_session_absent_from_a_heartbeat_goes_stale_and_comes_back() -> None:
    book = SessionBook()
    book.apply_heartbeat(make_heartbeat("a", "b"), created_at=100)

    book.apply_heartbeat(make_heartbeat("b"), created_at=101)

    assert book.sessions["a"].stale is True
    assert book.sessions["a"].info == make_session("a")  # kept, with its last info
    assert book.sessions["b"].stale is False

    book.apply_heartbeat(make_heartbeat("a", "b"), created_at=102)

    assert book.sessions["a"].stale is False


def test_an_empty_heartbeat_deletes_nothing() -> None:
    book = SessionBook()
    book.apply_heartbeat(make_heartbeat("a", "b"), created_at=100)

    book.apply_heartbeat(make_heartbeat(), created_at=101)

    assert set(book.sessions) == {"a", "b"}
    assert all(view.stale for view in book.sessions.values())


def test_only_tombstones_delete_and_a_tombstone_wins_over_a_listing() -> None:
    book = SessionBook()
    book.apply_heartbeat(make_heartbeat("a", "b", "c"), created_at=100)

    book.apply_heartbeat(make_heartbeat("b", "c", removedSessions=["a", "c"]), created_at=101)

    assert set(book.sessions) == {"b"}
    assert book.machine.tombstones == ["a", "c"]
    book.apply_heartbeat(make_heartbeat("b", removedSessions=["a"]), created_at=102)
    assert book.machine.tombstones == ["a", "c"]  # no duplicates


def test_machine_offline_keeps_the_sessions() -> None:
    book = SessionBook()
    book.apply_heartbeat(make_heartbeat("a", "b"), created_at=100)
    assert book.machine.online is True

    offline = make_heartbeat(
        make_session("a", state="offline"), make_session("b", state="offline"), machineOffline=True
    )
    book.apply_heartbeat(offline, created_at=101)

    assert book.machine.online is False
    assert {sid: view.state for sid, view in book.sessions.items()} == {
        "a": "offline",
        "b": "offline",
    }
    assert not any(view.stale for view in book.sessions.values())

    book.apply_heartbeat(make_heartbeat("a", "b"), created_at=102)
    assert book.machine.online is True


def test_an_older_heartbeat_is_ignored() -> None:
    book = SessionBook()
    book.apply_heartbeat(make_heartbeat("a", "b"), created_at=200)

    applied = book.apply_heartbeat(make_heartbeat("a", removedSessions=["b"]), created_at=199)

    assert applied is False
    assert set(book.sessions) == {"a", "b"}
    assert book.machine.ignored_heartbeats == 1
    assert book.machine.heartbeats == 1


def test_machine_fields_follow_the_latest_heartbeat() -> None:
    book = SessionBook()
    book.apply_heartbeat(
        make_heartbeat(
            machine="studio",
            host="service",
            capabilities=["sync/1", "folders"],
            folders=["app", "lib/core"],
            roots=["/srv/work"],
        ),
        created_at=100,
    )

    machine = book.machine
    assert (machine.name, machine.host, machine.protocol_version) == ("studio", "service", 10)
    assert machine.capabilities == ("sync/1", "folders")
    assert machine.folders == ("app", "lib/core")
    assert machine.roots == ("/srv/work",)
    assert machine.last_heartbeat_at == 100

    book.apply_heartbeat(make_heartbeat(machine="studio", capabilities=None), created_at=101)
    assert machine.capabilities is None
    assert machine.folders is None  # absent now: the phone gates on presence


def test_pending_sessions_resolve_by_ready_failed_or_heartbeat() -> None:
    book = SessionBook()
    for pending_id in ("p1", "p2", "p3"):
        book.apply_pending(
            SessionPendingMessage(pendingId=pending_id, machine="box", createdAt="2026-01-01")
        )

    book.apply_ready(SessionReadyMessage(pendingId="p1", session=make_session("p1")))
    book.apply_failed(SessionFailedMessage(pendingId="p2", reason="cwd outside the workspace"))
    book.apply_heartbeat(make_heartbeat("p3"), created_at=100)

    assert book.pending == {
        "p1": PendingSession("p1", "ready"),
        "p2": PendingSession("p2", "failed", "cwd outside the workspace"),
        "p3": PendingSession("p3", "ready"),
    }
    assert set(book.sessions) == {"p1", "p3"}


def test_session_ready_does_not_resurrect_a_tombstoned_session() -> None:
    book = SessionBook()
    book.apply_heartbeat(make_heartbeat(removedSessions=["s1"]), created_at=100)

    book.apply_ready(SessionReadyMessage(pendingId="s1", session=make_session("s1")))

    assert "s1" not in book.sessions


def test_a_user_delete_forgets_a_session() -> None:
    book = SessionBook()
    book.apply_heartbeat(make_heartbeat("a"), created_at=100)

    assert book.forget("a") is True
    assert book.forget("a") is False
    assert book.sessions == {}


def test_session_book_round_trips_through_json() -> None:
    book = SessionBook()
    book.apply_heartbeat(make_heartbeat("a", "b", folders=["x"], roots=["/r"]), created_at=100)
    book.apply_heartbeat(make_heartbeat("b", removedSessions=["z"]), created_at=101)
    book.apply_failed(SessionFailedMessage(pendingId="p", reason="no"))

    again = SessionBook.from_json(book.to_json())

    assert again.sessions == book.sessions
    assert again.sessions["a"] == SessionView(make_session("a"), stale=True)
    assert again.machine == book.machine
    assert again.pending == book.pending


# --- transcripts --------------------------------------------------------------------------------


def test_insert_or_ignore_and_conflicts() -> None:
    book = TranscriptBook()

    assert book.insert("s", 1, make_entry("one"), "live") is InsertResult.INSERTED
    assert book.insert("s", 1, make_entry("one"), "sync") is InsertResult.DUPLICATE
    assert book.insert("s", 1, make_entry("uno"), "sync") is InsertResult.CONFLICT

    assert book.entries("s") == {1: make_entry("one")}  # never overwritten
    assert book.duplicates == 1
    [conflict] = book.conflicts
    assert (conflict.session_id, conflict.seq, conflict.source) == ("s", 1, "sync")
    assert conflict.kept == make_entry("one")
    assert conflict.rejected == make_entry("uno")


def test_a_different_entry_type_with_the_same_text_is_a_conflict() -> None:
    book = TranscriptBook()
    book.insert("s", 4, make_entry("x", "text"), "live")

    assert book.insert("s", 4, make_entry("x", "thinking"), "sync") is InsertResult.CONFLICT


def test_have_ranges_merge_held_seqs_and_chunk_coverage() -> None:
    book = TranscriptBook()
    for seq in (1, 2, 3, 5, 9, 10):
        book.insert("s", seq, make_entry(str(seq)), "live")

    assert book.have_ranges("s") == [(1, 3), (5, 5), (9, 10)]

    book.cover("s", (11, 20))  # a chunk whose seqs were pruned on the bridge
    book.cover("s", (4, 4))

    assert book.have_ranges("s") == [(1, 5), (9, 20)]
    assert book.have_ranges("other") == []
    assert book.seq_high("s") == 10
    assert book.session_ids() == ["s"]


def test_entries_come_back_in_seq_order() -> None:
    book = TranscriptBook()
    for seq in (3, 1, 2):
        book.insert("s", seq, make_entry(str(seq)), "sync")

    assert list(book.entries("s")) == [1, 2, 3]


def test_transcript_book_round_trips_through_json() -> None:
    book = TranscriptBook()
    book.insert("s", 1, make_entry("one"), "live")
    book.insert("s", 1, make_entry("uno"), "sync")
    book.insert("t", 7, make_entry("seven"), "sync")
    book.cover("t", (1, 6))

    again = TranscriptBook.from_json(book.to_json())

    assert again.entries("s") == book.entries("s")
    assert again.have_ranges("t") == [(1, 7)]
    assert again.conflicts == book.conflicts
    assert again.duplicates == book.duplicates
