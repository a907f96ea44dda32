"""The invariant checks themselves, on hand-made ledgers and offline phones: each one can fail.

A chaos run that passes proves something only if its checks would have caught the violation;
these cases feed each check the violation it exists for, and a clean case that must pass.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from bridge.nostr.keys import Keypair
from bridge.protocol import InputAckMessage, InputFailedMessage, OutputEntry, SessionsMessage
from bridge.protocol.shared import RemoteSessionInfo
from tests.chaos.invariants import (
    Snapshot,
    answered_once,
    every_fault_injected,
    exactly_once,
    heartbeat_truthful,
    memory_bounded,
    silent_relay,
    transcripts_match,
    unpaired_key,
)
from tests.chaos.ledger import Expect, InputRecord, Ledger, ReplyTracker, SessionTrack, SilentProbe
from tests.chaos.plan import FaultKind
from tests.support.phone import PhoneSimulator
from tests.support.phone_state import Received

BRIDGE = Keypair.from_secret("55" * 32)
S1, S2 = "session-one", "session-two"
ENTRY = OutputEntry(entryType="text", content="hi", timestamp="2026-01-01T00:00:00.000Z")


def ledger(*records: InputRecord) -> Ledger:
    book = Ledger()
    book.sessions = {S1: SessionTrack(S1, 0), S2: SessionTrack(S2, 0, closed_index=5)}
    for record in records:
        book.add_input(record)
    return book


def record(n: int, text: str, expect: Expect = Expect.ACK, phone: str = "P1") -> InputRecord:
    return InputRecord(f"in-{n}", S1, text, phone, n, expect, (f"{n:064x}",))


def snapshot(**overrides: Any) -> Snapshot:
    fields: dict[str, Any] = {
        "executions": {},
        "executed": {},
        "transcripts": {},
        "daemon_sessions": [S1],
        "syncs": {},
        "processed_rows": 0,
        "outbox_rows": 0,
        "pending_inbox": 0,
        "log_records": [],
        "stop_status": 0,
        "rss_limit_kb": 400 * 1024,
    }
    fields.update(overrides)
    return Snapshot(**fields)


def phone() -> PhoneSimulator:
    return PhoneSimulator(bridge=BRIDGE.public_hex, relays=["ws://127.0.0.1:1"])


def hear(target: PhoneSimulator, *messages: Any) -> None:
    for message in messages:
        index = len(target.received)
        target.received.append(Received(message, f"{index:064x}", (), 4516, 0, "ws://r", index))


def test_exactly_once_passes_when_each_acknowledged_input_ran_once() -> None:
    book = ledger(record(1, "a"), record(2, "b"), record(3, "c", Expect.EXPIRED))
    snap = snapshot(executions={"u1": 1, "u2": 1}, executed={S1: Counter({"a": 1, "b": 1})})
    assert exactly_once(book, snap).ok


def test_exactly_once_catches_a_double_a_missing_and_a_forbidden_run() -> None:
    book = ledger(record(1, "a"), record(2, "b"), record(3, "c", Expect.EXPIRED))
    snap = snapshot(executions={"u1": 2, "u3": 1}, executed={S1: Counter({"a": 2, "c": 1})})
    verdict = exactly_once(book, snap)
    assert not verdict.ok
    text = "\n".join(verdict.details)
    assert "reached the agent 2 times" in text
    assert "never ran (1x)" in text and "'b'" in text
    assert "ran 1x too often" in text and "'c'" in text and "'a'" in text


def test_an_evicted_probe_may_run_once_late_but_never_twice() -> None:
    book = ledger(record(1, "a"), record(2, "evicted-probe-in-2", Expect.EVICTED))
    never = snapshot(executions={"u1": 1}, executed={S1: Counter({"a": 1})})
    late = snapshot(
        executions={"u1": 1, "u2": 1}, executed={S1: Counter({"a": 1, "evicted-probe-in-2": 1})}
    )
    twice = snapshot(
        executions={"u1": 1, "u2": 1}, executed={S1: Counter({"a": 1, "evicted-probe-in-2": 2})}
    )
    assert exactly_once(book, never).ok
    assert exactly_once(book, late).ok
    assert not exactly_once(book, twice).ok
    phones = {"P1": phone(), "P2": phone(), "P3": phone()}
    for name in ("P1", "P2"):
        hear(phones[name], InputAckMessage(sessionId=S1, inputId="in-1"))
    trackers = {name: ReplyTracker(p) for name, p in phones.items()}
    assert answered_once(book, trackers).ok
    hear(phones["P1"], InputAckMessage(sessionId=S1, inputId="in-2"))
    assert answered_once(book, trackers).ok
    hear(phones["P1"], InputAckMessage(sessionId=S1, inputId="in-2"))
    assert not answered_once(book, trackers).ok


def test_answered_once_catches_a_second_ack_and_a_missing_failure() -> None:
    book = ledger(record(1, "a"), record(2, "b", Expect.EXPIRED))
    phones = {"P1": phone(), "P2": phone(), "P3": phone()}
    for name in ("P1", "P2"):
        hear(
            phones[name],
            InputAckMessage(sessionId=S1, inputId="in-1"),
            InputFailedMessage(sessionId=S1, reason="expired", inputId="in-2"),
        )
    trackers = {name: ReplyTracker(p) for name, p in phones.items()}
    assert answered_once(book, trackers).ok
    hear(phones["P2"], InputAckMessage(sessionId=S1, inputId="in-1"))
    hear(phones["P1"], InputAckMessage(sessionId=S1, inputId="in-9"))
    verdict = answered_once(book, trackers)
    assert not verdict.ok
    assert any("P2: in-1" in d and "2 ack(s)" in d for d in verdict.details)
    assert any("never sent: in-9" in d for d in verdict.details)


def test_unpaired_key_catches_a_run_intruder_and_an_unknown_session() -> None:
    book = ledger(record(1, "a"), record(5, "intruder-5", Expect.IGNORED, phone="P3"))
    book.unpaired_at = 3
    trackers = {name: ReplyTracker(phone()) for name in ("P1", "P2", "P3")}
    clean = snapshot(executed={S1: Counter({"a": 1})})
    assert unpaired_key(book, clean, trackers).ok
    dirty = snapshot(executed={S1: Counter({"a": 1, "intruder-5": 1})}, daemon_sessions=[S1, "x"])
    verdict = unpaired_key(book, dirty, trackers)
    assert not verdict.ok and len(verdict.details) == 2
    book.unpaired_at = None
    assert not unpaired_key(book, clean, trackers).ok  # never unpaired: nothing was proven


def test_transcripts_must_match_the_store_seq_for_seq() -> None:
    book = ledger()
    phones = {"P1": phone(), "P2": phone()}
    for p in phones.values():
        p.transcripts.insert(S1, 1, ENTRY, "live")
    stored = {S1: {1: ENTRY.model_dump_json(exclude_none=True)}}
    complete = {(n, S1): _complete() for n in phones}
    assert transcripts_match(book, snapshot(transcripts=stored, syncs=complete), phones).ok
    other = ENTRY.model_copy(update={"content": "changed"})
    stored = {S1: {1: other.model_dump_json(exclude_none=True), 2: stored[S1][1]}}
    verdict = transcripts_match(book, snapshot(transcripts=stored, syncs=complete), phones)
    assert not verdict.ok
    text = "\n".join(verdict.details)
    assert "lacks seqs [2]" in text and "differ from the store [1]" in text


def _complete() -> Any:
    from tests.support.phone_sync import SyncResult

    return SyncResult(S1, True, 1, ((1, 1),), (), 1, ("s",))


def _info(session_id: str) -> RemoteSessionInfo:
    return RemoteSessionInfo(
        id=session_id, slug="", cwd="/", lastActivity="", lineCount=0, title=None, project=""
    )


def test_heartbeat_must_list_live_sessions_and_tombstone_only_closed_ones() -> None:
    book = ledger()
    phones = {"P1": phone(), "P2": phone()}
    truthful = SessionsMessage(
        machine="m", sessions=[_info(S1)], protocolVersion=10, removedSessions=[S2]
    )
    for p in phones.values():
        p.book.apply_heartbeat(truthful, 1)
    online = {"P1": True, "P2": True}
    assert heartbeat_truthful(book, snapshot(machine_online=online), phones).ok
    lying = SessionsMessage(machine="m", sessions=[], protocolVersion=10, removedSessions=[S1])
    phones["P2"].book.apply_heartbeat(lying, 2)
    verdict = heartbeat_truthful(book, snapshot(machine_online=online), phones)
    assert not verdict.ok
    assert any("P2: live sessions tombstoned" in d for d in verdict.details)
    offline = heartbeat_truthful(book, snapshot(machine_online={"P1": False, "P2": True}), phones)
    assert any("machine is offline" in d for d in offline.details)


def test_memory_bounds() -> None:
    book = ledger(record(1, "evicted-probe-in-1", Expect.EVICTED))
    book.evictions["in-1"] = True
    book.rss_samples = [(0, 100 * 1024)]
    assert memory_bounded(book, snapshot()).ok
    book.evictions["in-1"] = False  # the probe completed through the flood: the cap failed
    assert not memory_bounded(book, snapshot()).ok
    book.evictions["in-1"] = True
    book.rss_samples.append((10, 500 * 1024))
    verdict = memory_bounded(book, snapshot(outbox_rows=3))
    assert not verdict.ok and len(verdict.details) == 2
    assert not memory_bounded(ledger(), snapshot()).ok  # no assembler probe: not proven


def test_silent_relay_and_fault_coverage() -> None:
    book = ledger()
    assert not silent_relay(book).ok  # never ran
    book.silent_probes = [SilentProbe(1, 4, 4, 0.5, 20.0)]
    assert silent_relay(book).ok
    book.silent_probes.append(SilentProbe(2, 4, 1, 20.0, 20.0))
    assert not silent_relay(book).ok
    for kind in FaultKind:
        book.faults[kind] += 1
    assert every_fault_injected(book).ok
    book.faults[FaultKind.REPLAY] = 0
    assert every_fault_injected(book).details == ("never injected: replay",)
