"""The scripted runner from the outside: the events it emits, what it logs, how it ends.

The waits below are hang guards (10 s), never timing assertions: each test waits for events to
arrive, then compares the exact event list.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bridge.agents.base import AgentEvent, Emit, RunnerError, SessionSpec
from bridge.agents.scripted import (
    CRASH_REASON,
    FAIL_RESUME_MARKER,
    FAIL_START_MARKER,
    INTERRUPTED_TEXT,
    ScriptedRunner,
    big_content,
    count_executions,
    iso_timestamp,
    scripted_runner_factory,
)
from bridge.agents.scripted_directives import MAX_LINES, THINKING_TEXT, THOUGHT_TEXT
from bridge.engine.inputs import AgentEnded, AgentEntry, AgentFailed, AgentReady, AgentStateChanged
from bridge.protocol import OutputEntry

SID = "0b7f9a4e-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
NOW = 1_700_000_000.123
TS = "2023-11-14T22:13:20.123Z"
SDK_ID = "sdk-0001"
ASSISTANT = {"role": "assistant", "model": "scripted"}
READY = AgentReady(SID, SDK_ID, "scripted")
RUNNING = AgentStateChanged(SID, "running")
IDLE = AgentStateChanged(SID, "idle")


def entry(entry_type: Any, content: str, metadata: dict[str, Any] | None = None) -> AgentEntry:
    return AgentEntry(
        SID, OutputEntry(entryType=entry_type, content=content, timestamp=TS, metadata=metadata)
    )


def reply(content: str, model: str = "scripted") -> AgentEntry:
    return entry("text", content, {"role": "assistant", "model": model})


STREAM_END = entry("system", "", {"stream_end": True})


def turn(*entries: AgentEntry) -> list[AgentEvent]:
    return [RUNNING, *entries, IDLE, STREAM_END]


def stream_ends(events: list[AgentEvent]) -> int:
    """Turns ended so far, whatever the timestamps."""
    return sum(
        isinstance(event, AgentEntry) and event.entry.metadata == {"stream_end": True}
        for event in events
    )


class Recorder:
    """An ``emit`` that records events and lets a test wait for a condition on them."""

    def __init__(self) -> None:
        self.events: list[AgentEvent] = []
        self._wake = asyncio.Event()

    def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)
        self._wake.set()

    async def until(self, predicate: Callable[[list[AgentEvent]], bool]) -> None:
        async with asyncio.timeout(10):  # hang guard only
            while not predicate(self.events):
                self._wake.clear()
                await self._wake.wait()

    async def turns(self, count: int) -> None:
        await self.until(lambda events: stream_ends(events) >= count)

    async def has(self, event: AgentEvent) -> None:
        await self.until(lambda events: event in events)


@dataclass
class Harness:
    """Builds runners on one log directory and one cwd, and closes them all at teardown."""

    root: Path
    clock: Callable[[], float] = lambda: NOW
    sdk_ids: list[str] = field(default_factory=lambda: [SDK_ID, "sdk-0002", "sdk-0003"])
    runners: list[ScriptedRunner] = field(default_factory=list)

    @property
    def log_dir(self) -> Path:
        return self.root / "logs"

    @property
    def cwd(self) -> Path:
        return self.root / "work"

    def runner(self, emit: Emit, session_id: str = SID) -> ScriptedRunner:
        ids = iter(self.sdk_ids)
        factory = scripted_runner_factory(self.log_dir, clock=self.clock, new_id=lambda: next(ids))
        runner = factory(session_id, emit)
        assert isinstance(runner, ScriptedRunner)
        self.runners.append(runner)
        return runner

    def spec(self, **overrides: Any) -> SessionSpec:
        return SessionSpec(**{"session_id": SID, "cwd": self.cwd, **overrides})

    async def started(
        self, *, resume: bool = False, emit: Emit | None = None, **spec: Any
    ) -> tuple[ScriptedRunner, Recorder]:
        recorder = Recorder()
        runner = self.runner(emit or recorder)
        await runner.start(self.spec(**spec), resume=resume)
        await recorder.until(lambda events: bool(events) or emit is not None)
        return runner, recorder


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    (tmp_path / "work").mkdir()
    made = Harness(tmp_path)
    try:
        yield made
    finally:
        for runner in made.runners:
            await runner.close()


def logged(harness: Harness, session_id: str = SID) -> list[dict[str, Any]]:
    path = harness.log_dir / f"{session_id}.inputs.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


# -- start -------------------------------------------------------------------------------------


async def test_ready_comes_from_the_session_task_not_from_start(harness: Harness) -> None:
    recorder = Recorder()
    runner = harness.runner(recorder)
    await runner.start(harness.spec(), resume=False)
    assert recorder.events == []  # nothing emitted synchronously inside start()
    await recorder.until(bool)
    assert recorder.events == [READY]
    assert runner.sdk_session_id == SDK_ID
    assert (harness.log_dir / f"{SID}.sdk-session").read_text() == f"{SDK_ID}\n"


async def test_sdk_session_id_is_kept_across_a_resume(harness: Harness) -> None:
    first, _ = await harness.started()
    await first.close()
    harness.sdk_ids = ["sdk-never-used"]
    _, recorder = await harness.started(resume=True)
    assert recorder.events == [READY]


async def test_ready_reports_the_model_the_spec_asks_for(harness: Harness) -> None:
    _, recorder = await harness.started(model="claude-opus-4")
    assert recorder.events == [AgentReady(SID, SDK_ID, "claude-opus-4")]


async def test_start_twice_or_with_another_sessions_spec_is_refused(harness: Harness) -> None:
    runner, _ = await harness.started()
    with pytest.raises(RunnerError, match="already started"):
        await runner.start(harness.spec(), resume=False)
    other = harness.runner(Recorder())
    with pytest.raises(RunnerError, match="another session"):
        await other.start(harness.spec(session_id="someone-else"), resume=False)


def test_factory_refuses_a_session_id_unsafe_as_a_file_name(tmp_path: Path) -> None:
    factory = scripted_runner_factory(tmp_path)
    with pytest.raises(RunnerError, match="session id must be"):
        factory("../escape", Recorder())


# -- failing to start --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("marker_text", "reason"),
    [("no credit left\nsecond line\n", "no credit left"), ("", "scripted start failure")],
    ids=["reason-from-file", "default-reason"],
)
async def test_fail_start_marker_makes_start_fail(
    harness: Harness, marker_text: str, reason: str
) -> None:
    (harness.cwd / FAIL_START_MARKER).write_text(marker_text)
    runner, recorder = await harness.started()
    assert recorder.events == [AgentFailed(SID, reason)]
    with pytest.raises(RunnerError, match="failed to start"):
        await runner.send_input("u1", "hello")
    assert not (harness.log_dir / f"{SID}.inputs.jsonl").exists()


async def test_fail_resume_marker_fails_only_a_resume(harness: Harness) -> None:
    (harness.cwd / FAIL_RESUME_MARKER).write_text("conversation lost\n")
    _, fresh = await harness.started(resume=False)
    assert fresh.events == [READY]
    _, resumed = await harness.started(resume=True)
    assert resumed.events == [AgentFailed(SID, "conversation lost")]


async def test_a_missing_cwd_fails_start(harness: Harness) -> None:
    _, recorder = await harness.started(cwd=harness.root / "gone")
    assert recorder.events == [
        AgentFailed(SID, f"working directory {harness.root / 'gone'} does not exist")
    ]


async def test_an_unusable_log_directory_fails_start(harness: Harness) -> None:
    harness.log_dir.write_text("a file where the directory should be")
    _, recorder = await harness.started()
    [event] = recorder.events
    assert isinstance(event, AgentFailed)
    assert event.reason.startswith("the scripted agent cannot use its log directory")


# -- turns -------------------------------------------------------------------------------------

TURN_CASES: list[tuple[str, list[AgentEntry]]] = [
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
    (
        "lines 0",
        [
            entry(
                "error",
                f"lines takes a whole number from 1 to {MAX_LINES}",
                {"error_type": "invalid_directive"},
            )
        ],
    ),
]


@pytest.mark.parametrize(("text", "entries"), TURN_CASES, ids=[text for text, _ in TURN_CASES])
async def test_each_directive_emits_one_turn(
    harness: Harness, text: str, entries: list[AgentEntry]
) -> None:
    runner, recorder = await harness.started()
    await runner.send_input("u1", text)
    await recorder.turns(1)
    assert recorder.events == [READY, *turn(*entries)]


async def test_big_entry_has_exactly_n_characters(harness: Harness) -> None:
    runner, recorder = await harness.started()
    await runner.send_input("u1", "big 204800")
    await recorder.turns(1)
    [big] = [e for e in recorder.events if isinstance(e, AgentEntry) and e.entry.content]
    assert len(big.entry.content) == 204_800


async def test_inputs_run_in_order_one_turn_at_a_time(harness: Harness) -> None:
    runner, recorder = await harness.started()
    texts = [f"message {n}" if n % 3 else "lines 2" for n in range(20)]
    for n, text in enumerate(texts):
        await runner.send_input(f"u{n}", text)
    await recorder.turns(20)
    expected: list[AgentEvent] = [READY]
    for text in texts:
        if text == "lines 2":
            expected += turn(reply("line 1 of 2"), reply("line 2 of 2"))
        else:
            expected += turn(reply(f"echo: {text}"))
    assert recorder.events == expected
    assert [line["uid"] for line in logged(harness)] == [f"u{n}" for n in range(20)]


async def test_input_is_logged_durably_before_the_agent_acts(harness: Harness) -> None:
    runner, recorder = await harness.started()
    await runner.send_input("u1", "hello")
    # send_input never yields to the loop: the turn has not started, the record is on disk.
    assert recorder.events == [READY]
    assert logged(harness) == [{"uid": "u1", "text": "hello", "at": TS}]
    assert await runner.received(["u1", "u2"]) == {"u1"}
    await recorder.turns(1)


async def test_timestamps_come_from_the_injected_clock(harness: Harness) -> None:
    ticks = iter(range(100))
    harness.clock = lambda: NOW + next(ticks)
    runner, recorder = await harness.started()
    await runner.send_input("u1", "think")
    await recorder.turns(1)
    stamps = [e.entry.timestamp for e in recorder.events if isinstance(e, AgentEntry)]
    assert stamps == [iso_timestamp(NOW + n) for n in (1, 2, 3)]  # thinking, text, stream_end
    assert logged(harness)[0]["at"] == iso_timestamp(NOW)
    assert iso_timestamp(0) == "1970-01-01T00:00:00.000Z"


# -- interrupt ---------------------------------------------------------------------------------


async def test_interrupt_ends_a_slow_turn_and_the_next_input_runs(harness: Harness) -> None:
    runner, recorder = await harness.started()
    await runner.send_input("u1", "slow 3600")
    await runner.send_input("u2", "hello")
    await recorder.has(RUNNING)
    await runner.interrupt()
    await recorder.turns(2)
    assert recorder.events == [
        READY,
        *turn(entry("system", INTERRUPTED_TEXT)),
        *turn(reply("echo: hello")),
    ]


async def test_interrupt_stops_a_long_lines_turn_midway(harness: Harness) -> None:
    runner, recorder = await harness.started()
    await runner.send_input("u1", f"lines {MAX_LINES}")
    await recorder.has(RUNNING)
    await runner.interrupt()
    await recorder.turns(1)
    lines = [
        e for e in recorder.events if isinstance(e, AgentEntry) and e.entry.entryType == "text"
    ]
    assert 0 < len(lines) < MAX_LINES
    assert recorder.events[-3:] == [entry("system", INTERRUPTED_TEXT), IDLE, STREAM_END]


async def test_interrupt_when_idle_changes_nothing(harness: Harness) -> None:
    runner, recorder = await harness.started()
    await runner.interrupt()
    await runner.send_input("u1", "slow 0")
    await recorder.turns(1)
    assert recorder.events == [READY, *turn()]


# -- crash and failures ------------------------------------------------------------------------


async def test_crash_ends_the_agent_and_drops_what_was_queued(harness: Harness) -> None:
    runner, recorder = await harness.started()
    await runner.send_input("u1", "crash")
    await runner.send_input("u2", "queued behind the crash")
    await recorder.has(AgentEnded(SID, CRASH_REASON))
    for _ in range(5):
        await asyncio.sleep(0)
    assert recorder.events == [READY, RUNNING, AgentEnded(SID, CRASH_REASON)]
    with pytest.raises(RunnerError, match="has ended"):
        await runner.send_input("u3", "hello")
    with pytest.raises(RunnerError, match="has ended"):
        await runner.set_option("mode", "default")
    await runner.interrupt()  # a no-op, never an error
    # Both were received before the crash, as a real agent that died with them in its stdin.
    assert await runner.received(["u1", "u2", "u3"]) == {"u1", "u2"}


async def test_a_crashed_session_resumes_with_a_new_runner(harness: Harness) -> None:
    runner, recorder = await harness.started()
    await runner.send_input("u1", "crash")
    await recorder.has(AgentEnded(SID, CRASH_REASON))
    await runner.close()
    resumed, again = await harness.started(resume=True)
    await resumed.send_input("u2", "hello")
    await again.turns(1)
    assert again.events == [READY, *turn(reply("echo: hello"))]
    assert count_executions(harness.log_dir) == {"u1": 1, "u2": 1}


async def test_an_exception_in_the_session_task_is_reported_as_ended(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    broken = False
    harness.clock = lambda: math.nan if broken else NOW
    runner, recorder = await harness.started()
    await runner.send_input("u1", "hello")  # logged with a good clock
    broken = True
    with caplog.at_level(logging.ERROR, logger="bridge.agents.scripted"):
        await recorder.has(AgentEnded(SID, "scripted agent failed: ValueError"))
    assert recorder.events == [READY, RUNNING, AgentEnded(SID, "scripted agent failed: ValueError")]
    assert "scripted agent 0b7f9a4e failed" in caplog.text
    with pytest.raises(RunnerError, match="has ended"):
        await runner.send_input("u2", "hello")


async def test_an_emit_that_keeps_raising_never_escapes_the_runner(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[AgentEvent] = []

    def emit(event: AgentEvent) -> None:
        seen.append(event)
        if not isinstance(event, AgentReady):
            raise RuntimeError("the engine queue is gone")

    runner, _ = await harness.started(emit=emit)
    with caplog.at_level(logging.ERROR, logger="bridge.agents.scripted"):
        await runner.send_input("u1", "hello")
        async with asyncio.timeout(10):
            while len(seen) < 3:
                await asyncio.sleep(0)
    assert seen == [READY, RUNNING, AgentEnded(SID, "scripted agent failed: RuntimeError")]
    assert "emit failed" in caplog.text
    await runner.close()


async def test_a_log_that_cannot_be_written_refuses_the_input(harness: Harness) -> None:
    runner, recorder = await harness.started()
    (harness.log_dir / f"{SID}.inputs.jsonl").mkdir()
    with pytest.raises(RunnerError, match="could not record the input"):
        await runner.send_input("u1", "hello")
    for _ in range(5):
        await asyncio.sleep(0)
    assert recorder.events == [READY]  # nothing was queued


@pytest.mark.parametrize(("uid", "text"), [("", "hi"), (None, "hi"), ("u1", None)])
async def test_bad_arguments_to_send_input_are_refused(
    harness: Harness, uid: Any, text: Any
) -> None:
    runner, _ = await harness.started()
    with pytest.raises(RunnerError, match="must be a"):
        await runner.send_input(uid, text)
    assert not (harness.log_dir / f"{SID}.inputs.jsonl").exists()


async def test_send_input_before_start_is_refused(harness: Harness) -> None:
    runner = harness.runner(Recorder())
    with pytest.raises(RunnerError, match="has not been started"):
        await runner.send_input("u1", "hello")


# -- options -----------------------------------------------------------------------------------

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
    ("temperature", "1", None),
]


@pytest.mark.parametrize(("option", "value", "result"), OPTION_CASES)
async def test_set_option(harness: Harness, option: str, value: str, result: str | None) -> None:
    runner, _ = await harness.started()
    assert await runner.set_option(option, value) == result


async def test_options_in_force_show_in_later_turns(harness: Harness) -> None:
    runner, recorder = await harness.started(permission_mode="acceptEdits", effort_level="low")
    await runner.send_input("u1", "status")
    await recorder.turns(1)
    await runner.set_option("mode", "default")
    await runner.set_option("effort", "max")
    await runner.set_option("model", "claude-sonnet-4")
    await runner.set_option("mode", "yolo")  # refused: nothing changes
    await runner.send_input("u2", "status")
    await recorder.turns(2)
    assert recorder.events == [
        READY,
        *turn(reply("mode=acceptEdits effort=low model=scripted")),
        *turn(reply("mode=default effort=max model=claude-sonnet-4", model="claude-sonnet-4")),
    ]


# -- received and exactly-once -----------------------------------------------------------------


async def test_received_ignores_a_torn_write_and_the_log_stays_usable(harness: Harness) -> None:
    runner, recorder = await harness.started()
    await runner.send_input("u1", "one")
    await runner.send_input("u2", "two")
    await recorder.turns(2)
    await runner.close()
    log = harness.log_dir / f"{SID}.inputs.jsonl"
    with log.open("ab") as file:  # kill -9 in the middle of appending u3
        file.write(b'{"uid": "u3", "te')

    resumed, again = await harness.started(resume=True)
    assert await resumed.received(["u1", "u2", "u3"]) == {"u1", "u2"}
    await resumed.send_input("u3", "three")
    await again.turns(1)
    assert await resumed.received(["u1", "u2", "u3", "u4"]) == {"u1", "u2", "u3"}
    assert count_executions(harness.log_dir) == {"u1": 1, "u2": 1, "u3": 1}


async def test_received_answers_before_start_and_after_close(harness: Harness) -> None:
    runner, recorder = await harness.started()
    await runner.send_input("u1", "hello")
    await recorder.turns(1)
    await runner.close()
    assert await runner.received(["u1", "u9"]) == {"u1"}
    fresh = harness.runner(Recorder())
    assert await fresh.received(["u1"]) == {"u1"}
    assert await fresh.received([]) == set()


async def test_daemon_style_reconciliation_executes_each_input_exactly_once(
    harness: Harness,
) -> None:
    # The daemon marked u1..u6 `sent`, but only u1..u3 reached the agent before it died.
    pending = [f"u{n}" for n in range(1, 7)]
    runner, recorder = await harness.started()
    for uid in pending[:3]:
        await runner.send_input(uid, f"text of {uid}")
    await recorder.turns(3)
    await runner.close()

    resumed, again = await harness.started(resume=True)
    already = await resumed.received(pending)
    assert already == {"u1", "u2", "u3"}
    for uid in pending:
        if uid not in already:
            await resumed.send_input(uid, f"text of {uid}")
    await again.turns(3)
    assert count_executions(harness.log_dir) == dict.fromkeys(pending, 1)
    assert again.events == [
        READY,
        *turn(reply("echo: text of u4")),
        *turn(reply("echo: text of u5")),
        *turn(reply("echo: text of u6")),
    ]


async def test_count_executions_sees_a_duplicate_hand_off(harness: Harness) -> None:
    runner, recorder = await harness.started()
    await runner.send_input("u1", "hello")
    await runner.send_input("u1", "hello")  # what a broken reconciliation would do
    await recorder.turns(2)
    assert count_executions(harness.log_dir) == {"u1": 2}


# -- close -------------------------------------------------------------------------------------


async def test_close_is_idempotent_and_nothing_is_emitted_after_it(harness: Harness) -> None:
    runner, recorder = await harness.started()
    await runner.send_input("u1", "slow 3600")
    await recorder.has(RUNNING)
    await runner.close()
    await runner.close()
    for _ in range(5):
        await asyncio.sleep(0)
    assert recorder.events == [READY, RUNNING]  # no idle, no stream_end, no AgentEnded
    with pytest.raises(RunnerError, match="is closed"):
        await runner.send_input("u2", "hello")
    with pytest.raises(RunnerError, match="is closed"):
        await runner.set_option("mode", "default")
    with pytest.raises(RunnerError, match="is closed"):
        await runner.start(harness.spec(), resume=True)
    await runner.interrupt()
    assert recorder.events == [READY, RUNNING]


async def test_close_right_after_start_emits_nothing(harness: Harness) -> None:
    recorder = Recorder()
    runner = harness.runner(recorder)
    await runner.start(harness.spec(), resume=False)
    await runner.close()
    for _ in range(5):
        await asyncio.sleep(0)
    assert recorder.events == []


async def test_close_of_a_runner_never_started(harness: Harness) -> None:
    runner = harness.runner(Recorder())
    await runner.close()
    await runner.close()
    with pytest.raises(RunnerError, match="is closed"):
        await runner.start(harness.spec(), resume=False)


async def test_concurrent_closes_both_return(harness: Harness) -> None:
    runner, recorder = await harness.started()
    await runner.send_input("u1", "slow 3600")
    await recorder.has(RUNNING)
    await asyncio.gather(runner.close(), runner.close())
    assert recorder.events == [READY, RUNNING]
