"""The daemon's numbers (issue 4), through a local relay, side by side in one run.

The real daemon (``codedeck-bridge run`` as a subprocess, scripted agent) and phone simulators
talk through a rust-nostr LocalRelay on 127.0.0.1. :func:`measure_daemon` runs the cases in
order: cases 1 to 5 on one daemon (:mod:`tests.bench.daemon_scenarios`, which also holds the
helpers every case shares), then cases 6 and 7, each on a daemon of its own
(:mod:`tests.bench.daemon_load`); each module says how its cases are timed. This module runs
them and turns their results into rows and notes, or a failure. Rows:

- ``input → input-ack`` p50 / p99 (ms, lower is better) against the relay's own round trip
  (publish a like-sized event, receive it on a subscription), sampled alternately in the same
  run; aim: p50 within 3x the relay's p50. The relay's sockets have ``TCP_NODELAY`` set for this
  and every other case; one more row, measured last, shows the p50 through the relay as shipped
  (Nagle on), where ~40 ms delayed-ACK stalls dominate.
- live output (entries/s, higher is better) against the aim of 500/s, and against the relay
  alone moving as many like-sized events the way the daemon's sender publishes them; every seq
  must have arrived (live, or recovered by one sync, which the notes then say).
- full sync of 5,000 entries to a freshly paired phone (s, lower is better) against the 5 s aim.
- restart catch-up of 1,000 commands queued while the daemon was down (s, lower is better)
  against the 10 s aim; every input must run exactly once.
- live output to three phones (entries/s that reached every phone) against the one-phone live
  output of the same run; a turn of a third as many entries, so that the daemon publishes as
  many events as for one phone (LocalRelay would hang up on 15,000; see
  :mod:`tests.bench.daemon_load`, case 6); every phone must hold every seq.
- the daemon's resident memory (MiB, lower is better): idle against a Python process that only
  imports the daemon's modules (what running costs beyond the code), and with 20 sessions of
  5,000 entries each against the same daemon idle; the store must hold all 100,000 entries.

A run where the daemon loses or repeats work fails, with what went wrong (the numbers it did
measure go to stderr), instead of printing numbers. The module takes about 3 to 4 minutes on a
shared 2-core machine, most of it the 100,000 entries of the memory case; about a minute more
when the catch-up fails (it waits 60 s for the missing acks). Run alone:
``python -m tests.bench daemon``.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from tests.bench.common import Row
from tests.bench.daemon_load import (
    FANOUT_ENTRIES,
    FANOUT_PHONES,
    IDLE_SETTLE,
    IMPORTS_ONLY,
    LOADED_SETTLE,
    MEMORY_CONCURRENCY,
    MEMORY_ENTRIES,
    MEMORY_SESSIONS,
    FanoutResult,
    MemoryResult,
    measure_fanout,
    measure_memory,
)
from tests.bench.daemon_scenarios import (
    CATCHUP_COMMANDS,
    CATCHUP_TIMEOUT,
    LATENCY_SAMPLES,
    NAGLE_SAMPLES,
    SYNC_ENTRIES,
    DaemonNumbers,
    OutputResult,
    measure_one_phone,
    percentile,
    run_case,
)

__all__ = ["measure_daemon", "notes", "run"]

GROUP = "daemon"
AIM_ACK_RATIO = 3.0
AIM_ENTRIES_PER_SECOND = 500.0
AIM_SYNC_SECONDS = 5.0
AIM_CATCHUP_SECONDS = 10.0
KIB_PER_MIB = 1024

_notes: list[str] = []


async def measure_daemon(
    *,
    latency_samples: int = LATENCY_SAMPLES,
    nagle_samples: int = NAGLE_SAMPLES,
    sync_entries: int = SYNC_ENTRIES,
    catchup_commands: int = CATCHUP_COMMANDS,
    catchup_timeout: float = CATCHUP_TIMEOUT,
    fanout_phones: int = FANOUT_PHONES,
    fanout_entries: int = FANOUT_ENTRIES,
    memory_sessions: int = MEMORY_SESSIONS,
    memory_entries: int = MEMORY_ENTRIES,
    progress: Callable[[str], None] = lambda _: None,
    workdir: Path | None = None,
) -> DaemonNumbers:
    """Run the cases: 1-5 on one relay and daemon, then 6 and 7 on one each; clean up.

    Args:
        nagle_samples: ack latency samples through the relay as shipped, before
            ``TCP_NODELAY`` is set on its sockets for everything else (0: skip).
        catchup_timeout: how long to wait for the catch-up's acks before calling it failed.
        fanout_phones: phones of case 6 (0: skip it).
        memory_sessions: sessions of case 7 (0: skip it; skipped too without ``/proc``).
        workdir: an empty directory for the daemons' homes, logs and workspaces (the first
            daemon's directly in it, case 6's in ``fanout/``, case 7's in ``memory/``), kept
            afterwards (to read the logs); by default a temporary directory, removed.
    """
    numbers = DaemonNumbers()
    with contextlib.ExitStack() as files:
        if workdir is None:
            workdir = Path(files.enter_context(tempfile.TemporaryDirectory(prefix="cdb-bench-")))
        await measure_one_phone(
            numbers,
            workdir,
            latency_samples=latency_samples,
            nagle_samples=nagle_samples,
            sync_entries=sync_entries,
            catchup_commands=catchup_commands,
            catchup_timeout=catchup_timeout,
            progress=progress,
        )
        if fanout_phones:
            progress(f"live output to {fanout_phones} phones")
            numbers.fanout = await run_case(
                numbers,
                f"live output to {fanout_phones} phones",
                measure_fanout(numbers, workdir / "fanout", fanout_phones, fanout_entries),
            )
        numbers.memory_unavailable = not Path("/proc/self/status").is_file()
        if memory_sessions and not numbers.memory_unavailable:
            numbers.memory = await run_case(
                numbers,
                "memory",
                measure_memory(
                    numbers, workdir / "memory", memory_sessions, memory_entries, progress
                ),
            )
    return numbers


def _check(numbers: DaemonNumbers) -> list[str]:
    """What the daemon got wrong in this run (empty: every result is trustworthy)."""
    problems = list(numbers.problems)
    output, sync, catchup = numbers.output, numbers.sync, numbers.catchup
    if output is not None and output.lost_live and not output.recovered_by_sync:
        problems.append(f"live output lost {output.lost_live} entries and a sync did not recover")
    if sync is not None and not (sync.complete and sync.matches_store):
        problems.append(
            f"full sync: complete={sync.complete}, equal to the store={sync.matches_store}"
        )
    if catchup is not None:
        if catchup.acks != catchup.commands or catchup.duplicate_acks:
            problems.append(
                f"catch-up: {catchup.acks}/{catchup.commands} acks, "
                f"{catchup.duplicate_acks} duplicate(s)"
            )
        if catchup.executed_once != catchup.commands:
            problems.append(
                f"catch-up: {catchup.executed_once} inputs executed once, "
                f"{catchup.executed_twice_or_more} more than once, "
                f"{catchup.never_executed} never"
            )
    problems.extend(_fanout_problems(numbers.fanout))
    problems.extend(_memory_problems(numbers.memory))
    return problems


def _fanout_problems(fanout: FanoutResult | None) -> list[str]:
    if fanout is None:
        return []
    problems = []
    if fanout.entries != fanout.requested:
        problems.append(
            f"live output to {fanout.phones} phones: the store holds {fanout.entries} of the "
            f"turn's {fanout.requested} entries"
        )
    for index, delivery in enumerate(fanout.deliveries, 1):
        if delivery.lost and not delivery.recovered_by_sync:
            problems.append(
                f"live output to {fanout.phones} phones: phone {index} lost {delivery.lost} "
                "entries and a sync did not recover them"
            )
    return problems


def _memory_problems(memory: MemoryResult | None) -> list[str]:
    if memory is None or memory.complete_sessions == memory.sessions:
        return []
    return [
        f"memory load: {memory.complete_sessions} of {memory.sessions} sessions hold seqs 1 to "
        f"{memory.entries_per_session:,}; the store has {memory.stored_rows:,} of "
        f"{memory.sessions * memory.entries_per_session:,} rows "
        f"({memory.load_seconds:.0f} s after the inputs)"
    ]


def _rows(numbers: DaemonNumbers) -> list[Row]:
    rows: list[Row] = []
    latency, output, sync, catchup = (
        numbers.latency,
        numbers.output,
        numbers.sync,
        numbers.catchup,
    )
    if latency is not None:
        for pct in (50, 99):
            rows.append(
                Row(
                    GROUP,
                    f"input → input-ack p{pct} ({len(latency.ack_ms)} inputs; aim ≤ 3x at p50)"
                    if pct == 50
                    else f"input → input-ack p{pct}",
                    percentile(latency.ack_ms, pct),
                    percentile(latency.relay_ms, pct),
                    f"relay round trip p{pct}",
                    unit="ms",
                )
            )
    nagle = numbers.latency_nagle
    if nagle is not None:
        rows.append(
            Row(
                GROUP,
                f"input → input-ack p50, relay without TCP_NODELAY ({len(nagle.ack_ms)} inputs)",
                percentile(nagle.ack_ms, 50),
                percentile(nagle.relay_ms, 50),
                "relay round trip p50",
                unit="ms",
            )
        )
    if output is not None:
        rate = _live_rate(output)
        loss = (
            "zero loss"
            if not output.lost_live
            else f"{output.lost_live} lost live, recovered by sync"
        )
        rows.append(
            Row(
                GROUP,
                f"live output, {output.entries:,} entries, {loss}",
                rate,
                AIM_ENTRIES_PER_SECOND,
                "aim ≥ 500/s",
                unit="entries/s",
            )
        )
        rows.append(
            Row(
                GROUP,
                "live output vs relay alone",
                rate,
                output.relay_events / output.relay_seconds,
                "relay alone, same events, one at a time",
                unit="entries/s",
            )
        )
    if sync is not None:
        rows.append(
            Row(
                GROUP,
                f"full sync of {sync.entries:,} entries to a fresh phone",
                sync.seconds,
                AIM_SYNC_SECONDS,
                "aim ≤ 5 s",
                unit="s",
            )
        )
    if catchup is not None:
        rows.append(
            Row(
                GROUP,
                f"restart catch-up of {catchup.commands:,} queued commands",
                catchup.seconds,
                AIM_CATCHUP_SECONDS,
                "aim ≤ 10 s",
                unit="s",
            )
        )
    rows.extend(_fanout_rows(numbers.fanout, output))
    rows.extend(_memory_rows(numbers.memory))
    return rows


def _live_rate(output: OutputResult) -> float:
    """Entries/s of the one-phone live output: those that arrived live, until the last did."""
    return output.live_entries / output.seconds


def _fanout_rate(fanout: FanoutResult) -> float:
    """Entries/s that reached every phone live, until the last phone got its last one."""
    return fanout.live_entries / fanout.seconds


def _fanout_rows(fanout: FanoutResult | None, output: OutputResult | None) -> list[Row]:
    if fanout is None:
        return []
    loss = (
        "zero loss" if not fanout.lost_live else f"{fanout.lost_live} lost live, recovered by sync"
    )
    return [
        Row(
            GROUP,
            f"live output to {fanout.phones} phones, {fanout.entries:,} entries each, {loss}",
            _fanout_rate(fanout),
            _live_rate(output) if output is not None else None,
            "one phone, same run" if output is not None else None,
            unit="entries/s",
        )
    ]


def _mib(kib: int) -> float:
    return kib / KIB_PER_MIB


def _memory_rows(memory: MemoryResult | None) -> list[Row]:
    if memory is None:
        return []
    return [
        Row(
            GROUP,
            "daemon RSS idle (one phone paired, no session)",
            _mib(memory.idle_kib),
            _mib(memory.imports_only_kib),
            "python importing the daemon's modules",
            unit="MiB",
        ),
        Row(
            GROUP,
            f"daemon RSS with {memory.sessions} sessions of {memory.entries_per_session:,} "
            "entries each",
            _mib(memory.loaded_kib),
            _mib(memory.idle_kib),
            "the same daemon idle",
            unit="MiB",
        ),
    ]


def _describe(numbers: DaemonNumbers) -> list[str]:
    lines: list[str] = []
    latency, output, sync, catchup = (
        numbers.latency,
        numbers.output,
        numbers.sync,
        numbers.catchup,
    )
    if latency is not None:
        ack50 = percentile(latency.ack_ms, 50)
        relay50 = percentile(latency.relay_ms, 50)
        verdict = "met" if ack50 <= AIM_ACK_RATIO * relay50 else "NOT met"
        lines.append(
            f"daemon, ack latency: {len(latency.ack_ms)} inputs sent one at a time (each after "
            f"the previous turn ended), alternating with as many relay round trips of a "
            f"like-sized 4515 event; ack p50 {ack50:.2f} ms = {ack50 / relay50:.2f}x the relay's "
            f"{relay50:.2f} ms (aim ≤ {AIM_ACK_RATIO:g}x: {verdict}); max ack "
            f"{max(latency.ack_ms):.1f} ms. An ack crosses the relay twice (phone → daemon → "
            "phone) and includes the daemon's verify, decrypt, one SQLite commit and a "
            "signature, and the phone's verify and decrypt."
        )
        if not latency.nodelay:
            lines.append(
                "daemon: /proc/self/fd is unavailable, so the relay kept Nagle's algorithm on "
                "for every case (acks then include stalls of up to 40 ms)."
            )
    nagle = numbers.latency_nagle
    if nagle is not None and latency is not None and latency.nodelay:
        lines.append(
            "daemon, relay without TCP_NODELAY: rust-nostr's LocalRelay (also the daemon's "
            "embedded relay) leaves Nagle's algorithm on for the connections it accepts, so a "
            "frame it writes right after one the client's kernel has not acknowledged yet waits "
            "for that delayed ACK (up to 40 ms): the phone's command stalls behind the OK of the "
            "daemon's last publish. Measured last, through the relay as shipped: ack p50 "
            f"{percentile(nagle.ack_ms, 50):.1f} ms. Every other case runs with TCP_NODELAY set "
            "on the relay's sockets (as strfry sets it), so that they measure the daemon."
        )
    if output is not None:
        rate = _live_rate(output)
        lost = (
            "every seq arrived live"
            if not output.lost_live
            else f"{output.lost_live} seq(s) were lost live and one sync recovered them"
        )
        lines.append(
            f"daemon, live output: {output.live_entries:,} entries arrived live in "
            f"{output.seconds:.2f} s = {rate:,.0f}/s (aim ≥ {AIM_ENTRIES_PER_SECOND:g}/s: "
            f"{'met' if rate >= AIM_ENTRIES_PER_SECOND else 'NOT met'}); first entry after "
            f"{output.first_entry_ms:.1f} ms; {lost}. The relay alone moved "
            f"{output.relay_events:,} like-sized events in {output.relay_seconds:.2f} s "
            f"({output.relay_lost} lost)."
        )
    if sync is not None:
        lines.append(
            f"daemon, full sync: {sync.entries:,} entries in {sync.chunks} chunks, "
            f"{sync.seconds:.2f} s from sync-request to a complete transcript (aim ≤ "
            f"{AIM_SYNC_SECONDS:g} s: {'met' if sync.seconds <= AIM_SYNC_SECONDS else 'NOT met'}"
            f"), {sync.requests} request(s); equal to the daemon's store seq for seq."
        )
    if catchup is not None:
        met = "met" if catchup.seconds <= AIM_CATCHUP_SECONDS else "NOT met"
        lines.append(
            f"daemon, restart catch-up: {catchup.commands:,} inputs published in "
            f"{catchup.publish_seconds:.2f} s while the daemon was stopped; from its process "
            f"start: ready {catchup.ready_seconds:.2f} s, first ack {catchup.first_ack_seconds:.2f}"
            f" s, last ack {catchup.seconds:.2f} s (aim ≤ {AIM_CATCHUP_SECONDS:g} s: {met}), "
            f"every input in the agent's log once after {catchup.executed_seconds:.2f} s."
        )
    if numbers.disconnects:
        lines.append(
            f"daemon: the relay dropped the daemon's connection {numbers.disconnects} time(s) "
            "during the one-phone cases above (LocalRelay hangs up on more than 6,000 events a "
            "minute); live output sent meanwhile is lost until a sync."
        )
    lines.extend(_describe_fanout(numbers.fanout, output))
    lines.extend(_describe_memory(numbers.memory, unavailable=numbers.memory_unavailable))
    return lines


def _describe_fanout(fanout: FanoutResult | None, output: OutputResult | None) -> list[str]:
    if fanout is None:
        return []
    rate = _fanout_rate(fanout)
    events_rate = fanout.events / fanout.seconds
    if output is not None:
        one = _live_rate(output)
        versus = (
            f", {rate / one:.2f}x the {one:,.0f} entries/s of one phone in the same run; "
            f"the daemon published {fanout.events:,} live events (each phone gets its own NIP-44 "
            f"copy) = {events_rate:,.0f} events/s, against {one:,.0f}/s for one phone"
        )
    else:
        versus = (
            f"; the daemon published {fanout.events:,} live events (each phone gets its own "
            f"NIP-44 copy) = {events_rate:,.0f} events/s"
        )
    lost = (
        "every phone got every seq live"
        if not fanout.lost_live
        else "seqs lost live per phone: "
        + ", ".join(str(d.lost) for d in fanout.deliveries)
        + "; one sync per phone recovered them"
    )
    first = min(d.first_arrival_ms for d in fanout.deliveries)
    events = fanout.phones * fanout.entries
    why = (
        f"{fanout.phones} x {fanout.entries:,} = {events:,} live events to publish"
        + (f", as many as the one-phone turn's {output.entries:,}" if output is not None else "")
        + f" ({fanout.phones} x {SYNC_ENTRIES:,} would be {fanout.phones * SYNC_ENTRIES:,} on "
        "the daemon's one connection, and LocalRelay hangs up on a connection after about 6,000 "
        "a minute: entries would be lost live at every phone and the rate would time the "
        "reconnect, not the daemon)"
    )
    return [
        f"daemon, live output to {fanout.phones} phones: a turn of {fanout.entries:,} entries, "
        f"{why}. Every phone had them in {fanout.seconds:.2f} s = {rate:,.0f} entries/s"
        f"{versus}. First entry after {first:.1f} ms; {lost}; the relay dropped this daemon's "
        f"connection {fanout.daemon_disconnects} time(s)."
    ]


def _describe_memory(memory: MemoryResult | None, *, unavailable: bool) -> list[str]:
    if memory is None:
        if unavailable:
            return ["daemon, memory: not measured (no /proc/<pid>/status on this system)."]
        return []
    total = memory.sessions * memory.entries_per_session
    idle, loaded = _mib(memory.idle_kib), _mib(memory.loaded_kib)
    imports_only = _mib(memory.imports_only_kib)
    per_entry = (
        f", {(memory.loaded_kib - memory.idle_kib) * KIB_PER_MIB / memory.stored_rows:,.0f} "
        "bytes per stored entry"
        if memory.stored_rows
        else ""
    )
    rate = (
        f" = {memory.stored_rows / memory.load_seconds:,.0f} entries/s"
        if memory.load_seconds > 0
        else ""
    )
    checked = (
        f"every session holds seqs 1 to {memory.entries_per_session:,}"
        if memory.complete_sessions == memory.sessions
        else f"only {memory.complete_sessions} of {memory.sessions} sessions hold seqs 1 to "
        f"{memory.entries_per_session:,}"
    )
    dropped = "was dropped at least once" if memory.phone_dropped else "was never dropped"
    failed_reads = (
        f" {memory.failed_reads} read(s) of the store from the benchmark failed and were "
        "retried (sqlite3.DatabaseError while reading the daemon's WAL database)."
        if memory.failed_reads
        else ""
    )
    return [
        f"daemon, memory: VmRSS from /proc/<pid>/status. Idle (started, one phone paired, no "
        f"session, read after {IDLE_SETTLE:g} s): {idle:.1f} MiB, against {imports_only:.1f} "
        f"MiB for a Python process that only imports {', '.join(IMPORTS_ONLY)} (same "
        f"interpreter, read at the same moment): running adds {idle - imports_only:.1f} MiB. "
        f"Loaded: {memory.sessions} sessions, each given a `lines N` turn of "
        f"{memory.entries_per_session:,} entries, {MEMORY_CONCURRENCY} turns at a time (the "
        "scripted agent emits faster than the engine stores; with more at once the RSS would "
        "also count a transient backlog of queued entries), with the phone paired and online (every entry is sealed and "
        f"published live): the store's transcripts table held {memory.stored_rows:,} rows "
        f"(checked with sqlite3: {checked}), written in {memory.load_seconds:.1f} s{rate}; RSS "
        f"{loaded:.1f} MiB once the phone had heard nothing for {LOADED_SETTLE:g} s "
        f"({loaded - idle:+.1f} MiB over idle{per_entry}), peak (VmHWM) "
        f"{_mib(memory.loaded_peak_kib):.1f} MiB. LocalRelay hung up on the daemon "
        f"{memory.daemon_disconnects} time(s) during the load (it does past about 6,000 events "
        f"a minute): {memory.not_delivered:,} live events no relay took (sealed and sent, not "
        f"retried), so the phone got {memory.live_received:,} of the {total:,} entries live; "
        f"the phone's own connection {dropped}.{failed_reads}"
    ]


def run() -> list[Row]:
    _notes.clear()
    numbers = asyncio.run(
        measure_daemon(progress=lambda step: print(f"  daemon: {step}", file=sys.stderr))
    )
    problems = _check(numbers)
    described = _describe(numbers)
    if problems:
        print("\n".join(described), file=sys.stderr)
        raise RuntimeError("; ".join(problems))
    _notes.extend(described)
    return _rows(numbers)


def notes() -> list[str]:
    return list(_notes)
