"""The daemon benchmark's rows and notes, from :class:`~tests.bench.daemon_support.DaemonNumbers`.

Every row is ours against a baseline measured in the same run (or against an aim of issue 15,
named as such). Rows through the embedded relay end with ", embedded relay"; the others ran on
the test relay (LocalRelay with ``TCP_NODELAY``). The notes say how each number was taken and
whether its aim is met.
"""

from __future__ import annotations

from tests.bench.common import Row
from tests.bench.daemon_burst import BurstResult
from tests.bench.daemon_load import (
    IDLE_SETTLE,
    IMPORTS_ONLY,
    LOADED_SETTLE,
    MEMORY_CONCURRENCY,
    FanoutResult,
    MemoryResult,
)
from tests.bench.daemon_scenarios import OutputResult
from tests.bench.daemon_support import DaemonNumbers, RelayRun, percentile

__all__ = ["describe", "rows"]

GROUP = "daemon"
AIM_ACK_RATIO = 2.0
AIM_OUTPUT_RATIO = 0.8
AIM_FANOUT_RATIO = 0.8
AIM_SYNC_SECONDS = 2.0
AIM_CATCHUP_SECONDS = 2.0
AIM_IDLE_MIB = 80.0
KIB_PER_MIB = 1024


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def _live_rate(output: OutputResult) -> float:
    """Entries/s of the one-phone live output: those that arrived live, until the last did."""
    return output.live_entries / output.seconds


def _relay_rate(output: OutputResult) -> float:
    return output.relay_events / output.relay_seconds


# --- rows ---------------------------------------------------------------------------------------


def rows(numbers: DaemonNumbers) -> list[Row]:
    out: list[Row] = []
    for run in numbers.runs:
        out.extend(_run_rows(run))
    out.extend(_memory_rows(numbers.memory))
    return out


def _run_rows(run: RelayRun) -> list[Row]:
    out: list[Row] = []
    at = run.suffix
    latency, output, sync, catchup = run.latency, run.output, run.sync, run.catchup
    if latency is not None:
        out.append(
            Row(
                GROUP,
                f"input → input-ack p50 ({len(latency.ack_ms)} inputs; aim ≤ 2x){at}",
                percentile(latency.ack_ms, 50),
                percentile(latency.echo_ms, 50),
                "echo bot round trip p50",
                unit="ms",
            )
        )
        out.append(
            Row(
                GROUP,
                f"input → input-ack p99{at}",
                percentile(latency.ack_ms, 99),
                percentile(latency.echo_ms, 99),
                "echo bot round trip p99",
                unit="ms",
            )
        )
    if output is not None:
        loss = "zero loss" if not output.lost_live else f"{output.lost_live} lost live"
        out.append(
            Row(
                GROUP,
                f"live output, {output.entries:,} entries, {loss} (aim ≥ 0.8x){at}",
                _live_rate(output),
                _relay_rate(output),
                "relay alone, same events, each after the last OK",
                unit="entries/s",
            )
        )
    if run.fanout is not None:
        out.append(_fanout_row(run.fanout, output, at))
    if sync is not None:
        out.append(
            Row(
                GROUP,
                f"full sync of {sync.entries:,} entries to a fresh phone: every entry there{at}",
                sync.last_chunk_seconds,
                AIM_SYNC_SECONDS,
                f"aim ≤ {AIM_SYNC_SECONDS:g} s",
                unit="s",
            )
        )
        out.append(
            Row(
                GROUP,
                f"full sync: sync-end, after the phone's {sync.chunks:,} acks one at a time{at}",
                sync.seconds,
                sync.last_chunk_seconds,
                "every entry at the phone, same run",
                unit="s",
            )
        )
    if catchup is not None:
        out.append(
            Row(
                GROUP,
                f"restart catch-up of {catchup.commands:,} queued commands{at}",
                catchup.seconds,
                AIM_CATCHUP_SECONDS,
                f"aim ≤ {AIM_CATCHUP_SECONDS:g} s",
                unit="s",
            )
        )
    if run.burst is not None:
        out.append(_burst_row(run.burst, at))
    return out


def _fanout_row(fanout: FanoutResult, output: OutputResult | None, at: str) -> Row:
    loss = "zero loss" if not fanout.lost_live else f"{fanout.lost_live} lost live"
    return Row(
        GROUP,
        f"live output to {fanout.phones} phones, {fanout.entries:,} entries, per phone, "
        f"{loss} (aim ≥ 0.8x){at}",
        fanout.per_phone_rate,
        _live_rate(output) if output is not None else None,
        "one phone, same run" if output is not None else None,
        unit="entries/s",
    )


