"""The real-CLI chaos checks themselves, on hand-made ledgers and snapshots: each one can fail.

A run that passes proves something only if its checks would have caught the violation: each case
feeds a check the violation it exists for (or the clean case it must pass).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from bridge.nostr.keys import Keypair
from bridge.protocol import InputAckMessage, OutputEntry
from tests.chaos.cli.evidence import CliCall, CliRecord, Snapshot
from tests.chaos.cli.invariants import (
    Facts,
    cards_across_kills,
    every_kill_point,
    exactly_once,
    healthy,
    no_phantom_refusals,
    phone_shows_every_turn,
)
from tests.chaos.cli.ledger import CardAnswer, HeldCard, InputRecord, KillRecord, Ledger, Route
from tests.chaos.cli.model import INTERRUPTED_RESULT
from tests.chaos.cli.observe import PhoneWatch
from tests.chaos.cli.plan import KillPoint
from tests.support.phone import PhoneSimulator
from tests.support.phone_state import Received
from tests.support.phone_sync import SyncResult

BRIDGE = Keypair.from_secret("66" * 32)
S1 = "session-one"
TS = "2026-01-01T00:00:00.000Z"


def entry(kind: str, content: str = "", **metadata: Any) -> OutputEntry:
    return OutputEntry(entryType=kind, content=content, timestamp=TS, metadata=metadata or None)


def record(
    n: int, route: Route = Route.AUTO, allow: bool = True, mode: str = "default"
) -> InputRecord:
    return InputRecord(f"cc-{n:06d}", S1, "prompt", route, allow, 0.0, 1, float(n), mode)


def ledger(*records: InputRecord, kills: tuple[KillRecord, ...] = ()) -> Ledger:
    book = Ledger()
    book.sessions = {S1: "default"}
    for item in records:
        book.add_input(item)
    book.kills.extend(kills)
    return book


def turn(input_id: str, *, card: str | None = None) -> list[OutputEntry]:
    """The store's entries of one turn that ran to its end."""
    entries = [entry("text", f"[[cc: {input_id} | reply]]")]
    if card is not None:
        tool_input = {"command": f"echo {input_id} >> /w/ledger.txt"}
        entries.append(
            entry(
                "system",
                "card",
                special="permission_request",
                tool_use_id=card,
                tool_input=tool_input,
            )
        )
    return [*entries, entry("text", f"done {input_id}"), entry("system", "", stream_end=True)]


def store(*turns: list[OutputEntry]) -> dict[str, dict[int, OutputEntry]]:
    flat = [e for t in turns for e in t]
    return {S1: dict(enumerate(flat, 1))}


def snapshot(
    marks: dict[str, int] | None = None,
    stored: dict[str, dict[int, OutputEntry]] | None = None,
    calls: Sequence[CliCall] = (),
    **overrides: Any,
) -> Snapshot:
    stored = stored if stored is not None else {S1: {}}
    cli = CliRecord(calls={c.tool_use_id: c for c in calls}, files=1)
    fields: dict[str, Any] = {
        "marks": Counter(marks or {}),
        "store": stored,
        "phone": {s: dict(e) for s, e in stored.items()},
        "syncs": {s: SyncResult(s, True, len(e), (), (), 1, ("x",)) for s, e in stored.items()},
        "cli": cli,
        "log_records": [],
        "stop_status": 0,
    }
    fields.update(overrides)
    return Snapshot(**fields)


def ran(input_id: str, tool_id: str = "toolu_1", text: str = "ok", error: bool = False) -> CliCall:
    return CliCall(tool_id, input_id, text, error, "")


def watch(*acked: str) -> PhoneWatch:
    phone = PhoneSimulator(bridge=BRIDGE.public_hex, relays=["ws://127.0.0.1:1"])
    for index, input_id in enumerate(acked):
        message = InputAckMessage(sessionId=S1, inputId=input_id)
        phone.received.append(Received(message, f"{index:064x}", (), 24515, 0, "ws://r", index))
    seen = PhoneWatch(phone)
    seen.update()
    return seen


def cut(*in_flight: str) -> KillRecord:
    return KillRecord(KillPoint.CLI_KILL, 1, 5.0, "cli", S1, 42, in_flight)


