"""Desiide tasks end to end: the forked orchestrator → the daemon → the real Claude Code CLI.

The editor is :class:`~tests.support.desiide_client.DesiideClient` (it forks
``codedeck-bridge desiide`` on the daemon's home); the model is the tests' mock Anthropic API,
scripted by ``[[tool: mcp__desiide__… | {json}]]`` directives in the instruction. A paired phone
simulator sees the same sessions and answers the same cards.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from bridge.protocol import PermissionResCommand
from tests.e2e.desiide.conftest import call
from tests.integration.conftest import pair_phone
from tests.support.daemon import DaemonProcess
from tests.support.desiide_client import DesiideClient, RpcFailure
from tests.support.mock_jev import MockModelApi, Scripted, anthropic_text
from tests.support.relay import LoopbackRelay

pytestmark = pytest.mark.e2e

ALL_TOOLS = ["read_file", "list_files", "search", "propose_edit", "run_command"]


async def create(editor: DesiideClient, instruction: str, **extra: Any) -> str:
    params = {"kind": "edit", "instruction": instruction, "allowedTools": ALL_TOOLS, **extra}
    created = await editor.request("task.create", params)
    return str(created["task"]["id"])


async def test_a_command_waits_for_approval_then_the_task_is_done(
    editor: DesiideClient, claude_daemon: DaemonProcess
) -> None:
    task = await create(editor, call("run_command", {"command": "echo hello"}) + "[[after: ran]]")
    approval = await editor.wait_event(
        lambda e: e["taskId"] == task and e["type"] == "approval_required"
    )
    assert approval["call"]["tool"] == "run_command"
    assert approval["call"]["args"] == {"command": "echo hello"}
    assert approval["outcome"] == "confirm"
    await editor.wait_state(task, "awaiting_approval")
    await editor.request(
        "task.approve", {"taskId": task, "approvalId": approval["approvalId"], "scope": "once"}
    )
    finished = await editor.wait_event(
        lambda e: e["taskId"] == task and e["type"] == "tool_call_finished"
    )
    assert finished["result"]["ok"] is True and "hello" in finished["result"]["output"]
    await editor.wait_state(task, "done")
    events = editor.task_events(task)
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert any(e["type"] == "usage" for e in events)
    text = "".join(e["delta"] for e in events if e["type"] == "text_delta")
    assert "ran" in text
    # The same gate and log as a phone's: the card, then the editor's answer.
    page = await editor.request("decisions.list", {"taskId": task})
    outcomes = [d["outcome"] for d in page["decisions"]]
    assert "card" in outcomes and "editor_allow" in outcomes
    card = next(d for d in page["decisions"] if d["outcome"] == "card")
    replay = await editor.request("decisions.replay", {"id": card["id"]})
    assert replay["rules"]["outcome"] == "confirm" and replay["differs"] is False
    listed = await editor.request("task.list", {})
    assert [t["state"] for t in listed["tasks"] if t["id"] == task] == ["done"]


async def test_an_edit_proposal_is_reviewed_and_reported_once(
    editor: DesiideClient, claude_daemon: DaemonProcess
) -> None:
    files = [{"path": "a.txt", "content": "one\n"}, {"path": "b.txt", "content": "two\n"}]
    task = await create(editor, call("propose_edit", {"summary": "add two files", "files": files}))
    proposed = await editor.wait_event(
        lambda e: e["taskId"] == task and e["type"] == "edit_proposed"
    )
    proposal = proposed["proposal"]
    assert [f["path"] for f in proposal["files"]] == ["a.txt", "b.txt"]
    assert [f["path"] for f in proposed["files"]] == ["a.txt", "b.txt"]
    await editor.wait_state(task, "awaiting_approval")
    with pytest.raises(RpcFailure) as caught:  # a path outside the proposal
        await editor.request(
            "edits.report",
            {
                "taskId": task,
                "proposalId": proposal["id"],
                "files": [{"path": "c.txt", "status": "applied"}],
            },
        )
    assert caught.value.code == -32602
    report = {"taskId": task, "proposalId": proposal["id"]}
    await editor.request(
        "edits.report", {**report, "files": [{"path": "a.txt", "status": "applied"}]}
    )
    await asyncio.sleep(0.5)
    assert editor.task_events(task, "state_changed")[-1]["to"] == "awaiting_approval"
    await editor.request(
        "edits.report",
        {**report, "files": [{"path": "b.txt", "status": "rejected", "reason": "not needed"}]},
    )
    await editor.wait_state(task, "done")
    finished = editor.task_events(task, "tool_call_finished")[-1]["result"]
    assert "a.txt" in finished["output"] and "not needed" in finished["output"]
    with pytest.raises(RpcFailure) as caught:
        await editor.request(
            "edits.report", {**report, "files": [{"path": "a.txt", "status": "applied"}]}
        )
    assert caught.value.code == -32005
    assert not (claude_daemon.workspace / "a.txt").exists()  # the editor applies, never us


async def test_a_task_scoped_approval_covers_the_same_call_only(editor: DesiideClient) -> None:
    same = call("run_command", {"command": "echo same"})
    other = call("run_command", {"command": "echo other"})
    task = await create(editor, same + same + other)
    first = await editor.wait_event(
        lambda e: e["taskId"] == task and e["type"] == "approval_required"
    )
    await editor.request(
        "task.approve", {"taskId": task, "approvalId": first["approvalId"], "scope": "task"}
    )
    pending = await editor.wait_event(
        lambda e: (
            e["taskId"] == task
            and e["type"] == "approval_required"
            and e["call"]["args"]["command"] == "echo other"
        )
    )
    asked = [e["call"]["args"]["command"] for e in editor.task_events(task, "approval_required")]
    assert asked.count("echo same") == 1  # the second identical call was approved at once
    await editor.request(
        "task.reject",
        {"taskId": task, "approvalId": pending["approvalId"], "reason": "not that one"},
    )
    await editor.wait_state(task, "done")
    decisions = [e["decision"] for e in editor.task_events(task, "decision_made")]
    assert {d["outcome"] for d in decisions} >= {"approved", "auto", "rejected"}


async def test_the_tool_call_budget_fails_the_task(editor: DesiideClient) -> None:
    reads = call("read_file", {"path": "x.txt"}) + call("read_file", {"path": "y.txt"})
    task = await create(editor, reads, budget={"maxToolCalls": 1})
    failed = await editor.wait_state(task, "failed")
    assert failed["reason"] == "budget:maxToolCalls"
    kinds = [e["type"] for e in editor.task_events(task)]
    assert kinds[-2:] == ["error", "state_changed"]


async def test_the_same_call_three_times_is_a_loop(editor: DesiideClient) -> None:
    same = call("read_file", {"path": "loop.txt"})
    task = await create(editor, same * 3)
    failed = await editor.wait_state(task, "failed")
    assert failed["reason"] == "loop_detected"


async def test_two_run_one_waits_and_cancel_works_on_both(editor: DesiideClient) -> None:
    slow = "[[slow: 60]] take your time"
    first = await create(editor, slow)
    second = await create(editor, slow)
    third = await create(editor, slow)
    await editor.wait_state(first, "running")
    await editor.wait_state(second, "running")
    states = {t["id"]: t["state"] for t in (await editor.request("task.list", {}))["tasks"]}
    assert states[third] == "queued"
    assert (await editor.request("task.cancel", {"taskId": third}))["cancelled"] is True
    assert editor.task_events(third, "state_changed")[-1]["to"] == "cancelled"
    assert (await editor.request("task.cancel", {"taskId": first}))["cancelled"] is True
    await editor.wait_state(first, "cancelled")
    assert (await editor.request("task.cancel", {"taskId": first}))["cancelled"] is False
    await editor.request("task.cancel", {"taskId": second})
    await editor.wait_state(second, "cancelled")


async def test_a_fix_task_verifies_with_the_project_checks(
    editor: DesiideClient, claude_daemon: DaemonProcess
) -> None:
    workspace = claude_daemon.workspace
    (workspace / "Makefile").write_text("test:\n\ttest -f fixed.txt\n")
    files = [{"path": "fixed.txt", "content": "ok\n"}]
    task = await create(
        editor, call("propose_edit", {"summary": "fix", "files": files}), kind="fix"
    )
    proposed = await editor.wait_event(
        lambda e: e["taskId"] == task and e["type"] == "edit_proposed"
    )
    (workspace / "fixed.txt").write_text("ok\n")  # the editor applies the edit
    await editor.request(
        "edits.report",
        {
            "taskId": task,
            "proposalId": proposed["proposal"]["id"],
            "files": [{"path": "fixed.txt", "status": "applied"}],
        },
    )
    await editor.wait_state(task, "verifying")
    await editor.wait_state(task, "done")


async def test_a_phone_sees_the_task_and_its_answer_wins(
    editor: DesiideClient, claude_daemon: DaemonProcess, relay: LoopbackRelay
) -> None:
    phone = await pair_phone(claude_daemon, relay.url)
    try:
        task = await create(editor, call("run_command", {"command": "echo from-phone"}))
        approval = await editor.wait_event(
            lambda e: e["taskId"] == task and e["type"] == "approval_required"
        )
        await phone.wait_until(lambda: task in phone.sessions, timeout=30)
        await phone.send(
            PermissionResCommand(sessionId=task, requestId=approval["approvalId"], allow=True)
        )
        decided = await editor.wait_event(
            lambda e: e["taskId"] == task and e["type"] == "decision_made"
        )
        assert decided["decision"]["outcome"] == "answered_elsewhere"
        await editor.wait_state(task, "done")
        with pytest.raises(RpcFailure) as caught:
            await editor.request(
                "task.approve",
                {"taskId": task, "approvalId": approval["approvalId"], "scope": "once"},
            )
        assert caught.value.code == -32005
    finally:
        await phone.close()


async def test_a_model_error_fails_the_task(editor: DesiideClient) -> None:
    task = await create(editor, "[[fail: 401 | invalid x-api-key]]")
    failed = await editor.wait_state(task, "failed", timeout=90)
    assert failed["reason"].startswith("model_error:")
    error = editor.task_events(task, "error")[-1]
    assert error["kind"] == failed["reason"].removeprefix("model_error:")


async def test_closing_stdin_cancels_running_tasks(
    editor: DesiideClient, claude_daemon: DaemonProcess
) -> None:
    task = await create(editor, "[[slow: 60]] long")
    await editor.wait_state(task, "running")
    assert await editor.close() == 0
    assert editor.task_events(task, "state_changed")[-1]["to"] == "cancelled"
    assert claude_daemon.running  # the daemon keeps the session for the phone


@pytest.mark.parametrize("answer", ["yes", "no"])
async def test_the_judge_only_raises_a_call_the_rules_allow(
    editor: DesiideClient, claude_daemon: DaemonProcess, answer: str
) -> None:
    (claude_daemon.workspace / "notes.txt").write_text("hello\n")
    with MockModelApi() as judge:
        verdict = json.dumps({"answer": answer, "pYes": 0.9 if answer == "yes" else 0.05})
        judge.set_default("/v1/messages", Scripted(body=anthropic_text(verdict)))
        await editor.request(
            "config.update",
            {
                "jev": {
                    "baseUrl": judge.base_url,
                    "model": "judge-mock",
                    "apiKey": "secret:judge",
                    "riskGate": True,
                }
            },
        )
        editor.secrets["judge"] = "judge-key-123456"
        task = await create(editor, call("read_file", {"path": "notes.txt"}))
        if answer == "yes":
            approval = await editor.wait_event(
                lambda e: e["taskId"] == task and e["type"] == "approval_required"
            )
            assert "jev:risk_gate" in approval["reasons"]
            assert "jev:pending" not in approval["reasons"]
            await editor.request(
                "task.approve",
                {"taskId": task, "approvalId": approval["approvalId"], "scope": "once"},
            )
        await editor.wait_state(task, "done")
        states = [e["to"] for e in editor.task_events(task, "state_changed")]
        assert ("awaiting_approval" in states) == (answer == "yes")
        asked = [r for r in judge.requests if r.path == "/v1/messages"]
        assert len(asked) == 1
        assert "notes.txt" in json.dumps(asked[0].body) and "hello" not in json.dumps(asked[0].body)
        page = await editor.request("decisions.list", {"taskId": task, "outcome": "confirm"})
        (held,) = page["decisions"]
        assert held["reasons"] == ["jev:pending"]
        replay = await editor.request("decisions.replay", {"id": held["id"]})
        expected = "confirm" if answer == "yes" else "auto"
        assert replay["jev"]["outcome"] == expected and "jevError" not in replay
    finished = editor.task_events(task, "tool_call_finished")[-1]["result"]
    assert finished["ok"] is True and "hello" in finished["output"]
