"""The daemon's numbers (issue 4), through a local relay, side by side in one run.

The real daemon (``codedeck-bridge run`` as a subprocess, scripted agent) and phone simulators
talk through a rust-nostr LocalRelay on 127.0.0.1; :mod:`tests.bench.daemon_scenarios` has the
cases and how each is timed. Rows:

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

A run where the daemon loses or repeats work fails, with what went wrong (the numbers it did
measure go to stderr), instead of printing numbers. The module takes about 40 s, 80 s when the
catch-up fails (it waits 60 s for the missing acks). Run alone: ``python -m tests.bench daemon``.
"""

from __future__ import annotations

import asyncio
import sys

from tests.bench.common import Row
from tests.bench.daemon_scenarios import DaemonNumbers, measure_daemon, percentile

__all__ = ["notes", "run"]

GROUP = "daemon"
AIM_ACK_RATIO = 3.0
AIM_ENTRIES_PER_SECOND = 500.0
AIM_SYNC_SECONDS = 5.0
AIM_CATCHUP_SECONDS = 10.0

_notes: list[str] = []


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
    return problems


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
        rate = output.live_entries / output.seconds
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
    return rows


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
        rate = output.live_entries / output.seconds
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
            "during the run (LocalRelay hangs up on more than 6,000 events a minute); live "
            "output sent meanwhile is lost until a sync."
        )
    return lines


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
