"""One editor task's round trip: ``task.create`` → ``state_changed`` to ``done``.

The editor is the forked orchestrator (``codedeck-bridge desiide``) on the daemon's home; the
task runs as a session of the daemon with the real Claude Code CLI against the local mock API
(one ``read_file`` of the Desiide tools, then the answer). The baseline is the same work from a
phone in the same run: ``create-session`` then one ``input`` with the same script, to the turn's
``stream_end``. Both start a new Claude Code process per task; the difference is what the
orchestrator, its daemon link and the task policy add.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from bridge.protocol import CreateSessionCommand, InputCommand
from tests.bench.common import Row
from tests.integration.conftest import pair_phone
from tests.support.daemon import DaemonProcess
from tests.support.desiide_client import DesiideClient
from tests.support.mock_anthropic import MockAnthropic
from tests.support.relay import LoopbackRelay

__all__ = ["notes", "run"]

TASKS = 6
SCRIPT = (
    "[[tool: mcp__desiide__read_file | "
    + json.dumps({"path": "notes.txt"})
    + "]] [[after: read it]]"
)
PHONE_SCRIPT = "[[read: notes.txt]] [[after: read it]]"


async def _editor_tasks(daemon: DaemonProcess) -> list[float]:
    editor = DesiideClient(daemon.home)
    await editor.start()
    try:
        await editor.initialize([str(daemon.workspace)])
        times: list[float] = []
        for n in range(TASKS + 1):
            start = time.perf_counter()
            created = await editor.request(
                "task.create", {"kind": "ask", "instruction": f"{SCRIPT} ({n})"}
            )
            await editor.wait_state(created["task"]["id"], "done", timeout=120)
            if n:  # the first task warms the CLI's caches up
                times.append((time.perf_counter() - start) * 1000)
        return times
    finally:
        await editor.close()


async def _phone_turns(daemon: DaemonProcess, relay: LoopbackRelay) -> list[float]:
    phone = await pair_phone(daemon, relay.url)
    try:
        times: list[float] = []
        for n in range(TASKS + 1):
            start = time.perf_counter()
            mark = phone.mark()
            await phone.send(CreateSessionCommand(cwd=str(daemon.workspace)))
            ready = await phone.wait_for("session-ready", after=mark, timeout=120)
            session = str(ready.message.session.id)
            await phone.send(InputCommand(sessionId=session, text=f"{PHONE_SCRIPT} ({n})"))
            await phone.wait_for(
                "output",
                lambda m, s=session: (
                    m.sessionId == s and (m.entry.metadata or {}).get("stream_end") is True
                ),
                after=mark,
                timeout=120,
            )
            if n:
                times.append((time.perf_counter() - start) * 1000)
        return times
    finally:
        await phone.close()


async def _measure() -> tuple[list[float], list[float]]:
    with MockAnthropic() as mock, tempfile.TemporaryDirectory(prefix="cdb-desiide-") as tmp:
        base = Path(tmp)
        workspace = base / "ws"
        workspace.mkdir()
        (workspace / "notes.txt").write_text("hello\n")
        env = {"CODEDECK_AGENT": "claude", **mock.cli_env(base / "claude")}
        relay = LoopbackRelay()
        await relay.start()
        try:
            async with DaemonProcess(base / "home", [relay.url], workspace, env=env) as daemon:
                editor = await _editor_tasks(daemon)
                phone = await _phone_turns(daemon, relay)
        finally:
            await relay.stop()
    return editor, phone


def run() -> list[Row]:
    editor, phone = asyncio.run(_measure())
    return [
        Row(
            "desiide",
            f"task.create → done, one read_file, Claude Code + mock API, p50 ({TASKS} tasks)",
            statistics.median(editor),
            statistics.median(phone),
            "phone: create-session + input → stream_end",
            unit="ms",
        ),
        Row(
            "desiide",
            "task.create → done, max",
            max(editor),
            max(phone),
            "phone: create-session + input → stream_end",
            unit="ms",
        ),
    ]


def notes() -> list[str]:
    return [
        "desiide: the forked orchestrator → control socket → daemon → session host → the bundled "
        "Claude Code CLI with the Desiide tools (one read_file) → a local mock of the Anthropic "
        "API; time from sending task.create to the done event, after one warm-up task. "
        "Baseline: a phone doing the same turn (create-session, input with a Read, stream_end) "
        "on the same daemon in the same run (lower is better)."
    ]