A, B = "cc-000001", "cc-000002"
NOTE = entry("system", "restarting", special="session_restart", interrupted=[A])

EXACTLY_ONCE = [
    ("ran-once", (record(1),), (), {A: 1}, [ran(A)], True),
    ("ran-twice", (record(1),), (), {A: 2}, [ran(A)], False),
    ("never-ran", (record(1),), (), {}, [ran(A)], False),
    ("two-calls", (record(1),), (), {A: 1}, [ran(A), ran(A, "toolu_2")], False),
    ("denied-never-ran", (record(1, Route.CARD, allow=False),), (), {}, [ran(A)], True),
    ("denied-yet-ran", (record(1, Route.CARD, allow=False),), (), {A: 1}, [ran(A)], False),
    ("reply", (record(1, Route.REPLY),), (), {}, [], True),
]


@pytest.mark.parametrize(
    ("records", "kills", "marks", "calls", "ok"),
    [c[1:] for c in EXACTLY_ONCE],
    ids=[c[0] for c in EXACTLY_ONCE],
)
def test_exactly_once(
    records: tuple[InputRecord, ...],
    kills: tuple[KillRecord, ...],
    marks: dict[str, int],
    calls: list[CliCall],
    ok: bool,
) -> None:
    facts = Facts(ledger(*records, kills=kills), snapshot(marks, store(turn(A)), calls))
    assert exactly_once(facts, watch(A)).ok is ok


def test_an_input_acknowledged_twice_fails() -> None:
    facts = Facts(ledger(record(1)), snapshot({A: 1}, store(turn(A)), [ran(A)]))
    assert not exactly_once(facts, watch(A, A)).ok


def test_a_turn_that_ended_twice_fails() -> None:
    facts = Facts(ledger(record(1, Route.REPLY)), snapshot({}, store(turn(A), turn(A))))
    assert not exactly_once(facts, watch(A)).ok


@pytest.mark.parametrize(
    ("kills", "marks", "ok"),
    [((cut(A),), {}, True), ((cut(A),), {A: 1}, True), ((), {}, False), ((cut(A),), {A: 2}, False)],
    ids=["cut-never-ran", "cut-ran-once", "no-kill-cut-it", "cut-ran-twice"],
)
def test_interrupted(kills: tuple[KillRecord, ...], marks: dict[str, int], ok: bool) -> None:
    stored = store([entry("text", "[[cc: cc-000001 | …]]"), NOTE])
    facts = Facts(ledger(record(1), kills=kills), snapshot(marks, stored))
    assert exactly_once(facts, watch(A)).ok is ok


REFUSALS = [
    ("ran", ran(A), (), True),
    (
        "deliberate-deny",
        ran(A, text="The user denied this tool call.", error=True),
        ("toolu_1",),
        True,
    ),
    ("refused-by-nobody", ran(A, text="Auto mode is unavailable: …", error=True), (), False),
    ("hook-failed", ran(A, text="PreToolUse:Bash hook error", error=True), (), False),
    ("deny-that-ran", ran(A), ("toolu_1",), False),
    (
        "interrupted-without-a-kill",
        ran(A, text=f"[{INTERRUPTED_RESULT}: …]", error=True),
        (),
        False,
    ),
]


@pytest.mark.parametrize(
    ("call", "denied", "ok"), [c[1:] for c in REFUSALS], ids=[c[0] for c in REFUSALS]
)
def test_no_phantom_refusals(call: CliCall, denied: tuple[str, ...], ok: bool) -> None:
    book = ledger(record(1, Route.CARD, allow=not denied))
    book.answers += [CardAnswer(t, A, False, 1.0, "answerer") for t in denied]
    assert no_phantom_refusals(Facts(book, snapshot(calls=[call]))).ok is ok


def test_an_interrupted_result_after_a_cli_kill_passes() -> None:
    call = ran(A, text=f"[{INTERRUPTED_RESULT}: …]", error=True)
    book = ledger(record(1), kills=(cut(A),))
    assert no_phantom_refusals(Facts(book, snapshot(calls=[call]))).ok


