"""The chaos scenario: start the world, run the workload through the fault plan, check, report.

Order of a run:

1. start relays A, B, C and the daemon (scripted agent), pair the three phones, create three
   sessions;
2. until ``commands`` commands are sent: apply the plan's actions that are due, send one command
   of the mix, and every few commands wait until the observer phone heard an answer for all but
   the last ``in_flight`` inputs (and sample the daemon's RSS);
3. end every fault (relays up, phone online, clocks right), then wait until every input was
   answered and ran, refresh the heartbeat, sync every live session on both phones, let the
   traffic settle, and snapshot the daemon's state; stop it with SIGTERM;
4. check the invariants (:mod:`tests.chaos.invariants`) and build the report.

A step or a fault that raises is recorded as an incident (a violation) and the run goes on: one
broken fault must not hide what the rest of the run would show. The work directory (relays'
LMDB, the daemon's home and log, the phones' state files) is kept when the run fails.
"""

from __future__ import annotations

import asyncio
import random
import resource
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bridge.protocol import RefreshSessionsCommand
from tests.chaos.faults import FaultInjector
from tests.chaos.invariants import Snapshot, check_all
from tests.chaos.ledger import Expect, Ledger, SessionTrack
from tests.chaos.plan import make_plan
from tests.chaos.report import ChaosReport
from tests.chaos.workload import Workload
from tests.chaos.world import World
from tests.support.phone_sync import SyncResult

__all__ = ["ChaosConfig", "run_chaos"]

_INITIAL_SESSIONS = 3


@dataclass(frozen=True, slots=True)
class ChaosConfig:
    """One run's parameters (``python -m tests.chaos --help`` names them)."""

    commands: int = 10_000
    seed: int = 1
    work_dir: Path | None = None
    keep: bool = False
    """Keep the work directory even when every invariant passed."""
    rss_limit_mb: int = 400
    in_flight: int = 30
    settle_every: int = 10
    progress: Callable[[str], None] | None = None


async def run_chaos(config: ChaosConfig) -> ChaosReport:
    """Run one chaos scenario and return its report (never raises for product behaviour)."""
    plan = make_plan(config.seed, config.commands)
    rng = random.Random(config.seed * 7919 + 1)  # independent of the plan's stream
    root = config.work_dir or Path(tempfile.mkdtemp(prefix="codedeck-chaos-"))
    say = config.progress or (lambda _text: None)
    started = time.monotonic()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu_before = usage.ru_utime + usage.ru_stime
    ledger = Ledger()
    world = await World.start(root)
    try:
        workload = Workload(world, ledger, rng)
        injector = FaultInjector(world, ledger, workload, rng)
        for _ in range(_INITIAL_SESSIONS):
            session_id = await world.create_session(world.phones["P1"])
            ledger.sessions[session_id] = SessionTrack(session_id, 0)
        say(f"world up in {time.monotonic() - started:.1f} s: {root}")
        actions = list(plan)
        position = 0
        next_settle = config.settle_every
        next_progress = 500
        while ledger.commands < config.commands:
            while position < len(actions) and actions[position].at <= ledger.commands:
                action = actions[position]
                position += 1
                try:
                    await injector.apply(action)
                except Exception as exc:
                    ledger.incident(f"fault {action.kind.value} {action.phase} failed: {exc!r}")
                    if not world.daemon.running:
                        await injector.start_daemon()
            try:
                await injector.tick()
                await injector.ensure_daemon()
                await workload.step()
            except Exception as exc:
                ledger.incident(f"step failed: {exc!r}")
            if ledger.commands >= next_settle:
                next_settle = ledger.commands + config.settle_every
                await workload.settle(config.in_flight, timeout=30)
                _sample(world, ledger)
            if ledger.commands >= next_progress:
                next_progress += 500
                say(
                    f"{ledger.commands} commands, {sum(ledger.faults.values())} faults, "
                    f"{len(ledger.incidents)} incidents, {time.monotonic() - started:.0f} s"
                )
        for action in actions[position:]:  # stretch ends planned past the last command
            await injector.apply(action)
        await injector.finish()
        say("workload done; final checks")
        snapshot = await _final_phase(world, ledger, workload, config)
        verdicts = check_all(ledger, snapshot, world.phones, workload.trackers)
        dedup = sum(
            1
            for r in snapshot.log_records
            if "duplicate (already processed)" in str(r.get("message", ""))
        )
    finally:
        await world.close()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    report = ChaosReport(
        config.seed,
        config.commands,
        time.monotonic() - started,
        ledger,
        verdicts,
        root,
        dedup,
        usage.ru_utime + usage.ru_stime - cpu_before,
    )
    (root / "report.txt").write_text(report.render(fault_log=True, limit=None) + "\n")
    if report.ok and not config.keep and config.work_dir is None:
        shutil.rmtree(root, ignore_errors=True)
    return report


