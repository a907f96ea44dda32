"""The invariants a real-CLI chaos run proves, checked against the ledger and the final snapshot.

Each check returns a :class:`~tests.chaos.invariants.Verdict` (PASS/FAIL, a one-line summary
with numbers, and every violation with the input, its round and intention, and what was found).

1. **Exactly once, never lost.** Every input is acknowledged once. Its Bash call left its marker
   in the ledger files exactly once (a deliberate deny: never), Claude Code made no second call
   for it, and its turn ended once (one ``done`` text in the store). The only exception: an input
   reported interrupted in a ``session_restart`` note — allowed only when a session host or a CLI
   was killed while it was in flight — ran at most once, and never if denied.
2. **No refusal the phone did not give.** Every Bash result Claude Code recorded as an error is a
   deliberate denial of the phone, or "[Tool call interrupted: …" for a call whose host or CLI
   was killed (counted). Anything else — a hook that failed closed, a refusal after a restart,
   an error nobody explains — fails. And every prompt Claude Code recorded was taken in the
   permission mode the phone had set (a restart that loses the mode refuses what it should ask).
3. **The phone shows every turn.** After a final sync, each input that was not interrupted has
   its ``done`` text in the phone's transcript, the phone's transcript equals the store seq for
   seq, no seq conflicts, no contract violations.
4. **Cards across kills.** Every card held at a kill was answered afterwards and its call ran
   once (allow) or never (deny); a card whose agent was killed never ran; every card input that
   was not interrupted had exactly one card, each card was written once, and no input that
   needed no card got one.
5. **Healthy.** No ERROR in the daemon's log nor in the hosts' logs, no traceback, a clean final
   SIGTERM, no CLI outliving its host, no process of the run left after the final stop, no
   session ended by the bridge and no conversation that could not be resumed.

Plus: liveness — every input had its outcome within its round's wait (60 s), so a lost input
shows even when a later restart happens to report it — and every kill point was hit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from bridge.protocol import OutputEntry
from tests.chaos.cli.evidence import Snapshot
from tests.chaos.cli.ledger import InputRecord, KillRecord, Ledger, Route
from tests.chaos.cli.model import INTERRUPTED_RESULT, done_text, parse_done
from tests.chaos.cli.observe import PhoneWatch, card_of, restart_of
from tests.chaos.cli.plan import KillPoint
from tests.chaos.invariants import Verdict, clean_contract
from tests.support.phone import PhoneSimulator

__all__ = [
    "ALLOWED_ERRORS",
    "Facts",
    "cards_across_kills",
    "check_all",
    "every_kill_point",
    "exactly_once",
    "healthy",
    "no_incidents",
    "no_phantom_refusals",
    "phone_shows_every_turn",
]

ALLOWED_ERRORS: tuple[str, ...] = ()
"""Substrings of daemon ERROR lines a run expects (none so far)."""


class Facts:
    """What the checks share, computed once from the snapshot."""

    def __init__(self, ledger: Ledger, snap: Snapshot) -> None:
        self.ledger = ledger
        self.snap = snap
        self.done: Counter[str] = Counter()
        self.interrupted: dict[str, list[int]] = {}
        """input id → seqs of the restart notes that say it was interrupted."""
        self.fresh_conversations: list[str] = []
        self.deaths: list[str] = []
        """Sessions the bridge ended ("Session ended unexpectedly …")."""
        self.store_cards: Counter[str] = Counter()
        self.card_input: dict[str, str | None] = {}
        for session_id, entries in snap.store.items():
            for seq, entry in sorted(entries.items()):
                self._entry(session_id, seq, entry)
        self.denied = {a.tool_use_id for a in ledger.answers if not a.allow}

    def _entry(self, session_id: str, seq: int, entry: OutputEntry) -> None:
        if (entry.metadata or {}).get("special") == "session_died":
            self.deaths.append(f"{session_id[:8]} seq {seq}: {entry.content[:160]}")
            return
        if entry.entryType == "text":
            input_id = parse_done(entry.content)
            if input_id is not None:
                self.done[input_id] += 1
            return
        card = card_of(session_id, seq, entry, 0.0)
        if card is not None:
            self.store_cards[card.tool_use_id] += 1
            self.card_input[card.tool_use_id] = card.input_id
            return
        note = restart_of(session_id, seq, entry, 0.0)
        if note is not None:
            for input_id in note.interrupted:
                self.interrupted.setdefault(input_id, []).append(seq)
            if note.fresh_conversation:
                self.fresh_conversations.append(f"{session_id[:8]} seq {seq}")

    def cut_after(self, record: InputRecord) -> KillRecord | None:
        """A host or CLI kill of `record`'s session after it was sent, if any: Claude Code's
        files may then lack the end of its turn (its writes are batched, ~0.1 s), and a resumed
        CLI marks a call left without a result "interrupted"."""
        return next(
            (k for k in self.ledger.cutting_kills(record.session_id) if k.at >= record.sent_at),
            None,
        )

    def excuse(self, record: InputRecord) -> KillRecord | None:
        """The host or CLI kill that may have cut `record`'s turn, if any."""
        return next(
            (
                k
                for k in self.ledger.cutting_kills(record.session_id)
                if record.input_id in k.in_flight
            ),
            None,
        )


