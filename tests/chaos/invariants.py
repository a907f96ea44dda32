"""The invariants a chaos run proves, checked against the ledger and the final snapshot.

Each check returns one :class:`Verdict`: PASS/FAIL, a one-line summary, and the details of every
violation (input ids with how they travelled, sessions, seqs), so a failure can be traced without
re-running. The checks are strict on purpose: one duplicate ack among 10,000 fails the run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bridge.engine.ingest import MAX_REMEMBERED_IDS
from bridge.protocol import OutputEntry
from bridge.protocol.codec import decode_as
from tests.chaos.ledger import Expect, InputRecord, Ledger, ReplyTracker
from tests.chaos.plan import FaultKind
from tests.support.phone import PhoneSimulator
from tests.support.phone_sync import SyncResult

__all__ = [
    "TOMBSTONE_CAP",
    "Snapshot",
    "Verdict",
    "answered_once",
    "check_all",
    "clean_contract",
    "daemon_healthy",
    "every_fault_injected",
    "exactly_once",
    "heartbeat_truthful",
    "memory_bounded",
    "no_incidents",
    "render_verdicts",
    "silent_relay",
    "transcripts_match",
    "unpaired_key",
]

TOMBSTONE_CAP = 100
"""The heartbeat announces at most the last 100 closed sessions (store.bridge_state)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    name: str
    ok: bool
    summary: str
    details: tuple[str, ...] = ()


def render_verdicts(verdicts: Sequence[Verdict], limit: int | None) -> list[str]:
    """The report's lines of the verdicts: PASS/FAIL, summary, details (at most `limit` each)."""
    lines: list[str] = []
    for verdict in verdicts:
        lines.append(f"  {'PASS' if verdict.ok else 'FAIL'}  {verdict.name}")
        lines.append(f"        {verdict.summary}")
        details = list(verdict.details)
        shown = details if limit is None else details[:limit]
        lines += [f"        - {detail}" for detail in shown]
        if len(shown) < len(details):
            lines.append(f"        - ... and {len(details) - len(shown)} more (see report.txt)")
    return lines


@dataclass
class Snapshot:
    """The daemon's and the phones' state after the final sync, before the daemon stops."""

    executions: Mapping[str, int]
    """uid → how many times the agent received it."""
    executed: Mapping[str, Counter[str]]
    """session id → text → times run."""
    transcripts: Mapping[str, Mapping[int, str]]
    """Live session id → the bridge store's seq → entry JSON."""
    daemon_sessions: Sequence[str]
    syncs: Mapping[tuple[str, str], SyncResult | None]
    """(phone, session) → how the final sync ended (None: it failed to run)."""
    processed_rows: int
    outbox_rows: int
    pending_inbox: int
    log_records: Sequence[Mapping[str, Any]]
    stop_status: int | None = None
    rss_limit_kb: int = 0
    machine_online: dict[str, bool | None] = field(default_factory=dict)
    """Per phone: what the last heartbeat said of the machine (taken before the final stop)."""
    sync_errors: list[str] = field(default_factory=list)


def _show(lines: Sequence[str]) -> tuple[str, ...]:
    return tuple(lines)  # every one; the report decides how many to print


def _describe(record: InputRecord) -> str:
    extra = f", {record.note}" if record.note else ""
    events = "/".join(event_id[:8] for event_id in record.event_ids)
    return (
        f"{record.input_id} (event {events}) from {record.phone} @{record.index} "
        f"to {record.session_id[:8]} {record.text[:24]!r}{extra}"
    )


