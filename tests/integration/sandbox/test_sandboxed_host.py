"""A real session host runs a real agent in the sandbox, proven by what the agent could do.

The agent is the tests' ACP agent (``tests/support/fake_acp_agent.py``) behind a shell probe that
runs first inside the sandbox and writes what it saw into the session folder: whether it could
read a secret under a hidden path (checked by content) and the bridge home, write ``~/outside``,
its folder and its ``TMPDIR``, and which processes ``/proc`` shows. The shell then runs the agent
as its child and records a SIGTERM when one reaches it; a ``kill -9`` of the host takes the
sandbox with it. Needs bubblewrap (skipped without).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bridge.agents.base import SessionSpec
from bridge.agents.child_process import (
    agent_pid,
    exit_status,
    is_sandboxed,
    signal_agent,
    spawn_agent_process,
)
from bridge.engine.inputs import AgentFailed, AgentReady, Input, JournalRecord
from bridge.host.layout import host_alive, host_paths, read_info
from bridge.runtime.hosts.host_runner import HostRunner
from bridge.runtime.hosts.launcher import HostLauncher
from bridge.sandbox import SandboxPolicy, check_sandbox, hidden_paths, plan_policy, survey
from tests.integration.host.test_host_runner import FakeStore
from tests.support.daemon import kill_hosts_under
from tests.support.fake_acp_agent import FAKE_AGENT

pytestmark = pytest.mark.skipif(
    not check_sandbox(None, os.environ.get("PATH")).available, reason="bubblewrap cannot run here"
)

WAIT = 20.0
SESSION = "sandboxed-1"
SECRET = "the-private-key-material"
PROBE = r"""
out="$PWD/probe"; mkdir -p "$out"
cat "$HOME/.ssh/id_test" > "$out/ssh.txt" 2>&1
cat "$BRIDGE_HOME/bridge.db" > "$out/db.txt" 2>&1
cat "$HOME/.netrc" > "$out/netrc.txt" && echo read-empty >> "$out/netrc.txt"
if echo x > "$HOME/outside" 2>/dev/null; then echo wrote; else echo refused; fi > "$out/outside.txt"
echo ok > "$PWD/in-folder.txt"
echo ok > "$TMPDIR/t" && echo "$TMPDIR" > "$out/tmpdir.txt"
ls /proc | grep -E '^[0-9]+$' > "$out/pids.txt"
exec 3<&0
trap 'echo term > "$out/got-term"; kill "$child"; wait "$child"; exit 0' TERM
"$AGENT_PYTHON" "$AGENT_SCRIPT" <&3 &
child=$!
wait "$child"
"""


@dataclass
class Layout:
    root: Path
    bridge: Path
    home: Path
    folder: Path
    fed: list[Input] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def env(self) -> dict[str, str]:
        return {
            "PATH": os.environ["PATH"],
            "HOME": str(self.home),
            "BRIDGE_HOME": str(self.bridge),
            "AGENT_PYTHON": sys.executable,
            "AGENT_SCRIPT": str(FAKE_AGENT),
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        }

    def sandbox_for(self, spec: SessionSpec, env: object) -> object:
        support = check_sandbox(None, os.environ.get("PATH"))
        assert support.bwrap is not None
        hidden = hidden_paths(str(self.home), str(self.bridge))
        return plan_policy(
            bwrap=support.bwrap,
            cwd=str(spec.cwd),
            env=self.env(),
            home=str(self.home),
            hidden=hidden,
            facts=survey(hidden, str(spec.cwd)),
        )

    def runner(self) -> HostRunner:
        made: list[HostRunner] = []

        def emit(event: Input) -> None:
            self.fed.append(event)
            self.changed.set()
            if isinstance(event, JournalRecord):
                asyncio.get_running_loop().call_soon(made[0].acked, event.seq)

        made.append(
            HostRunner(
                SESSION,
                emit,
                launcher=HostLauncher(self.bridge),
                agent="acp",
                label="The probe agent",
                env_for=lambda spec: self.env(),
                driver_options={
                    "agent_id": "probe",
                    "label": "The probe agent",
                    "command": ["/bin/sh", "-c", PROBE],
                    "record_dir": str(self.bridge / "acp"),
                },
                tool_check=None,
                diff_allowed=lambda: False,
                store=FakeStore(),
                orphan_timeout=3600.0,
                sandbox_for=self.sandbox_for,  # type: ignore[arg-type]
            )
        )
        return made[0]

    def ready(self) -> AgentReady | None:
        for event in self.fed:
            inner = event.event if isinstance(event, JournalRecord) else event
            if isinstance(inner, AgentReady):
                return inner
            if isinstance(inner, AgentFailed):
                raise AssertionError(f"the agent failed: {inner.reason}")
        return None

    async def until_ready(self) -> AgentReady:
        async with asyncio.timeout(WAIT):
            while (found := self.ready()) is None:
                self.changed.clear()
                await self.changed.wait()
        return found

    def probe(self, name: str) -> str:
        return (self.folder / "probe" / name).read_text()


@pytest.fixture
def layout() -> Iterator[Layout]:
    root = Path(tempfile.mkdtemp(prefix="sb", dir="/tmp"))  # a unix socket path stays short
    bridge, home, folder = root / "bridge", root / "home", root / "ws"
    for path in (bridge, home / ".ssh", folder):
        path.mkdir(parents=True)
    (home / ".ssh" / "id_test").write_text(SECRET)
    (home / ".netrc").write_text(SECRET)
    (bridge / "bridge.db").write_text(SECRET)
    try:
        yield Layout(root, bridge, home, folder)
    finally:
        kill_hosts_under(root)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
async def started(layout: Layout) -> AsyncIterator[tuple[Layout, HostRunner]]:
    runner = layout.runner()
    await runner.start(SessionSpec(SESSION, layout.folder), resume=False)
    ready = await layout.until_ready()
    assert ready.sandboxed is True
    yield layout, runner


def the_agent(layout: Layout) -> int:
    """The probe shell's pid in the host's namespace: host → bwrap → the sandbox's init → it."""
    info = read_info(host_paths(layout.bridge, SESSION))
    assert info is not None and host_alive(info)
    children = Path(f"/proc/{info.pid}/task/{info.pid}/children").read_text().split()
    assert len(children) == 1
    assert Path(f"/proc/{children[0]}/exe").resolve().name == "bwrap"
    pid = agent_pid(int(children[0]))
    assert pid is not None
    return pid


