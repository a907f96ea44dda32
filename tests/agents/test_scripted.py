"""The scripted driver from the outside: the events it emits, what it logs, how it ends.

Every driver runs against :class:`~tests.host.fakes.FakeServices`. The waits below are hang
guards, never timing assertions: each test waits for events to arrive, then compares the exact
event list.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bridge.agents.scripted import (
    CRASH_REASON,
    FAIL_RESUME_MARKER,
    FAIL_START_MARKER,
    INTERRUPTED_TEXT,
    ScriptedDriver,
    big_content,
    count_executions,
    iso_timestamp,
    scripted_driver_factory,
)
from bridge.agents.scripted_directives import MAX_LINES, THINKING_TEXT, THOUGHT_TEXT
from bridge.host.driver import DriverError, DriverSpec, DriverStatus, PermissionAnswer, ToolVerdict
from bridge.host.events import (
    Answered,
    Entry,
    Failed,
    HostEvent,
    InputTaken,
    OptionSet,
    PermissionAsked,
    Ready,
    StateChanged,
)
from bridge.protocol import OutputEntry
from tests.host.fakes import FakeServices

SID = "0b7f9a4e-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
NOW = 1_700_000_000.123
TS = "2023-11-14T22:13:20.123Z"
SDK_ID = "sdk-0001"
ASSISTANT = {"role": "assistant", "model": "scripted"}
RUNNING = StateChanged("running")
IDLE = StateChanged("idle")


def entry(entry_type: str, content: str, metadata: dict[str, Any] | None = None) -> Entry:
    raw: dict[str, Any] = {"entryType": entry_type, "content": content, "timestamp": TS}
    if metadata is not None:
        raw["metadata"] = metadata
    return Entry(raw)


def reply(content: str, model: str = "scripted") -> Entry:
    return entry("text", content, {"role": "assistant", "model": model})


def invalid(message: str) -> Entry:
    return entry("error", message, {"error_type": "invalid_directive"})


STREAM_END = entry("system", "", {"stream_end": True})
INTERRUPTED = entry("system", INTERRUPTED_TEXT)


def turn(uid: str, *entries: HostEvent) -> list[HostEvent]:
    return [RUNNING, *entries, IDLE, STREAM_END, Answered((uid,))]


@dataclass
class Running:
    """A driver, its services, and the task of its ``run``."""

    driver: ScriptedDriver
    services: FakeServices
    task: asyncio.Task[str | None] | None = None

    @property
    def events(self) -> list[HostEvent]:
        """What the agent said, without the ``taken`` marks (see the test of those)."""
        return [e for e in self.services.events if not isinstance(e, InputTaken)]

    async def turns(self, count: int) -> None:
        await self.services.wait_event(Answered, count)

    async def has(self, event: HostEvent) -> None:
        await self.services.wait_for(lambda: event in self.services.events)

    async def result(self) -> str | None:
        assert self.task is not None
        async with asyncio.timeout(10):  # hang guard only
            return await self.task

    async def settle(self) -> None:
        """Let the serving task run what it would run now (to show it emits nothing more)."""
        for _ in range(5):
            await asyncio.sleep(0)


@dataclass
class Harness:
    """Builds drivers on one log directory and one cwd, and closes them all at teardown."""

    root: Path
    clock: Callable[[], float] = lambda: NOW
    made: list[Running] = field(default_factory=list)

    @property
    def log_dir(self) -> Path:
        return self.root / "logs"

    @property
    def cwd(self) -> Path:
        return self.root / "work"

    def ready(self, sdk_id: str = SDK_ID, model: str = "scripted") -> Ready:
        return Ready(sdk_id, model, str(self.cwd))

    def spec(self, **overrides: Any) -> DriverSpec:
        fields: dict[str, Any] = {
            "session_id": SID,
            "cwd": str(self.cwd),
            "sdk_session_id": SDK_ID,
            "options": {"log_dir": str(self.log_dir)},
        }
        return DriverSpec(**{**fields, **overrides})

    def driver(self, services: FakeServices | None = None, **spec: Any) -> Running:
        services = services or FakeServices(clock=self.clock)
        made = Running(scripted_driver_factory(self.spec(**spec), services), services)
        self.made.append(made)
        return made

    async def started(self, services: FakeServices | None = None, **spec: Any) -> Running:
        made = self.driver(services, **spec)
        made.task = asyncio.create_task(made.driver.run())
        await made.services.wait_for(lambda: made.events)
        return made


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    (tmp_path / "work").mkdir()
    made = Harness(tmp_path)
    try:
        yield made
    finally:
        for running in made.made:
            await running.driver.close()
            if running.task is not None:
                await running.result()


def logged(harness: Harness, session_id: str = SID) -> list[dict[str, Any]]:
    path = harness.log_dir / f"{session_id}.inputs.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


# -- lean ---------------------------------------------------------------------------------------


# -- start --------------------------------------------------------------------------------------


async def test_ready_is_the_first_event_of_run(harness: Harness) -> None:
    made = harness.driver()
    assert made.events == []  # nothing before run()
    assert made.driver.status() == DriverStatus(mode="plan", model="scripted")
    made.task = asyncio.create_task(made.driver.run())
    await made.has(harness.ready())
    assert made.events == [harness.ready()]
    assert made.driver.status().sdk_session_id == SDK_ID
    assert (harness.log_dir / f"{SID}.sdk-session").read_text() == f"{SDK_ID}\n"


async def test_sdk_session_id_is_kept_across_a_resume(harness: Harness) -> None:
    first = await harness.started()
    await first.driver.close()
    assert await first.result() is None
    resumed = await harness.started(resume=True, sdk_session_id="sdk-never-used")
    assert resumed.events == [harness.ready()]


async def test_without_an_sdk_session_id_the_driver_makes_one(harness: Harness) -> None:
    made = await harness.started(sdk_session_id=None)
    [ready] = made.events
    assert isinstance(ready, Ready) and ready.sdk_session_id is not None
    assert str(uuid.UUID(ready.sdk_session_id)) == ready.sdk_session_id


async def test_ready_reports_the_model_the_spec_asks_for(harness: Harness) -> None:
    made = await harness.started(model="claude-opus-4")
    assert made.events == [harness.ready(model="claude-opus-4")]


async def test_run_twice_is_refused(harness: Harness) -> None:
    made = await harness.started()
    with pytest.raises(DriverError, match="already started"):
        await made.driver.run()


def test_factory_refuses_a_session_id_unsafe_as_a_file_name(harness: Harness) -> None:
    with pytest.raises(DriverError, match="session id must be"):
        scripted_driver_factory(harness.spec(session_id="../escape"), FakeServices())


@pytest.mark.parametrize("options", [{}, {"log_dir": ""}, {"log_dir": 7}], ids=repr)
def test_factory_needs_a_log_directory(harness: Harness, options: dict[str, Any]) -> None:
    with pytest.raises(DriverError, match="needs the option 'log_dir'"):
        scripted_driver_factory(harness.spec(options=options), FakeServices())


# -- failing to start ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("marker_text", "reason"),
    [("no credit left\nsecond line\n", "no credit left"), ("", "scripted start failure")],
    ids=["reason-from-file", "default-reason"],
)
async def test_fail_start_marker_makes_run_fail(
    harness: Harness, marker_text: str, reason: str
) -> None:
    (harness.cwd / FAIL_START_MARKER).write_text(marker_text)
    made = await harness.started()
    assert await made.result() == reason
    assert made.events == [Failed(reason)]
    with pytest.raises(DriverError, match="failed to start"):
        made.driver.send_input("u1", "hello")
    assert not (harness.log_dir / f"{SID}.inputs.jsonl").exists()


async def test_fail_resume_marker_fails_only_a_resume(harness: Harness) -> None:
    (harness.cwd / FAIL_RESUME_MARKER).write_text("conversation lost\n")
    fresh = await harness.started(resume=False)
    assert fresh.events == [harness.ready()]
    resumed = await harness.started(resume=True)
    assert resumed.events == [Failed("conversation lost")]
    assert await resumed.result() == "conversation lost"


async def test_a_missing_cwd_fails_run(harness: Harness) -> None:
    made = await harness.started(cwd=str(harness.root / "gone"))
    assert made.events == [Failed(f"working directory {harness.root / 'gone'} does not exist")]


async def test_an_unusable_log_directory_fails_run(harness: Harness) -> None:
    harness.log_dir.write_text("a file where the directory should be")
    made = await harness.started()
    [event] = made.events
    assert isinstance(event, Failed)
    assert event.reason.startswith("the scripted agent cannot use its log directory")


# -- turns --------------------------------------------------------------------------------------

TURN_CASES: list[tuple[str, list[HostEvent]]] = [
    ("hello", [reply("echo: hello")]),
    ("  spaced  ", [reply("echo:   spaced  ")]),
    ("/unknown arg", [reply("echo: /unknown arg")]),
    ("lines 3", [reply("line 1 of 3"), reply("line 2 of 3"), reply("line 3 of 3")]),
    ("lines 130", [reply(f"line {n} of 130") for n in range(1, 131)]),
    ("big 1000", [reply(big_content(1000))]),
    ("big 204800", [reply(big_content(204_800))]),
    ("think", [entry("thinking", THINKING_TEXT, ASSISTANT), reply(THOUGHT_TEXT)]),
    ("status", [reply("mode=plan effort=default model=scripted")]),
    ("slow 0", []),
    ("lines 0", [invalid(f"lines takes a whole number from 1 to {MAX_LINES}")]),
    ("ask Bash please", [invalid("ask takes a tool name, then optionally one JSON object")]),
]


@pytest.mark.parametrize(("text", "entries"), TURN_CASES, ids=[text for text, _ in TURN_CASES])
async def test_each_directive_emits_one_turn(
    harness: Harness, text: str, entries: list[HostEvent]
) -> None:
    made = await harness.started()
    made.driver.send_input("u1", text)
    await made.turns(1)
    assert made.events == [harness.ready(), *turn("u1", *entries)]


async def test_every_entry_is_a_valid_wire_entry(harness: Harness) -> None:
    made = await harness.started()
    for n, text in enumerate(["hello", "think", "lines 2", "lines 0", "status", "big 20"]):
        made.driver.send_input(f"u{n}", text)
    made.driver.send_input("u9", "slow 3600")
    await made.turns(6)
    await made.services.wait_for(lambda: made.driver.status().state == "running")
    await made.driver.interrupt()
    await made.turns(7)
    entries = made.services.entries()
    assert len(entries) == 16  # 7 stream ends, 8 replies, 1 Interrupted
    for raw in entries:
        assert OutputEntry.model_validate(raw).model_dump(exclude_none=True) == raw


async def test_big_entry_has_exactly_n_characters(harness: Harness) -> None:
    made = await harness.started()
    made.driver.send_input("u1", "big 204800")
    await made.turns(1)
    [big] = [e for e in made.services.entries() if e["content"]]
    assert len(big["content"]) == 204_800


async def test_inputs_run_in_order_one_turn_at_a_time(harness: Harness) -> None:
    made = await harness.started()
    texts = [f"message {n}" if n % 3 else "lines 2" for n in range(20)]
    for n, text in enumerate(texts):
        made.driver.send_input(f"u{n}", text)
    await made.turns(20)
    expected: list[HostEvent] = [harness.ready()]
    for n, text in enumerate(texts):
        if text == "lines 2":
            expected += turn(f"u{n}", reply("line 1 of 2"), reply("line 2 of 2"))
        else:
            expected += turn(f"u{n}", reply(f"echo: {text}"))
    assert made.events == expected
    assert [line["uid"] for line in logged(harness)] == [f"u{n}" for n in range(20)]


async def test_input_is_logged_durably_before_the_agent_acts(harness: Harness) -> None:
    made = await harness.started()
    made.driver.send_input("u1", "hello")
    # send_input is synchronous: the turn has not started, the record is on disk.
    assert made.events == [harness.ready()]
    assert logged(harness) == [{"uid": "u1", "text": "hello", "at": TS}]
    assert await made.driver.received(["u1", "u2"]) == {"u1"}
    assert made.driver.status().taken == ("u1",)
    await made.turns(1)


async def test_timestamps_come_from_the_services_clock(harness: Harness) -> None:
    ticks = iter(range(100))
    harness.clock = lambda: NOW + next(ticks)
    made = await harness.started()
    made.driver.send_input("u1", "think")
    await made.turns(1)
    stamps = [e["timestamp"] for e in made.services.entries()]
    assert stamps == [iso_timestamp(NOW + n) for n in (1, 2, 3)]  # thinking, text, stream_end
    assert logged(harness)[0]["at"] == iso_timestamp(NOW)


async def test_status_tracks_taken_inputs_and_finished_turns(harness: Harness) -> None:
    made = await harness.started(permission_mode="default", effort_level="high")
    made.driver.send_input("u1", "slow 3600")
    made.driver.send_input("u2", "ask Bash")
    made.driver.send_input("u2", "hello")  # a duplicate hand-off is owed two turns
    assert made.driver.status() == DriverStatus(
        state="idle",
        mode="default",
        model="scripted",
        effort="high",
        sdk_session_id=SDK_ID,
        turn_completed=False,
        taken=("u1", "u2", "u2"),
    )
    await made.has(RUNNING)
    assert made.driver.status().state == "running"
    await made.driver.interrupt()
    pending = await made.services.next_ask()  # u1 is over, u2 waits for its answer
    assert made.services.of(Answered) == [Answered(("u1",))]
    status = made.driver.status()
    assert (status.state, status.turn_completed, status.taken) == (
        "waiting_permission",
        True,
        ("u2", "u2"),
    )
    pending.future.set_result(PermissionAnswer(allow=True))
    await made.turns(3)
    assert made.services.of(Answered) == [Answered(("u1",)), Answered(("u2",)), Answered(("u2",))]
    assert made.driver.status().taken == ()
    assert made.driver.status().state == "idle"


# -- interrupt ----------------------------------------------------------------------------------


async def test_interrupt_ends_a_slow_turn_and_the_next_input_runs(harness: Harness) -> None:
    made = await harness.started()
    made.driver.send_input("u1", "slow 3600")
    made.driver.send_input("u2", "hello")
    await made.has(RUNNING)
    await made.driver.interrupt()
    await made.turns(2)
    assert made.events == [
        harness.ready(),
        *turn("u1", INTERRUPTED),
        *turn("u2", reply("echo: hello")),
    ]


async def test_interrupt_stops_a_long_lines_turn_midway(harness: Harness) -> None:
    made = await harness.started()
    made.driver.send_input("u1", f"lines {MAX_LINES}")
    await made.has(RUNNING)
    await made.driver.interrupt()
    await made.turns(1)
    lines = [e for e in made.services.entries() if e["entryType"] == "text"]
    assert 0 < len(lines) < MAX_LINES
    assert made.events[-4:] == [INTERRUPTED, IDLE, STREAM_END, Answered(("u1",))]


async def test_interrupt_when_idle_changes_nothing(harness: Harness) -> None:
    made = await harness.started()
    await made.driver.interrupt()
    made.driver.send_input("u1", "slow 0")
    await made.turns(1)
    assert made.events == [harness.ready(), *turn("u1")]


# -- ask and check ------------------------------------------------------------------------------

ASK_CASES: list[tuple[str, PermissionAnswer, str]] = [
    ("ask Bash", PermissionAnswer(allow=True), "allowed Bash"),
    ("ask Bash", PermissionAnswer(allow=True, always=True), "allowed Bash (always)"),
    ("ask Edit", PermissionAnswer(allow=False, message="not now"), "denied Edit: not now"),
    (
        'ask AskUserQuestion {"questions": []}',
        PermissionAnswer(allow=True, updated_input={"answers": {"Color?": "blue"}}),
        'allowed AskUserQuestion input={"answers":{"Color?":"blue"}}',
    ),
]


@pytest.mark.parametrize(("text", "answer", "text_reply"), ASK_CASES, ids=[c[2] for c in ASK_CASES])
async def test_ask_waits_for_the_answer_and_reports_it(
    harness: Harness, text: str, answer: PermissionAnswer, text_reply: str
) -> None:
    made = await harness.started()
    made.driver.send_input("u1", text)
    pending = await made.services.next_ask()
    tool_name = pending.request.tool_name
    waiting = "waiting_question" if tool_name == "AskUserQuestion" else "waiting_permission"
    assert made.driver.status().state == waiting
    assert made.driver.status().taken == ("u1",)
    pending.future.set_result(answer)
    await made.turns(1)
    request = pending.request
    assert len(request.request_id) == 32 and int(request.request_id, 16) >= 0  # uuid4 hex
    assert made.events == [
        harness.ready(),
        *turn(
            "u1",
            StateChanged(waiting),
            request,
            RUNNING,
            reply(text_reply),
        ),
    ]


async def test_ask_carries_the_tool_input(harness: Harness) -> None:
    services = FakeServices(clock=harness.clock, permission_policy=lambda _: PermissionAnswer(True))
    made = await harness.started(services)
    made.driver.send_input("u1", 'ask Bash {"command": "ls -la", "timeout": 5}')
    made.driver.send_input("u2", "ask mcp__files__read")
    await made.turns(2)
    first, second = made.services.of(PermissionAsked)
    assert (first.tool_name, dict(first.tool_input)) == (
        "Bash",
        {"command": "ls -la", "timeout": 5},
    )
    assert (second.tool_name, dict(second.tool_input)) == ("mcp__files__read", {})
    assert first.request_id != second.request_id


async def test_an_interrupt_withdraws_a_waiting_ask(harness: Harness) -> None:
    made = await harness.started()
    made.driver.send_input("u1", "ask Bash")
    made.driver.send_input("u2", "hello")
    pending = await made.services.next_ask()
    await made.driver.interrupt()
    await made.turns(2)
    assert made.services.withdrawn == [pending.request.request_id]
    assert made.services.asks == []
    assert made.events == [
        harness.ready(),
        *turn("u1", StateChanged("waiting_permission"), pending.request, RUNNING, INTERRUPTED),
        *turn("u2", reply("echo: hello")),
    ]


CHECK_CASES = [
    (ToolVerdict("deny", "rm -rf is blocked"), "verdict deny: rm -rf is blocked"),
    (ToolVerdict("ask", "writes outside the project"), "verdict ask: writes outside the project"),
    (ToolVerdict("none"), "verdict none: "),
]


@pytest.mark.parametrize(("verdict", "text_reply"), CHECK_CASES, ids=[c[1] for c in CHECK_CASES])
async def test_check_asks_the_daemon_and_reports_the_verdict(
    harness: Harness, verdict: ToolVerdict, text_reply: str
) -> None:
    made = await harness.started()
    made.driver.send_input("u1", 'check Bash {"command": "rm -rf /"}')
    pending = await made.services.next_check()
    assert (pending.tool_name, pending.tool_input) == ("Bash", {"command": "rm -rf /"})
    assert len(pending.request_id) == 32
    assert made.driver.status().state == "running"  # a check is not a card
    pending.future.set_result(verdict)
    await made.turns(1)
    assert made.events == [harness.ready(), *turn("u1", reply(text_reply))]


async def test_an_interrupt_withdraws_a_waiting_check(harness: Harness) -> None:
    made = await harness.started()
    made.driver.send_input("u1", "check Write")
    pending = await made.services.next_check()
    await made.driver.interrupt()
    await made.turns(1)
    assert pending.future.cancelled()
    assert made.services.checks == []
    assert made.events == [harness.ready(), *turn("u1", INTERRUPTED)]


async def test_close_withdraws_a_waiting_ask_and_emits_nothing_more(harness: Harness) -> None:
    made = await harness.started()
    made.driver.send_input("u1", "ask Bash")
    pending = await made.services.next_ask()
    await made.driver.close()
    assert await made.result() is None
    assert made.services.withdrawn == [pending.request.request_id]
    assert made.events == [
        harness.ready(),
        RUNNING,
        StateChanged("waiting_permission"),
        pending.request,
    ]
    assert made.driver.status().taken == ("u1",)  # owed a turn the next host will not give


# -- crash and failures -------------------------------------------------------------------------


async def test_crash_ends_the_agent_and_drops_what_was_queued(harness: Harness) -> None:
    made = await harness.started()
    made.driver.send_input("u0", "hello")
    made.driver.send_input("u1", "crash")
    made.driver.send_input("u2", "queued behind the crash")
    assert await made.result() == CRASH_REASON
    await made.settle()
    assert made.events == [harness.ready(), *turn("u0", reply("echo: hello")), RUNNING]
    with pytest.raises(DriverError, match="has ended"):
        made.driver.send_input("u3", "hello")
    with pytest.raises(DriverError, match="has ended"):
        await made.driver.set_option("mode", "default")
    await made.driver.interrupt()  # a no-op, never an error
    # Both were received before the crash, as a real agent that died with them in its stdin.
    assert await made.driver.received(["u1", "u2", "u3"]) == {"u1", "u2"}
    status = made.driver.status()
    assert (status.turn_completed, status.taken) == (True, ("u1", "u2"))


async def test_a_crashed_session_resumes_with_a_new_driver(harness: Harness) -> None:
    made = await harness.started()
    made.driver.send_input("u1", "crash")
    assert await made.result() == CRASH_REASON
    await made.driver.close()
    resumed = await harness.started(resume=True)
    resumed.driver.send_input("u2", "hello")
    await resumed.turns(1)
    assert resumed.events == [harness.ready(), *turn("u2", reply("echo: hello"))]
    assert count_executions(harness.log_dir) == {"u1": 1, "u2": 1}


async def test_an_exception_in_the_serving_task_ends_the_agent(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    broken = False
    harness.clock = lambda: math.nan if broken else NOW
    made = await harness.started()
    made.driver.send_input("u1", "hello")  # logged with a good clock
    broken = True
    with caplog.at_level(logging.ERROR, logger="bridge.agents.scripted"):
        assert await made.result() == "scripted agent failed: ValueError"
    assert made.events == [harness.ready(), RUNNING]
    assert "scripted agent 0b7f9a4e failed" in caplog.text
    with pytest.raises(DriverError, match="has ended"):
        made.driver.send_input("u2", "hello")


class BrokenEmit(FakeServices):
    """Services whose journal fails after ``Ready`` (and the input's ``taken`` mark)."""

    def emit(self, event: HostEvent) -> None:
        super().emit(event)
        if not isinstance(event, Ready | InputTaken):
            raise RuntimeError("the journal is gone")


async def test_an_emit_that_raises_ends_the_agent_without_escaping(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    made = await harness.started(BrokenEmit(clock=harness.clock))
    with caplog.at_level(logging.ERROR, logger="bridge.agents.scripted"):
        made.driver.send_input("u1", "hello")
        assert await made.result() == "scripted agent failed: RuntimeError"
    assert made.events == [harness.ready(), RUNNING]
    assert "the journal is gone" in caplog.text  # in the log's traceback, not in the reason


async def test_a_log_that_cannot_be_written_refuses_the_input(harness: Harness) -> None:
    made = await harness.started()
    (harness.log_dir / f"{SID}.inputs.jsonl").mkdir()
    with pytest.raises(DriverError, match="could not record the input"):
        made.driver.send_input("u1", "hello")
    await made.settle()
    assert made.events == [harness.ready()]  # nothing was queued
    assert made.driver.status().taken == ()


@pytest.mark.parametrize(("uid", "text"), [("", "hi"), (None, "hi"), ("u1", None)])
async def test_bad_arguments_to_send_input_are_refused(
    harness: Harness, uid: Any, text: Any
) -> None:
    made = await harness.started()
    with pytest.raises(DriverError, match="must be a"):
        made.driver.send_input(uid, text)
    assert not (harness.log_dir / f"{SID}.inputs.jsonl").exists()


async def test_send_input_before_run_is_refused(harness: Harness) -> None:
    made = harness.driver()
    with pytest.raises(DriverError, match="has not been started"):
        made.driver.send_input("u1", "hello")
    with pytest.raises(DriverError, match="has not been started"):
        await made.driver.set_option("mode", "default")


# -- options ------------------------------------------------------------------------------------

OPTION_CASES = [
    ("mode", "default", "default"),
    ("mode", "acceptEdits", "acceptEdits"),
    ("mode", "bypassPermissions", None),
    ("effort", "high", "high"),
    ("effort", "turbo", None),
    ("model", "claude-sonnet-4", "claude-sonnet-4"),
    ("model", "", None),
    ("model", "   ", None),
    ("model", "a\nb", None),
    ("model", "m" * 201, None),
]


@pytest.mark.parametrize(("option", "value", "result"), OPTION_CASES)
async def test_set_option(harness: Harness, option: str, value: str, result: str | None) -> None:
    made = await harness.started()
    await made.driver.set_option(option, value)
    assert made.events == [harness.ready(), OptionSet(option, value, result)]


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [("temperature", "1", "unknown option 'temperature'"), ("mode", None, "must be a string")],
)
async def test_set_option_refuses_what_no_option_set_can_carry(
    harness: Harness, option: str, value: Any, message: str
) -> None:
    made = await harness.started()
    with pytest.raises(DriverError, match=message):
        await made.driver.set_option(option, value)
    assert made.events == [harness.ready()]


async def test_options_in_force_show_in_later_turns(harness: Harness) -> None:
    made = await harness.started(permission_mode="acceptEdits", effort_level="low")
    made.driver.send_input("u1", "status")
    await made.turns(1)
    await made.driver.set_option("mode", "default")
    await made.driver.set_option("effort", "max")
    await made.driver.set_option("model", "claude-sonnet-4")
    await made.driver.set_option("mode", "yolo")  # refused: nothing changes
    made.driver.send_input("u2", "status")
    await made.turns(2)
    assert made.events == [
        harness.ready(),
        *turn("u1", reply("mode=acceptEdits effort=low model=scripted")),
        OptionSet("mode", "default", "default"),
        OptionSet("effort", "max", "max"),
        OptionSet("model", "claude-sonnet-4", "claude-sonnet-4"),
        OptionSet("mode", "yolo", None),
        *turn(
            "u2", reply("mode=default effort=max model=claude-sonnet-4", model="claude-sonnet-4")
        ),
    ]
    status = made.driver.status()
    assert (status.mode, status.effort, status.model) == ("default", "max", "claude-sonnet-4")


# -- received and exactly-once ------------------------------------------------------------------


async def test_received_ignores_a_torn_write_and_the_log_stays_usable(harness: Harness) -> None:
    made = await harness.started()
    made.driver.send_input("u1", "one")
    made.driver.send_input("u2", "two")
    await made.turns(2)
    await made.driver.close()
    log = harness.log_dir / f"{SID}.inputs.jsonl"
    with log.open("ab") as file:  # kill -9 in the middle of appending u3
        file.write(b'{"uid": "u3", "te')

    resumed = await harness.started(resume=True)
    assert await resumed.driver.received(["u1", "u2", "u3"]) == {"u1", "u2"}
    resumed.driver.send_input("u3", "three")
    await resumed.turns(1)
    assert await resumed.driver.received(["u1", "u2", "u3", "u4"]) == {"u1", "u2", "u3"}
    assert count_executions(harness.log_dir) == {"u1": 1, "u2": 1, "u3": 1}


async def test_received_answers_before_run_and_after_close(harness: Harness) -> None:
    made = await harness.started()
    made.driver.send_input("u1", "hello")
    await made.turns(1)
    await made.driver.close()
    assert await made.driver.received(["u1", "u9"]) == {"u1"}
    fresh = harness.driver()
    assert await fresh.driver.received(["u1"]) == {"u1"}
    assert await fresh.driver.received([]) == set()


async def test_received_fails_when_the_log_cannot_be_read(harness: Harness) -> None:
    made = harness.driver()
    (harness.log_dir / f"{SID}.inputs.jsonl").mkdir(parents=True)
    with pytest.raises(DriverError, match="log cannot be read"):
        await made.driver.received(["u1"])


async def test_daemon_style_reconciliation_executes_each_input_exactly_once(
    harness: Harness,
) -> None:
    # The daemon marked u1..u6 `sent`, but only u1..u3 reached the agent before its host died.
    pending = [f"u{n}" for n in range(1, 7)]
    made = await harness.started()
    for uid in pending[:3]:
        made.driver.send_input(uid, f"text of {uid}")
    await made.turns(3)
    await made.driver.close()

    resumed = await harness.started(resume=True)
    already = await resumed.driver.received(pending)
    assert already == {"u1", "u2", "u3"}
    for uid in pending:
        if uid not in already:
            resumed.driver.send_input(uid, f"text of {uid}")
    await resumed.turns(3)
    assert count_executions(harness.log_dir) == dict.fromkeys(pending, 1)
    assert resumed.events == [
        harness.ready(),
        *turn("u4", reply("echo: text of u4")),
        *turn("u5", reply("echo: text of u5")),
        *turn("u6", reply("echo: text of u6")),
    ]


async def test_count_executions_sees_a_duplicate_hand_off(harness: Harness) -> None:
    made = await harness.started()
    made.driver.send_input("u1", "hello")
    made.driver.send_input("u1", "hello")  # what a broken reconciliation would do
    await made.turns(2)
    assert count_executions(harness.log_dir) == {"u1": 2}


# -- close --------------------------------------------------------------------------------------


async def test_close_is_idempotent_and_nothing_is_emitted_after_it(harness: Harness) -> None:
    made = await harness.started()
    made.driver.send_input("u1", "slow 3600")
    await made.has(RUNNING)
    await made.driver.close()
    await made.driver.close()
    assert await made.result() is None
    await made.settle()
    assert made.events == [harness.ready(), RUNNING]  # no idle, no stream_end, no answered
    with pytest.raises(DriverError, match="is closed"):
        made.driver.send_input("u2", "hello")
    with pytest.raises(DriverError, match="is closed"):
        await made.driver.set_option("mode", "default")
    assert await made.driver.run() is None
    await made.driver.interrupt()
    assert made.events == [harness.ready(), RUNNING]


async def test_close_when_idle_makes_run_return_none(harness: Harness) -> None:
    made = await harness.started()
    await made.driver.close()
    assert await made.result() is None
    assert made.events == [harness.ready()]


async def test_close_before_run_emits_nothing(harness: Harness) -> None:
    made = harness.driver()
    await made.driver.close()
    await made.driver.close()
    assert await made.driver.run() is None
    assert made.events == []


async def test_concurrent_closes_both_return(harness: Harness) -> None:
    made = await harness.started()
    made.driver.send_input("u1", "slow 3600")
    await made.has(RUNNING)
    await asyncio.gather(made.driver.close(), made.driver.close())
    assert await made.result() is None
    assert made.events == [harness.ready(), RUNNING]


async def test_cancelling_run_closes_the_agent(harness: Harness) -> None:
    made = await harness.started()
    made.driver.send_input("u1", "ask Bash")
    pending = await made.services.next_ask()
    assert made.task is not None
    made.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await made.task
    assert made.services.withdrawn == [pending.request.request_id]
    with pytest.raises(DriverError, match="is closed"):
        made.driver.send_input("u2", "hello")
    made.task = None  # nothing left to await at teardown


async def test_every_input_logged_is_reported_taken_at_once(tmp_path: Path) -> None:
    services = FakeServices()
    driver = scripted_driver_factory(
        DriverSpec("s-taken", str(tmp_path), options={"log_dir": str(tmp_path / "log")}), services
    )
    task = asyncio.ensure_future(driver.run())
    await services.wait_event(Ready)
    driver.send_input("u1", "slow 5")
    driver.send_input("u2", "hello")  # queued behind the slow turn, taken all the same
    assert services.of(InputTaken) == [InputTaken("u1"), InputTaken("u2")]
    await driver.close()
    await task