def _sample(world: World, ledger: Ledger) -> None:
    """The daemon's RSS and CPU time, now."""
    if (kb := world.rss_kb()) is not None:
        ledger.rss_samples.append((ledger.commands, kb))
    if (cpu := world.cpu_seconds()) is not None:
        ledger.daemon_cpu[cpu[0]] = cpu[1]


async def _final_phase(
    world: World, ledger: Ledger, workload: Workload, config: ChaosConfig
) -> Snapshot:
    """Everything healthy: wait for the answers, refresh, sync, then snapshot and stop."""
    await workload.settle(0, timeout=120)
    await workload.wait_executed(list(ledger.sessions), timeout=60)
    main = workload.phone("P1")
    tracker = workload.trackers["P1"]
    waiting = [
        r.input_id
        for r in ledger.inputs.values()
        if r.expect.reply and r.input_id not in workload.overdue  # overdue: reported already
    ]

    def caught_up() -> bool:
        tracker.update()
        return all(tracker.answered(i) for i in waiting)

    try:
        await main.wait_until(caught_up, timeout=60, what="P1 catching up on every answer")
    except TimeoutError as exc:
        ledger.incident(f"P1 never heard every answer: {exc}")
    marks = {name: workload.phone(name).mark() for name in ("P1", "P2")}
    await workload.send("P1", RefreshSessionsCommand(), "refresh-sessions")
    for name, mark in marks.items():
        try:
            await workload.phone(name).wait_for("sessions", after=mark, timeout=60)
        except TimeoutError as exc:
            ledger.incident(f"{name}: no heartbeat after the final refresh: {exc}")
    syncs: dict[tuple[str, str], SyncResult | None] = {}
    errors: list[str] = []
    for session_id in ledger.live_sessions():
        for name in ("P1", "P2"):
            syncs[(name, session_id)] = await _final_sync(workload, name, session_id, errors)
    for name in ("P1", "P2"):
        try:
            await workload.phone(name).quiesce(idle=2.0, timeout=90)
        except TimeoutError as exc:
            ledger.incident(f"{name} still receiving at the end: {exc}")
    # Every relay is up: the outbox must drain (a reply leaves it once every relay holds it).
    # Retries after the last reconnects may still be under way; give them a moment.
    deadline = time.monotonic() + 30
    while world.query("SELECT count(*) FROM outbox")[0][0] and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
    _sample(world, ledger)
    live = ledger.live_sessions()
    daemon_sessions = [str(s["sessionId"]) for s in await world.daemon.call("sessions.list")]
    pending = world.query("SELECT count(*) FROM inbox WHERE state = 'pending'")[0][0]
    snapshot = Snapshot(
        executions=world.daemon.executions(),
        executed=world.executed_texts(),
        transcripts={sid: world.daemon.transcript(sid) for sid in live},
        daemon_sessions=daemon_sessions,
        syncs=syncs,
        processed_rows=world.query("SELECT count(*) FROM processed")[0][0],
        outbox_rows=world.query("SELECT count(*) FROM outbox")[0][0],
        pending_inbox=pending,
        log_records=[],
        rss_limit_kb=config.rss_limit_mb * 1024,
        sync_errors=errors,
    )
    snapshot.machine_online = {n: workload.phone(n).machine.online for n in ("P1", "P2")}
    snapshot.stop_status = await world.daemon.stop(timeout=60)
    snapshot.log_records = world.log_records()
    ignored = sum(1 for r in ledger.inputs.values() if r.expect is Expect.IGNORED)
    if config.progress is not None:
        config.progress(f"snapshot taken ({ignored} inputs expected to be ignored)")
    return snapshot


async def _final_sync(
    workload: Workload, name: str, session_id: str, errors: list[str]
) -> SyncResult | None:
    """A fresh sync of one session (twice at most, as a phone retries a sync that went quiet).

    Mid-run syncs may have lost their ``sync-begin`` (a daemon killed between the request and
    the answer, a phone offline: sync traffic is best effort by design); the phone simulator's
    tracker would then wait for it forever, so the final sync starts a new one.
    """
    phone = workload.phone(name)
    for attempt in (1, 2):
        phone.syncs.pop(session_id, None)
        try:
            return await phone.sync(session_id, timeout=45)
        except TimeoutError as exc:
            errors.append(f"{name}: final sync of {session_id[:8]}, attempt {attempt}: {exc}")
    return None
