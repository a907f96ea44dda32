"""The orchestrator forked as the editor forks it, its tasks run by a real daemon."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.daemon import DaemonProcess
from tests.support.desiide_client import DesiideClient


@pytest.fixture
async def editor(daemon: DaemonProcess, workspace: Path) -> AsyncIterator[DesiideClient]:
    client = DesiideClient(daemon.home)
    await client.start()
    try:
        yield client
    finally:
        await client.kill()


async def test_an_ask_task_runs_to_done_in_the_daemon(
    editor: DesiideClient, daemon: DaemonProcess, workspace: Path
) -> None:
    await editor.initialize([str(workspace)])
    created = await editor.request("task.create", {"kind": "ask", "instruction": "what is x?"})
    task_id = created["task"]["id"]
    await editor.wait_state(task_id, "done", timeout=60)
    sessions = await daemon.call("sessions.list")
    assert task_id in [s["sessionId"] for s in sessions]
    assert await editor.close() == 0
