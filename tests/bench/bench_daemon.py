"""The daemon's numbers (issues 4 and 15), side by side with their baselines in one run.

The real daemon (``codedeck-bridge run`` as a subprocess, scripted agent) and phone simulators,
through two relays in turn (:mod:`tests.bench.daemon_support`): the **test relay** (LocalRelay
with ``TCP_NODELAY``, a neutral relay) and the **embedded relay**, the daemon serving its own as
``make run`` starts it (what users run). :func:`measure_daemon` runs, for each relay:

1-4. on one daemon (:mod:`tests.bench.daemon_scenarios`): live output to one phone, full sync of
     50,000 entries to a fresh phone, ``input`` → ``input-ack`` latency against an echo bot
     (:mod:`tests.bench.echo_bot`), restart catch-up of 1,000 queued commands;
5.   on a daemon of its own (:mod:`tests.bench.daemon_load`): live output to three phones;
6.   on a daemon of its own (:mod:`tests.bench.daemon_burst`): four phones sending 800 commands
     each over ~30 s;

then, on the test relay only, 7: the daemon's memory, idle and with 20 sessions of 5,000 entries
(:mod:`tests.bench.daemon_load`). :mod:`tests.bench.daemon_report` turns the results into rows
and notes. Aims (issue 15): ack p50 ≤ 2x the echo bot's; live output ≥ 0.8x the relay alone; to
three phones each ≥ 0.8x one phone, zero loss; catch-up ≤ 2 s from the process start to the last
ack, each command once; full sync of 50,000 ≤ 2 s (to every entry at the phone); idle RSS ≤ 80
MiB.

A run where the daemon loses or repeats work fails, with what went wrong (the numbers it did
measure go to stderr), instead of printing numbers. The module takes about 7 minutes on a
shared 2-core machine. Run alone: ``python -m tests.bench daemon``; ``CDB_BENCH_RELAYS=embedded``
(or ``test``) runs one relay's cases only, and ``CDB_BENCH_MEMORY=0`` skips case 7 (neither is
for the numbers in docs/BENCHMARKS.md).
"""

from __future__ import annotations

import asyncio
import compileall
import contextlib
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from tests.bench.common import Row
from tests.bench.daemon_burst import (
    BURST_COMMANDS,
    BURST_PHONES,
    BURST_SECONDS,
    BurstResult,
    measure_burst,
)
from tests.bench.daemon_load import (
    FANOUT_ENTRIES,
    FANOUT_PHONES,
    MEMORY_ENTRIES,
    MEMORY_SESSIONS,
    FanoutResult,
    MemoryResult,
    measure_fanout,
    measure_memory,
)
from tests.bench.daemon_report import describe, rows
from tests.bench.daemon_scenarios import (
    CATCHUP_COMMANDS,
    CATCHUP_TIMEOUT,
    LATENCY_SAMPLES,
    OUTPUT_ENTRIES,
    SYNC_ENTRIES,
    measure_one_phone,
)
from tests.bench.daemon_support import (
    EMBEDDED_RELAY,
    TEST_RELAY,
    DaemonNumbers,
    RelayRun,
    run_case,
)

__all__ = ["measure_daemon", "notes", "run"]

_notes: list[str] = []
_REPO = Path(__file__).resolve().parents[2]
_RELAYS = {"test": TEST_RELAY, "embedded": EMBEDDED_RELAY}
FANOUT_ENTRIES_LOCAL_RELAY = OUTPUT_ENTRIES // FANOUT_PHONES
"""The three-phone turn on the test relay: a third as many entries, so that the daemon publishes
as many events as for one phone. LocalRelay hangs up on a connection after about 6,000 events a
minute; 15,000 would time its reconnects, not the daemon."""


