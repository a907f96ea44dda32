"""The real-CLI chaos scenario: start the world, run the rounds of the kill plan, check, report.

Order of a run:

1. start the relay, the mock API and the daemon (real Claude Code), pair the phone, open the two
   sessions (``default``, ``acceptEdits``), start the phone's card answerer, and settle one input
   per session (the CLIs are up);
2. for each round of the plan: now and then swap the sessions' modes (the phone changes modes
   too), apply its kill point (:mod:`.faults`), then send an input to every
   session whose turn the kill may have cut, and a few more of the mix (back to back, so some
   arrive while a turn runs), and settle: every input acknowledged and its turn done or
   reported interrupted;
3. settle everything, sync each session afresh, let the traffic end, snapshot what happened
   (:mod:`.evidence`), stop the daemon with SIGTERM and look for anything left running;
4. check the invariants (:mod:`.invariants`) and build the report.

A round that raises is an incident (a violation) and the run goes on. The work directory is kept
when the run fails (and with ``keep``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
import resource
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bridge.host.layout import host_paths
from tests.chaos.cli import procs
from tests.chaos.cli.evidence import Snapshot, read_cli_record, store_entries
from tests.chaos.cli.faults import Injector
from tests.chaos.cli.invariants import check_all
from tests.chaos.cli.ledger import Ledger
from tests.chaos.cli.model import DEFAULT_LATENCY
from tests.chaos.cli.observe import PhoneWatch
from tests.chaos.cli.plan import KillPoint, make_plan
from tests.chaos.cli.report import CliChaosReport
from tests.chaos.cli.workload import Workload
from tests.chaos.cli.world import SESSION_MODES, World
from tests.support.phone_sync import SyncResult

__all__ = ["CliChaosConfig", "run_cli_chaos"]

_LEFTOVER_WAIT = 15.0


@dataclass(frozen=True, slots=True)
class CliChaosConfig:
    """One run's parameters (``python -m tests.chaos.cli --help`` names them)."""

    kills: int = 120
    seed: int = 1
    points: tuple[KillPoint, ...] | None = None
    """Only these kill points (None: all of them)."""
    work_dir: Path | None = None
    keep: bool = False
    """Keep the work directory even when every invariant passed."""
    filler: tuple[int, int] = (0, 2)
    """Inputs of the mix sent after each round's kill (uniform in this range)."""
    mode_swap_rate: float = 0.15
    """Share of rounds that start by swapping the sessions' modes (``default`` ↔ ``acceptEdits``)."""
    model_latency: float = DEFAULT_LATENCY
    """Seconds the chaos model waits before answering a new prompt (:mod:`.model`)."""
    settle_timeout: float = 60.0
    progress: Callable[[str], None] | None = None


async def run_cli_chaos(config: CliChaosConfig) -> CliChaosReport:
    """Run one scenario and return its report (never raises for product behaviour)."""
    plan = make_plan(config.seed, config.kills, config.points)
    rng = random.Random(config.seed * 7919 + 2)  # independent of the plan's stream
    root = config.work_dir or Path(tempfile.mkdtemp(prefix="codedeck-chaos-cli-"))
    say = config.progress or (lambda _text: None)
    started = time.monotonic()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu_before = usage.ru_utime + usage.ru_stime
    ledger = Ledger()
    tree = _tree_digest()
    world = await World.start(root, model_latency=config.model_latency)
    answerer: asyncio.Task[None] | None = None
    try:
        for session_id, mode in zip(await world.open_sessions(), SESSION_MODES, strict=True):
            ledger.sessions[session_id] = mode
        watch = PhoneWatch(world.require_phone())
        workload = Workload(world, ledger, watch, rng)
        injector = Injector(world, ledger, workload)
        answerer = asyncio.create_task(workload.answer_cards(), name="card-answerer")
        for session_id in world.sessions:
            await workload.send(session_id, note="warm-up")
        await workload.settle(config.settle_timeout)
        say(f"world up in {time.monotonic() - started:.1f} s: {root}")
        for number, point in enumerate(plan, 1):
            workload.round = ledger.rounds = number
            await _round(injector, workload, ledger, point, config)
            if answerer.done():
                ledger.incident(number, f"the card answerer stopped: {answerer.exception()!r}")
                answerer = asyncio.create_task(workload.answer_cards(), name="card-answerer")
            if number % 10 == 0 or number == len(plan):
                say(
                    f"round {number}/{len(plan)}: {len(ledger.inputs)} inputs, "
                    f"{len(ledger.kills)} kills, {len(ledger.incidents)} incidents, "
                    f"{time.monotonic() - started:.0f} s"
                )
        say("rounds done; final checks")
        await injector.ensure_daemon()
        snapshot = await _final_phase(world, workload, config)
        verdicts = check_all(
            ledger,
            snapshot,
            watch,
            world.require_phone(),
            sorted(set(plan), key=list(KillPoint).index),
        )
    finally:
        if answerer is not None:
            answerer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await answerer
        await world.close()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    report = CliChaosReport(
        config.seed,
        config.kills,
        time.monotonic() - started,
        ledger,
        verdicts,
        root,
        _cli_version(),
        world.mock.call_count,
        config.model_latency,
        usage.ru_utime + usage.ru_stime - cpu_before,
        tree if _tree_digest() == tree else f"{tree} -> {_tree_digest()} (changed during the run!)",
    )
    (root / "report.txt").write_text(report.render(fault_log=True, limit=None) + "\n")
    if report.ok and not config.keep and config.work_dir is None:
        shutil.rmtree(root, ignore_errors=True)
    return report