def _show(lines: Sequence[str]) -> tuple[str, ...]:
    return tuple(lines)


def exactly_once(facts: Facts, watch: PhoneWatch) -> Verdict:
    ledger, snap = facts.ledger, facts.snap
    problems: list[str] = []
    counts: Counter[str] = Counter()
    for record in ledger.inputs.values():
        input_id = record.input_id
        acks, failures = watch.acks[input_id], watch.failures.get(input_id, [])
        if acks != 1 or failures:
            problems.append(f"{record.describe()}: {acks} ack(s), failures {failures}")
        marks, done = snap.marks[input_id], facts.done[input_id]
        calls = snap.cli.calls_of(input_id)
        notes = facts.interrupted.get(input_id, [])
        if notes:
            counts["interrupted"] += 1
            counts[f"interrupted, ran {min(marks, 2)}x"] += 1
            if facts.excuse(record) is None:
                problems.append(
                    f"{record.describe()}: reported interrupted (seq {notes}) but no host or CLI "
                    "was killed while it was in flight"
                )
            if len(notes) > 1:
                problems.append(f"{record.describe()}: reported interrupted {len(notes)} times")
            if marks > 1 or len(calls) > 1 or done > 1:
                problems.append(
                    f"{record.describe()}: interrupted, yet ran {marks}x on disk, "
                    f"{len(calls)} Bash call(s), {done} turn end(s)"
                )
            if record.denied_on_purpose and marks:
                problems.append(f"{record.describe()}: denied on purpose, yet ran {marks}x")
            continue
        if record.route.runs_tool:
            expected = 1 if record.must_run else 0
            if marks != expected:
                why = "; ".join(f"{c.tool_use_id}: {_result(c.result)}" for c in calls) or "no call"
                problems.append(
                    f"{record.describe()}: ran {marks}x on disk, expected {expected} ({why})"
                )
            if len(calls) > 1:  # none recorded: a CLI killed before it wrote (the marks tell)
                problems.append(f"{record.describe()}: Claude Code made {len(calls)} Bash calls")
            counts["denied, never ran" if record.denied_on_purpose else "ran once on disk"] += (
                marks == expected
            )
        if done != 1:
            problems.append(f"{record.describe()}: its turn ended {done}x in the store")
        elif record.route is Route.REPLY:
            counts["replies answered once"] += 1
    unknown = sorted(set(snap.marks) - set(ledger.inputs))
    problems += [f"marker {m} in the ledger, but no input has that id" for m in unknown]
    acked = sum(1 for r in ledger.inputs.values() if watch.acks[r.input_id] == 1)
    return Verdict(
        "1. exactly once: every acknowledged input ran once (or, cut by a host/CLI kill, was "
        "reported interrupted and ran at most once); none ran twice, none went missing",
        not problems,
        f"{len(ledger.inputs)} inputs, {acked} acked once; "
        + ", ".join(f"{what} {n}" for what, n in sorted(counts.items())),
        _show(problems),
    )


def _result(text: str | None) -> str:
    return "no result recorded" if text is None else repr(text[:100])


def no_phantom_refusals(facts: Facts) -> Verdict:
    ledger, snap = facts.ledger, facts.snap
    problems: list[str] = []
    counts: Counter[str] = Counter()
    for call in snap.cli.calls.values():
        record = ledger.inputs.get(call.input_id)
        who = record.describe() if record is not None else call.input_id
        if call.result is None:
            counts["no result recorded (its CLI died)"] += 1
            if record is None or facts.cut_after(record) is None:
                problems.append(f"{who}: call {call.tool_use_id} has no result, and no kill cut it")
            continue
        if call.tool_use_id in facts.denied:
            counts["deliberate denials"] += 1
            if not call.is_error:
                problems.append(f"{who}: denied by the phone, yet it ran: {_result(call.result)}")
            continue
        if not call.is_error:
            counts["ran"] += 1
            continue
        if INTERRUPTED_RESULT in call.result:
            counts["interrupted by a host/CLI kill"] += 1
            if record is None or facts.cut_after(record) is None:
                problems.append(f"{who}: {_result(call.result)} with no host or CLI kill")
            continue
        counts["refused or failed with no one refusing"] += 1
        decision = f" [{call.decision}]" if call.decision else ""
        problems.append(
            f"{who}: call {call.tool_use_id} refused/failed, the phone did not deny it: "
            f"{_result(call.result)}{decision}"
        )
    for input_id, modes in sorted(snap.cli.modes.items()):
        record = ledger.inputs.get(input_id)
        drifted = sorted({m for m in modes if record is not None and m != record.mode})
        if record is not None and drifted:
            counts["taken in another mode"] += 1
            problems.append(
                f"{record.describe()}: Claude Code took it in mode {', '.join(drifted)}; the "
                f"phone had set {record.mode}"
            )
    return Verdict(
        "2. no phantom refusal: no tool call was refused that the phone did not refuse, and each "
        "prompt ran in the mode the phone set (read from Claude Code's own files)",
        not problems,
        f"{len(snap.cli.calls)} Bash calls in {snap.cli.files} session file(s): "
        + ", ".join(f"{what} {n}" for what, n in sorted(counts.items())),
        _show(problems),
    )


