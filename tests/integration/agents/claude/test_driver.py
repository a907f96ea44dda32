"""ClaudeDriver against the fake CLI: lifecycle, turns, prompts, checks, options, exits."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest

from bridge.agents.claude import DEFAULT_DENY_MESSAGE, ClaudeDriver, input_uuid, sdk_version
from bridge.host.driver import DriverError, PermissionAnswer, ToolVerdict
from bridge.host.events import (
    Answered,
    Entry,
    Failed,
    ModelChoice,
    OptionSet,
    PermissionAsked,
    Ready,
    StateChanged,
)
from tests.agents.claude.conftest import FakeCli, Session, is_stream_end, make_spec
from tests.host.fakes import FakeServices


def _contents(session: Session, since: int = 0) -> list[str]:
    return [str(e.entry["content"]) for e in session.events[since:] if isinstance(e, Entry)]


async def test_start_is_ready_with_the_argv_and_environment_of_the_sdk(
    start_session: Any, fake_cli: FakeCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOT_FOR_THE_CLI", "1")
    given = str(uuid.uuid4())
    session: Session = await start_session(
        permission_mode="bypassPermissions",
        effort_level="high",
        model="fast",
        sdk_session_id=given,
        env=fake_cli.env(SECRET="s", CLAUDECODE="1", CLAUDE_CODE_ENTRYPOINT="cli"),
    )
    [ready] = session.services.of(Ready)
    assert session.events[0] == ready
    assert ready.sdk_session_id == given
    assert ready.model == "fast"
    assert ready.cwd == session.spec.cwd
    assert ready.models == (
        ModelChoice("default", "Default (recommended)"),
        ModelChoice("fast", "Fast"),
        ModelChoice("plain", None),
    )
    [start] = fake_cli.log("start")
    assert start["argv"] == [
        "--output-format",
        "stream-json",
        "--verbose",
        "--model",
        "fast",
        "--permission-prompt-tool",
        "stdio",
        "--permission-mode",
        "default",  # bypassPermissions is never given to a phone-driven session
        f"--session-id={given}",
        "--setting-sources=user,project",
        "--effort",
        "high",
        "--input-format",
        "stream-json",
    ]
    env = start["env"]
    assert env["CLAUDE_CODE_ENTRYPOINT"] == "sdk-py"
    assert env["CLAUDE_AGENT_SDK_VERSION"] == sdk_version()
    assert env["CLAUDE_CODE_SDK_READS_SESSION_STATE"] == "1"
    assert env["PWD"] == session.spec.cwd
    assert env["SECRET"] == "s" and "CLAUDECODE" not in env
    assert "NOT_FOR_THE_CLI" not in env  # spec.env is the whole environment
    [init] = fake_cli.controls("initialize")
    assert init["hooks"] is None
    status = session.driver.status()
    assert (status.state, status.mode, status.effort, status.sdk_session_id) == (
        "idle",
        "default",
        "high",
        given,
    )


@pytest.mark.parametrize(
    ("mode", "effort", "argv_mode", "argv_effort"),
    [("yolo", "auto", "plan", None), ("acceptEdits", "extreme", "acceptEdits", None)],
)
async def test_start_options_are_coerced(
    start_session: Any,
    fake_cli: FakeCli,
    mode: str,
    effort: str,
    argv_mode: str,
    argv_effort: str | None,
) -> None:
    session: Session = await start_session(permission_mode=mode, effort_level=effort)
    argv = fake_cli.log("start")[0]["argv"]
    assert argv[argv.index("--permission-mode") + 1] == argv_mode
    assert ("--effort" in argv) == (argv_effort is not None)
    [ready] = session.services.of(Ready)
    assert uuid.UUID(ready.sdk_session_id or "")
    assert ready.model == "fake-default"  # the CLI's own choice, read with get_settings


async def test_a_missing_cli_fails_the_start(start_session: Any, tmp_path: Path) -> None:
    session: Session = await start_session(options={"cli_path": str(tmp_path / "nope")})
    [failed] = session.services.of(Failed)
    assert failed.reason.startswith("Claude Code could not be started")


async def test_a_cli_that_cannot_block_on_a_failing_hook_is_refused(
    start_session: Any, fake_cli: FakeCli
) -> None:
    session: Session = await start_session(
        env=fake_cli.env(FAKE_NO_BLOCKING_HOOKS="1"), options={"check_tools": True}
    )
    [failed] = session.services.of(Failed)
    assert "cannot hold tool calls" in failed.reason
    assert not session.services.of(Ready)


async def test_a_cli_that_dies_while_starting_fails_the_start(
    fake_cli: FakeCli, tmp_path: Path
) -> None:
    services = FakeServices()
    spec = make_spec(fake_cli, tmp_path, env=fake_cli.env(FAKE_SILENT_INIT="1"))
    run = asyncio.ensure_future(ClaudeDriver(spec, services).run())
    await _until(lambda: fake_cli.log("control"))  # it waits for the initialize answer
    os.kill(_pid_of(fake_cli), signal.SIGKILL)
    reason = await asyncio.wait_for(run, 10)
    # asyncio reports 255 when its child watcher lost the race to the real status (seen on a
    # loaded machine); either way the start failed with the exit's description.
    assert reason in (
        "Claude Code stopped while starting (killed by signal 9)",
        "Claude Code stopped while starting (exit code 255)",
    )
    assert services.events == [Failed(reason)]


async def _until(check: Any, timeout: float = 10) -> Any:
    async with asyncio.timeout(timeout):
        while not (value := check()):
            await asyncio.sleep(0.02)
        return value


def _pid_of(cli: FakeCli) -> int:
    """The pid of the fake CLI started last."""
    return int(cli.log("start")[-1]["pid"])


async def test_a_turn_running_entries_answered_idle_then_stream_end(
    start_session: Any, fake_cli: FakeCli
) -> None:
    session: Session = await start_session()
    uid = "inbox-row-1"
    events = await session.turn("reply:hello", uid=uid)
    assert events[0] == StateChanged("running")
    assert "hello" in [e.entry["content"] for e in events if isinstance(e, Entry)]
    assert events[-3:] == [Answered((uid,)), StateChanged("idle"), events[-1]]
    assert is_stream_end(events[-1])
    [message] = [m["message"] for m in fake_cli.log("message") if m["message"]["type"] == "user"]
    assert message == {
        "type": "user",
        "message": {"role": "user", "content": "reply:hello"},
        "parent_tool_use_id": None,
        "session_id": "default",
        "uuid": input_uuid(uid),
    }
    status = session.driver.status()
    assert status.turn_completed and status.taken == () and status.state == "idle"


async def test_received_is_what_was_taken_or_recorded_in_every_known_transcript(
    start_session: Any, fake_cli: FakeCli
) -> None:
    earlier = str(uuid.uuid4())
    fake_cli.transcript(earlier, [{"type": "user", "uuid": input_uuid("old-row")}])
    session: Session = await start_session(sdk_session_id=earlier, resume=True)
    assert session.services.of(Ready)[0].sdk_session_id == earlier
    await session.turn("reply:x", uid="new-row")
    assert await session.driver.received(["old-row", "new-row", "other"]) == {"old-row", "new-row"}


async def test_an_unresumable_conversation_starts_afresh(
    start_session: Any, fake_cli: FakeCli
) -> None:
    gone = str(uuid.uuid4())
    session: Session = await start_session(sdk_session_id=gone, resume=True)
    [ready] = session.services.of(Ready)
    assert ready.sdk_session_id not in (None, gone)
    note = session.events[1]
    assert isinstance(note, Entry)
    assert note.entry["metadata"] == {"special": "session_restart", "previous_sdk_session_id": gone}
    assert "could not be resumed" in note.entry["content"]
    assert len(session.events) == 2  # nothing of the CLI that refused to resume
    argvs = [record["argv"] for record in fake_cli.log("start")]
    assert f"--resume={gone}" in argvs[0]
    assert f"--session-id={ready.sdk_session_id}" in argvs[1]
    await session.turn("reply:x", uid="fresh")
    assert await session.driver.received(["fresh"]) == {"fresh"}


async def test_a_resumed_conversation_counts_its_cost_from_the_transcript(
    start_session: Any, fake_cli: FakeCli
) -> None:
    earlier = str(uuid.uuid4())
    fake_cli.transcript(earlier, [{"type": "cost-state", "totalCostUSD": 0.004}])
    session: Session = await start_session(sdk_session_id=earlier, resume=True)
    # The fake starts its own count at 0: its first result says 0.01 in total.
    events = await session.turn("reply:x")
    [result] = [
        e.entry
        for e in events
        if isinstance(e, Entry) and e.entry["metadata"].get("subtype") == "result"
    ]
    assert result["metadata"]["cost_usd"] == pytest.approx(0.01 - 0.004)


async def test_a_prompt_waits_for_the_phone_then_allows_with_always(
    start_session: Any, fake_cli: FakeCli
) -> None:
    session: Session = await start_session()
    mark = session.mark()
    session.driver.send_input("u1", "tool:Bash")
    ask = await session.services.next_ask()
    assert ask.request.tool_name == "Bash" and ask.request.description == "Run Bash"
    assert ask.request.request_id.startswith("toolu_")
    position = session.events.index(ask.request)
    tool_use = [e for e in session.events[mark:position] if isinstance(e, Entry)]
    assert any(e.entry["entryType"] == "tool_use" for e in tool_use)  # the card came after it
    assert session.events[position - 1] == StateChanged("waiting_permission")
    await asyncio.sleep(0.5)  # any timeout would have struck by now: none does
    assert not ask.future.done() and session.driver.status().state == "waiting_permission"
    ask.future.set_result(PermissionAnswer(True, always=True))
    await session.turn_end(mark)
    [answer] = fake_cli.answers("can_use_tool")
    assert answer["response"] == {
        "behavior": "allow",
        "updatedInput": {"command": "touch x"},
        "updatedPermissions": [
            {
                "type": "addRules",
                "rules": [{"toolName": "Bash", "ruleContent": "touch x"}],
                "behavior": "allow",
                "destination": destination,
            }
            for destination in ("localSettings", "session")
        ],
    }
    states = [e.state for e in session.events[mark:] if isinstance(e, StateChanged)]
    assert states == ["running", "waiting_permission", "running", "idle"]


@pytest.mark.parametrize(("message", "expected"), [("", DEFAULT_DENY_MESSAGE), ("No", "No")])
async def test_a_denied_prompt_carries_the_message(
    start_session: Any, fake_cli: FakeCli, message: str, expected: str
) -> None:
    session: Session = await start_session(
        services=FakeServices(permission_policy=lambda r: PermissionAnswer(False, message))
    )
    await session.turn("tool:Write")
    [answer] = fake_cli.answers("can_use_tool")
    assert answer["response"] == {"behavior": "deny", "message": expected}
    assert expected in _contents(session)


async def test_an_updated_input_is_what_the_call_gets(
    start_session: Any, fake_cli: FakeCli
) -> None:
    policy = lambda r: PermissionAnswer(True, updated_input={"answers": {"q": "a"}})  # noqa: E731
    session: Session = await start_session(services=FakeServices(permission_policy=policy))
    events = await session.turn("tool:AskUserQuestion")
    asked = [e for e in events if isinstance(e, StateChanged) and e.state.startswith("waiting")]
    assert asked == [StateChanged("waiting_question")]
    [answer] = fake_cli.answers("can_use_tool")
    assert answer["response"]["updatedInput"] == {"answers": {"q": "a"}}


async def test_an_interrupt_withdraws_a_pending_prompt(
    start_session: Any, fake_cli: FakeCli
) -> None:
    session: Session = await start_session()
    mark = session.mark()
    session.driver.send_input("u1", "tool:Bash")
    ask = await session.services.next_ask()
    await session.driver.interrupt()
    await session.turn_end(mark)
    await _until(lambda: session.services.withdrawn)
    assert session.services.withdrawn == [ask.request.request_id]
    states = [e.state for e in session.events[mark:] if isinstance(e, StateChanged)]
    assert states == ["running", "waiting_permission", "running", "idle"]
    assert fake_cli.answers("can_use_tool") == [] and not fake_cli.log("stray_answer")
    assert fake_cli.log("cancelled")
    assert session.driver.status().state == "idle"
    assert "Interrupted" in _contents(session, mark)
    await session.turn("reply:again")  # still usable


async def test_an_interrupt_when_idle_asks_nothing(start_session: Any, fake_cli: FakeCli) -> None:
    session: Session = await start_session()
    await session.driver.interrupt()
    assert fake_cli.controls("interrupt") == []


VERDICT_CASES = [
    ("deny", ToolVerdict("deny", "not here"), "deny", False),
    ("ask", ToolVerdict("ask", "sure?"), "ask", True),
    ("none", ToolVerdict("none"), None, True),
    ("garbage is a deny", ToolVerdict("maybe"), "deny", False),
]


@pytest.mark.parametrize(
    ("verdict", "decision", "prompted"),
    [c[1:] for c in VERDICT_CASES],
    ids=[c[0] for c in VERDICT_CASES],
)
async def test_pre_tool_checks(
    start_session: Any,
    fake_cli: FakeCli,
    verdict: ToolVerdict,
    decision: str | None,
    prompted: bool,
) -> None:
    services = FakeServices(permission_policy=lambda r: PermissionAnswer(True))
    session: Session = await start_session(services=services, options={"check_tools": True})
    [init] = fake_cli.controls("initialize")
    assert init["hooks"] == {
        "PreToolUse": [
            {
                "matcher": None,
                "hookCallbackIds": ["hook_0"],
                "timeout": 7 * 24 * 3600,
                "onFailure": "block",
            }
        ]
    }
    mark = session.mark()
    session.driver.send_input("u1", "tool:Bash")
    check = await services.next_check()
    assert (check.tool_name, check.tool_input) == ("Bash", {"command": "touch x"})
    assert check.request_id.startswith("cli-")  # the CLI's own request id
    check.future.set_result(verdict)
    await session.turn_end(mark)
    [answer] = fake_cli.answers("hook_callback")
    output = answer["response"].get("hookSpecificOutput")
    assert (output or {}).get("permissionDecision") == decision
    if output:
        assert output["hookEventName"] == "PreToolUse"
    assert bool(services.of(PermissionAsked)) == prompted


async def test_an_unknown_request_of_the_cli_gets_an_error_answer(
    start_session: Any, fake_cli: FakeCli
) -> None:
    session: Session = await start_session()
    await session.turn("ask_unknown reply:ok")
    [answer] = fake_cli.answers("no_such_request")
    assert answer == {
        "subtype": "error",
        "request_id": answer["request_id"],
        "error": "Unsupported control request subtype: no_such_request",
    }


async def test_option_changes(start_session: Any, fake_cli: FakeCli) -> None:
    session: Session = await start_session()
    driver: ClaudeDriver = session.driver
    for option, value in [
        ("mode", "acceptEdits"),
        ("mode", "bypassPermissions"),
        ("mode", "yolo"),
        ("effort", "xhigh"),
        ("effort", "extreme"),
        ("effort", "auto"),
        ("model", " fast "),
        ("model", "bad"),
        ("model", "  "),
    ]:
        await driver.set_option(option, value)
    assert session.services.of(OptionSet) == [
        OptionSet("mode", "acceptEdits", "acceptEdits"),
        OptionSet("mode", "bypassPermissions", "default"),
        OptionSet("mode", "yolo", None),
        OptionSet("effort", "xhigh", "high"),  # clamped by the CLI, read back
        OptionSet("effort", "extreme", None),
        OptionSet("effort", "auto", "auto"),
        OptionSet("model", " fast ", "fast"),
        OptionSet("model", "bad", None),  # refused by the CLI
        OptionSet("model", "  ", None),
    ]
    assert [r["mode"] for r in fake_cli.controls("set_permission_mode")] == [
        "acceptEdits",
        "default",
    ]
    assert [r["settings"] for r in fake_cli.controls("apply_flag_settings")] == [
        {"effortLevel": "xhigh"},
        {"effortLevel": None},
    ]
    status = driver.status()
    assert (status.mode, status.model, status.effort) == ("default", "fast", None)
    with pytest.raises(DriverError, match="unknown option"):
        await driver.set_option("colour", "red")


async def test_a_mode_the_cli_switches_to_by_itself_is_reported(
    start_session: Any, fake_cli: FakeCli
) -> None:
    session: Session = await start_session(permission_mode="plan")
    await session.turn("mode:default reply:x")
    assert session.services.of(OptionSet) == [OptionSet("mode", "default", "default")]
    assert session.driver.status().mode == "default"


async def test_a_crash_ends_run_with_the_exit_code_and_the_open_inputs(
    start_session: Any, fake_cli: FakeCli
) -> None:
    session: Session = await start_session()
    await session.turn("reply:first", uid="done")
    session.driver.send_input("lost", "crash:3")
    assert await asyncio.wait_for(session.run, 10) == "exit code 3"
    status = session.driver.status()
    assert status.taken == ("lost",) and status.turn_completed
    with pytest.raises(DriverError, match="not running"):
        session.driver.send_input("late", "x")
    with pytest.raises(DriverError, match="not running"):
        await session.driver.set_option("mode", "plan")


async def test_a_killed_cli_is_reported_by_signal(start_session: Any, fake_cli: FakeCli) -> None:
    session: Session = await start_session()
    os.kill(_pid_of(fake_cli), signal.SIGKILL)
    assert await asyncio.wait_for(session.run, 10) == "killed by signal 9"
    assert not session.driver.status().turn_completed


async def test_close_terminates_an_idle_cli_and_run_returns_none(
    start_session: Any, fake_cli: FakeCli
) -> None:
    session: Session = await start_session()
    pid = _pid_of(fake_cli)
    count = len(session.events)
    await asyncio.gather(session.driver.close(), session.driver.close())
    await session.driver.close()
    assert await asyncio.wait_for(session.run, 10) is None
    assert len(session.events) == count
    assert fake_cli.log("sigterm") and not fake_cli.log("eof")
    assert fake_cli.controls("interrupt") == []
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # gone and reaped


async def test_close_interrupts_a_running_turn_first(start_session: Any, fake_cli: FakeCli) -> None:
    session: Session = await start_session()
    mark = session.mark()
    session.driver.send_input("u", "slow")
    await session.services.wait_for(lambda: session.driver.status().state == "running")
    await asyncio.sleep(0.1)
    await session.driver.close()
    assert await asyncio.wait_for(session.run, 10) is None
    assert len(fake_cli.controls("interrupt")) == 1
    assert "Interrupted" in _contents(session, mark)  # the turn's end is still journaled


async def test_close_while_starting(fake_cli: FakeCli, tmp_path: Path) -> None:
    services = FakeServices()
    spec = make_spec(fake_cli, tmp_path, env=fake_cli.env(FAKE_SILENT_INIT="1"))
    driver = ClaudeDriver(spec, services)
    run = asyncio.ensure_future(driver.run())
    await _until(lambda: fake_cli.log("control"))  # spawned, initializing
    await driver.close()
    assert await asyncio.wait_for(run, 10) is None
    assert services.events == []
    assert await driver.run() is None  # closed: nothing to run


async def test_a_driver_runs_once(start_session: Any) -> None:
    session: Session = await start_session()
    with pytest.raises(DriverError, match="started already"):
        await session.driver.run()
