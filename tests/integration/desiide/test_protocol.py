"""``codedeck-bridge desiide`` forked as the extension forks it: handshake, errors, lifetime.

Tasks run in the e2e tier (the real Claude Code CLI); here the process itself is under test: the
framing on stdout, every error code it can answer, the reverse request ``secrets.get``, settings,
decisions without a daemon, and how it ends (stdin closed, SIGTERM).
"""

from __future__ import annotations

import json
import signal
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bridge.control.framing import encode_frame
from tests.support.desiide_client import DesiideClient, RpcFailure
from tests.support.mock_anthropic import MockAnthropic


@pytest.fixture
async def editor(tmp_path: Path) -> AsyncIterator[DesiideClient]:
    client = DesiideClient(tmp_path / "home", secrets={"anthropic": "sk-ant-test-123456"})
    await client.start()
    try:
        yield client
    finally:
        await client.kill()


async def test_every_request_before_initialize_is_not_initialized(editor: DesiideClient) -> None:
    for method in ("task.list", "health.ping", "no.such.method"):
        with pytest.raises(RpcFailure) as caught:
            await editor.request(method, {})
        assert caught.value.code == -32002


async def test_another_major_is_a_protocol_mismatch_that_says_to_update(
    editor: DesiideClient, tmp_path: Path
) -> None:
    with pytest.raises(RpcFailure) as caught:
        await editor.initialize([str(tmp_path)], version="2.0.0")
    assert caught.value.code == -32001
    assert "update" in caught.value.message
    result = await editor.initialize([str(tmp_path)])  # the same major is still welcome
    assert result["protocolVersion"] == "1.0.0"
    assert result["server"]["name"] == "codedeck-bridge"


async def test_errors_of_an_initialized_connection(editor: DesiideClient, tmp_path: Path) -> None:
    await editor.initialize([str(tmp_path)])
    cases = [
        ("no.such.method", {}, -32601),
        ("task.create", {"kind": "ask", "instruction": "x", "colour": "red"}, -32602),
        ("task.create", {"kind": "rewrite", "instruction": "x"}, -32602),
        ("task.cancel", {"taskId": "task-" + "0" * 32}, -32004),
        ("decisions.replay", {"id": 1}, -32602),
        (
            "edits.report",
            {"taskId": "t", "proposalId": "p", "files": [{"path": "/etc/x", "status": "applied"}]},
            -32602,
        ),
    ]
    for method, params, code in cases:
        with pytest.raises(RpcFailure) as caught:
            await editor.request(method, params)
        assert caught.value.code == code, (method, caught.value)
    with pytest.raises(RpcFailure) as caught:
        await editor.request("task.create", {"kind": "ask", "instruction": "x", "colour": "red"})
    assert "colour" in caught.value.message
    # A body that is not JSON is a parse error; the connection goes on.
    editor.send_raw(encode_frame(b"{not json"))
    pong = await editor.request("health.ping")
    assert pong["ok"] is True and pong["uptimeMs"] >= 0
    parse_errors = [m for m in editor.raw if m.get("error", {}).get("code") == -32700]
    assert len(parse_errors) == 1


async def test_approve_of_no_pending_approval_is_approval_not_found(
    editor: DesiideClient, tmp_path: Path
) -> None:
    """A task that failed at once (no checks in an empty project) has no approval to answer."""
    await editor.initialize([str(tmp_path)])
    created = await editor.request(
        "task.create", {"kind": "fix", "instruction": "make the tests pass"}
    )
    task = created["task"]
    assert task["state"] == "failed" and task["failureReason"] == "no_check_command"
    kinds = [e["type"] for e in editor.task_events(task["id"])]
    assert kinds[-2:] == ["error", "state_changed"]
    with pytest.raises(RpcFailure) as caught:
        await editor.request(
            "task.approve", {"taskId": task["id"], "approvalId": "toolu_x", "scope": "once"}
        )
    assert caught.value.code == -32005
    listed = await editor.request("task.list", {})
    assert [t["id"] for t in listed["tasks"]] == [task["id"]]


async def test_no_workspace_fails_the_task(editor: DesiideClient) -> None:
    await editor.initialize([])
    created = await editor.request("task.create", {"kind": "ask", "instruction": "hello"})
    assert created["task"]["failureReason"] == "no_workspace"


async def test_settings_are_refs_only_and_secrets_come_from_the_editor(
    editor: DesiideClient, tmp_path: Path
) -> None:
    await editor.initialize([str(tmp_path)])
    raw_key = "sk-ant-api03-" + "x" * 40
    model = {
        "id": "judge",
        "provider": "anthropic",
        "baseUrl": "http://127.0.0.1:9",
        "model": "claude-haiku",
    }
    with pytest.raises(RpcFailure) as caught:
        await editor.request("config.update", {"models": [{**model, "apiKey": raw_key}]})
    assert caught.value.code == -32602 and raw_key not in caught.value.message
    with MockAnthropic() as api:
        configured = {**model, "baseUrl": api.base_url, "apiKey": "secret:anthropic"}
        missing = {**configured, "id": "other", "apiKey": "secret:unset"}
        await editor.request("config.update", {"models": [configured, missing]})
        tested = await editor.request("models.test", {"modelId": "judge"})
        assert tested["ok"] is True and tested["latencyMs"] >= 0
        assert editor.secret_asks == ["secret:anthropic"]
        with pytest.raises(RpcFailure) as caught:
            await editor.request("models.test", {"modelId": "other"})
        assert caught.value.code == -32006
    listed = await editor.request("models.list", {})
    assert {"judge", "other"} <= {m["id"] for m in listed["models"]}
    stored = (tmp_path / "home" / "desiide" / "config.json").read_text()
    assert "secret:anthropic" in stored and "sk-ant-test" not in stored
    judged = await editor.request("jev.test", {})
    assert judged["ok"] is False and judged["error"]["kind"] == "jev_not_configured"
    preview = await editor.request("jev.preview", {"pack": "risk_gate@1"})
    assert preview["pack"] == "risk_gate@1" and "filesTouched" in preview["state"]
    assert await editor.close() == 0
    text = editor.stderr_text + (editor.log_dir / "orchestrator.log").read_text()
    assert "sk-ant-test-123456" not in text


async def test_decisions_without_a_daemon_are_an_empty_log(
    editor: DesiideClient, tmp_path: Path
) -> None:
    await editor.initialize([str(tmp_path)])
    assert await editor.request("decisions.list", {}) == {"decisions": []}
    with pytest.raises(RpcFailure) as caught:
        await editor.request("decisions.list", {"limit": 501})
    assert caught.value.code == -32602


async def test_stdin_closed_ends_the_process_and_logs_rotate_privately(
    editor: DesiideClient, tmp_path: Path
) -> None:
    await editor.initialize([str(tmp_path)])
    assert await editor.close() == 0
    log = editor.log_dir / "orchestrator.log"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert stat.S_IMODE(editor.log_dir.stat().st_mode) == 0o700
    for line in log.read_text().splitlines():
        json.loads(line)  # JSON lines only


async def test_sigterm_ends_the_process(editor: DesiideClient, tmp_path: Path) -> None:
    await editor.initialize([str(tmp_path)])
    assert editor.proc is not None
    editor.proc.send_signal(signal.SIGTERM)
    assert await editor.proc.wait() == 0