def phone_shows_every_turn(facts: Facts, phone: PhoneSimulator) -> Verdict:
    ledger, snap = facts.ledger, facts.snap
    problems: list[str] = list(snap.sync_errors)
    shown = {
        parse_done(e.content)
        for entries in snap.phone.values()
        for e in entries.values()
        if e.entryType == "text"
    }
    missing = [
        r
        for r in ledger.inputs.values()
        if r.input_id not in facts.interrupted and r.input_id not in shown
    ]
    problems += [f"{r.describe()}: no '{done_text(r.input_id)}' on the phone" for r in missing]
    compared = 0
    for session_id, stored in snap.store.items():
        result = snap.syncs.get(session_id)
        if result is None or not result.complete:
            problems.append(f"final sync of {session_id[:8]} incomplete: {result}")
        held = snap.phone.get(session_id, {})
        compared += len(stored)
        lacking = sorted(set(stored) - set(held))
        extra = sorted(set(held) - set(stored))
        differ = sorted(s for s in set(stored) & set(held) if stored[s] != held[s])
        if lacking:
            problems.append(f"{session_id[:8]}: the phone lacks seqs {lacking[:10]}")
        if extra:
            problems.append(f"{session_id[:8]}: the phone has seqs the store lacks {extra[:10]}")
        if differ:
            problems.append(f"{session_id[:8]}: seqs differ from the store {differ[:10]}")
    problems += [
        f"seq conflict in {c.session_id[:8]} seq {c.seq} ({c.source})" for c in phone.conflicts
    ]
    contract = clean_contract({"phone": phone})
    problems += list(contract.details)
    turns = len(ledger.inputs) - len(missing)
    return Verdict(
        "3. phone shows every turn: each turn that ran is on the phone, which equals the store seq "
        "for seq; no seq conflicts, no contract violations",
        not problems,
        f"{turns} turns shown; {compared} entries compared over {len(snap.store)} sessions; "
        f"{len(phone.received)} messages received",
        _show(problems),
    )


def cards_across_kills(facts: Facts, watch: PhoneWatch) -> Verdict:
    ledger, snap = facts.ledger, facts.snap
    problems: list[str] = list(ledger.unexpected_cards)
    answered = Counter(a.tool_use_id for a in ledger.answers)
    problems += [f"card {t} answered {n} times by the phone" for t, n in answered.items() if n > 1]
    problems += [
        f"card {t} written {n} times in the store" for t, n in facts.store_cards.items() if n > 1
    ]
    by_input: dict[str, list[str]] = {}
    for tool_use_id, input_id in facts.card_input.items():
        by_input.setdefault(input_id or "?", []).append(tool_use_id)
    for record in ledger.inputs.values():
        cards = by_input.get(record.input_id, [])
        if record.route is not Route.CARD:
            if cards:
                problems.append(f"{record.describe()}: needed no card, got {len(cards)}")
            continue
        if record.input_id in facts.interrupted:
            if len(cards) > 1:
                problems.append(f"{record.describe()}: interrupted, with {len(cards)} cards")
            continue
        if len(cards) != 1:
            problems.append(f"{record.describe()}: {len(cards)} card(s), expected 1")
        unanswered = [t for t in cards if t not in answered and t not in _skipped(ledger)]
        problems += [f"{record.describe()}: card {t} never answered" for t in unanswered]
    held_at_daemon = 0
    for held in ledger.held_cards:
        record = ledger.inputs[held.input_id]
        marks = snap.marks[held.input_id]
        if held.point is KillPoint.DAEMON_CARD_PENDING:
            held_at_daemon += 1
            expected = 1 if record.allow else 0
            if not held.answered or held.tool_use_id not in answered:
                problems.append(f"r{held.round} {record.describe()}: held card never answered")
            if marks != expected or facts.done[held.input_id] != 1:
                problems.append(
                    f"r{held.round} {record.describe()}: card pending at a daemon kill, answered "
                    f"{'while down' if held.answered_while_down else 'after the restart'}: ran "
                    f"{marks}x (expected {expected}), turn ended {facts.done[held.input_id]}x"
                )
        else:
            call = snap.cli.calls.get(held.tool_use_id)
            if call is not None and call.result is not None and not call.is_error:
                problems.append(
                    f"r{held.round} {record.describe()}: card {held.tool_use_id} pending when "
                    f"its {held.point.value} killed the agent, yet that call ran"
                )
    card_inputs = sum(1 for r in ledger.inputs.values() if r.route is Route.CARD)
    return Verdict(
        "4. cards across kills: every card pending at a daemon kill was answered afterwards and its "
        "call ran once (deny: never); one card per card input; no card where none was due",
        not problems,
        f"{len(facts.store_cards)} cards for {card_inputs} card inputs; {held_at_daemon} held "
        f"across a daemon kill, {len(ledger.held_cards) - held_at_daemon} across a host/CLI kill; "
        f"{len(ledger.answers)} answers ({len(facts.denied)} deny)",
        _show(problems),
    )