async def _round(
    injector: Injector, workload: Workload, ledger: Ledger, point: KillPoint, config: CliChaosConfig
) -> None:
    number = workload.round
    try:
        await injector.ensure_daemon()
        if workload.rng.random() < config.mode_swap_rate:
            await workload.swap_modes()
        await injector.apply(point)
    except Exception as exc:
        ledger.incident(number, f"{point.value} failed: {exc!r}")
        if not injector.world.daemon.running:
            await injector.start_daemon()
    try:
        for session_id in sorted(injector.cut_sessions):
            await workload.send(session_id, note="after the cut")
        count = workload.rng.randint(*config.filler)
        if count and workload.rng.random() < 0.3:
            session_id = workload.rng.choice(workload.sessions)
            await workload.send(session_id, slow=round(workload.rng.uniform(0.3, 1.0), 2))
        await workload.send_some(count)
        await workload.settle(config.settle_timeout)
    except Exception as exc:
        ledger.incident(number, f"settling failed: {exc!r}")


async def _final_phase(world: World, workload: Workload, config: CliChaosConfig) -> Snapshot:
    """Everything settled: sync afresh, snapshot, stop, look for leftovers."""
    await workload.settle(max(config.settle_timeout, 120.0))
    phone = world.require_phone()
    syncs: dict[str, SyncResult | None] = {}
    errors: list[str] = []
    for session_id in world.sessions:
        syncs[session_id] = await _final_sync(world, session_id, errors)
    with contextlib.suppress(TimeoutError):
        await phone.quiesce(idle=2.0, timeout=60)
    daemon = world.daemon
    host_logs: dict[str, str] = {}
    for session_id in world.sessions:
        with contextlib.suppress(OSError):
            text = host_paths(world.home, session_id).log.read_text(errors="replace")
            host_logs[session_id] = text
            (world.root / f"host-{session_id[:8]}.log").write_text(text)
    snapshot = Snapshot(
        marks=world.ledger_marks(),
        store={s: store_entries(daemon.transcript(s)) for s in world.sessions},
        phone={s: dict(phone.transcript(s)) for s in world.sessions},
        syncs=syncs,
        cli=read_cli_record(world.config_dir),
        log_records=[],
        host_logs=host_logs,
        sync_errors=errors,
        live_hosts_before_stop=len(daemon.host_pids()),
    )
    try:
        snapshot.stop_status = await daemon.stop(timeout=60)
    except Exception as exc:
        errors.append(f"the final SIGTERM did not stop the daemon: {exc!r}")
        daemon.kill()
    snapshot.log_records = world.log_records()
    marker = str(world.config_dir)
    deadline = time.monotonic() + _LEFTOVER_WAIT
    while procs.processes_with_env("CLAUDE_CONFIG_DIR", marker) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    for pid in procs.processes_with_env("CLAUDE_CONFIG_DIR", marker):
        snapshot.leftovers.append(f"pid {pid}: {' '.join(procs.command_line(pid))[:120]}")
        procs.kill(pid)
    return snapshot


async def _final_sync(world: World, session_id: str, errors: list[str]) -> SyncResult | None:
    """A fresh sync of one session (twice at most, as a phone retries a sync that went quiet)."""
    phone = world.require_phone()
    for attempt in (1, 2):
        phone.syncs.pop(session_id, None)
        try:
            return await phone.sync(session_id, timeout=60)
        except TimeoutError as exc:
            errors.append(f"final sync of {session_id[:8]}, attempt {attempt}: {exc}")
    return None


def _tree_digest() -> str:
    """``<HEAD> + bridge/ <digest>``: which code ran (the tree may hold uncommitted changes)."""
    repo = Path(__file__).resolve().parents[3]
    digest = hashlib.sha256()
    for path in sorted((repo / "bridge").rglob("*.py")):
        digest.update(path.relative_to(repo).as_posix().encode())
        digest.update(path.read_bytes())
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        head = ""
    return f"{head or '?'} + bridge/ {digest.hexdigest()[:12]}"


def _cli_version() -> str:
    try:
        from claude_agent_sdk._cli_version import __cli_version__

        return str(__cli_version__)
    except ImportError:
        return ""