def exactly_once(ledger: Ledger, snap: Snapshot) -> Verdict:
    problems = [
        f"uid {uid[:8]} reached the agent {n} times" for uid, n in snap.executions.items() if n != 1
    ]
    by_text: dict[tuple[str, str], list[InputRecord]] = {}
    for record in ledger.inputs.values():
        by_text.setdefault((record.session_id, record.text), []).append(record)
    sessions = set(ledger.sessions) | set(snap.executed)
    for session_id in sorted(sessions):
        expected = ledger.expected_texts(session_id)
        executed = snap.executed.get(session_id, Counter())
        for text, n in sorted((expected - executed).items()):
            who = "; ".join(_describe(r) for r in by_text.get((session_id, text), [])[:3])
            problems.append(f"never ran ({n}x) in {session_id[:8]}: {text[:24]!r} [{who}]")
        allowed = expected + ledger.optional_texts(session_id)
        for text, n in sorted((executed - allowed).items()):
            who = "; ".join(_describe(r) for r in by_text.get((session_id, text), [])[:3])
            problems.append(f"ran {n}x too often in {session_id[:8]}: {text[:24]!r} [{who}]")
    acked = sum(1 for r in ledger.inputs.values() if r.expect is Expect.ACK)
    return Verdict(
        "every acknowledged input ran exactly once; nothing else ran",
        not problems,
        f"{sum(snap.executions.values())} executions of {len(snap.executions)} uids, "
        f"{acked} inputs expected to run",
        _show(problems),
    )


def _reply_problems(name: str, tracker: ReplyTracker, records: Sequence[InputRecord]) -> list[str]:
    tracker.update()
    problems = []
    for record in records:
        acks = tracker.acks.get(record.input_id, 0)
        failures = tracker.failures.get(record.input_id, [])
        if record.expect is Expect.ACK:
            good = acks == 1 and not failures
        elif record.expect is Expect.IGNORED:
            good = acks == 0 and not failures
        elif record.expect is Expect.EVICTED:
            good = acks <= 1 and not failures
        else:
            good = acks == 0 and failures == [record.expect.value]
        if not good:
            problems.append(
                f"{name}: {_describe(record)}: expected {record.expect.value}, "
                f"got {acks} ack(s), failures {failures}"
            )
    known = {r.input_id for r in records}
    for input_id, n in tracker.acks.items():
        if input_id not in known:
            problems.append(f"{name}: {n} ack(s) for an inputId never sent: {input_id}")
    return problems


def answered_once(ledger: Ledger, trackers: Mapping[str, ReplyTracker]) -> Verdict:
    records = list(ledger.inputs.values())
    problems = _reply_problems("P1", trackers["P1"], records)
    problems += _reply_problems("P2", trackers["P2"], records)
    own = [
        r
        for r in records
        if r.phone == "P3" and (ledger.unpaired_at is None or r.index <= ledger.unpaired_at)
    ]
    p3 = trackers["P3"]
    p3.update()
    problems += [
        f"P3: {_describe(r)}: {p3.acks.get(r.input_id, 0)} ack(s)"
        for r in own
        if p3.acks.get(r.input_id, 0) != 1
    ]
    problems += [f"P3: {n} acks for {i}" for i, n in p3.acks.items() if n > 1]
    counts = Counter(r.expect.value for r in records)
    return Verdict(
        "every input answered exactly once on every phone (ack, or failed with its reason)",
        not problems,
        ", ".join(f"{n} {what}" for what, n in sorted(counts.items())),
        _show(problems),
    )


def unpaired_key(ledger: Ledger, snap: Snapshot, trackers: Mapping[str, ReplyTracker]) -> Verdict:
    if ledger.unpaired_at is None:
        return Verdict("no command from an unpaired key ran", False, "P3 was never unpaired")
    intruders = [
        r for r in ledger.inputs.values() if r.phone == "P3" and r.index > ledger.unpaired_at
    ]
    ran = {text for counts in snap.executed.values() for text in counts}
    problems = [f"ran: {_describe(r)}" for r in intruders if r.text in ran]
    unknown = sorted(set(snap.daemon_sessions) - set(ledger.sessions))
    problems += [f"session {s} exists that no paired phone created" for s in unknown]
    return Verdict(
        "no command from an unpaired key ran",
        not problems,
        f"{len(intruders)} inputs and {ledger.intruder_creates} create-session after unpairing",
        _show(problems),
    )


def _entries(raw: Mapping[int, str]) -> dict[int, OutputEntry]:
    return {seq: decode_as(OutputEntry, text) for seq, text in raw.items()}


