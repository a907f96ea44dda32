"""The orchestrator forked as the editor forks it, its tasks run by a real daemon."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bridge.control.client import ControlClient, DaemonNotRunning
from tests.support.daemon import DaemonProcess
from tests.support.desiide_client import DesiideClient
from tests.support.relay import LoopbackRelay


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


async def test_with_no_daemon_the_orchestrator_runs_one_for_its_lifetime(
    tmp_path: Path, relay: LoopbackRelay
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    home = tmp_path / "home"
    env = {"CODEDECK_AGENT": "scripted", "CODEDECK_RELAYS": relay.url}
    editor = DesiideClient(home, env=env)
    await editor.start()
    try:
        await editor.initialize([str(workspace)])
        created = await editor.request("task.create", {"kind": "ask", "instruction": "hi"})
        task_id = created["task"]["id"]
        await editor.wait_state(task_id, "done", timeout=60)
        assert await editor.close() == 0
    finally:
        await editor.kill()
    with pytest.raises(DaemonNotRunning):  # stopped with the orchestrator
        await ControlClient.connect(home)
    with contextlib.closing(sqlite3.connect(home / "bridge.db")) as db:
        rows = db.execute("SELECT session_id FROM sessions").fetchall()
    assert rows == [(task_id,)]