def _skipped(ledger: Ledger) -> set[str]:
    return {h.tool_use_id for h in ledger.held_cards if not h.answered}


def healthy(facts: Facts) -> Verdict:
    ledger, snap = facts.ledger, facts.snap
    problems: list[str] = []
    for record in snap.log_records:
        level = record.get("level")
        message = str(record.get("message", ""))
        if level in ("ERROR", "CRITICAL") and not any(a in message for a in ALLOWED_ERRORS):
            problems.append(f"daemon {level}: {message[:200]}")
        elif "raw" in record and "Traceback" in str(record["raw"]):
            problems.append(f"daemon traceback: {str(record['raw'])[:160]}")
    for session_id, text in snap.host_logs.items():
        for line in text.splitlines():
            if '"ERROR"' in line or '"CRITICAL"' in line or "Traceback" in line:
                problems.append(f"host {session_id[:8]}: {line[:200]}")
    if snap.stop_status != 0:
        problems.append(f"final SIGTERM: exit status {snap.stop_status}")
    problems += ledger.orphans
    problems += [f"left running after the final stop: {p}" for p in snap.leftovers]
    problems += [f"a conversation could not be resumed: {c}" for c in facts.fresh_conversations]
    problems += [f"the bridge ended a session: {d}" for d in facts.deaths]
    return Verdict(
        "5. healthy: no ERROR logged, no session ended, clean final stop, no CLI outliving its "
        "host, nothing left running",
        not problems,
        f"{len(ledger.kills)} kill -9 ({sum(1 for k in ledger.kills if k.target == 'daemon')} "
        f"daemon), {ledger.daemon_starts} daemon starts, {len(snap.log_records)} log lines, "
        f"{snap.live_hosts_before_stop} host(s) at the end",
        _show(problems),
    )


def no_incidents(ledger: Ledger) -> Verdict:
    return Verdict(
        "liveness: every input had its outcome (acked, turn ended or reported interrupted) "
        "within its round's wait; the run itself went through",
        not ledger.incidents,
        f"{len(ledger.incidents)} incident(s); {ledger.stall_syncs} stall sync(s)",
        _show(ledger.incidents),
    )


def every_kill_point(ledger: Ledger, planned: Sequence[KillPoint] | None = None) -> Verdict:
    """Every kill point of the plan (default: all of them) killed something at least once."""
    wanted = list(planned) if planned is not None else list(KillPoint)
    hit = ledger.kills_by_point()
    missing = [p.value for p in wanted if hit[p] == 0]
    return Verdict(
        "every kill point hit: each planned kill point killed something",
        not missing,
        f"{sum(hit.values())} kill rounds over {len(wanted) - len(missing)}/{len(wanted)} points",
        _show([f"never hit: {m}" for m in missing]),
    )


def check_all(
    ledger: Ledger,
    snap: Snapshot,
    watch: PhoneWatch,
    phone: PhoneSimulator,
    planned: Sequence[KillPoint] | None = None,
) -> list[Verdict]:
    """Every invariant, in report order."""
    facts = Facts(ledger, snap)
    checks: list[Callable[[], Verdict]] = [
        lambda: exactly_once(facts, watch),
        lambda: no_phantom_refusals(facts),
        lambda: phone_shows_every_turn(facts, phone),
        lambda: cards_across_kills(facts, watch),
        lambda: healthy(facts),
        lambda: no_incidents(ledger),
        lambda: every_kill_point(ledger, planned),
    ]
    return [check() for check in checks]
