"""Kill it anywhere: the editor's orchestrator and the daemon under ``kill -9`` mid-task.

- The daemon killed while a task waits for approval: the card is parked in the session host, the
  orchestrator waits for the daemon to come back (as systemd restarts it), the editor's approval
  then runs the command exactly once and the task ends ``done``.
- The orchestrator killed while a task waits: the session is the daemon's, so a phone still sees
  the card, answers it, and the turn finishes; nothing of the task is lost or run twice.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from bridge.protocol import PermissionResCommand
from tests.e2e.desiide.conftest import call
from tests.integration.conftest import pair_phone
from tests.support.daemon import DaemonProcess
from tests.support.desiide_client import DesiideClient
from tests.support.processes import alive
from tests.support.relay import LoopbackRelay

pytestmark = pytest.mark.e2e


def run_command(command: str) -> str:
    return call("run_command", {"command": command})


async def waiting_task(editor: DesiideClient, marker: Path) -> tuple[str, dict[str, Any]]:
    created = await editor.request(
        "task.create",
        {
            "kind": "edit",
            "instruction": run_command(f"echo ran >> {marker.name}") + "[[after: finished]]",
            "allowedTools": ["read_file", "run_command"],
        },
    )
    task = str(created["task"]["id"])
    approval = await editor.wait_event(
        lambda e: e["taskId"] == task and e["type"] == "approval_required"
    )
    return task, approval


async def test_the_daemon_killed_while_a_task_waits_loses_nothing(
    editor: DesiideClient, claude_daemon: DaemonProcess
) -> None:
    marker = claude_daemon.workspace / "ran.txt"
    task, approval = await waiting_task(editor, marker)
    claude_daemon.kill()
    await claude_daemon.start()
    await editor.request(
        "task.approve", {"taskId": task, "approvalId": approval["approvalId"], "scope": "once"}
    )
    await editor.wait_state(task, "done", timeout=90)
    assert marker.read_text() == "ran\n"  # once
    asked = editor.task_events(task, "approval_required")
    assert [e["approvalId"] for e in asked] == [approval["approvalId"]]  # no duplicate card


async def test_the_orchestrator_killed_leaves_the_task_to_the_phone(
    editor: DesiideClient, claude_daemon: DaemonProcess, relay: LoopbackRelay
) -> None:
    marker = claude_daemon.workspace / "ran.txt"
    task, approval = await waiting_task(editor, marker)
    assert editor.proc is not None
    editor.proc.kill()
    await editor.proc.wait()
    phone = await pair_phone(claude_daemon, relay.url)
    try:
        await phone.wait_until(lambda: task in phone.sessions, timeout=30)
        await phone.send(
            PermissionResCommand(sessionId=task, requestId=approval["approvalId"], allow=True)
        )

        def finished() -> bool:
            entries = [json.loads(e) for e in claude_daemon.transcript(task).values()]
            return any(
                e["entryType"] == "text"
                and e["content"] == "finished"
                and (e.get("metadata") or {}).get("role") == "assistant"
                for e in entries
            )

        await phone.wait_until(finished, timeout=60, what="the turn's last text")
    finally:
        await phone.close()
    assert marker.read_text() == "ran\n"


async def test_a_command_left_running_by_a_killed_host_is_reaped(
    editor: DesiideClient, claude_daemon: DaemonProcess
) -> None:
    """The host's death takes its shell (PDEATHSIG) but not what the shell started; the
    session's next host ends that before it serves the task again."""
    created = await editor.request(
        "task.create",
        {
            "kind": "edit",
            "instruction": run_command("sleep 300 & echo $! > bg.pid; wait"),
            "allowedTools": ["run_command"],
        },
    )
    task = str(created["task"]["id"])
    approval = await editor.wait_event(
        lambda e: e["taskId"] == task and e["type"] == "approval_required"
    )
    await editor.request(
        "task.approve", {"taskId": task, "approvalId": approval["approvalId"], "scope": "once"}
    )
    pid_file = claude_daemon.workspace / "bg.pid"
    deadline = time.monotonic() + 30
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert time.monotonic() < deadline, "the command did not start"
        await asyncio.sleep(0.05)
    # The pid the shell wrote is its sandbox's (a pid namespace of its own): find the same
    # process by what it runs and where.
    sleeper = _sleeper_in(claude_daemon.workspace)
    assert alive(sleeper)
    claude_daemon.kill_hosts()
    deadline = time.monotonic() + 60
    while alive(sleeper):
        assert time.monotonic() < deadline, "the command outlived its host and the restart"
        await asyncio.sleep(0.1)


def _sleeper_in(workspace: Path) -> int:
    """The pid (in our namespace) of the ``sleep 300`` that runs in `workspace`."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")[:2]
            cwd = (entry / "cwd").readlink()
        except OSError:
            continue
        if argv == [b"sleep", b"300"] and cwd == workspace.resolve():
            return int(entry.name)
    raise AssertionError("no sleep 300 runs in the workspace")
