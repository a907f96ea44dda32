"""The session host in this process, over its real unix socket, with a driver the test steers.

The daemon's side is the real :class:`~bridge.runtime.hosts.link.HostLink`, so both ends of the
protocol are exercised together: replay and live records from the journal, parked asks and
checks re-presented to a new daemon, answers carried by ``hello``, acks that trim, close, an
agent that exits, a host left alone, a journal that cannot be written.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import AsyncIterator, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bridge.host import server as server_module
from bridge.host.driver import (
    DriverError,
    DriverSpec,
    DriverStatus,
    HostServices,
    PermissionAnswer,
    ToolVerdict,
)
from bridge.host.events import (
    Entry,
    Exited,
    InputTaken,
    InterruptedInput,
    PermissionAsked,
    Ready,
    Restarted,
    StateChanged,
)
from bridge.host.journal import Journal
from bridge.host.launch import LaunchSpec, RestartOrder
from bridge.host.layout import host_paths
from bridge.host.server import SessionHost, bind_socket
from bridge.host.wire import (
    Ack,
    Answer,
    Close,
    EventRecord,
    Hello,
    PermissionPending,
    SendInput,
    Synced,
    ToolCheck,
    Verdict,
)
from bridge.runtime.hosts.link import HostLink

WAIT = 10.0
SESSION = "s-1"


@dataclass
class SteeredDriver:
    """A driver whose agent does what the test says."""

    services: HostServices
    inputs: list[tuple[str, str]] = field(default_factory=list)
    exit_with: asyncio.Future[str | None] = field(default_factory=asyncio.Future)
    closed: bool = False
    state: str = "idle"
    answers: list[PermissionAnswer] = field(default_factory=list)
    verdicts: list[ToolVerdict] = field(default_factory=list)

    async def run(self) -> str | None:
        self.services.emit(Ready("sdk-1", "m", "/w"))
        return await self.exit_with

    def send_input(self, uid: str, text: str) -> None:
        if self.exit_with.done():
            raise DriverError("the agent is gone")
        self.inputs.append((uid, text))

    async def received(self, uids: Collection[str]) -> set[str]:
        recorded = {"took-it"}  # what the agent's own record holds from an earlier host
        return {u for u in uids if u in recorded or any(u == t for t, _ in self.inputs)}

    async def interrupt(self) -> None:
        return None

    async def set_option(self, option: str, value: str) -> None:
        return None

    async def close(self, *, interrupt: bool = True) -> None:
        self.closed = True
        if not self.exit_with.done():
            self.exit_with.set_result(None)

    def status(self) -> DriverStatus:
        return DriverStatus(state=self.state, sdk_session_id="sdk-1")

    # --- what the test makes the agent do -------------------------------------------------------

    def say(self, text: str) -> None:
        self.services.emit(Entry({"entryType": "text", "content": text, "timestamp": "t"}))

    def ask(self, request_id: str) -> asyncio.Task[None]:
        async def asking() -> None:
            self.state = "waiting_permission"
            answer = await self.services.ask_permission(PermissionAsked(request_id, "Bash"))
            self.answers.append(answer)
            self.state = "running"

        return asyncio.ensure_future(asking())

    def check(self, request_id: str) -> asyncio.Task[None]:
        async def checking() -> None:
            self.verdicts.append(await self.services.check_tool(request_id, "Bash", {"c": 1}))

        return asyncio.ensure_future(checking())


@dataclass
class Rig:
    home: Path
    host: SessionHost
    driver: SteeredDriver
    task: asyncio.Task[int]

    async def connect(self, after: int = 0, answers: tuple[Answer, ...] = ()) -> HostLink:
        paths = host_paths(self.home, SESSION)
        link = await HostLink.connect(paths.socket, Hello(after, answers=answers), "test")
        assert link is not None
        return link


@pytest.fixture
def home() -> Iterator[Path]:
    # A short path: a unix socket's path must stay under 108 bytes.
    path = Path(tempfile.mkdtemp(prefix="h", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


async def start_host(
    home: Path,
    *,
    orphan_timeout: float = 3600.0,
    unclaimed_timeout: float = 3600.0,
    restart: RestartOrder | None = None,
) -> Rig:
    spec = LaunchSpec(
        "scripted",
        home,
        DriverSpec(SESSION, "/w"),
        orphan_timeout=orphan_timeout,
        unclaimed_timeout=unclaimed_timeout,
        restart=restart,
    )
    paths = host_paths(home, SESSION)
    journal = Journal.open(paths.journal, sync=False)
    drivers: list[SteeredDriver] = []

    def factory(driver_spec: DriverSpec, services: HostServices) -> SteeredDriver:
        drivers.append(SteeredDriver(services))
        return drivers[0]

    host = SessionHost(spec, paths, journal, factory)
    serving = asyncio.Event()
    task = asyncio.ensure_future(host.run(bind_socket(paths), serving.set))
    async with asyncio.timeout(WAIT):
        await serving.wait()
    return Rig(home, host, drivers[0], task)


@pytest.fixture
async def rig(home: Path) -> AsyncIterator[Rig]:
    rig = await start_host(home)
    try:
        yield rig
    finally:
        if not rig.task.done():
            rig.host.request_stop()
            with contextlib.suppress(Exception):
                async with asyncio.timeout(WAIT):
                    await rig.task


async def stream(link: HostLink, count: int, *, synced: bool = False) -> list[object]:
    """The next `count` items of the stream (``synced`` markers left out unless asked for)."""
    items: list[object] = []
    async with asyncio.timeout(WAIT):
        while len(items) < count:
            item = await link.next()
            assert item is not None, f"the host closed after {items}"
            if isinstance(item, Synced) and not synced:
                continue
            items.append(item)
    return items


def contents(items: list[object]) -> list[str]:
    out = []
    for item in items:
        assert isinstance(item, EventRecord)
        if isinstance(item.event, Entry):
            out.append(str(item.event.entry["content"]))
    return out


async def test_a_daemon_gets_the_replay_then_live_records_in_order(rig: Rig) -> None:
    rig.driver.say("one")
    rig.driver.say("two")
    await asyncio.sleep(0)
    link = await rig.connect()
    assert link.welcome is not None and link.welcome.ready_seq == 1
    first = await stream(link, 3)
    rig.driver.say("three")
    live = await stream(link, 1)
    assert [i.seq for i in first + live] == [1, 2, 3, 4]  # type: ignore[attr-defined]
    assert contents(first[1:] + live) == ["one", "two", "three"]
    await link.close()
    again = await rig.connect(after=2)  # a daemon that committed up to 2
    assert contents(await stream(again, 2)) == ["two", "three"]
    await again.close()


async def test_a_record_journaled_before_the_senders_wait_first_runs_still_wakes_it(
    rig: Rig,
) -> None:
    # The sender starts its wait as a task (``race``); a batch flushed between that task's
    # creation and its first step must count, or those records sit unsent until the next emit.
    last = rig.host.welcome().next_seq - 1
    async with asyncio.timeout(WAIT), asyncio.TaskGroup() as tasks:
        tasks.create_task(rig.host.journal_beyond(last))  # its first step comes after these:
        rig.driver.say("flushed before the wait's first step")
        rig.host.flush()
    assert await asyncio.wait_for(rig.host.journal_beyond(last - 1), WAIT) is None  # at once


async def test_an_agent_that_answers_each_input_at_once_has_every_answer_delivered(
    rig: Rig,
) -> None:
    # As the scripted agent does: the input wakes the agent's task, which answers in its next
    # step, and is journaled as taken in the step that read the daemon's message. Each input
    # arrives a varying number of loop steps after the agent said something on its own, so
    # that it lands at every point of the host's sender cycle.
    def answering(uid: str, text: str) -> None:
        rig.driver.inputs.append((uid, text))
        asyncio.get_running_loop().call_soon(rig.driver.say, f"echo: {text}")
        rig.driver.services.emit(InputTaken(uid))

    rig.driver.send_input = answering  # type: ignore[method-assign]
    link = await rig.connect()
    await stream(link, 1)  # ready
    for n in range(300):
        rig.driver.say(f"busy {n}")
        for _ in range(n % 30):
            await asyncio.sleep(0)
        link.send(SendInput(f"u-{n}", f"in {n}"))
        items = await stream(link, 3)
        assert sorted(contents(items)) == [f"busy {n}", f"echo: in {n}"]
    await link.close()


async def test_a_replay_starts_after_the_daemons_cursor(rig: Rig) -> None:
    for n in range(5):
        rig.driver.say(f"line {n}")
    link = await rig.connect(after=4)  # ready + lines 0..2 are the daemon's already
    items = await stream(link, 2)
    assert [i.seq for i in items] == [5, 6]  # type: ignore[attr-defined]
    assert contents(items) == ["line 3", "line 4"]
    await link.close()


async def test_a_parked_ask_waits_for_the_answer_and_the_answer_is_confirmed(rig: Rig) -> None:
    link = await rig.connect()
    asking = rig.driver.ask("req-1")
    items = await stream(link, 2)  # ready, the ask
    assert isinstance(items[1], EventRecord) and isinstance(items[1].event, PermissionAsked)
    await asyncio.sleep(0.2)
    assert not asking.done()  # nobody answered: it waits, it is never refused
    assert await link.answer("req-1", PermissionAnswer(True, always=True)) is True
    async with asyncio.timeout(WAIT):
        await asking
    assert rig.driver.answers == [PermissionAnswer(True, always=True)]
    assert await link.answer("req-1", PermissionAnswer(False)) is False  # answered already
    await link.close()


async def test_a_new_daemon_is_shown_the_asks_still_parked_after_its_replay(rig: Rig) -> None:
    first = await rig.connect()
    asking = rig.driver.ask("req-1")
    await stream(first, 2)
    await first.close()  # the daemon died before anyone answered
    second = await rig.connect(after=2)  # it had committed the ask's record
    [pending] = await stream(second, 1)
    assert isinstance(pending, PermissionPending) and pending.request.request_id == "req-1"
    assert await second.answer("req-1", PermissionAnswer(False, "no")) is True
    async with asyncio.timeout(WAIT):
        await asking
    assert rig.driver.answers == [PermissionAnswer(False, "no")]
    await second.close()


async def test_synced_follows_the_replay_and_the_asks_re_presented(rig: Rig) -> None:
    first = await rig.connect()
    rig.driver.ask("req-1")
    await stream(first, 2)
    await first.close()
    second = await rig.connect(after=0)
    items = await stream(second, 4, synced=True)
    assert [type(i).__name__ for i in items] == [
        "EventRecord",
        "EventRecord",
        "PermissionPending",
        "Synced",
    ]
    assert items[-1] == Synced(2)
    await second.close()


async def test_answers_carried_by_hello_are_applied_before_anything_is_re_presented(
    rig: Rig,
) -> None:
    first = await rig.connect()
    asking = rig.driver.ask("req-1")
    await stream(first, 2)
    await first.close()
    stored = Answer("req-1", PermissionAnswer(True))  # decided, never delivered
    second = await rig.connect(after=2, answers=(stored,))
    async with asyncio.timeout(WAIT):
        await asking
    rig.driver.say("after")
    [item] = await stream(second, 1)
    assert contents([item]) == ["after"]  # no PermissionPending: the phone is not asked twice
    await second.close()


async def test_a_tool_check_goes_to_every_daemon_until_one_answers(rig: Rig) -> None:
    first = await rig.connect()
    await stream(first, 1)
    checking = rig.driver.check("chk-1")
    [check] = await stream(first, 1)
    assert isinstance(check, ToolCheck) and check.tool_input == {"c": 1}
    await first.close()
    second = await rig.connect(after=1)
    [again] = await stream(second, 1)
    assert isinstance(again, ToolCheck) and again.request_id == "chk-1"
    second.send(Verdict("chk-1", "deny", "rm_rf"))
    async with asyncio.timeout(WAIT):
        await checking
    assert rig.driver.verdicts == [ToolVerdict("deny", "rm_rf")]
    await second.close()


async def test_an_input_reaches_the_driver_and_received_answers_from_it(rig: Rig) -> None:
    link = await rig.connect()
    link.send(SendInput("u-1", "hi"))
    assert await link.received(["u-1", "u-2"]) == {"u-1"}
    assert rig.driver.inputs == [("u-1", "hi")]
    await link.close()


async def test_acks_trim_the_journal_once_enough_records_are_committed(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server_module, "TRIM_EVERY", 4)
    link = await rig.connect()
    for n in range(6):
        rig.driver.say(str(n))
    await stream(link, 7)
    link.send(Ack(2))
    await link.received([])  # a round trip: the ack was handled
    assert rig.host.journal_floor == 0  # 2 records: not worth a trim yet
    link.send(Ack(5))
    await link.received([])
    assert rig.host.journal_floor == 5
    await link.close()
    again = await rig.connect(after=5)
    assert contents(await stream(again, 2)) == ["4", "5"]
    await again.close()


async def test_close_stops_the_agent_confirms_and_removes_the_files(rig: Rig) -> None:
    link = await rig.connect()
    link.send(Close("bye"))
    async with asyncio.timeout(WAIT):
        while await link.next() is not None:
            pass
        assert await rig.task == 0
    assert link.closed_by_host and rig.driver.closed
    assert not host_paths(rig.home, SESSION).root.exists()


async def test_an_agent_that_exits_is_journaled_and_the_journal_stays(rig: Rig) -> None:
    link = await rig.connect()
    await stream(link, 1)
    rig.driver.exit_with.set_result("exit code 3")
    [exited] = await stream(link, 1)
    assert isinstance(exited, EventRecord)
    assert exited.event == Exited("exit code 3", False, ())
    async with asyncio.timeout(WAIT):
        assert await rig.task == 0
        assert await link.next() is None
    with Journal.open(host_paths(rig.home, SESSION).journal, sync=False) as journal:
        assert [p["t"] for _, p in journal.read()] == ["ready", "exited"]


async def test_a_host_no_daemon_comes_to_stops_once_the_agent_is_idle(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server_module, "_ORPHAN_CHECK", 0.05)
    rig = await start_host(home, orphan_timeout=0.2)
    rig.driver.state = "running"
    await asyncio.sleep(0.5)
    assert not rig.task.done()  # never while the agent works
    rig.driver.state = "idle"
    async with asyncio.timeout(WAIT):
        assert await rig.task == 0
    assert rig.driver.closed
    assert host_paths(home, SESSION).journal.exists()  # the next daemon resumes from it


async def test_a_host_no_daemon_ever_took_over_stops_after_the_unclaimed_timeout(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its launcher stopped or died before connecting: it must not keep its agent for an hour.
    monkeypatch.setattr(server_module, "_ORPHAN_CHECK", 0.05)
    rig = await start_host(home, unclaimed_timeout=0.3)
    async with asyncio.timeout(WAIT):
        assert await rig.task == 0
    assert rig.driver.closed
    assert host_paths(home, SESSION).journal.exists()


async def test_a_host_a_daemon_took_over_waits_the_orphan_timeout_after_it_left(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server_module, "_ORPHAN_CHECK", 0.05)
    rig = await start_host(home, unclaimed_timeout=0.3)
    link = await rig.connect()
    await link.close()
    await asyncio.sleep(0.8)
    assert not rig.task.done()  # claimed: the hour-long orphan timeout applies now
    rig.host.request_stop()
    async with asyncio.timeout(WAIT):
        assert await rig.task == 0


async def test_a_journal_that_cannot_be_written_stops_the_host(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(*_args: object) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("bridge.host.journal.os.pwrite", full)
    rig.driver.say("lost")
    async with asyncio.timeout(WAIT):
        assert await rig.task == 1
    assert rig.driver.closed
    with pytest.raises(Exception, match="cannot be written"):
        rig.driver.services.emit(StateChanged("idle"))


async def test_a_host_that_resumes_a_session_journals_why_first(home: Path) -> None:
    took = InterruptedInput("took-it", "in-1", "make it so")
    never = InterruptedInput("never-got-it", "in-2", "and this")
    rig = await start_host(home, restart=RestartOrder("the host stopped", 1, 2, (took, never)))
    try:
        link = await rig.connect()
        first, second = await stream(link, 2)
        assert isinstance(first, EventRecord) and first.seq == 1
        assert isinstance(first.event, Restarted)
        assert (first.event.reason, first.event.count, first.event.interrupted) == (
            "the host stopped",
            1,
            (took,),  # only what the agent took; the other is delivered again instead
        )
        assert isinstance(second, EventRecord) and isinstance(second.event, Ready)
        await link.close()
    finally:
        rig.host.request_stop()
        async with asyncio.timeout(WAIT):
            await rig.task
