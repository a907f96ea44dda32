"""The daemon's runner of a session host, against real host processes (scripted agent).

No daemon, no relay: the runner's reports are collected as the engine would get them. Covered:
a new host and a closed one, detach and adoption (replay after the cursor, ``ready`` reported
again), an agent that cannot start, the restart budget with its notes, and answers the store
held that a new connection delivers before anything is re-presented.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bridge.agents.base import SessionSpec
from bridge.engine.inputs import (
    AgentEnded,
    AgentEntry,
    AgentFailed,
    AgentReady,
    AgentRestarted,
    Input,
    JournalRecord,
    PermissionRequested,
    PermissionStillPending,
)
from bridge.host.driver import PermissionAnswer
from bridge.host.layout import host_alive, host_paths, read_info
from bridge.host.wire import Answer
from bridge.runtime.hosts.host_runner import HostRunner
from bridge.runtime.hosts.launcher import HostLauncher
from store.bridge_state import InboxRow
from tests.support.daemon import kill_hosts_under

WAIT = 20.0
SESSION = "sess-1"


@dataclass
class FakeStore:
    answers_held: list[Answer] = field(default_factory=list)
    delivered: list[str] = field(default_factory=list)
    sent: list[InboxRow] = field(default_factory=list)

    async def answers(self, session_id: str) -> list[Answer]:
        return list(self.answers_held)

    async def answer_delivered(self, session_id: str, request_id: str) -> None:
        self.delivered.append(request_id)

    async def sent_inputs(self, session_id: str) -> list[InboxRow]:
        return list(self.sent)


@dataclass
class Rig:
    home: Path
    workspace: Path
    store: FakeStore
    fed: list[Input] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def runner(self, *, max_restarts: int = 2) -> HostRunner:
        made: list[HostRunner] = []

        def emit(event: Input) -> None:
            self.fed.append(event)
            self.changed.set()
            if isinstance(event, JournalRecord):  # the engine commits it at once
                asyncio.get_running_loop().call_soon(made[0].acked, event.seq)

        made.append(
            HostRunner(
                SESSION,
                emit,
                launcher=HostLauncher(self.home),
                agent="scripted",
                label="The scripted agent",
                env_for=lambda spec: {},
                driver_options={"log_dir": str(self.home / "scripted")},
                tool_check=None,
                diff_allowed=lambda: False,
                store=self.store,
                orphan_timeout=3600.0,
                max_restarts=max_restarts,
            )
        )
        return made[0]

    def spec(self, agent_seq: int = 0) -> SessionSpec:
        return SessionSpec(SESSION, self.workspace, agent_seq=agent_seq)

    def inner(self) -> list[Input]:
        """What the engine got, journal records unwrapped."""
        out: list[Input] = []
        for event in self.fed:
            if isinstance(event, JournalRecord):
                if event.event is not None:
                    out.append(event.event)
            else:
                out.append(event)
        return out

    def seqs(self) -> list[int]:
        return [e.seq for e in self.fed if isinstance(e, JournalRecord)]

    def texts(self) -> list[str]:
        return [e.entry.content for e in self.inner() if isinstance(e, AgentEntry | AgentRestarted)]

    async def until(self, check: Callable[[], Any]) -> Any:
        async with asyncio.timeout(WAIT):
            while not (found := check()):
                self.changed.clear()
                await self.changed.wait()
        return found


@pytest.fixture
def home() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="r", dir="/tmp"))  # a unix socket path stays short
    try:
        yield path
    finally:
        kill_hosts_under(path)
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def rig(home: Path) -> AsyncIterator[Rig]:
    workspace = home / "ws"
    workspace.mkdir()
    yield Rig(home, workspace, FakeStore())


def of(kind: type, events: list[Input]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


async def test_a_new_host_serves_the_session_and_close_ends_it(rig: Rig) -> None:
    runner = rig.runner()
    await runner.start(rig.spec(), resume=False)
    await rig.until(lambda: of(AgentReady, rig.inner()))
    await asyncio.wait_for(runner.attached.wait(), WAIT)
    await runner.send_input("u-1", "hello")
    await rig.until(lambda: "echo: hello" in rig.texts())
    assert await runner.received(["u-1", "u-2"]) == {"u-1"}
    assert rig.seqs() == sorted(set(rig.seqs()))  # each record once, in order
    info = read_info(host_paths(rig.home, SESSION))
    assert info is not None and host_alive(info)
    await runner.close()
    assert not host_alive(info)
    assert not host_paths(rig.home, SESSION).root.exists()


def _when_attached(runner: HostRunner, snapshot: Callable[[], Any]) -> asyncio.Task[Any]:
    """What `snapshot` says at the moment the runner lets the phones' commands through."""

    async def wait() -> Any:
        await runner.attached.wait()
        return snapshot()

    return asyncio.ensure_future(wait())