def transcripts_match(
    ledger: Ledger, snap: Snapshot, phones: Mapping[str, PhoneSimulator]
) -> Verdict:
    problems: list[str] = list(snap.sync_errors)
    compared = 0
    for session_id in ledger.live_sessions():
        stored = _entries(snap.transcripts.get(session_id, {}))
        floor = min(stored, default=1)
        for name in ("P1", "P2"):
            result = snap.syncs.get((name, session_id))
            if result is None or not result.complete:
                problems.append(f"{name}: final sync of {session_id[:8]} incomplete: {result}")
            held = phones[name].transcript(session_id)
            missing = sorted(set(stored) - set(held))
            extra = sorted(s for s in set(held) - set(stored) if s >= floor)
            differ = sorted(s for s in set(stored) & set(held) if stored[s] != held[s])
            compared += len(stored)
            if missing:
                problems.append(f"{name}: {session_id[:8]} lacks seqs {missing[:10]}")
            if extra:
                problems.append(f"{name}: {session_id[:8]} has seqs the bridge lacks {extra[:10]}")
            if differ:
                problems.append(
                    f"{name}: {session_id[:8]} seqs differ from the store {differ[:10]}"
                )
    for name, phone in phones.items():
        problems += [
            f"{name}: seq conflict in {c.session_id[:8]} seq {c.seq} ({c.source})"
            for c in phone.conflicts
        ]
    return Verdict(
        "phone transcripts equal the bridge store seq for seq; no seq conflicts",
        not problems,
        f"{compared} entries compared over {len(ledger.live_sessions())} live sessions x 2 phones",
        _show(problems),
    )


def heartbeat_truthful(
    ledger: Ledger, snap: Snapshot, phones: Mapping[str, PhoneSimulator]
) -> Verdict:
    live = set(ledger.live_sessions())
    closed = ledger.closed_sessions()
    problems: list[str] = []
    if set(snap.daemon_sessions) != live:
        problems.append(
            f"daemon lists {sorted(s[:8] for s in snap.daemon_sessions)}, "
            f"expected {sorted(s[:8] for s in live)}"
        )
    for name in ("P1", "P2"):
        phone = phones[name]
        shown = {sid for sid, view in phone.sessions.items() if not view.stale}
        stale = sorted(sid[:8] for sid, view in phone.sessions.items() if view.stale)
        if shown != live:
            problems.append(
                f"{name} shows {sorted(s[:8] for s in shown)}, expected {sorted(s[:8] for s in live)}"
            )
        if stale:
            problems.append(f"{name} keeps sessions the heartbeat stopped listing: {stale}")
        tombstones = set(phone.machine.tombstones)
        if tombstones & live:
            problems.append(f"{name}: live sessions tombstoned: {sorted(tombstones & live)}")
        if tombstones - set(closed):
            problems.append(
                f"{name}: tombstones for sessions never closed: {tombstones - set(closed)}"
            )
        if len(closed) <= TOMBSTONE_CAP and set(closed) - tombstones:
            problems.append(f"{name}: closed but never tombstoned: {set(closed) - tombstones}")
        if snap.machine_online.get(name) is not True:
            problems.append(f"{name}: the last heartbeat says the machine is offline")
    return Verdict(
        "final heartbeat truthful: every live session listed, tombstones only for closed ones",
        not problems,
        f"{len(live)} live, {len(closed)} closed sessions",
        _show(problems),
    )


def memory_bounded(ledger: Ledger, snap: Snapshot) -> Verdict:
    peak = max((kb for _, kb in ledger.rss_samples), default=0)
    problems = []
    if snap.rss_limit_kb and peak > snap.rss_limit_kb:
        problems.append(
            f"daemon RSS peaked at {peak // 1024} MiB > {snap.rss_limit_kb // 1024} MiB"
        )
    if snap.processed_rows > MAX_REMEMBERED_IDS:
        problems.append(f"{snap.processed_rows} processed ids kept > cap {MAX_REMEMBERED_IDS}")
    if snap.outbox_rows:
        problems.append(f"{snap.outbox_rows} durable replies still in the outbox at the end")
    if snap.pending_inbox:
        problems.append(f"{snap.pending_inbox} inputs still pending in the inbox at the end")
    probes = [r for r in ledger.inputs.values() if r.expect is Expect.EVICTED]
    if not probes:
        problems.append("the assembler cap was never probed")
    problems += [
        f"assembler cap did not hold: probe {input_id} completed through the flood"
        for input_id, evicted in ledger.evictions.items()
        if not evicted
    ]
    first = ledger.rss_samples[0][1] if ledger.rss_samples else 0
    return Verdict(
        "daemon memory bounded (RSS, dedup set, assembler cap, outbox, inbox)",
        not problems,
        f"RSS first {first // 1024} MiB, peak {peak // 1024} MiB; {snap.processed_rows} "
        f"processed ids; {len(probes)} assembler probe(s) evicted",
        _show(problems),
    )