async def test_the_agent_sees_no_secret_and_writes_only_where_it_may(
    started: tuple[Layout, HostRunner],
) -> None:
    layout, runner = started
    assert SECRET not in layout.probe("ssh.txt")
    assert SECRET not in layout.probe("db.txt")
    assert layout.probe("netrc.txt") == "read-empty\n"  # a hidden file reads as empty
    assert layout.probe("outside.txt").strip() == "refused"
    assert not (layout.home / "outside").exists()
    assert (layout.folder / "in-folder.txt").read_text() == "ok\n"
    tmpdir = Path(layout.probe("tmpdir.txt").strip())
    assert tmpdir.parent.name.startswith("codedeck-agent-") and (tmpdir / "t").exists()
    pids = [int(p) for p in layout.probe("pids.txt").split()]
    assert max(pids) < 20, pids  # its own pid namespace: neither the host nor the daemon
    assert os.getpid() not in pids or os.getpid() < 20
    await runner.close()
    assert not tmpdir.parent.exists()  # the private tmp went with the host


async def test_a_stop_signal_reaches_the_agent_inside(layout: Layout) -> None:
    """What ``CliProcess.stop`` and the ACP driver's stop send: SIGTERM to the agent itself
    (bwrap would die of it and SIGKILL the agent), then the exit status as usual."""
    policy = layout.sandbox_for(SessionSpec(SESSION, layout.folder), {})
    assert isinstance(policy, SandboxPolicy)
    process, stdin = await spawn_agent_process(
        ["/bin/sh", "-c", PROBE], layout.env(), str(layout.folder), limit=1 << 16, sandbox=policy
    )
    assert is_sandboxed(process)
    try:
        async with asyncio.timeout(WAIT):
            while not (layout.folder / "probe" / "pids.txt").exists():
                await asyncio.sleep(0.02)
        await asyncio.sleep(0.2)  # the trap is set once the agent runs
        signal_agent(process, signal.SIGTERM)
        async with asyncio.timeout(WAIT):
            await process.wait()
    finally:
        stdin.close()
        signal_agent(process, signal.SIGKILL)
    assert layout.probe("got-term").strip() == "term"
    assert exit_status(process) == 0


async def test_the_agent_dies_with_its_host(started: tuple[Layout, HostRunner]) -> None:
    layout, runner = started
    agent = the_agent(layout)
    info = read_info(host_paths(layout.bridge, SESSION))
    assert info is not None
    await runner.detach()
    os.kill(info.pid, signal.SIGKILL)
    async with asyncio.timeout(WAIT):
        while Path(f"/proc/{agent}").exists() and "Z" not in _state(agent):
            await asyncio.sleep(0.02)
    assert not (layout.folder / "probe" / "got-term").exists()  # killed, not asked


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"