async def test_a_new_host_does_not_hold_the_phones_commands(rig: Rig) -> None:
    runner = rig.runner()
    seen = _when_attached(runner, lambda: of(AgentReady, rig.inner()))
    await runner.start(rig.spec(), resume=False)
    assert await asyncio.wait_for(seen, WAIT) == []  # let through before the host even served
    await _ready(rig)
    await runner.close()


async def test_a_detached_host_is_adopted_and_replays_only_after_the_cursor(rig: Rig) -> None:
    first = rig.runner()
    await first.start(rig.spec(), resume=False)
    await _ready(rig)
    await first.send_input("u-1", "lines 5")
    await rig.until(lambda: "line 5 of 5" in rig.texts())
    cursor = rig.seqs()[3]  # the engine committed a few records only
    await first.detach()
    rig.fed.clear()
    second = rig.runner()
    replayed = _when_attached(second, rig.texts)
    await second.start(rig.spec(agent_seq=cursor), resume=True)
    # An adopted host holds the phones' commands until its replay is in the engine's queue.
    assert "line 5 of 5" in await asyncio.wait_for(replayed, WAIT)
    assert rig.seqs()[0] == cursor + 1  # the replay starts right after the cursor
    assert of(AgentReady, rig.fed)  # ready again, reported by the runner: its record was had
    await second.close()


async def _ready(rig: Rig) -> bool:
    await rig.until(lambda: of(AgentReady, rig.inner()))
    return True


async def test_an_agent_that_cannot_start_fails_the_session_once(rig: Rig) -> None:
    (rig.workspace / ".scripted-fail-start").write_text("no way\n")
    runner = rig.runner()
    await runner.start(rig.spec(), resume=False)
    [failed] = await rig.until(lambda: of(AgentFailed, rig.inner()))
    assert failed.reason == "no way"
    await asyncio.wait_for(runner.attached.wait(), WAIT)
    await asyncio.sleep(0.5)
    assert len(of(AgentFailed, rig.inner())) == 1  # no restart after a failed start
    await runner.close()


async def test_crashes_restart_the_session_until_the_budget_runs_out(rig: Rig) -> None:
    runner = rig.runner(max_restarts=2)
    await runner.start(rig.spec(), resume=False)
    await _ready(rig)
    for count in (1, 2):
        rig.store.sent = [InboxRow(f"c{count}", SESSION, "crash", f"in-{count}", "sent")]
        await runner.send_input(f"c{count}", "crash")
        note = await rig.until(
            lambda n=count: [t for t in rig.texts() if f"restarting ({n} of 2)" in t]
        )
        assert "scripted crash" in note[0] and "“crash”" in note[0]
        await rig.until(lambda n=count: len(of(AgentReady, rig.inner())) == n + 1)
    restarts = of(AgentRestarted, rig.inner())
    assert [r.interrupted for r in restarts] == [("c1",), ("c2",)]  # said, and done with
    await runner.send_input("c3", "crash")
    [ended] = await rig.until(lambda: of(AgentEnded, rig.inner()))
    assert "after 2 restart(s)" in ended.reason
    await runner.close()


async def test_answers_the_store_held_reach_the_host_before_it_re_presents(rig: Rig) -> None:
    first = rig.runner()
    await first.start(rig.spec(), resume=False)
    await _ready(rig)
    await first.send_input("u-1", 'ask Bash {"command": "make"}')
    [asked] = await rig.until(lambda: of(PermissionRequested, rig.inner()))
    cursor = rig.seqs()[-1]  # the engine committed the ask (its card is on the phone)
    await first.detach()  # the daemon died after it decided, before it delivered
    rig.store.answers_held = [Answer(asked.request_id, PermissionAnswer(True))]
    rig.fed.clear()
    second = rig.runner()
    await second.start(rig.spec(agent_seq=cursor), resume=True)
    await rig.until(lambda: "allowed Bash" in rig.texts())
    assert of(PermissionStillPending, rig.fed) == []  # never shown to the phone again
    async with asyncio.timeout(WAIT):
        while rig.store.delivered != [asked.request_id]:  # and the store may forget it
            await asyncio.sleep(0.02)
    await second.close()