def _burst_row(burst: BurstResult, at: str) -> Row:
    per_phone = "/".join(str(p.acks) for p in burst.phones)
    return Row(
        GROUP,
        f"{len(burst.phones)} phones x {burst.commands_per_phone} commands in "
        f"{burst.send_seconds:.0f} s: replies live per phone {per_phone}, bridge connection "
        f"drops {burst.daemon_disconnects}{at}",
        min(p.acks for p in burst.phones),
        burst.commands_per_phone,
        "commands per phone",
        unit="replies",
    )


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


# --- notes --------------------------------------------------------------------------------------


def describe(numbers: DaemonNumbers) -> list[str]:
    lines = [
        "daemon: every case runs through two relays, each with its own daemons: the test relay "
        "(rust-nostr's LocalRelay in the bench's process, TCP_NODELAY set on its sockets as "
        "strfry sets it) and the embedded relay, the daemon serving its own with no relay "
        'configured, as `make run` starts it (rows marked "embedded relay"). Every bench '
        "daemon keeps its whole transcripts (CODEDECK_TRANSCRIPT_KEEP_LAST=0); the daemon's "
        "packages are byte-compiled before the first one starts, as an installed package's are."
    ]
    for run in numbers.runs:
        lines.extend(_describe_run(run))
    lines.extend(_describe_memory(numbers.memory, unavailable=numbers.memory_unavailable))
    return lines


def _describe_run(run: RelayRun) -> list[str]:
    lines: list[str] = []
    where = f"daemon ({run.relay})"
    latency, output, sync, catchup = run.latency, run.output, run.sync, run.catchup
    if latency is not None:
        ack50, echo50 = percentile(latency.ack_ms, 50), percentile(latency.echo_ms, 50)
        relay50 = percentile(latency.relay_ms, 50)
        lines.append(
            f"{where}, ack latency: {len(latency.ack_ms)} inputs sent one at a time by the one "
            "phone paired (each after the previous turn ended), alternating with as many round trips of the echo bot (a "
            "separate process that answers each 4515 with a reply signed beforehand: the same "
            "two relay crossings with no work) and one-way trips of a like-sized 4515 through "
            f"the relay; ack p50 {ack50:.2f} ms = {ack50 / echo50:.2f}x the echo bot's "
            f"{echo50:.2f} ms (aim ≤ {AIM_ACK_RATIO:g}x: {_met(ack50 <= AIM_ACK_RATIO * echo50)}"
            f"); the relay's one-way trip p50 {relay50:.2f} ms; max ack "
            f"{max(latency.ack_ms):.1f} ms. Between the two crossings the daemon verifies, "
            "decrypts, commits once and signs; the phone verifies and decrypts."
        )
    if output is not None:
        rate, relay = _live_rate(output), _relay_rate(output)
        lost = (
            "every seq arrived live"
            if not output.lost_live
            else f"{output.lost_live} seq(s) were lost live and one sync recovered them"
        )
        lines.append(
            f"{where}, live output: {output.live_entries:,} entries arrived live in "
            f"{output.seconds:.2f} s = {rate:,.0f}/s, {rate / relay:.2f}x the relay alone "
            f"(aim ≥ {AIM_OUTPUT_RATIO:g}x: {_met(rate >= AIM_OUTPUT_RATIO * relay)}), which "
            f"moved {output.relay_events:,} like-sized events in {output.relay_seconds:.2f} s = "
            f"{relay:,.0f}/s, published one at a time, each after the last OK ("
            f"{output.relay_lost} lost); first entry after {output.first_entry_ms:.1f} ms; "
            f"{lost}."
        )
    if run.fanout is not None:
        lines.append(_describe_fanout(where, run.fanout, output))
    if sync is not None:
        lines.append(
            f"{where}, full sync: a session given {sync.entries:,} lines in the store while "
            f"the daemon was down (the output turn's lines, repeated); {sync.chunks} chunks, "
            f"{sync.requests} request(s). From a fresh phone's sync-request, the phone had its "
            f"first chunk after {sync.first_chunk_seconds:.2f} s and every entry after "
            f"{sync.last_chunk_seconds:.2f} s (aim ≤ {AIM_SYNC_SECONDS:g} s: "
            f"{_met(sync.last_chunk_seconds <= AIM_SYNC_SECONDS)}), equal to the daemon's store "
            f"seq for seq; sync-end came after {sync.seconds:.2f} s: the phone simulator sends "
            "its 1 sync-ack per chunk one at a time (each after the relay's OK, behind its own "
            "decoding of the chunks, in the bench's process), and the daemon ends the sync once "
            "every ack is in."
        )
    if catchup is not None:
        lines.append(
            f"{where}, restart catch-up: {catchup.commands:,} inputs queued in "
            f"{catchup.queued_in} while the daemon was stopped (published in "
            f"{catchup.publish_seconds:.2f} s"
            + (", from the phone's return" if catchup.queued_in == "the phone" else "")
            + f"); from the process start: ready {catchup.ready_seconds:.2f} s, first ack "
            f"{catchup.first_ack_seconds:.2f} s, last ack {catchup.seconds:.2f} s (aim ≤ "
            f"{AIM_CATCHUP_SECONDS:g} s: {_met(catchup.seconds <= AIM_CATCHUP_SECONDS)}), every "
            f"input in the agent's log once after {catchup.executed_seconds:.2f} s."
        )
    if run.burst is not None:
        lines.append(_describe_burst(where, run.burst))
    if run.disconnects:
        lines.append(
            f"{where}: the relay dropped the daemon's connection {run.disconnects} time(s) "
            "during the one-phone cases; live output sent meanwhile is lost until a sync."
        )
    return lines