def silent_relay(ledger: Ledger) -> Verdict:
    probes = ledger.silent_probes
    problems = [
        f"@{p.index}: {p.acked}/{p.sent} inputs acked within {p.limit:g} s (waited {p.waited:.1f} s)"
        for p in probes
        if p.acked < p.sent
    ]
    if not probes:
        problems.append("no silent-relay stretch ran")
    return Verdict(
        "a relay that never answers OK does not hold up delivery",
        not problems,
        f"{len(probes)} silent stretch(es), {sum(p.sent for p in probes)} inputs sent during them",
        _show(problems),
    )


def clean_contract(phones: Mapping[str, PhoneSimulator]) -> Verdict:
    problems: list[str] = []
    for name, phone in phones.items():
        problems += [f"{name}: violation {v.message_type}: {v.problem}" for v in phone.violations]
        problems += [f"{name}: invalid payload ({i.stage}): {i.error[:80]}" for i in phone.invalid]
        problems += [f"{name}: simulator error: {e[:120]}" for e in phone.errors]
        problems += [f"{name}: gave up sending {getattr(c, 'type', c)}" for c in phone.undelivered]
    return Verdict(
        "phones saw only valid, well-formed traffic",
        not problems,
        ", ".join(f"{n}: {len(p.received)} messages" for n, p in phones.items()),
        _show(problems),
    )


def daemon_healthy(ledger: Ledger, snap: Snapshot) -> Verdict:
    errors = [
        f"{r.get('level')}: {str(r.get('message', ''))[:160]}"
        for r in snap.log_records
        if r.get("level") in ("ERROR", "CRITICAL")
    ]
    raw = [
        str(r["raw"])[:160] for r in snap.log_records if "raw" in r and "Traceback" in str(r["raw"])
    ]
    problems = errors + [f"traceback: {line}" for line in raw]
    if snap.stop_status != 0:
        problems.append(f"final SIGTERM: exit status {snap.stop_status}")
    return Verdict(
        "daemon healthy: no ERROR logged, clean final shutdown",
        not problems,
        f"{ledger.kills} kill -9, {ledger.graceful_stops} SIGTERM restarts, "
        f"{len(snap.log_records)} log lines",
        _show(problems),
    )


def no_incidents(ledger: Ledger) -> Verdict:
    return Verdict(
        "the run itself went through (no liveness timeout, failed publish or crash)",
        not ledger.incidents,
        f"{len(ledger.incidents)} incident(s)",
        _show(ledger.incidents),
    )


def every_fault_injected(ledger: Ledger) -> Verdict:
    missing = [kind.value for kind in FaultKind if ledger.faults[kind] == 0]
    return Verdict(
        "every fault kind was injected",
        not missing,
        f"{sum(ledger.faults.values())} faults of {len(FaultKind)} kinds",
        _show([f"never injected: {m}" for m in missing]),
    )


def check_all(
    ledger: Ledger,
    snap: Snapshot,
    phones: Mapping[str, PhoneSimulator],
    trackers: Mapping[str, ReplyTracker],
) -> list[Verdict]:
    """Every invariant, in report order."""
    checks: list[Callable[[], Verdict]] = [
        lambda: exactly_once(ledger, snap),
        lambda: answered_once(ledger, trackers),
        lambda: unpaired_key(ledger, snap, trackers),
        lambda: transcripts_match(ledger, snap, phones),
        lambda: heartbeat_truthful(ledger, snap, phones),
        lambda: memory_bounded(ledger, snap),
        lambda: silent_relay(ledger),
        lambda: clean_contract(phones),
        lambda: daemon_healthy(ledger, snap),
        lambda: no_incidents(ledger),
        lambda: every_fault_injected(ledger),
    ]
    return [check() for check in checks]