@pytest.mark.parametrize(("recorded", "ok"), [("default", True), ("plan", False)])
def test_the_mode_claude_code_took_a_prompt_in(recorded: str, ok: bool) -> None:
    snap = snapshot()
    snap.cli.modes = {A: [recorded]}
    assert no_phantom_refusals(Facts(ledger(record(1, mode="default")), snap)).ok is ok


def test_phone_shows_every_turn() -> None:
    book = ledger(record(1, Route.REPLY), record(2, Route.REPLY))
    stored = store(turn(A), turn(B))
    phone = PhoneSimulator(bridge=BRIDGE.public_hex, relays=["ws://127.0.0.1:1"])
    assert phone_shows_every_turn(Facts(book, snapshot(stored=stored)), phone).ok
    lacking = {S1: {seq: e for seq, e in stored[S1].items() if e.content != f"done {B}"}}
    snap = snapshot(stored=stored, phone=lacking)
    verdict = phone_shows_every_turn(Facts(book, snap), phone)
    assert not verdict.ok and any("no 'done cc-000002'" in d for d in verdict.details)


@pytest.mark.parametrize(
    ("marks", "answered", "ok"),
    [({A: 1}, True, True), ({}, True, False), ({A: 1}, False, False)],
    ids=["answered-ran-once", "answered-never-ran", "never-answered"],
)
def test_a_card_held_across_a_daemon_kill(marks: dict[str, int], answered: bool, ok: bool) -> None:
    book = ledger(record(1, Route.CARD))
    book.held_cards.append(
        HeldCard(1, KillPoint.DAEMON_CARD_PENDING, A, "toolu_c", False, answered)
    )
    if answered:
        book.answers.append(CardAnswer("toolu_c", A, True, 2.0, "daemon-card-pending"))
    snap = snapshot(marks, store(turn(A, card="toolu_c")), [ran(A, "toolu_c")])
    assert cards_across_kills(Facts(book, snap), watch(A)).ok is ok


def test_a_card_where_none_was_due_fails() -> None:
    book = ledger(record(1, Route.AUTO))
    book.answers.append(CardAnswer("toolu_c", A, True, 2.0, "answerer"))
    snap = snapshot({A: 1}, store(turn(A, card="toolu_c")), [ran(A, "toolu_c")])
    assert not cards_across_kills(Facts(book, snap), watch(A)).ok


def test_a_card_written_twice_fails() -> None:
    book = ledger(record(1, Route.CARD))
    book.answers.append(CardAnswer("toolu_c", A, True, 2.0, "answerer"))
    stored = store(turn(A, card="toolu_c"), turn(A, card="toolu_c")[1:2])
    assert not cards_across_kills(Facts(book, snapshot({A: 1}, stored)), watch(A)).ok


HEALTH = [
    ("clean", {}, True),
    ("error-logged", {"log_records": [{"level": "ERROR", "message": "x session: boom"}]}, False),
    ("traceback", {"log_records": [{"raw": "Traceback (most recent call last):"}]}, False),
    ("dirty-stop", {"stop_status": 1}, False),
    ("leftover", {"leftovers": ["pid 7: claude"]}, False),
    ("host-error", {"host_logs": {S1: '{"level": "ERROR", "message": "x"}'}}, False),
    (
        "session-died",
        {"stored": {S1: {1: entry("error", "Session ended unexpectedly", special="session_died")}}},
        False,
    ),
]


@pytest.mark.parametrize(("overrides", "ok"), [c[1:] for c in HEALTH], ids=[c[0] for c in HEALTH])
def test_healthy(overrides: dict[str, Any], ok: bool) -> None:
    assert healthy(Facts(ledger(), snapshot(**overrides))).ok is ok


def test_an_orphan_cli_fails() -> None:
    book = ledger()
    book.orphans.append("r1: Claude Code pid 9 outlived its host")
    assert not healthy(Facts(book, snapshot())).ok


def test_every_kill_point() -> None:
    book = ledger(kills=(cut(),))
    assert every_kill_point(book, [KillPoint.CLI_KILL]).ok
    assert not every_kill_point(book).ok
