"""What a session host costs, and how fast a restarted daemon is back: three measurements.

- **Session start, with and without a host.** The same driver started in this process (its
  ``Ready``) against the same driver started in a host process by the daemon's launcher (spawn,
  launch spec, journal, socket, ``welcome``, the ``Ready`` record over the socket) — for the
  real Claude Code CLI against the mock API, and for the scripted agent. The difference is what
  the host adds to a session's start.
- **Per-host RSS**, besides the agent's own process: a host running the scripted agent, and a
  host running Claude Code (the CLI, its child, not counted), against a Python interpreter that
  imports nothing.
- **Restart → first entry produced while the daemon was down, on the phone.** The scripted agent
  waits 1 s and then writes 100 lines; the daemon is killed with ``kill -9`` right after handing
  the inputs over, and started again 1.5 s later: the time from its start to the phone's first of
  those lines, against the time from the same start to the first heartbeat (the floor of any
  restart) in the same run.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bridge.agents.claude import claude_driver_factory
from bridge.agents.scripted import scripted_driver_factory
from bridge.host.driver import DriverFactory, DriverSpec
from bridge.host.events import Ready
from bridge.host.launch import LaunchSpec
from bridge.host.wire import EventRecord, Hello
from bridge.protocol import InputCommand
from bridge.runtime.hosts.launcher import HostLauncher, stop_host
from bridge.runtime.hosts.link import HostLink
from bridge.sandbox import SandboxPolicy, check_sandbox, hidden_paths, plan_policy, survey
from tests.bench.common import Row
from tests.host.fakes import FakeServices
from tests.integration.conftest import pair_phone
from tests.integration.test_daemon_sessions import create_session
from tests.support.daemon import DaemonProcess
from tests.support.mock_anthropic import MockAnthropic
from tests.support.relay import LoopbackRelay

__all__ = ["notes", "run"]

STARTS = 7
RESTARTS = 5
_NOTES: list[str] = []


def _spec(
    agent: str,
    session: str,
    cwd: Path,
    env: dict[str, str],
    base: Path,
    sandbox: SandboxPolicy | None = None,
) -> DriverSpec:
    options: dict[str, object] = (
        {"log_dir": str(base / "scripted")} if agent == "scripted" else {"check_tools": True}
    )
    return DriverSpec(
        session, str(cwd), permission_mode="default", env=env, options=options, sandbox=sandbox
    )


def _policy(cwd: Path, env: dict[str, str], base: Path) -> SandboxPolicy:
    """The sandbox the daemon would plan for a session in `cwd` (the real planner and survey)."""
    support = check_sandbox(None, os.environ.get("PATH"))
    if support.bwrap is None:
        raise RuntimeError(f"the sandbox cannot run here: {support.reason}")
    hidden = hidden_paths(str(Path.home()), str(base / "home"))
    return plan_policy(
        bwrap=support.bwrap,
        cwd=str(cwd),
        env=env,
        home=str(Path.home()),
        hidden=hidden,
        facts=survey(hidden, str(cwd)),
    )


async def _in_process(factory: DriverFactory, spec: DriverSpec) -> float:
    services = FakeServices()
    driver = factory(spec, services)
    start = time.perf_counter()
    task = asyncio.ensure_future(driver.run())
    await services.wait_event(Ready)
    elapsed = time.perf_counter() - start
    await driver.close()
    await task
    return elapsed * 1000


async def _hosted(launcher: HostLauncher, agent: str, spec: DriverSpec) -> tuple[float, int]:
    start = time.perf_counter()
    pid = await launcher.spawn(LaunchSpec(agent, launcher.home, spec))
    link = await HostLink.connect(launcher.paths(spec.session_id).socket, Hello(0), "bench")
    assert link is not None
    while True:
        item = await link.next()
        assert item is not None
        if isinstance(item, EventRecord) and isinstance(item.event, Ready):
            break
    elapsed = time.perf_counter() - start
    await asyncio.sleep(0.5)  # settled: what a host holds while its agent waits for input
    rss = _rss_kib(pid)
    await link.close()
    await stop_host(launcher.paths(spec.session_id))
    return elapsed * 1000, rss


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _bare_python_rss() -> int:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(1.0)
        return _rss_kib(process.pid)
    finally:
        process.kill()
        process.wait()


async def _starts(mock: MockAnthropic, base: Path) -> dict[str, tuple[list[float], ...]]:
    launcher = HostLauncher(base / "home")
    out: dict[str, tuple[list[float], ...]] = {}
    for agent, factory in (
        ("scripted", scripted_driver_factory),
        ("claude", claude_driver_factory),
    ):
        env = mock.cli_env(base / f"config-{agent}") if agent == "claude" else {}
        cwd = base / f"ws-{agent}"
        cwd.mkdir()
        inline, hosted, rss, confined = [], [], [], []
        for n in range(STARTS + 1):  # the first of each warms the page cache
            spec = _spec(agent, f"{agent}-in-{n}", cwd, env, base)
            took = await _in_process(factory, spec)
            spec = _spec(agent, f"{agent}-host-{n}", cwd, env, base)
            hosted_ms, rss_kib = await _hosted(launcher, agent, spec)
            confined_ms = 0.0
            if agent == "claude":  # the same start in the sandbox, alternating with the above
                policy = await asyncio.to_thread(_policy, cwd, env, base)
                spec = _spec(agent, f"{agent}-sandbox-{n}", cwd, env, base, policy)
                confined_ms, _ = await _hosted(launcher, agent, spec)
            if n:
                inline.append(took)
                hosted.append(hosted_ms)
                rss.append(float(rss_kib))
                confined.append(confined_ms)
        out[agent] = (inline, hosted, rss, confined)
    return out


async def _restarts(base: Path) -> tuple[list[float], list[float]]:
    relay = LoopbackRelay()
    await relay.start()
    workspace = base / "ws-restart"
    workspace.mkdir()
    daemon = DaemonProcess(base / "home-restart", [relay.url], workspace)
    replayed: list[float] = []
    heartbeat: list[float] = []
    try:
        await daemon.start()
        phone = await pair_phone(daemon, relay.url)
        try:
            session = await create_session(phone)
            for n in range(RESTARTS):
                # The agent waits 1 s, then writes 100 lines: all of them while the daemon is down.
                mark = phone.mark()
                await phone.send(InputCommand(sessionId=session, text="slow 1", inputId=f"s{n}"))
                await phone.send(InputCommand(sessionId=session, text="lines 100", inputId=f"l{n}"))
                await phone.wait_for_count("input-ack", 2, after=mark)
                await asyncio.sleep(0.1)  # the hand-off reaches the host
                daemon.kill()
                await asyncio.sleep(1.5)
                mark = phone.mark()
                started = time.perf_counter()
                await daemon.start()
                await phone.wait_for("sessions", after=mark, timeout=60)
                heartbeat.append((time.perf_counter() - started) * 1000)
                await phone.wait_for(
                    "output", lambda m: m.entry.content == "line 1 of 100", after=mark, timeout=60
                )
                replayed.append((time.perf_counter() - started) * 1000)
                await phone.wait_for(
                    "output", lambda m: m.entry.content == "line 100 of 100", after=mark, timeout=60
                )
        finally:
            await phone.close()
    finally:
        daemon.kill()
        daemon.kill_hosts()
        await relay.stop()
    return replayed, heartbeat


async def _measure() -> tuple[dict[str, tuple[list[float], ...]], tuple[list[float], list[float]]]:
    with MockAnthropic() as mock, tempfile.TemporaryDirectory(prefix="cdb-h", dir="/tmp") as tmp:
        base = Path(tmp)
        starts = await _starts(mock, base)
        restarts = await _restarts(base)
    return starts, restarts


def run() -> list[Row]:
    starts, (replayed, heartbeat) = asyncio.run(_measure())
    bare = _bare_python_rss() / 1024
    rows: list[Row] = []
    for agent, label in (("claude", "Claude Code"), ("scripted", "scripted agent")):
        inline, hosted, rss, confined = starts[agent]
        if agent == "claude":
            rows.append(
                Row(
                    "hosts",
                    f"session start → ready, {label}, in a host, sandboxed (p50 of {STARTS})",
                    statistics.median(confined),
                    statistics.median(hosted),
                    "the same start unconfined, alternating",
                    unit="ms",
                )
            )
        rows.append(
            Row(
                "hosts",
                f"session start → ready, {label}, in a host (p50 of {STARTS})",
                statistics.median(hosted),
                statistics.median(inline),
                "the same driver in this process",
                unit="ms",
            )
        )
        rows.append(
            Row(
                "hosts",
                f"host RSS, {label} (its agent's process not counted)",
                statistics.median(rss) / 1024,
                bare,
                "a Python interpreter that imports nothing",
                unit="MiB",
            )
        )
    rows.append(
        Row(
            "hosts",
            f"kill -9 mid-turn, restart → first entry produced while down, on the phone (p50 of {RESTARTS})",
            statistics.median(replayed),
            statistics.median(heartbeat),
            "restart → first heartbeat, same runs",
            unit="ms",
        )
    )
    for agent in ("claude", "scripted"):
        inline, hosted, _, _ = starts[agent]
        _NOTES.append(
            f"hosts/{agent}: a host adds {statistics.median(hosted) - statistics.median(inline):.0f}"
            f" ms to a session's start (p50 {statistics.median(hosted):.0f} ms in a host, "
            f"{statistics.median(inline):.0f} ms in-process)."
        )
    return rows


def notes() -> list[str]:
    return [
        "hosts: session start is the time from asking for the agent to its `ready` (in a host: "
        "spawn + launch spec + journal + socket + welcome + the ready record); RSS is the host "
        "process alone, 0.5 s after ready; the restart row kills the daemon (kill -9) while the "
        "scripted agent waits 1 s, then writes 100 lines while the daemon is down; it times the "
        "new daemon from its start to the phone's first of those lines, against its first "
        "heartbeat in the same runs.",
        *_NOTES,
    ]