def _describe_fanout(where: str, fanout: FanoutResult, output: OutputResult | None) -> str:
    per_phone = fanout.per_phone_rate
    versus = ""
    if output is not None:
        one = _live_rate(output)
        versus = (
            f", {per_phone / one:.2f}x the {one:,.0f} entries/s of one phone in the same run "
            f"(aim ≥ {AIM_FANOUT_RATIO:g}x: {_met(per_phone >= AIM_FANOUT_RATIO * one)})"
        )
    lost = (
        "every phone got every seq live"
        if not fanout.lost_live
        else "seqs lost live per phone: "
        + ", ".join(str(d.lost) for d in fanout.deliveries)
        + "; one sync per phone recovered them"
    )
    first = min(d.first_arrival_ms for d in fanout.deliveries)
    return (
        f"{where}, live output to {fanout.phones} phones: one turn of {fanout.entries:,} "
        f"entries, {fanout.events:,} live events in all (one NIP-44 copy per phone); the "
        f"slowest phone had its entries at {per_phone:,.0f} entries/s{versus}; every phone had "
        f"them after {fanout.seconds:.2f} s. First entry after {first:.1f} ms; {lost}; the relay "
        f"dropped the daemon's connection {fanout.daemon_disconnects} time(s) and "
        f"{fanout.phones_dropped} phone's connection(s)."
    )


def _describe_burst(where: str, burst: BurstResult) -> str:
    per_phone = ", ".join(
        f"{p.acks}/{p.sent}"
        + (f" ({p.refused} refused by the relay)" if p.refused else "")
        + (" (its connection dropped)" if p.dropped else "")
        for p in burst.phones
    )
    executed = (
        "every input executed once"
        if burst.executed_once == len(burst.phones) * burst.commands_per_phone
        else f"{burst.executed_once} inputs executed once, {burst.never_executed} not within "
        "2 minutes of the last command (never acked either: commands the daemon did not get)"
    )
    return (
        f"{where}, {len(burst.phones)} phones x {burst.commands_per_phone} commands: each phone "
        f"sent its `input` commands at a steady pace over {burst.send_seconds:.1f} s, each "
        f"phone in its own session (every input is a turn whose lines go live to all "
        f"{len(burst.phones)} phones); replies (input-ack) received per phone: {per_phone}; "
        f"the last after {burst.seconds:.1f} s; every reply live: "
        f"{'yes' if burst.every_reply_live else 'NO'}; the bridge's relay connection was "
        f"dropped {burst.daemon_disconnects} time(s); {executed}."
    )


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
        f"daemon (test relay), memory: VmRSS from /proc/<pid>/status. Idle (started, one phone "
        f"paired, no session, read after {IDLE_SETTLE:g} s): {idle:.1f} MiB (aim ≤ "
        f"{AIM_IDLE_MIB:g} MiB: {_met(idle <= AIM_IDLE_MIB)}), against {imports_only:.1f} MiB "
        f"for a Python process that only imports {', '.join(IMPORTS_ONLY)} (same interpreter, "
        f"read at the same moment): running adds {idle - imports_only:.1f} MiB. Loaded: "
        f"{memory.sessions} sessions, each given a `lines N` turn of "
        f"{memory.entries_per_session:,} entries, {MEMORY_CONCURRENCY} turns at a time, with "
        "the phone paired and online (every entry is sealed and published live): the store's "
        f"transcripts table held {memory.stored_rows:,} rows (checked with sqlite3: "
        f"{checked}), written in {memory.load_seconds:.1f} s{rate}; RSS {loaded:.1f} MiB once "
        f"the phone had heard nothing for {LOADED_SETTLE:g} s ({loaded - idle:+.1f} MiB over "
        f"idle{per_entry}), peak (VmHWM) {_mib(memory.loaded_peak_kib):.1f} MiB. The relay "
        f"dropped the daemon's connection {memory.daemon_disconnects} time(s) during the load: "
        f"{memory.not_delivered:,} live events no relay took (sealed and sent, not retried), "
        f"so the phone got {memory.live_received:,} of the {total:,} entries live; the phone's "
        f"own connection {dropped}.{failed_reads}"
    ]