async def measure_daemon(
    *,
    relays: tuple[str, ...] = (TEST_RELAY, EMBEDDED_RELAY),
    latency_samples: int = LATENCY_SAMPLES,
    output_entries: int = OUTPUT_ENTRIES,
    sync_entries: int = SYNC_ENTRIES,
    catchup_commands: int = CATCHUP_COMMANDS,
    catchup_timeout: float = CATCHUP_TIMEOUT,
    fanout_phones: int = FANOUT_PHONES,
    burst_phones: int = BURST_PHONES,
    burst_commands: int = BURST_COMMANDS,
    burst_seconds: float = BURST_SECONDS,
    memory_sessions: int = MEMORY_SESSIONS,
    memory_entries: int = MEMORY_ENTRIES,
    progress: Callable[[str], None] = lambda _: None,
    workdir: Path | None = None,
) -> DaemonNumbers:
    """Run the cases through each of `relays`, then the memory case; clean up.

    Args:
        sync_entries: lines of the fully synced session (0: skip the case).
        fanout_phones / burst_phones: phones of cases 5 and 6 (0: skip the case).
        memory_sessions: sessions of case 7 (0: skip it; skipped too without ``/proc``).
        workdir: an empty directory for the daemons' homes, logs and workspaces (one
            subdirectory per relay and case), kept afterwards (to read the logs); by default a
            temporary directory, removed.
    """
    numbers = DaemonNumbers()
    _byte_compile()
    with contextlib.ExitStack() as files:
        if workdir is None:
            workdir = Path(files.enter_context(tempfile.TemporaryDirectory(prefix="cdb-bench-")))
        for relay in relays:
            run = RelayRun(relay)
            numbers.runs.append(run)
            base = workdir / relay.replace(" ", "-")
            await measure_one_phone(
                numbers,
                run,
                base,
                latency_samples=latency_samples,
                output_entries=output_entries,
                sync_entries=sync_entries,
                catchup_commands=catchup_commands,
                catchup_timeout=catchup_timeout,
                progress=progress,
            )
            if fanout_phones:
                entries = FANOUT_ENTRIES if relay == EMBEDDED_RELAY else FANOUT_ENTRIES_LOCAL_RELAY
                progress(f"live output to {fanout_phones} phones ({relay})")
                run.fanout = await run_case(
                    numbers,
                    f"live output to {fanout_phones} phones{run.suffix}",
                    measure_fanout(numbers, base / "fanout", relay, fanout_phones, entries),
                )
            if burst_phones:
                progress(f"{burst_phones} phones x {burst_commands} commands ({relay})")
                run.burst = await run_case(
                    numbers,
                    f"{burst_phones} phones x {burst_commands} commands{run.suffix}",
                    measure_burst(
                        numbers, base / "burst", relay, burst_phones, burst_commands, burst_seconds
                    ),
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


def _byte_compile() -> None:
    """Byte-compile the daemon's packages first, as an installed package's are.

    Every case that restarts a daemon times it from its process start; with no cached bytecode
    (an environment with ``PYTHONDONTWRITEBYTECODE``, a fresh checkout) each start would compile
    every module again (measured: 0.3-0.5 s of a start on a shared 2-core machine), which says
    nothing about the daemon. Stale caches are harmless: Python checks them against the source.
    """
    for package in ("bridge", "store", "relaypolicy"):
        compileall.compile_dir(_REPO / package, quiet=1)


def _check(numbers: DaemonNumbers) -> list[str]:
    """What the daemon got wrong in this run (empty: every result is trustworthy)."""
    problems = list(numbers.problems)
    for run in numbers.runs:
        where = run.suffix
        output, sync, catchup = run.output, run.sync, run.catchup
        if output is not None and output.lost_live and not output.recovered_by_sync:
            problems.append(
                f"live output{where} lost {output.lost_live} entries and a sync did not recover"
            )
        if sync is not None and not (sync.complete and sync.matches_store):
            problems.append(
                f"full sync{where}: complete={sync.complete}, equal to the store="
                f"{sync.matches_store}"
            )
        if catchup is not None:
            if catchup.acks != catchup.commands or catchup.duplicate_acks:
                problems.append(
                    f"catch-up{where}: {catchup.acks}/{catchup.commands} acks, "
                    f"{catchup.duplicate_acks} duplicate(s)"
                )
            if catchup.executed_once != catchup.commands:
                problems.append(
                    f"catch-up{where}: {catchup.executed_once} inputs executed once, "
                    f"{catchup.executed_twice_or_more} more than once, "
                    f"{catchup.never_executed} never"
                )
        problems.extend(_fanout_problems(run.fanout, where))
        problems.extend(_burst_problems(run.burst, where))
    problems.extend(_memory_problems(numbers.memory))
    return problems


def _fanout_problems(fanout: FanoutResult | None, where: str) -> list[str]:
    if fanout is None:
        return []
    problems = []
    if fanout.entries != fanout.requested:
        problems.append(
            f"live output to {fanout.phones} phones{where}: the store holds {fanout.entries} of "
            f"the turn's {fanout.requested} entries"
        )
    for index, delivery in enumerate(fanout.deliveries, 1):
        if delivery.lost and not delivery.recovered_by_sync:
            problems.append(
                f"live output to {fanout.phones} phones{where}: phone {index} lost "
                f"{delivery.lost} entries and a sync did not recover them"
            )
    return problems


def _burst_problems(burst: BurstResult | None, where: str) -> list[str]:
    """Work run twice is a failure; a reply not live or a dropped connection is a row, not one."""
    if burst is None or not burst.executed_twice_or_more:
        return []
    return [
        f"{len(burst.phones)} phones x {burst.commands_per_phone} commands{where}: "
        f"{burst.executed_twice_or_more} inputs executed more than once"
    ]


def _memory_problems(memory: MemoryResult | None) -> list[str]:
    if memory is None or memory.complete_sessions == memory.sessions:
        return []
    return [
        f"memory load: {memory.complete_sessions} of {memory.sessions} sessions hold seqs 1 to "
        f"{memory.entries_per_session:,}; the store has {memory.stored_rows:,} of "
        f"{memory.sessions * memory.entries_per_session:,} rows "
        f"({memory.load_seconds:.0f} s after the inputs)"
    ]


def run() -> list[Row]:
    _notes.clear()
    chosen = os.environ.get("CDB_BENCH_RELAYS")  # see the module docstring
    relays = (
        tuple(_RELAYS[name.strip()] for name in chosen.split(","))
        if chosen
        else (TEST_RELAY, EMBEDDED_RELAY)
    )
    numbers = asyncio.run(
        measure_daemon(
            relays=relays,
            memory_sessions=0 if os.environ.get("CDB_BENCH_MEMORY") == "0" else MEMORY_SESSIONS,
            progress=lambda step: print(f"  daemon: {step}", file=sys.stderr, flush=True),
        )
    )
    problems = _check(numbers)
    described = describe(numbers)
    if problems:
        print("\n".join(described), file=sys.stderr)
        raise RuntimeError("; ".join(problems))
    _notes.extend(described)
    return rows(numbers)


def notes() -> list[str]:
    return list(_notes)
