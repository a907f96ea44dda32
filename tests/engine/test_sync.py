"""The transcript sync server (PROTOCOL-v10-wire.md §8) with a fake clock: exact effect lists."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.engine.effects import Effect, Publish, SendSyncChunk
from bridge.engine.sync import (
    MAX_ACTIVE_SYNCS,
    SYNC_ACK_TIMEOUT_SECONDS,
    SYNC_CHUNK_SIZE,
    SYNC_IDLE_TIMEOUT_SECONDS,
    SYNC_MAX_RETRIES,
    SyncOutcome,
    SyncServer,
)
from bridge.protocol import SyncBeginMessage, SyncEndMessage, ranges
from bridge.protocol.ranges import Range

PHONE = "a" * 64
OTHER_PHONE = "b" * 64
SESSION = "3f1c2a9e-8b7d-4c6e-9f0a-1b2c3d4e5f60"
OTHER_SESSION = "9e0d1c2b-3a4f-4e5d-8c7b-6a5f4e3d2c1b"
SYNC = "sync-1"
T0 = 1_700_000_000.0


def begin(missing: Sequence[Range], seq_high: int, sync_id: str = SYNC) -> Publish:
    message = SyncBeginMessage(
        sessionId=SESSION, syncId=sync_id, seqHigh=seq_high, ranges=list(missing)
    )
    return Publish(message, (PHONE,))


def end(delivered: Sequence[Range], sync_id: str = SYNC, session: str = SESSION) -> Publish:
    message = SyncEndMessage(sessionId=session, syncId=sync_id, deliveredRanges=list(delivered))
    return Publish(message, (PHONE,))


def chunk(low: int, high: int, sync_id: str = SYNC) -> SendSyncChunk:
    return SendSyncChunk(PHONE, SESSION, sync_id, (low, high))


def chunks_of(effects: Sequence[Effect]) -> list[Range]:
    return [effect.seq_range for effect in effects if isinstance(effect, SendSyncChunk)]


def started(seq_high: int = 120, **config: float) -> SyncServer:
    """A server with one sync of ``[1, seq_high]`` to PHONE, started at T0."""
    server = SyncServer(**config)  # type: ignore[arg-type]
    server.request(PHONE, SESSION, [], seq_high, SYNC, T0)
    return server


# --- request: missing ranges and chunks ---------------------------------------------------------

REQUEST_CASES: dict[str, tuple[list[tuple[int, int]], int, list[Range], list[Range]]] = {
    "fresh phone": ([], 120, [(1, 120)], [(1, 50), (51, 100), (101, 120)]),
    "exactly one chunk": ([], 50, [(1, 50)], [(1, 50)]),
    "one over a chunk": ([], 51, [(1, 51)], [(1, 50), (51, 51)]),
    "single entry": ([], 1, [(1, 1)], [(1, 1)]),
    "tail missing": ([(1, 100)], 130, [(101, 130)], [(101, 130)]),
    "holes": ([(1, 10), (20, 30)], 40, [(11, 19), (31, 40)], [(11, 19), (31, 40)]),
    "unsorted, overlapping, adjacent, inverted have": (
        [(41, 60), (30, 40), (10, 5), (1, 3), (35, 45)],
        200,
        [(4, 29), (61, 200)],
        [(4, 29), (61, 110), (111, 160), (161, 200)],
    ),
    "have beyond seq_high": ([(1, 10), (50, 10_000)], 60, [(11, 49)], [(11, 49)]),
    "have seq 0 only": ([(0, 0)], 3, [(1, 3)], [(1, 3)]),
}


@pytest.mark.parametrize(
    ("have", "seq_high", "missing", "expected_chunks"),
    list(REQUEST_CASES.values()),
    ids=list(REQUEST_CASES),
)
def test_request_sends_begin_then_every_chunk(
    have: list[tuple[int, int]], seq_high: int, missing: list[Range], expected_chunks: list[Range]
) -> None:
    server = SyncServer()
    effects = server.request(PHONE, SESSION, have, seq_high, SYNC, T0)
    assert effects == [begin(missing, seq_high), *(chunk(*c) for c in expected_chunks)]
    assert server.active_count() == 1
    assert server.is_active(SYNC)
    assert server.next_deadline() == T0 + SYNC_ACK_TIMEOUT_SECONDS


EMPTY_CASES: dict[str, tuple[list[tuple[int, int]], int]] = {
    "empty transcript": ([], 0),
    "phone has everything": ([(1, 75)], 75),
    "phone has more": ([(1, 90)], 75),
    "pieces cover everything": ([(40, 75), (1, 39)], 75),
}


@pytest.mark.parametrize(("have", "seq_high"), list(EMPTY_CASES.values()), ids=list(EMPTY_CASES))
def test_nothing_missing_begins_and_ends_at_once(
    have: list[tuple[int, int]], seq_high: int
) -> None:
    server = SyncServer()
    assert server.request(PHONE, SESSION, have, seq_high, SYNC, T0) == [
        begin([], seq_high),
        end([]),
    ]
    assert server.active_count() == 0
    assert server.next_deadline() is None
    assert server.outcomes[SyncOutcome.COMPLETE] == 1


def test_five_thousand_entries_make_one_hundred_chunks_of_fifty() -> None:
    server = SyncServer()
    effects = server.request(PHONE, SESSION, [], 5000, SYNC, T0)
    sent = chunks_of(effects)
    assert len(sent) == 100
    assert all(high - low + 1 == SYNC_CHUNK_SIZE for low, high in sent)
    assert ranges.normalize(sent) == [(1, 5000)]
    for seq_range in reversed(sent[1:]):  # any order
        assert server.ack(PHONE, SYNC, seq_range, T0 + 1) == []
    assert server.ack(PHONE, SYNC, sent[0], T0 + 1) == [end([(1, 5000)])]
    assert server.active_count() == 0


def test_every_message_goes_to_the_requester_only_and_best_effort() -> None:
    server = SyncServer()
    effects = server.request(PHONE, SESSION, [], 120, SYNC, T0)
    effects += server.tick(T0 + 10) + server.tick(T0 + 30) + server.tick(T0 + 70)
    assert {type(effect) for effect in effects} == {Publish, SendSyncChunk}
    for effect in effects:
        if isinstance(effect, Publish):
            assert effect.audience == (PHONE,)
        else:
            assert isinstance(effect, SendSyncChunk)
            assert effect.phone == PHONE


# --- acks ------------------------------------------------------------------------------------------


def test_acks_in_any_order_complete_the_sync() -> None:
    server = started()
    assert server.ack(PHONE, SYNC, (51, 100), T0 + 1) == []
    assert server.ack(PHONE, SYNC, [101, 120], T0 + 2) == []  # a list is a range too
    assert server.ack(PHONE, SYNC, (1, 50), T0 + 3) == [end([(1, 120)])]
    assert server.active_count() == 0
    assert not server.is_active(SYNC)
    assert server.next_deadline() is None
    assert server.outcomes[SyncOutcome.COMPLETE] == 1


IGNORED_ACKS: dict[str, tuple[str, str, Sequence[int]]] = {
    "unknown sync id": (PHONE, "sync-0", (1, 50)),
    "another phone": (OTHER_PHONE, SYNC, (1, 50)),
    "part of a chunk": (PHONE, SYNC, (1, 10)),
    "two chunks at once": (PHONE, SYNC, (1, 100)),
    "shifted": (PHONE, SYNC, (0, 49)),
    "inverted": (PHONE, SYNC, (50, 1)),
    "beyond seq_high": (PHONE, SYNC, (121, 170)),
    "not a pair": (PHONE, SYNC, (1, 50, 100)),
    "empty": (PHONE, SYNC, ()),
}


@pytest.mark.parametrize(
    ("phone", "sync_id", "seq_range"), list(IGNORED_ACKS.values()), ids=list(IGNORED_ACKS)
)
def test_acks_that_match_no_chunk_are_ignored(
    phone: str, sync_id: str, seq_range: Sequence[int]
) -> None:
    server = started()
    assert server.ack(phone, sync_id, seq_range, T0 + 1) == []
    # Nothing was marked acked: the remaining acks do not complete the sync...
    assert server.ack(PHONE, SYNC, (51, 100), T0 + 2) == []
    assert server.ack(PHONE, SYNC, (101, 120), T0 + 2) == []
    # ...and the resend still covers the first chunk.
    assert server.tick(T0 + 10) == [chunk(1, 50)]
    assert server.ack(PHONE, SYNC, (1, 50), T0 + 11) == [end([(1, 120)])]


def test_duplicate_acks_count_once() -> None:
    server = started()
    assert server.ack(PHONE, SYNC, (1, 50), T0 + 1) == []
    assert server.ack(PHONE, SYNC, (1, 50), T0 + 2) == []
    assert server.ack(PHONE, SYNC, (1, 50), T0 + 3) == []
    assert server.tick(T0 + 10) == [chunk(51, 100), chunk(101, 120)]


def test_acks_after_the_end_are_ignored() -> None:
    server = started(seq_high=50)
    assert server.ack(PHONE, SYNC, (1, 50), T0 + 1) == [end([(1, 50)])]
    assert server.ack(PHONE, SYNC, (1, 50), T0 + 2) == []
    assert server.tick(T0 + 1000) == []


# --- timers: resend passes, give-up, idle close ----------------------------------------------------

# (time offset from T0, the effects of tick(T0 + offset)) on a sync of [1, 120] where only the
# first chunk is ever acked (at T0 + 1).
SCHEDULE: list[tuple[float, list[Effect]]] = [
    (9.999, []),
    (10.0, [chunk(51, 100), chunk(101, 120)]),  # pass 1; then wait 20 s
    (10.0, []),
    (29.999, []),
    (30.0, [chunk(51, 100), chunk(101, 120)]),  # pass 2; then wait 40 s
    (69.999, []),
    (70.0, [end([(1, 50)])]),  # retries exhausted: only the acked chunk is delivered
    (1000.0, []),
]


def test_resend_schedule_has_exact_boundaries() -> None:
    server = started()
    assert server.ack(PHONE, SYNC, (1, 50), T0 + 1) == []
    deadlines = []
    for offset, expected in SCHEDULE:
        assert server.tick(T0 + offset) == expected, offset
        deadlines.append(server.next_deadline())
    assert deadlines == [
        T0 + 10,
        T0 + 30,
        T0 + 30,
        T0 + 30,
        T0 + 70,
        T0 + 70,
        None,
        None,
    ]
    assert server.outcomes[SyncOutcome.RETRIES_EXHAUSTED] == 1
    assert server.outcomes[SyncOutcome.IDLE] == 0


def test_resends_only_what_is_still_unacked_in_order() -> None:
    server = started(seq_high=250)
    server.ack(PHONE, SYNC, (51, 100), T0 + 1)
    server.ack(PHONE, SYNC, (201, 250), T0 + 1)
    assert server.tick(T0 + 10) == [chunk(1, 50), chunk(101, 150), chunk(151, 200)]
    server.ack(PHONE, SYNC, (101, 150), T0 + 11)
    assert server.tick(T0 + 30) == [chunk(1, 50), chunk(151, 200)]
    server.ack(PHONE, SYNC, (1, 50), T0 + 31)
    assert server.tick(T0 + 70) == [end([(1, 150), (201, 250)])]


def test_an_ack_after_a_resend_still_completes() -> None:
    server = started(seq_high=60)
    server.ack(PHONE, SYNC, (1, 50), T0 + 1)
    assert server.tick(T0 + 10) == [chunk(51, 60)]
    assert server.ack(PHONE, SYNC, (51, 60), T0 + 12) == [end([(1, 60)])]
    assert server.tick(T0 + 100) == []


def test_chunks_sent_starts_the_wait_when_sending_finished() -> None:
    server = started()
    server.chunks_sent(PHONE, SYNC, T0 + 3)
    assert server.next_deadline() == T0 + 13
    assert server.tick(T0 + 12.999) == []
    assert server.tick(T0 + 13) == [chunk(1, 50), chunk(51, 100), chunk(101, 120)]
    server.chunks_sent(PHONE, SYNC, T0 + 15)  # the resend pass took 2 s: wait 20 s from there
    assert server.next_deadline() == T0 + 35
    assert server.tick(T0 + 34.999) == []
    assert len(server.tick(T0 + 35)) == 3


@pytest.mark.parametrize(("phone", "sync_id"), [(OTHER_PHONE, SYNC), (PHONE, "sync-0")])
def test_chunks_sent_for_someone_else_is_ignored(phone: str, sync_id: str) -> None:
    server = started()
    server.chunks_sent(phone, sync_id, T0 + 5)
    assert server.next_deadline() == T0 + 10


def test_a_late_tick_runs_one_step_only() -> None:
    server = started()
    assert chunks_of(server.tick(T0 + 1000)) == [(1, 50), (51, 100), (101, 120)]
    assert server.next_deadline() == T0 + 1020
    assert server.active_count() == 1


def test_with_the_default_constants_the_ack_schedule_ends_before_idle() -> None:
    assert SYNC_ACK_TIMEOUT_SECONDS * 2**SYNC_MAX_RETRIES < SYNC_IDLE_TIMEOUT_SECONDS
    server = started()
    for offset in (10.0, 30.0):
        server.tick(T0 + offset)
    assert server.next_deadline() == T0 + 70  # not T0 + 30 + 60


def test_idle_close_sends_what_was_acked() -> None:
    server = started(idle_timeout=5.0)
    assert server.next_deadline() == T0 + 5
    assert server.tick(T0 + 2.999) == []
    server.ack(PHONE, SYNC, (51, 100), T0 + 3)  # activity: the idle clock restarts
    assert server.next_deadline() == T0 + 8
    assert server.tick(T0 + 7.999) == []
    server.ack(PHONE, SYNC, (51, 100), T0 + 7.5)  # a duplicate ack is activity too
    assert server.next_deadline() == T0 + 10  # the ack wait now comes first
    assert server.tick(T0 + 10) == [chunk(1, 50), chunk(101, 120)]
    assert server.next_deadline() == T0 + 15  # the resend restarted the idle clock
    assert server.tick(T0 + 14.999) == []
    assert server.tick(T0 + 15) == [end([(51, 100)])]
    assert server.outcomes[SyncOutcome.IDLE] == 1
    assert server.outcomes[SyncOutcome.RETRIES_EXHAUSTED] == 0
    assert server.active_count() == 0


def test_no_resend_pass_when_max_retries_is_zero() -> None:
    server = started(max_retries=0)
    assert server.tick(T0 + 10) == [end([])]
    assert server.outcomes[SyncOutcome.RETRIES_EXHAUSTED] == 1


# --- one sync per (session, phone), aborts and the cap -------------------------------------------


def test_a_newer_request_supersedes_without_sync_end() -> None:
    server = started()
    server.ack(PHONE, SYNC, (1, 50), T0 + 1)
    effects = server.request(PHONE, SESSION, [(1, 50)], 130, "sync-2", T0 + 2)
    assert effects == [
        begin([(51, 130)], 130, "sync-2"),
        chunk(51, 100, "sync-2"),
        chunk(101, 130, "sync-2"),
    ]
    assert server.active_count() == 1
    assert not server.is_active(SYNC)
    assert server.ack(PHONE, SYNC, (51, 100), T0 + 3) == []  # the old sync is gone
    assert server.outcomes[SyncOutcome.SUPERSEDED] == 1
    assert server.next_deadline() == T0 + 12
    assert server.tick(T0 + 12) == [chunk(51, 100, "sync-2"), chunk(101, 130, "sync-2")]


def test_an_empty_newer_request_also_supersedes_silently() -> None:
    server = started()
    assert server.request(PHONE, SESSION, [(1, 120)], 120, "sync-2", T0 + 1) == [
        begin([], 120, "sync-2"),
        end([], "sync-2"),
    ]
    assert server.active_count() == 0
    assert server.tick(T0 + 100) == []


def test_syncs_of_other_phones_and_sessions_run_side_by_side() -> None:
    server = started()
    other_phone = server.request(OTHER_PHONE, SESSION, [], 10, "sync-2", T0 + 1)
    other_session = server.request(PHONE, OTHER_SESSION, [], 10, "sync-3", T0 + 2)
    assert other_phone[0] == Publish(
        SyncBeginMessage(sessionId=SESSION, syncId="sync-2", seqHigh=10, ranges=[(1, 10)]),
        (OTHER_PHONE,),
    )
    assert other_phone[1] == SendSyncChunk(OTHER_PHONE, SESSION, "sync-2", (1, 10))
    assert other_session[1] == SendSyncChunk(PHONE, OTHER_SESSION, "sync-3", (1, 10))
    assert server.active_count() == 3
    assert server.next_deadline() == T0 + 10
    assert server.ack(PHONE, "sync-3", (1, 10), T0 + 3) == [end([(1, 10)], "sync-3", OTHER_SESSION)]
    assert server.active_count() == 2


def test_abort_all_ends_everything_silently() -> None:
    server = started()
    server.request(OTHER_PHONE, SESSION, [], 10, "sync-2", T0)
    server.abort_all()
    assert server.active_count() == 0
    assert server.next_deadline() is None
    assert server.tick(T0 + 100) == []
    assert server.ack(PHONE, SYNC, (1, 50), T0 + 1) == []
    assert server.outcomes[SyncOutcome.ABORTED] == 2


def test_abort_session_and_abort_phone_end_only_their_syncs() -> None:
    server = started()
    server.request(OTHER_PHONE, SESSION, [], 10, "sync-2", T0)
    server.request(PHONE, OTHER_SESSION, [], 10, "sync-3", T0)
    server.request(OTHER_PHONE, OTHER_SESSION, [], 10, "sync-4", T0)
    server.abort_session(SESSION)
    assert [server.is_active(s) for s in (SYNC, "sync-2", "sync-3", "sync-4")] == [
        False,
        False,
        True,
        True,
    ]
    server.abort_phone(OTHER_PHONE)
    assert [server.is_active(s) for s in ("sync-3", "sync-4")] == [True, False]
    assert server.outcomes[SyncOutcome.ABORTED] == 3


def test_the_oldest_sync_is_evicted_past_the_cap() -> None:
    assert MAX_ACTIVE_SYNCS == 256
    server = SyncServer(max_syncs=3)
    for index in range(3):
        server.request(PHONE, f"session-{index}", [], 10, f"sync-{index}", T0 + index)
    # Superseding replaces in place: nothing is evicted, and session-0 becomes the newest.
    server.request(PHONE, "session-0", [], 10, "sync-0b", T0 + 3)
    assert server.active_count() == 3
    assert server.outcomes[SyncOutcome.EVICTED] == 0
    effects = server.request(PHONE, "session-3", [], 10, "sync-3", T0 + 4)
    assert len(effects) == 2  # begin + chunk, no sync-end for the evicted one
    assert server.active_count() == 3
    assert not server.is_active("sync-1")
    assert [server.is_active(s) for s in ("sync-0b", "sync-2", "sync-3")] == [True] * 3
    assert server.outcomes[SyncOutcome.EVICTED] == 1
    assert server.ack(PHONE, "sync-1", (1, 10), T0 + 5) == []


# --- bad arguments (local bugs) ----------------------------------------------------------------------

BAD_REQUESTS: dict[str, tuple[int, str, float, str]] = {
    "negative seq_high": (-1, "sync-9", T0, "seq_high must be a non-negative integer"),
    "bool seq_high": (True, "sync-9", T0, "seq_high must be a non-negative integer"),
    "empty sync id": (10, "", T0, "sync_id must not be empty"),
    "nan clock": (10, "sync-9", float("nan"), "now must be a finite number of seconds"),
    "sync id in use": (10, SYNC, T0, "sync_id is already used by another active sync"),
}


@pytest.mark.parametrize(
    ("seq_high", "sync_id", "now", "message"), list(BAD_REQUESTS.values()), ids=list(BAD_REQUESTS)
)
def test_bad_requests_raise(seq_high: int, sync_id: str, now: float, message: str) -> None:
    server = started()
    with pytest.raises(ValueError, match=f"^{message}$"):
        server.request(OTHER_PHONE, SESSION, [], seq_high, sync_id, now)
    assert server.active_count() == 1
    assert server.is_active(SYNC)


def test_reusing_the_id_of_the_sync_being_superseded_is_allowed() -> None:
    server = started()
    effects = server.request(PHONE, SESSION, [], 10, SYNC, T0 + 1)
    assert effects == [begin([(1, 10)], 10), chunk(1, 10)]
    assert server.ack(PHONE, SYNC, (1, 10), T0 + 2) == [end([(1, 10)])]


@pytest.mark.parametrize(
    "config",
    [
        {"chunk_size": 0},
        {"max_syncs": 0},
        {"max_retries": -1},
        {"ack_timeout": 0.0},
        {"idle_timeout": -1.0},
        {"ack_timeout": float("nan")},
    ],
    ids=str,
)
def test_bad_configuration_raises(config: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        SyncServer(**config)  # type: ignore[arg-type]


# --- random ack loss -----------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    seq_high=st.integers(min_value=0, max_value=700),
    have=st.lists(st.tuples(st.integers(0, 750), st.integers(0, 750)), max_size=6),
    arrivals=st.lists(st.booleans(), min_size=60, max_size=60),
    delays=st.lists(st.floats(min_value=0.0, max_value=50.0), min_size=60, max_size=60),
)
def test_delivered_ranges_are_exactly_the_acked_chunks(
    seq_high: int, have: list[tuple[int, int]], arrivals: list[bool], delays: list[float]
) -> None:
    """Whatever subset of acks arrives, and whenever, ``deliveredRanges`` tells the truth."""
    server = SyncServer()
    effects = server.request(PHONE, SESSION, have, seq_high, SYNC, T0)
    all_chunks = set(chunks_of(effects))
    sends: Counter[Range] = Counter()
    acked: set[Range] = set()
    ended: list[SyncEndMessage] = []
    in_flight: list[tuple[float, Range]] = []  # acks on their way: (arrival time, range)
    draw = 0

    def absorb(batch: list[Effect], now: float) -> None:
        nonlocal draw
        for effect in batch:
            if isinstance(effect, SendSyncChunk):
                assert effect.seq_range not in acked  # an acked chunk is never resent
                sends[effect.seq_range] += 1
                if arrivals[draw % len(arrivals)]:
                    in_flight.append((now + delays[draw % len(delays)], effect.seq_range))
                draw += 1
            else:
                assert isinstance(effect, Publish)
                if isinstance(effect.message, SyncEndMessage):
                    ended.append(effect.message)

    absorb(effects, T0)
    now = T0
    while server.active_count():
        deadline = server.next_deadline()
        assert deadline is not None
        in_flight.sort()
        if in_flight and in_flight[0][0] < deadline:
            now, seq_range = in_flight.pop(0)
            if not ended:
                acked.add(seq_range)
            absorb(server.ack(PHONE, SYNC, seq_range, now), now)
        else:
            now = deadline
            absorb(server.tick(now), now)

    missing = ranges.missing(have, 1, seq_high)
    assert all_chunks == set(ranges.chunk_ranges(missing, SYNC_CHUNK_SIZE))
    assert len(ended) == 1
    assert ended[0].deliveredRanges == ranges.normalize(acked)
    assert set(sends) == all_chunks
    assert max(sends.values(), default=0) <= 1 + SYNC_MAX_RETRIES
    assert now - T0 <= 70.0
