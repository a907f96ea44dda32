"""The daemon benchmark's load cases, each on a daemon and a relay of its own (5 and 7).

They put the most traffic through a daemon, so each gets a fresh daemon on its own home (and,
on the test relay, its own relay), after the one-daemon cases of
:mod:`tests.bench.daemon_scenarios`: those keep the machine to themselves, and these start from
a known state. :func:`tests.bench.bench_daemon.measure_daemon` runs :func:`measure_fanout` for
each relay, and :func:`measure_memory` on the test relay.

5. **live output to three phones**: three paired phones, one turn of :data:`FANOUT_ENTRIES`
   entries, as many as case 1's turn; every phone must receive every seq of it, live or by one
   sync, as in case 1, and each phone's entries/s are compared with case 1's one phone (aim:
   each phone at least 0.8x one phone). The daemon publishes three NIP-44 copies of every entry,
   15,000 events on its one connection (LocalRelay used to hang up after about 6,000 a minute,
   which the relay's drops count shows if it still does).
7. **memory**: the daemon's ``VmRSS`` (``/proc/<pid>/status``) idle (started, one phone paired,
   no session, settled) next to a Python process that only imports the daemon's modules, then
   loaded: 20 sessions each given ``lines N`` so that each holds 5,000 entries (at most
   :data:`MEMORY_CONCURRENCY` turns at a time), with the phone paired and online (every entry is
   sealed and published, as with a user watching), read after the store holds every row and the
   daemon went quiet. The store is then checked with ``sqlite3``: every session must hold
   exactly seqs 1 to 5,000. LocalRelay hangs up on the daemon every ~6,000 events meanwhile
   (100,000 live events); what that cost (the daemon's ``not delivered`` log lines, entries the
   phone got live) and whether the phone's own connection dropped are reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bridge.protocol import InputCommand
from tests.bench.daemon_scenarios import OUTPUT_ENTRIES
from tests.bench.daemon_support import (
    TEST_RELAY,
    TURN_OVERHEAD_ENTRIES,
    DaemonNumbers,
    PhoneDelivery,
    TimedPhone,
    await_turn,
    create_session,
    delivery,
    pair,
    phone_problems,
    relay_drops,
    testbed,
)
from tests.support.daemon import DaemonProcess

__all__ = [
    "FANOUT_ENTRIES",
    "FANOUT_PHONES",
    "IDLE_SETTLE",
    "IMPORTS_ONLY",
    "LOADED_SETTLE",
    "MEMORY_CONCURRENCY",
    "MEMORY_ENTRIES",
    "MEMORY_SESSIONS",
    "FanoutResult",
    "MemoryResult",
    "measure_fanout",
    "measure_memory",
]

FANOUT_PHONES = 3
FANOUT_ENTRIES = OUTPUT_ENTRIES
"""Entries of the three-phone turn: as many as the one-phone turn, to each phone."""
MEMORY_SESSIONS = 20
MEMORY_ENTRIES = OUTPUT_ENTRIES
"""Entries each loaded session holds (the store's default ``transcript_keep_last`` is 5,000)."""
IDLE_SETTLE = 2.0  # seconds between pairing and reading the idle RSS: heartbeats, lazy imports
LOADED_SETTLE = 2.0  # seconds of quiet at the phone before reading the loaded RSS
MEMORY_CONCURRENCY = 4
"""Turns of the load at a time. The scripted agent emits entries faster than the engine stores
them, so with 20 turns at once up to 100,000 entries would wait in the daemon's input queue
(it never drops them: an earlier bounded queue did, which this benchmark found), and the
loaded RSS would measure that transient backlog rather than what 20 stored sessions cost.
4 turns keep the worst case at 20,000 queued."""
LOAD_POLL = 0.25  # seconds between two counts of the store's rows during the load
LOAD_STALL = 15.0  # the store gained no row for this long: the load is over, complete or not
LOAD_TIMEOUT = 900.0
IMPORTS_ONLY = ("bridge.cli.main", "bridge.runtime.daemon", "bridge.agents.scripted")
"""What the idle RSS baseline imports: the daemon's entry point, its runtime and its agent."""
_NOT_DELIVERED = re.compile(r"- output [0-9a-f]{8} not delivered")
"""What the daemon's sender logs for each live-output event no relay took (never retried)."""
_REPO = Path(__file__).resolve().parents[2]
_HIGHEST_SEQ = "SELECT MAX(seq) FROM transcripts WHERE session_id = ?"
_READ_RETRIES = 10  # reads of the store that may fail in one load (and are retried)


# --- results ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FanoutResult:
    requested: int
    """Entries the turn was asked to produce (the user's input and the turn's end included)."""
    entries: int
    """Entries of the turn in the daemon's store."""
    seconds: float
    """From publishing the input to the last live arrival at any phone."""
    deliveries: tuple[PhoneDelivery, ...]
    daemon_disconnects: int
    phones_dropped: int
    """Phones whose own relay connection was dropped during the turn."""

    @property
    def phones(self) -> int:
        return len(self.deliveries)

    @property
    def live_entries(self) -> int:
        """Entries that reached every phone live (the slowest phone's count)."""
        return min(d.live for d in self.deliveries)

    @property
    def per_phone_rate(self) -> float:
        """The slowest phone's entries/s: its live entries until its own last arrival."""
        return min(d.live / d.last_arrival for d in self.deliveries)

    @property
    def events(self) -> int:
        """Live events the phones received in all: one encrypted copy per phone and entry."""
        return sum(d.live for d in self.deliveries)

    @property
    def lost_live(self) -> int:
        return sum(d.lost for d in self.deliveries)


@dataclass(frozen=True, slots=True)
class MemoryResult:
    imports_only_kib: int
    """VmRSS of a Python process that only imported :data:`IMPORTS_ONLY`."""
    idle_kib: int
    """The daemon's VmRSS: started, one phone paired, no session, settled."""
    loaded_kib: int
    """The daemon's VmRSS after the load, once the store held every row and it went quiet."""
    loaded_peak_kib: int
    """The daemon's VmHWM (peak RSS) at that moment."""
    sessions: int
    entries_per_session: int
    stored_rows: int
    """Rows of the loaded sessions in the store's ``transcripts`` table."""
    complete_sessions: int
    """Sessions holding exactly the seqs 1 to ``entries_per_session``."""
    load_seconds: float
    """From publishing the inputs until the store held every row (or stopped growing)."""
    live_received: int
    """Entries of the load that reached the phone live."""
    phone_dropped: bool
    """Whether the phone's own relay connection was dropped during the load."""
    daemon_disconnects: int
    not_delivered: int
    """Events the daemon logged as taken by no relay during the load."""
    failed_reads: int
    """Reads of the store that failed (``sqlite3.DatabaseError``) and were retried."""


# --- case 6: three phones -----------------------------------------------------------------------


async def _fanout(
    daemon: DaemonProcess, phones: Sequence[TimedPhone], session: str, entries: int
) -> FanoutResult:
    """One turn of `entries` entries, live to every phone (case 5); the first phone asks."""
    sender = phones[0]
    seq_before = max(sender.transcript(session), default=0)
    lines = entries - TURN_OVERHEAD_ENTRIES
    event = sender.build_command(InputCommand(sessionId=session, text=f"lines {lines}"))
    marks = [phone.mark() for phone in phones]
    connections = [phone.connections() for phone in phones]
    log_offset = daemon.log_size()
    start = time.perf_counter()
    await sender.publish_event(event)
    for phone, mark in zip(phones, marks, strict=True):
        await await_turn(phone, mark)  # arrivals are stamped meanwhile at every phone
    stored = await asyncio.to_thread(daemon.transcript, session)
    wanted = range(seq_before + 1, max(stored) + 1)
    dropped = sum(
        1 for phone, was in zip(phones, connections, strict=True) if phone.connections() != was
    )
    deliveries = [
        await delivery(phone, session, wanted, mark, start)
        for phone, mark in zip(phones, marks, strict=True)
    ]
    return FanoutResult(
        requested=entries,
        entries=sum(1 for seq in stored if seq > seq_before),
        seconds=max(d.last_arrival for d in deliveries),
        deliveries=tuple(deliveries),
        daemon_disconnects=relay_drops(daemon.log_since(log_offset)),
        phones_dropped=dropped,
    )


# --- case 7: memory -----------------------------------------------------------------------------


def _proc_kib(pid: int, name: str = "VmRSS") -> int:
    """``VmRSS`` (resident now) or ``VmHWM`` (its peak) of a process, in KiB (Linux ``/proc``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key == name:
            return int(value.split()[0])
    raise RuntimeError(f"no {name} in /proc/{pid}/status")


class _ImportsOnly:
    """The idle RSS baseline: a Python process that imports the daemon's modules, then waits.

    Same interpreter, ``PYTHONPATH`` and working directory as the daemon. It prints a line once
    its imports are done and exits when its stdin closes, so it lives exactly as long as the
    measurement needs it and cannot outlive the benchmark.
    """

    def __init__(self, modules: Sequence[str] = IMPORTS_ONLY) -> None:
        self.modules = tuple(modules)
        self._proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        imports = ", ".join(("sys", *self.modules))
        code = f"import {imports}; print('imported', flush=True); sys.stdin.read()"
        env = dict(os.environ)
        env["PYTHONPATH"] = str(_REPO)
        self._proc = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=_REPO,
            text=True,
        )

    async def imported(self, timeout: float = 60.0) -> None:
        """Wait for the process to report its imports done."""
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        async with asyncio.timeout(timeout):
            line = await asyncio.to_thread(proc.stdout.readline)
        if line.strip() != "imported":
            raise RuntimeError(f"the imports-only process failed (exit status {proc.poll()})")

    def rss_kib(self) -> int:
        assert self._proc is not None
        return _proc_kib(self._proc.pid)

    def stop(self) -> None:
        """Close its stdin (it exits), ``kill`` it if it does not; idempotent, never raises."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _stored_sessions(home: Path) -> dict[str, tuple[int, int, int]]:
    """Session id → (rows, lowest seq, highest seq) of the store's ``transcripts`` table."""
    with contextlib.closing(sqlite3.connect(home / "bridge.db")) as conn:
        rows = conn.execute(
            "SELECT session_id, COUNT(*), MIN(seq), MAX(seq) FROM transcripts GROUP BY session_id"
        ).fetchall()
    return {str(sid): (int(n), int(low), int(high)) for sid, n, low, high in rows}


def _stored_high(home: Path, ids: Sequence[str]) -> dict[str, int]:
    """Session id → highest stored seq, for `ids`: one index lookup each, cheap while loading."""
    with contextlib.closing(sqlite3.connect(home / "bridge.db")) as conn:
        return {sid: int(conn.execute(_HIGHEST_SEQ, (sid,)).fetchone()[0] or 0) for sid in ids}


async def _run_turns(
    phone: TimedPhone, home: Path, ids: Sequence[str], entries: int
) -> tuple[float, int]:
    """Give each session a turn of `entries` entries, :data:`MEMORY_CONCURRENCY` at a time.

    A session's turn is over once the store holds its seq `entries` (the turn's last entry;
    seqs are given as entries are stored, so an entry lost before the store leaves the turn
    short of it), and the next session's input is published then. Stops early when the store
    gains no row for :data:`LOAD_STALL` seconds (entries lost, or the daemon stuck): the
    caller's count then falls short. The store is read in WAL mode, which never blocks the
    daemon's commits; a read that fails is retried at the next poll. Returns the seconds from
    the first input to the poll that saw the last row, and how many reads failed.
    """
    lines = entries - TURN_OVERHEAD_ENTRIES
    waiting = list(ids)
    running: set[str] = set()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + LOAD_TIMEOUT
    start = time.perf_counter()
    rows, grown_at, failed_reads = 0, start, 0
    finished = 0  # rows of the sessions whose turn is over
    while (waiting or running) and loop.time() < deadline:
        while waiting and len(running) < MEMORY_CONCURRENCY:
            sid = waiting.pop(0)
            command = InputCommand(sessionId=sid, text=f"lines {lines}")
            await phone.publish_event(phone.build_command(command))
            running.add(sid)
        await asyncio.sleep(LOAD_POLL)
        now = time.perf_counter()
        try:
            highs = await asyncio.to_thread(_stored_high, home, sorted(running))
        except sqlite3.DatabaseError:
            failed_reads += 1
        else:
            done = {sid for sid, high in highs.items() if high >= entries}
            stored = finished + sum(highs.values())
            if stored != rows:
                rows, grown_at = stored, now
            finished += sum(highs[sid] for sid in done)
            running -= done
        if now - grown_at > LOAD_STALL:
            break
    return grown_at - start, failed_reads


async def _load(
    daemon: DaemonProcess,
    phone: TimedPhone,
    sessions: int,
    entries: int,
    *,
    imports_only_kib: int,
    idle_kib: int,
) -> MemoryResult:
    """The loaded half of case 7: every session's turn, then the RSS and the store."""
    assert daemon.proc is not None
    ids = [await create_session(phone) for _ in range(sessions)]
    log_offset = len(daemon.log_text)
    connections = phone.connections()
    mark = phone.mark()
    seconds, failed_reads = await _run_turns(phone, daemon.home, ids, entries)
    # Settled: the daemon's send queue has drained once the phone has heard nothing for a while.
    with contextlib.suppress(TimeoutError):
        await phone.quiesce(LOADED_SETTLE, timeout=120)
    loaded = _proc_kib(daemon.proc.pid)
    peak = _proc_kib(daemon.proc.pid, "VmHWM")
    counts = None
    while counts is None:
        try:
            counts = await asyncio.to_thread(_stored_sessions, daemon.home)
        except sqlite3.DatabaseError:
            failed_reads += 1
            if failed_reads > _READ_RETRIES:
                raise
            await asyncio.sleep(LOAD_POLL)
    log = daemon.log_text[log_offset:]
    wanted = set(ids)
    live = {
        (item.message.sessionId, item.message.seq)
        for item in phone.messages("output", lambda m: m.sessionId in wanted, after=mark)
    }
    return MemoryResult(
        imports_only_kib=imports_only_kib,
        idle_kib=idle_kib,
        loaded_kib=loaded,
        loaded_peak_kib=peak,
        sessions=sessions,
        entries_per_session=entries,
        stored_rows=sum(counts.get(sid, (0, 0, 0))[0] for sid in ids),
        complete_sessions=sum(1 for sid in ids if counts.get(sid) == (entries, 1, entries)),
        load_seconds=seconds,
        live_received=len(live),
        phone_dropped=phone.connections() != connections,
        daemon_disconnects=relay_drops(log),
        not_delivered=len(_NOT_DELIVERED.findall(log)),
        failed_reads=failed_reads,
    )


# --- the two daemons ----------------------------------------------------------------------------


async def measure_fanout(
    numbers: DaemonNumbers, directory: Path, relay_kind: str, phones: int, entries: int
) -> FanoutResult:
    """Case 5, on a daemon of its own: its connection carries nothing but this case."""
    async with contextlib.AsyncExitStack() as stack:
        bed = await testbed(stack, directory, relay_kind)
        await bed.daemon.start()
        paired: list[TimedPhone] = []
        for index in range(phones):
            phone = await pair(bed.daemon, bed.relay_url, f"Fan-out phone {index + 1}")
            stack.push_async_callback(phone.close)
            paired.append(phone)
        session = await create_session(paired[0])
        result = await _fanout(bed.daemon, paired, session, entries)
        phone_problems(numbers, paired)
        return result


async def measure_memory(
    numbers: DaemonNumbers,
    directory: Path,
    sessions: int,
    entries: int,
    progress: Callable[[str], None],
) -> MemoryResult:
    """Case 7, on a daemon of its own: idle RSS next to the imports-only process, then loaded."""
    async with contextlib.AsyncExitStack() as stack:
        bed = await testbed(stack, directory, TEST_RELAY)
        baseline = _ImportsOnly()
        stack.callback(baseline.stop)
        baseline.start()
        await bed.daemon.start()
        assert bed.daemon.proc is not None
        phone = await pair(bed.daemon, bed.relay_url, "Memory phone")
        stack.push_async_callback(phone.close)
        await baseline.imported()
        await asyncio.sleep(IDLE_SETTLE)
        imports_only, idle = baseline.rss_kib(), _proc_kib(bed.daemon.proc.pid)
        baseline.stop()
        progress(f"memory, {sessions} sessions x {entries:,} entries")
        result = await _load(
            bed.daemon, phone, sessions, entries, imports_only_kib=imports_only, idle_kib=idle
        )
        phone_problems(numbers, [phone])
        return result
