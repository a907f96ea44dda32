"""ClaudeDriver against the real bundled Claude Code CLI and the mock Anthropic API.

Every test runs real CLI processes (about 0.3 s to start one); the mock answers instantly. Nothing
leaves 127.0.0.1 (see ``offline_cli_env``). The host is a :class:`~tests.host.fakes.FakeServices`:
the tests answer the permission asks and tool checks themselves.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from bridge.agents.claude import provider_env
from bridge.host.driver import DriverError, PermissionAnswer, ToolVerdict
from bridge.host.events import (
    Answered,
    Failed,
    OptionSet,
    PermissionAsked,
    Ready,
    StateChanged,
)
from tests.host.fakes import FakeServices
from tests.support.mock_anthropic import MockAnthropic

from .conftest import Harness, is_stream_end, make_spec, start

pytestmark = pytest.mark.e2e


def _texts(entries: list[dict[str, Any]]) -> list[str]:
    return [
        e["content"]
        for e in entries
        if e["entryType"] == "text" and (e.get("metadata") or {}).get("role") == "assistant"
    ]


def _states(harness: Harness, since: int = 0) -> list[str]:
    return [e.state for e in harness.events[since:] if isinstance(e, StateChanged)]


def _pid(harness: Harness) -> int:
    cli = harness.driver._cli
    assert cli is not None
    return cli.process.pid


def _transcript(harness: Harness) -> str:
    sdk_id = harness.driver.status().sdk_session_id
    return "".join(p.read_text() for p in harness.config_dir.glob(f"projects/*/{sdk_id}.jsonl"))


def _tool_results(transcript: str) -> list[dict[str, Any]]:
    """The tool_result blocks the CLI recorded in its session file."""
    found: list[dict[str, Any]] = []
    for line in transcript.splitlines():
        record = json.loads(line)
        content = (
            (record.get("message") or {}).get("content") if record.get("type") == "user" else None
        )
        if isinstance(content, list):
            found += [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
    return found


async def test_start_is_ready_with_ids_model_and_models(session_factory: Any) -> None:
    started = time.monotonic()
    harness: Harness = await session_factory()
    elapsed = time.monotonic() - started
    [ready] = harness.services.of(Ready)
    assert harness.events[0] == ready
    assert uuid.UUID(ready.sdk_session_id or "")
    assert ready.sdk_session_id == harness.driver.status().sdk_session_id
    assert ready.model == "claude-opus-5-5"  # the CLI's default, read back with get_settings
    assert ready.cwd == str(harness.cwd)
    assert {"opus", "sonnet", "haiku"} <= {m.id for m in ready.models}
    assert all(m.label for m in ready.models)
    assert elapsed < 20  # generous: 2 shared cores (measured ~0.3 s)


async def test_a_turn_thinking_text_result_answered_idle(
    session_factory: Any, mock_api: MockAnthropic
) -> None:
    harness: Harness = await session_factory()
    uid = str(uuid.uuid4())
    mark = harness.mark()
    entries = await harness.turn("[[think: Pondering.]] [[reply: Hello there]]", uid=uid)
    assert entries[0]["content"].startswith("Claude Code 2.1.")  # init, once
    thinking = next(e for e in entries if e["entryType"] == "thinking")
    text = next(e for e in entries if e["entryType"] == "text")
    assert thinking["content"] == "Pondering." and text["content"] == "Hello there"
    assert entries.index(thinking) < entries.index(text)
    assert text["metadata"] == {
        "role": "assistant",
        "model": "claude-opus-5-5",
        "display_hint": "show",
    }
    result = next(e for e in entries if e["metadata"].get("subtype") == "result")
    assert result["content"].startswith("Session complete — 1 turn, $")
    tail = harness.events[-3:]
    assert tail[:2] == [Answered((uid,)), StateChanged("idle")] and is_stream_end(tail[2])
    assert _states(harness, mark) == ["running", "idle"]
    second = await harness.turn("[[reply: again]]")
    assert not any(e["metadata"].get("subtype") == "init" for e in second)
    assert _texts(second) == ["again"]
    sdk_id = harness.driver.status().sdk_session_id
    assert mock_api.message_requests(session_id=sdk_id)[-1].prompt == "[[reply: again]]"
    assert await harness.driver.received([uid, "other"]) == {uid}


async def test_write_needs_permission_allow_writes_the_file(session_factory: Any) -> None:
    harness: Harness = await session_factory()
    target = harness.cwd / "hello.txt"
    mark = harness.mark()
    harness.driver.send_input(str(uuid.uuid4()), f"[[write: {target} | hi there]]")
    ask = await harness.services.next_ask()
    assert ask.request.tool_name == "Write"
    assert ask.request.tool_input == {"file_path": str(target), "content": "hi there"}
    assert ask.request.request_id.startswith("toolu_")
    position = harness.events.index(ask.request)
    tool_use = [e for e in harness.entries(mark)[:position] if e["entryType"] == "tool_use"]
    assert [e["content"] for e in tool_use] == [f"Write: {target}"]  # the card came after it
    assert harness.events[position - 1] == StateChanged("waiting_permission")
    assert not target.exists()
    ask.future.set_result(PermissionAnswer(True))
    await harness.turn_end(mark)
    assert target.read_text() == "hi there"
    assert _states(harness, mark)[-3:] == ["waiting_permission", "running", "idle"]


async def test_write_denied_leaves_no_file_and_tells_the_model(
    session_factory: Any, mock_api: MockAnthropic
) -> None:
    harness: Harness = await session_factory()
    target = harness.cwd / "nope.txt"
    mark = harness.mark()
    harness.driver.send_input(str(uuid.uuid4()), f"[[write: {target} | x]]")
    ask = await harness.services.next_ask()
    ask.future.set_result(PermissionAnswer(False, "Not today"))
    await harness.turn_end(mark)
    assert not target.exists()
    result = next(e for e in harness.entries(mark) if e["entryType"] == "tool_result")
    assert "Not today" in result["content"]
    assert result["metadata"] == {"tool_use_id": ask.request.request_id, "is_error": True}
    sdk_id = harness.driver.status().sdk_session_id
    last = mock_api.message_requests(session_id=sdk_id)[-1]
    assert "Not today" in json.dumps(last.body["messages"][-1])


async def test_always_adds_an_allow_rule_to_local_settings(session_factory: Any) -> None:
    harness: Harness = await session_factory()
    mark = harness.mark()
    harness.driver.send_input(str(uuid.uuid4()), "[[bash: touch made-by-bash]]")
    ask = await harness.services.next_ask()
    assert ask.request.tool_input["command"] == "touch made-by-bash"
    ask.future.set_result(PermissionAnswer(True, always=True))
    await harness.turn_end(mark)
    assert (harness.cwd / "made-by-bash").exists()
    settings = json.loads((harness.cwd / ".claude" / "settings.local.json").read_text())
    # The CLI's own suggestion for the call (a prefix rule for this command), not all of Bash.
    assert settings["permissions"]["allow"] == ["Bash(touch made-by-bash *)"]
    (harness.cwd / "made-by-bash").unlink()
    mark = harness.mark()
    await harness.turn("[[bash: touch made-by-bash]]")  # allowed by the rule: no card
    assert not harness.services.of(PermissionAsked)[1:]
    assert (harness.cwd / "made-by-bash").exists()


async def test_exit_plan_mode_asks_with_the_plan_and_the_cli_leaves_plan_mode(
    session_factory: Any,
) -> None:
    harness: Harness = await session_factory(mode="plan")
    mark = harness.mark()
    harness.driver.send_input(str(uuid.uuid4()), "[[exit_plan: 1. Write the code]]")
    ask = await harness.services.next_ask()
    assert ask.request.tool_name == "ExitPlanMode"
    assert ask.request.tool_input["plan"] == "1. Write the code"
    assert str(ask.request.tool_input["planFilePath"]).endswith(".md")
    ask.future.set_result(PermissionAnswer(True))
    await harness.turn_end(mark)
    assert OptionSet("mode", "default", "default") in harness.services.of(OptionSet)
    assert harness.driver.status().mode == "default"
    shown = [e for e in harness.entries(mark) if e["entryType"] == "tool_use"]
    assert "ExitPlanMode" not in {e["metadata"].get("tool_name") for e in shown}


async def test_enter_plan_mode_is_reported_as_a_mode_change(session_factory: Any) -> None:
    harness: Harness = await session_factory()
    entries = await harness.turn("[[enter_plan]]")
    # Claude Code 2.1.332 allows EnterPlanMode by itself (no prompt); the driver reports it.
    assert not harness.services.of(PermissionAsked)
    assert harness.services.of(OptionSet) == [OptionSet("mode", "plan", "plan")]
    assert harness.driver.status().mode == "plan"
    assert "EnterPlanMode: {}" in [e["content"] for e in entries]


async def test_ask_user_question_answered_with_updated_input(session_factory: Any) -> None:
    harness: Harness = await session_factory()
    mark = harness.mark()
    prompt = "[[ask: Which color? | Red | Blue]] [[ask: Which size? | S | L]]"
    harness.driver.send_input(str(uuid.uuid4()), prompt)
    ask = await harness.services.next_ask()
    assert ask.request.tool_name == "AskUserQuestion"
    questions = ask.request.tool_input["questions"]
    assert [q["question"] for q in questions] == ["Which color?", "Which size?"]
    assert _states(harness)[-1] == "waiting_question"
    answers = {"Which color?": "Blue", "Which size?": "L"}
    updated = {**ask.request.tool_input, "answers": answers}
    ask.future.set_result(PermissionAnswer(True, updated_input=updated))
    await harness.turn_end(mark)
    entries = harness.entries(mark)
    final = _texts(entries)[-1]
    assert "Blue" in final and "L" in final
    assert not [e for e in entries if e["entryType"] in ("tool_use", "tool_result")]


async def test_interrupt_while_streaming(session_factory: Any) -> None:
    harness: Harness = await session_factory()
    mark = harness.mark()
    harness.driver.send_input(str(uuid.uuid4()), "[[slow: 20]]")
    await harness.wait_for(lambda e: e == StateChanged("running"), since=mark)
    await asyncio.sleep(0.3)  # let the request reach the mock
    await harness.driver.interrupt()
    await harness.turn_end(mark, timeout=10)
    assert "Interrupted" in [e["content"] for e in harness.entries(mark)]
    assert harness.driver.status().state == "idle"
    assert _texts(await harness.turn("[[reply: still here]]")) == ["still here"]


async def test_interrupt_while_a_card_is_pending_withdraws_it(session_factory: Any) -> None:
    harness: Harness = await session_factory()
    mark = harness.mark()
    harness.driver.send_input(str(uuid.uuid4()), "[[bash: touch never]]")
    ask = await harness.services.next_ask()
    await harness.driver.interrupt()
    await harness.turn_end(mark)
    await harness.services.wait_for(lambda: harness.services.withdrawn)
    assert harness.services.withdrawn == [ask.request.request_id]
    assert not (harness.cwd / "never").exists()
    assert "Interrupted" in [e["content"] for e in harness.entries(mark)]
    assert _states(harness, mark)[-3:] == ["waiting_permission", "running", "idle"]
    assert _texts(await harness.turn("[[reply: next]]")) == ["next"]


async def test_pre_tool_checks_deny_ask_and_none(session_factory: Any) -> None:
    services = FakeServices(permission_policy=lambda r: PermissionAnswer(True))
    harness: Harness = await session_factory(
        services=services, check_tools=True, mode="acceptEdits"
    )
    cases = [
        ("deny", "blocked.txt", False, False),
        ("ask", "asked.txt", True, True),
        ("none", "free.txt", False, True),
    ]
    for decision, name, prompted, written in cases:
        target = harness.cwd / name
        mark = harness.mark()
        asks = len(services.of(PermissionAsked))
        harness.driver.send_input(str(uuid.uuid4()), f"[[write: {target} | {decision}]]")
        check = await services.next_check()
        assert (check.tool_name, check.tool_input["file_path"]) == ("Write", str(target))
        check.future.set_result(ToolVerdict(decision, f"the gate says {decision}"))
        await harness.turn_end(mark)
        assert (len(services.of(PermissionAsked)) > asks) == prompted, decision
        assert target.exists() == written, decision
        if decision == "deny":
            result = next(e for e in harness.entries(mark) if e["entryType"] == "tool_result")
            assert "the gate says deny" in result["content"]


async def test_set_options_reach_the_api(session_factory: Any, mock_api: MockAnthropic) -> None:
    harness: Harness = await session_factory()
    driver = harness.driver
    for option, value in [
        ("mode", "acceptEdits"),
        ("mode", "bypassPermissions"),
        ("mode", "yolo"),
        ("effort", "high"),
        ("effort", "extreme"),
        ("model", "sonnet"),
        ("model", "  "),
    ]:
        await driver.set_option(option, value)
    assert harness.services.of(OptionSet) == [
        OptionSet("mode", "acceptEdits", "acceptEdits"),
        OptionSet("mode", "bypassPermissions", "default"),
        OptionSet("mode", "yolo", None),
        OptionSet("effort", "high", "high"),
        OptionSet("effort", "extreme", None),
        OptionSet("model", "sonnet", "sonnet"),
        OptionSet("model", "  ", None),
    ]
    with pytest.raises(DriverError):
        await driver.set_option("colour", "red")
    sdk_id = driver.status().sdk_session_id
    await harness.turn("[[reply: ok]]")
    body = mock_api.message_requests(session_id=sdk_id)[-1].body
    assert body["model"] == "claude-sonnet-5-5"
    assert body["output_config"]["effort"] == "high"
    await driver.set_option("effort", "auto")
    await harness.turn("[[reply: ok]]")
    body = mock_api.message_requests(session_id=sdk_id)[-1].body
    assert body["output_config"]["effort"] == "medium"  # the model's default again
    status = driver.status()
    assert (status.mode, status.model, status.effort) == ("default", "sonnet", None)


async def test_a_killed_cli_ends_run_with_its_open_inputs(session_factory: Any) -> None:
    harness: Harness = await session_factory()
    await harness.turn("[[reply: first]]")
    uid = str(uuid.uuid4())
    mark = harness.mark()
    harness.driver.send_input(uid, "[[slow: 20]]")
    await harness.wait_for(lambda e: e == StateChanged("running"), since=mark)
    os.kill(_pid(harness), signal.SIGKILL)
    assert harness.run is not None
    assert await asyncio.wait_for(harness.run, 10) == "killed by signal 9"
    status = harness.driver.status()
    assert status.taken == (uid,) and status.turn_completed
    with pytest.raises(DriverError):
        harness.driver.send_input("late", "x")


async def test_close_is_idempotent_and_leaves_no_process(session_factory: Any) -> None:
    harness: Harness = await session_factory()
    pid = _pid(harness)
    harness.driver.send_input(str(uuid.uuid4()), "[[slow: 20]]")
    await harness.wait_for(lambda e: e == StateChanged("running"))
    await asyncio.gather(harness.driver.close(), harness.driver.close())
    assert harness.run is not None
    assert await asyncio.wait_for(harness.run, 10) is None
    count = len(harness.events)
    await harness.driver.close()
    await asyncio.sleep(0.2)
    assert len(harness.events) == count
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the CLI is gone (and reaped)


async def test_a_new_driver_resumes_the_conversation_and_its_record(
    mock_api: MockAnthropic, tmp_path: Path
) -> None:
    """What a host restart does: a new driver, ``resume``, the conversation id of the first."""
    first_services = FakeServices()
    spec = make_spec(mock_api, tmp_path)
    first = await start(spec, first_services, tmp_path / "config")
    delivered = str(uuid.uuid4())
    try:
        entries = await first.turn("[[reply: before the restart]]", uid=delivered)
    finally:
        await first.driver.close()
    sdk_id = first.driver.status().sdk_session_id
    first_cost = next(
        e["metadata"]["total_cost_usd"] for e in entries if e["metadata"].get("subtype") == "result"
    )
    again_spec = make_spec(
        mock_api, tmp_path, sdk_session_id=sdk_id, resume=True, cwd=Path(spec.cwd)
    )
    again = await start(again_spec, FakeServices(), tmp_path / "config")
    try:
        [ready] = again.services.of(Ready)
        assert ready.sdk_session_id == sdk_id
        assert await again.driver.received([delivered, str(uuid.uuid4())]) == {delivered}
        entries = await again.turn("[[reply: after the restart]]")
        result = next(e for e in entries if e["metadata"].get("subtype") == "result")
        total = result["metadata"]["total_cost_usd"]
        assert total > first_cost  # cumulative across the resume …
        assert result["metadata"]["cost_usd"] == pytest.approx(
            total - first_cost, abs=1e-6
        )  # … delta
        request = mock_api.message_requests(session_id=sdk_id)[-1]
        assert "before the restart" in json.dumps(request.body["messages"])
    finally:
        await again.driver.close()


async def test_an_unresumable_conversation_starts_fresh(
    mock_api: MockAnthropic, tmp_path: Path
) -> None:
    gone = str(uuid.uuid4())
    spec = make_spec(mock_api, tmp_path, sdk_session_id=gone, resume=True)
    harness = await start(spec, FakeServices(), tmp_path / "config")
    try:
        [ready] = harness.services.of(Ready)
        assert ready.sdk_session_id not in (None, gone)
        [note] = harness.entries()
        assert note["metadata"] == {"special": "session_restart", "previous_sdk_session_id": gone}
        assert len(harness.events) == 2  # nothing of the CLI that refused to resume
        assert _texts(await harness.turn("[[reply: fresh]]")) == ["fresh"]
    finally:
        await harness.driver.close()


async def test_a_missing_cwd_fails_the_start(mock_api: MockAnthropic, tmp_path: Path) -> None:
    spec = make_spec(mock_api, tmp_path, cwd=tmp_path / "missing")
    harness = await start(spec, FakeServices(), tmp_path / "config")
    [failed] = harness.services.of(Failed)
    assert "does not exist" in failed.reason
    assert harness.run is not None and await harness.run == failed.reason


async def test_a_provider_bound_session_uses_the_profile_token(
    mock_api: MockAnthropic, tmp_path: Path
) -> None:
    daemon_env = {
        **os.environ,
        **mock_api.cli_env(tmp_path / "config"),
        "CLAUDE_CODE_USE_BEDROCK": "1",
        "AWS_REGION": "eu-west-1",
    }
    env = provider_env(daemon_env, mock_api.base_url, "tok-profile-123", "claude-provider-1")
    spec = make_spec(mock_api, tmp_path, env=env, effort="low")
    harness = await start(spec, FakeServices(), tmp_path / "config")
    try:
        await harness.turn("[[reply: via the provider]]")
        sdk_id = harness.driver.status().sdk_session_id
        request = mock_api.message_requests(session_id=sdk_id)[-1]
        assert request.headers["authorization"] == "Bearer tok-profile-123"
        assert "x-api-key" not in request.headers  # the daemon's ANTHROPIC_API_KEY was scrubbed
        assert request.body["model"] == "claude-provider-1"
        assert request.body["output_config"]["effort"] == "low"  # the spec's effort, at spawn
    finally:
        await harness.driver.close()


@pytest.mark.timeout(240)
async def test_answers_that_come_a_minute_late_still_let_the_calls_run(
    session_factory: Any,
) -> None:
    """No timeout anywhere on the way: a daemon that restarts for over a minute still decides.

    Two sessions wait side by side, one in a pre-tool check, one in a permission prompt, for
    longer than the CLI's 60 s control and default hook timeouts; both calls then run and
    neither session file records a refusal.
    """
    hooked = await session_factory(check_tools=True)
    prompted = await session_factory()
    marks = (hooked.mark(), prompted.mark())
    targets = (hooked.cwd / "late-check.txt", prompted.cwd / "late-prompt.txt")
    hooked.driver.send_input(str(uuid.uuid4()), f"[[write: {targets[0]} | late]]")
    prompted.driver.send_input(str(uuid.uuid4()), f"[[write: {targets[1]} | late]]")
    check = await hooked.services.next_check()
    ask = await prompted.services.next_ask()
    await asyncio.sleep(65)
    check.future.set_result(ToolVerdict("none"))
    ask.future.set_result(PermissionAnswer(True))
    (await hooked.services.next_ask()).future.set_result(PermissionAnswer(True))
    await hooked.turn_end(marks[0])
    await prompted.turn_end(marks[1])
    for harness, target in zip((hooked, prompted), targets, strict=True):
        assert target.read_text() == "late"
        results = _tool_results(_transcript(harness))
        assert results and all(not r.get("is_error") for r in results), results
        assert "File created successfully" in str(results[-1]["content"])
        assert not [e for e in harness.entries() if e["entryType"] == "error"]
