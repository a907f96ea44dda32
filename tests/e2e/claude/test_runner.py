"""ClaudeRunner against the real bundled Claude Code CLI and the mock Anthropic API.

Every test runs real CLI processes (about 0.5 s to start one); the mock answers instantly. Nothing
leaves 127.0.0.1 (see ``offline_cli_env``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest

from bridge.agents.base import RunnerError, SessionSpec
from bridge.agents.claude import (
    RESTART_DENY_MESSAGE,
    ClaudeRunner,
    provider_env,
)
from bridge.engine.inputs import (
    AgentEnded,
    AgentEntry,
    AgentFailed,
    AgentOptionSet,
    AgentReady,
    AgentStateChanged,
    PermissionRequested,
)
from tests.support.mock_anthropic import MockAnthropic

from .conftest import Harness


def _special(harness: Harness, special: str, since: int = 0) -> list[Any]:
    return [e for e in harness.entries(since) if (e.metadata or {}).get("special") == special]


def _texts(entries: list[Any]) -> list[str]:
    return [
        e.content
        for e in entries
        if e.entryType == "text" and (e.metadata or {}).get("role") == "assistant"
    ]


async def test_start_is_ready_with_ids_model_and_models(session_factory: Any) -> None:
    harness: Harness = await session_factory()
    ready = harness.of(AgentReady)[0]
    assert ready.session_id == harness.spec.session_id
    assert ready.sdk_session_id == harness.runner.sdk_session_id
    assert uuid.UUID(ready.sdk_session_id or "")
    assert ready.model == "claude-opus-5-5"  # the CLI's default, read back with get_settings
    assert ready.cwd == str(harness.cwd)
    assert harness.runner.cli_pid is not None
    models = harness.runner.models()
    assert {"opus", "sonnet", "haiku"} <= {m.id for m in models}
    assert all(m.label for m in models)


async def test_input_gives_thinking_and_text_then_result_and_idle(
    session_factory: Any, mock_api: MockAnthropic
) -> None:
    harness: Harness = await session_factory()
    uid = str(uuid.uuid4())
    entries = await harness.turn("[[think: Pondering.]] [[reply: Hello there]]", uid=uid)
    kinds = [(e.entryType, e.content) for e in entries]
    assert kinds[0][1].startswith("Claude Code 2.1.")  # init, once
    thinking = next(e for e in entries if e.entryType == "thinking")
    text = next(e for e in entries if e.entryType == "text")
    assert thinking.content == "Pondering."
    assert entries.index(thinking) < entries.index(text)
    assert text.content == "Hello there"
    assert text.metadata == {
        "role": "assistant",
        "model": "claude-opus-5-5",
        "display_hint": "show",
    }
    result = next(e for e in entries if (e.metadata or {}).get("subtype") == "result")
    assert result.content.startswith("Session complete — 1 turn, $")
    assert result.metadata is not None
    assert result.metadata["context_window"] == 1_000_000
    assert 0 <= result.metadata["context_percentage"] <= 100
    assert entries[-1].metadata == {"stream_end": True}
    states = [e.state for e in harness.of(AgentStateChanged)]
    assert states == ["running", "idle"]
    # A second turn: no second init entry, and the cost is the turn's, not the session's.
    second = await harness.turn("[[reply: again]]")
    assert not any((e.metadata or {}).get("subtype") == "init" for e in second)
    assert _texts(second) == ["again"]
    request = mock_api.message_requests(session_id=harness.runner.sdk_session_id)[-1]
    assert request.prompt == "[[reply: again]]"
    # received(): from the CLI's transcript.
    other = str(uuid.uuid4())
    assert await harness.runner.received([uid, other]) == {uid}


async def test_write_needs_permission_allow_writes_the_file(session_factory: Any) -> None:
    harness: Harness = await session_factory()
    target = harness.cwd / "hello.txt"
    mark = len(harness.events)
    await harness.runner.send_input(str(uuid.uuid4()), f"[[write: {target} | hi there]]")
    request = await harness.wait_kind(PermissionRequested, since=mark)
    assert request.tool_name == "Write"
    assert request.tool_input == {"file_path": str(target), "content": "hi there"}
    assert request.request_id.startswith("toolu_")
    # The card never overtakes its tool_use entry.
    position = harness.position(request)
    tool_use = [
        e
        for e in harness.events[mark:position]
        if isinstance(e, AgentEntry) and e.entry.entryType == "tool_use"
    ]
    assert [e.entry.content for e in tool_use] == [f"Write: {target}"]
    assert harness.of(AgentStateChanged)[-1].state == "waiting_permission"
    assert not target.exists()
    await harness.runner.answer_permission(request.request_id, True)
    await harness.wait_for(
        lambda e: isinstance(e, AgentEntry) and bool((e.entry.metadata or {}).get("stream_end")),
        since=mark,
    )
    assert target.read_text() == "hi there"
    assert [e.state for e in harness.of(AgentStateChanged)][-3:] == [
        "waiting_permission",
        "running",
        "idle",
    ]


async def test_write_denied_leaves_no_file_and_tells_the_model(
    session_factory: Any, mock_api: MockAnthropic
) -> None:
    harness: Harness = await session_factory()
    target = harness.cwd / "nope.txt"
    mark = len(harness.events)
    await harness.runner.send_input(str(uuid.uuid4()), f"[[write: {target} | x]]")
    request = await harness.wait_kind(PermissionRequested, since=mark)
    await harness.runner.answer_permission(request.request_id, False, message="Not today")
    end = await harness.wait_for(
        lambda e: isinstance(e, AgentEntry) and bool((e.entry.metadata or {}).get("stream_end")),
        since=mark,
    )
    assert not target.exists()
    entries = harness.entries(mark)
    result = next(e for e in entries if e.entryType == "tool_result")
    assert "Not today" in result.content
    assert result.metadata == {"tool_use_id": request.request_id, "is_error": True}
    assert end is harness.events[-1]
    last = mock_api.message_requests(session_id=harness.runner.sdk_session_id)[-1]
    assert "Not today" in json.dumps(last.body["messages"][-1])


async def test_always_adds_an_allow_rule_to_local_settings(session_factory: Any) -> None:
    harness: Harness = await session_factory()
    mark = len(harness.events)
    await harness.runner.send_input(str(uuid.uuid4()), "[[bash: touch made-by-bash]]")
    request = await harness.wait_kind(PermissionRequested, since=mark)
    assert request.tool_input["command"] == "touch made-by-bash"
    await harness.runner.answer_permission(request.request_id, True, always=True)
    await harness.wait_for(
        lambda e: isinstance(e, AgentEntry) and bool((e.entry.metadata or {}).get("stream_end")),
        since=mark,
    )
    assert (harness.cwd / "made-by-bash").exists()
    settings = json.loads((harness.cwd / ".claude" / "settings.local.json").read_text())
    # The CLI's own suggestion for the call (a prefix rule for this command), not all of Bash.
    assert settings["permissions"]["allow"] == ["Bash(touch made-by-bash *)"]
    # The same command again is allowed by the rule: no card this time.
    (harness.cwd / "made-by-bash").unlink()
    mark = len(harness.events)
    await harness.turn("[[bash: touch made-by-bash]]")
    assert not [e for e in harness.events[mark:] if isinstance(e, PermissionRequested)]
    assert (harness.cwd / "made-by-bash").exists()


async def test_exit_plan_mode_reaches_can_use_tool_with_the_plan(session_factory: Any) -> None:
    harness: Harness = await session_factory(mode="plan")
    mark = len(harness.events)
    await harness.runner.send_input(str(uuid.uuid4()), "[[exit_plan: 1. Write the code]]")
    request = await harness.wait_kind(PermissionRequested, since=mark)
    assert request.tool_name == "ExitPlanMode"
    assert request.tool_input["plan"] == "1. Write the code"
    assert str(request.tool_input["planFilePath"]).endswith(".md")
    await harness.runner.answer_permission(request.request_id, True)
    option = await harness.wait_kind(AgentOptionSet, since=mark)
    assert (option.option, option.value) == ("mode", "default")  # the CLI left plan mode itself
    await harness.wait_for(
        lambda e: isinstance(e, AgentEntry) and bool((e.entry.metadata or {}).get("stream_end")),
        since=mark,
    )
    assert harness.runner.permission_mode == "default"
    shown = [e for e in harness.entries(mark) if e.entryType == "tool_use"]
    assert "ExitPlanMode" not in {(e.metadata or {}).get("tool_name") for e in shown}


async def test_ask_user_question_with_two_questions(session_factory: Any) -> None:
    harness: Harness = await session_factory()
    mark = len(harness.events)
    prompt = "[[ask: Which color? | Red | Blue]] [[ask: Which size? | S | L]]"
    await harness.runner.send_input(str(uuid.uuid4()), prompt)
    request = await harness.wait_kind(PermissionRequested, since=mark)
    assert request.tool_name == "AskUserQuestion"
    questions = request.tool_input["questions"]
    assert [q["question"] for q in questions] == ["Which color?", "Which size?"]
    assert [o["label"] for o in questions[1]["options"]] == ["S", "L"]
    assert harness.of(AgentStateChanged)[-1].state == "waiting_question"
    answers = {"Which color?": "Blue", "Which size?": "L"}
    await harness.runner.answer_permission(
        request.request_id, True, updated_input={**request.tool_input, "answers": answers}
    )
    await harness.wait_for(
        lambda e: isinstance(e, AgentEntry) and bool((e.entry.metadata or {}).get("stream_end")),
        since=mark,
    )
    entries = harness.entries(mark)
    final = _texts(entries)[-1]
    assert "Blue" in final and "L" in final
    assert not [e for e in entries if e.entryType in ("tool_use", "tool_result")]


async def test_interrupt_during_a_turn(session_factory: Any) -> None:
    harness: Harness = await session_factory()
    mark = len(harness.events)
    await harness.runner.send_input(str(uuid.uuid4()), "[[slow: 20]]")
    await harness.wait_for(lambda e: isinstance(e, AgentStateChanged) and e.state == "running")
    await asyncio.sleep(0.3)  # let the request reach the mock
    await harness.runner.interrupt()
    await harness.wait_for(
        lambda e: isinstance(e, AgentEntry) and bool((e.entry.metadata or {}).get("stream_end")),
        since=mark,
        timeout=10,
    )
    contents = [e.content for e in harness.entries(mark)]
    assert "Interrupted" in contents
    assert harness.of(AgentStateChanged)[-1].state == "idle"
    assert _texts(await harness.turn("[[reply: still here]]")) == ["still here"]


async def test_interrupt_during_a_pending_permission(session_factory: Any) -> None:
    harness: Harness = await session_factory()
    mark = len(harness.events)
    await harness.runner.send_input(str(uuid.uuid4()), "[[bash: touch never]]")
    request = await harness.wait_kind(PermissionRequested, since=mark)
    await harness.runner.interrupt()
    await harness.wait_for(
        lambda e: isinstance(e, AgentEntry) and bool((e.entry.metadata or {}).get("stream_end")),
        since=mark,
    )
    assert not (harness.cwd / "never").exists()
    assert harness.runner.pending_permissions == ()  # the cancelled callback cleaned up
    assert "Interrupted" in [e.content for e in harness.entries(mark)]
    assert harness.of(AgentStateChanged)[-1].state == "idle"
    await harness.runner.answer_permission(request.request_id, True)  # too late: ignored
    assert _texts(await harness.turn("[[reply: next]]")) == ["next"]


async def test_set_options(session_factory: Any, mock_api: MockAnthropic) -> None:
    harness: Harness = await session_factory()
    runner = harness.runner
    assert await runner.set_option("mode", "acceptEdits") == "acceptEdits"
    assert await runner.set_option("mode", "bypassPermissions") == "default"
    assert await runner.set_option("mode", "yolo") is None
    assert await runner.set_option("effort", "high") == "high"
    assert await runner.set_option("effort", "extreme") is None
    assert await runner.set_option("model", "sonnet") == "sonnet"
    assert await runner.set_option("model", "  ") is None
    assert await runner.set_option("colour", "red") is None
    await harness.turn("[[reply: ok]]")
    body = mock_api.message_requests(session_id=runner.sdk_session_id)[-1].body
    assert body["model"] == "claude-sonnet-5-5"
    assert body["output_config"]["effort"] == "high"
    assert await runner.set_option("effort", "auto") == "auto"
    await harness.turn("[[reply: ok]]")
    body = mock_api.message_requests(session_id=runner.sdk_session_id)[-1].body
    assert body["output_config"]["effort"] == "medium"  # the model's default again
    # Nothing but the runtime reports these changes: no AgentOptionSet from the runner.
    assert harness.of(AgentOptionSet) == []


async def test_killed_cli_restarts_with_resume_and_continues(
    session_factory: Any, mock_api: MockAnthropic
) -> None:
    harness: Harness = await session_factory()
    await harness.turn("[[reply: remember me]]")
    sdk_id = harness.runner.sdk_session_id
    pid = harness.runner.cli_pid
    assert pid is not None
    # A slow turn in flight and a second input queued behind it when the CLI dies.
    slow, queued = str(uuid.uuid4()), str(uuid.uuid4())
    mark = len(harness.events)
    await harness.runner.send_input(slow, "[[slow: 20]]")
    await harness.wait_for(
        lambda e: isinstance(e, AgentStateChanged) and e.state == "running", since=mark
    )
    await asyncio.sleep(0.3)
    await harness.runner.send_input(queued, "[[reply: after the crash]]")
    await asyncio.sleep(0.2)
    os.kill(pid, signal.SIGKILL)
    restart = await harness.wait_for(
        lambda e: (
            isinstance(e, AgentEntry)
            and (e.entry.metadata or {}).get("special") == "session_restart"
        ),
        since=mark,
    )
    assert isinstance(restart, AgentEntry)
    assert "exit code -9" in restart.entry.content
    ready = await harness.wait_kind(AgentReady, since=mark)
    assert ready.sdk_session_id == sdk_id  # resumed, not a new conversation
    assert harness.runner.cli_pid not in (None, pid)
    # The queued input never reached the transcript: it is written again, once, and answered.
    end = await harness.wait_for(
        lambda e: isinstance(e, AgentEntry) and bool((e.entry.metadata or {}).get("stream_end")),
        since=harness.position(ready),
    )
    assert _texts(harness.entries(harness.position(ready)))[-1] == "after the crash"
    assert end is not None
    requests = mock_api.message_requests(session_id=sdk_id)
    assert sum(r.prompt == "[[reply: after the crash]]" for r in requests) == 1
    resumed = json.dumps(requests[-1].body["messages"])
    assert "remember me" in resumed  # the conversation continued
    assert await harness.runner.received([slow, queued]) == {slow, queued}
    assert not harness.of(AgentEnded)


async def test_restarts_run_out(session_factory: Any) -> None:
    harness: Harness = await session_factory()
    runner = harness.runner
    await harness.turn("[[reply: a conversation to resume]]")
    for _ in range(3):
        pid = runner.cli_pid
        assert pid is not None
        mark = len(harness.events)
        os.kill(pid, signal.SIGKILL)
        await harness.wait_for(lambda e: isinstance(e, (AgentReady, AgentEnded)), since=mark)
    ended = harness.of(AgentEnded)
    assert len(ended) == 1 and "after 2 restart(s)" in ended[0].reason
    assert len(_special(harness, "session_restart")) == 2
    with pytest.raises(RunnerError, match="has ended"):
        await runner.send_input("u", "hello")


async def test_pending_permission_is_denied_on_restart(session_factory: Any) -> None:
    harness: Harness = await session_factory()
    mark = len(harness.events)
    await harness.runner.send_input(str(uuid.uuid4()), "[[bash: touch later]]")
    await harness.wait_kind(PermissionRequested, since=mark)
    pid = harness.runner.cli_pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    await harness.wait_kind(AgentReady, since=mark)
    assert harness.runner.pending_permissions == ()
    assert RESTART_DENY_MESSAGE == "Session restarted — please retry"


async def test_unresumable_conversation_starts_fresh(
    mock_api: MockAnthropic, tmp_path: Path
) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    events: list[Any] = []
    gone = str(uuid.uuid4())
    spec = SessionSpec("s-fresh", cwd, permission_mode="default", sdk_session_id=gone)
    runner = ClaudeRunner(
        "s-fresh", events.append, base_env={**os.environ, **mock_api.cli_env(tmp_path / "c")}
    )
    try:
        await runner.start(spec, resume=True)
        async with asyncio.timeout(30):
            while not any(isinstance(e, (AgentReady, AgentFailed)) for e in events):
                await asyncio.sleep(0.02)
        ready = next(e for e in events if isinstance(e, AgentReady))
        assert ready.sdk_session_id not in (None, gone)
        assert runner.previous_sdk_session_ids == (gone,)
        notes = [e.entry for e in events if isinstance(e, AgentEntry)]
        assert notes[0].metadata == {"special": "session_restart", "previous_sdk_session_id": gone}
    finally:
        await runner.close()


async def test_missing_cwd_fails_the_start(mock_api: MockAnthropic, tmp_path: Path) -> None:
    events: list[Any] = []
    runner = ClaudeRunner("s-x", events.append, base_env=mock_api.cli_env(tmp_path / "c"))
    await runner.start(SessionSpec("s-x", tmp_path / "missing"), resume=False)
    async with asyncio.timeout(10):
        while not events:
            await asyncio.sleep(0.01)
    assert isinstance(events[0], AgentFailed) and "does not exist" in events[0].reason
    with pytest.raises(RunnerError, match="failed to start"):
        await runner.send_input("u", "x")
    await runner.close()


async def test_close_is_idempotent_and_silent(session_factory: Any) -> None:
    harness: Harness = await session_factory()
    pid = harness.runner.cli_pid
    assert pid is not None
    await harness.runner.send_input(str(uuid.uuid4()), "[[slow: 20]]")
    count = len(harness.events)
    await harness.runner.close()
    await harness.runner.close()
    await asyncio.sleep(0.2)
    assert len(harness.events) == count
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the CLI is gone (and reaped)
    with pytest.raises(RunnerError, match="closed"):
        await harness.runner.set_option("mode", "plan")


async def test_provider_bound_session_uses_the_profile_token(
    session_factory: Any, mock_api: MockAnthropic
) -> None:
    async def hook(spec: SessionSpec, env: dict[str, str]) -> dict[str, str]:
        return provider_env(env, mock_api.base_url, "tok-profile-123", "claude-provider-1")

    harness: Harness = await session_factory(
        env_hook=hook,
        effort="low",
        extra_env={"CLAUDE_CODE_USE_BEDROCK": "1", "AWS_REGION": "eu-west-1"},
    )
    await harness.turn("[[reply: via the provider]]")
    request = mock_api.message_requests(session_id=harness.runner.sdk_session_id)[-1]
    assert request.headers["authorization"] == "Bearer tok-profile-123"
    assert "x-api-key" not in request.headers  # the daemon's ANTHROPIC_API_KEY was scrubbed
    assert request.body["model"] == "claude-provider-1"
    assert request.body["output_config"]["effort"] == "low"  # the spec's effort, at spawn


async def test_enter_plan_mode_is_reported_as_a_mode_change(session_factory: Any) -> None:
    harness: Harness = await session_factory()
    mark = len(harness.events)
    entries = await harness.turn("[[enter_plan]]")
    # Claude Code 2.1.332 allows EnterPlanMode by itself (no can_use_tool); the runner reports
    # the mode it switched to.
    assert not [e for e in harness.events[mark:] if isinstance(e, PermissionRequested)]
    option = await harness.wait_kind(AgentOptionSet, since=mark)
    assert (option.option, option.requested, option.value) == ("mode", "plan", "plan")
    assert harness.runner.permission_mode == "plan"
    assert "EnterPlanMode: {}" in [e.content for e in entries]


async def test_a_new_runner_resumes_the_session_and_its_record(
    mock_api: MockAnthropic, tmp_path: Path
) -> None:
    """What a daemon restart does: a new runner, ``resume=True``, the stored SDK session id."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = {**os.environ, **mock_api.cli_env(tmp_path / "config")}
    first: list[Any] = []
    runner = ClaudeRunner("s-resume", first.append, base_env=env)
    spec = SessionSpec("s-resume", cwd, permission_mode="default")
    delivered = str(uuid.uuid4())
    try:
        await runner.start(spec, resume=False)
        await _until(first, lambda e: isinstance(e, AgentReady))
        await runner.send_input(delivered, "[[reply: before the restart]]")
        await _until(first, _stream_end)
    finally:
        await runner.close()
    sdk_id = runner.sdk_session_id
    first_cost = next(
        (e.entry.metadata or {})["total_cost_usd"]
        for e in first
        if isinstance(e, AgentEntry) and (e.entry.metadata or {}).get("subtype") == "result"
    )
    second: list[Any] = []
    again = ClaudeRunner("s-resume", second.append, base_env=env)
    try:
        await again.start(
            SessionSpec("s-resume", cwd, permission_mode="default", sdk_session_id=sdk_id),
            resume=True,
        )
        ready = await _until(second, lambda e: isinstance(e, AgentReady))
        assert ready.sdk_session_id == sdk_id
        assert await again.received([delivered, str(uuid.uuid4())]) == {delivered}
        await again.send_input(str(uuid.uuid4()), "[[reply: after the restart]]")
        await _until(second, _stream_end)
        result = next(
            e.entry
            for e in second
            if isinstance(e, AgentEntry) and (e.entry.metadata or {}).get("subtype") == "result"
        )
        assert result.metadata is not None
        total = result.metadata["total_cost_usd"]
        assert total > first_cost  # cumulative across the resume …
        assert result.metadata["cost_usd"] == pytest.approx(total - first_cost, abs=1e-6)  # … delta
    finally:
        await again.close()


def _stream_end(event: Any) -> bool:
    return isinstance(event, AgentEntry) and bool((event.entry.metadata or {}).get("stream_end"))


async def _until(events: list[Any], predicate: Any, timeout: float = 30) -> Any:
    async with asyncio.timeout(timeout):
        while True:
            for event in events:
                if predicate(event):
                    return event
            await asyncio.sleep(0.02)
