"""An ACP agent's session survives every process being killed: the daemon, the session host, the
agent itself — with a card pending, and counted on disk.

The agent is the fake ACP agent of tests/support (configured as ``opencode``): each allowed
command is appended to ``ran.txt`` in the workspace and every permission answer the agent was
given to ``answers.txt``, so "ran once" and "nothing was refused that the phone did not refuse"
are read from the agent's side, not the bridge's.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bridge.protocol import CreateSessionCommand, InputCommand, PermissionResCommand
from tests.support.daemon import DaemonProcess, home_with_agents
from tests.support.fake_acp_agent import fake_agent_command
from tests.support.phone import PhoneSimulator
from tests.support.relay import LoopbackRelay

CHECKED = 60.0


@pytest.fixture
async def daemon(
    relay: LoopbackRelay, tmp_path: Path, workspace: Path
) -> AsyncIterator[DaemonProcess]:
    agent = fake_agent_command("--state", str(tmp_path / "agent-state"))
    home = home_with_agents(
        tmp_path, {"opencode": agent}, sandbox_writable=[tmp_path / "agent-state"]
    )
    async with DaemonProcess(home, [relay.url], workspace) as running:
        yield running
    running.kill()


def is_card(message: Any) -> bool:
    return bool((message.entry.metadata or {}).get("special") == "permission_request")


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


async def open_session(phone: PhoneSimulator) -> str:
    await phone.wait_for(
        "sessions", lambda m: "opencode" in (m.capabilities or []), timeout=CHECKED
    )
    mark = phone.mark()
    await phone.send(CreateSessionCommand(backend="opencode"))
    ready = await phone.wait_for("session-ready", after=mark, timeout=60)
    return str(ready.message.session.id)


async def ask_card(phone: PhoneSimulator, session: str, command: str, input_id: str) -> str:
    mark = phone.mark()
    await phone.send(
        InputCommand(sessionId=session, text=f"permission {command}", inputId=input_id)
    )
    card = await phone.wait_for("output", is_card, after=mark, timeout=60)
    return str((card.message.entry.metadata or {})["tool_use_id"])


async def test_a_card_pending_while_the_daemon_is_killed_is_answered_and_runs_once(
    daemon: DaemonProcess, phone: PhoneSimulator, workspace: Path
) -> None:
    session = await open_session(phone)
    request_id = await ask_card(phone, session, "make-build", "in-1")
    hosts = daemon.host_pids()
    daemon.kill()  # the host and the agent keep waiting for the answer
    await asyncio.sleep(0.5)
    assert daemon.host_pids() == hosts
    await daemon.start()
    mark = phone.mark()
    await phone.send(PermissionResCommand(sessionId=session, requestId=request_id, allow=True))
    await phone.wait_for(
        "output", lambda m: m.entry.content == "ran: make-build", after=mark, timeout=60
    )
    await phone.quiesce(idle=1.0)
    assert lines(workspace / "ran.txt") == ["make-build"]
    assert lines(workspace / "answers.txt") == ["once"]


async def test_a_host_killed_with_a_card_pending_refuses_nothing_and_runs_nothing_twice(
    daemon: DaemonProcess, phone: PhoneSimulator, workspace: Path
) -> None:
    session = await open_session(phone)
    await ask_card(phone, session, "deploy", "in-1")
    [host] = daemon.host_pids()
    mark = phone.mark()
    os.kill(host, signal.SIGKILL)  # its agent dies with it (PR_SET_PDEATHSIG), without a word
    note = await phone.wait_for(
        "output",
        lambda m: (m.entry.metadata or {}).get("special") == "session_restart",
        after=mark,
        timeout=60,
    )
    assert (note.message.entry.metadata or {})["interrupted"] == ["in-1"]
    assert lines(workspace / "answers.txt") == []  # no refusal was recorded that nobody gave
    mark = phone.mark()
    await phone.send(InputCommand(sessionId=session, text="after the kill", inputId="in-2"))
    await phone.wait_for(
        "output", lambda m: m.entry.content == "echo: after the kill", after=mark, timeout=60
    )
    assert lines(workspace / "ran.txt") == []  # the interrupted call never ran
    assert [pid for pid in daemon.host_pids() if pid != host]


async def test_the_agent_killed_mid_turn_is_resumed_and_the_input_not_sent_again(
    daemon: DaemonProcess, phone: PhoneSimulator, workspace: Path
) -> None:
    session = await open_session(phone)
    mark = phone.mark()
    await phone.send(InputCommand(sessionId=session, text="slow", inputId="in-slow"))
    await phone.wait_for(
        "sessions", lambda m: any(s.state == "running" for s in m.sessions), after=mark, timeout=60
    )
    agents = [
        pid
        for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
        if _is_fake_agent_of(pid, workspace)
    ]
    assert len(agents) == 1
    os.kill(agents[0], signal.SIGKILL)
    note = await phone.wait_for(
        "output",
        lambda m: (m.entry.metadata or {}).get("special") == "session_restart",
        after=mark,
        timeout=60,
    )
    assert (note.message.entry.metadata or {})["interrupted"] == ["in-slow"]
    mark = phone.mark()
    await phone.send(InputCommand(sessionId=session, text="next", inputId="in-2"))
    await phone.wait_for(
        "output", lambda m: m.entry.content == "echo: next", after=mark, timeout=60
    )
    await phone.quiesce(idle=1.0)
    # The agent's own record: the interrupted input reached it once and was not sent again.
    [state] = (workspace.parent / "agent-state").glob("*.json")
    users = [text for role, text in json.loads(state.read_text())["history"] if role == "user"]
    assert users == ["slow", "next"]
    texts = [e.content for e in phone.transcript(session).values()]
    assert texts.count("echo: next") == 1


def _is_fake_agent_of(pid: int, workspace: Path) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return False
    # Not the bwrap around it (its command line holds the agent's): the agent itself.
    sandbox = Path(cmdline[0].decode(errors="replace")).name == "bwrap"
    return (
        not sandbox
        and any(part.endswith(b"fake_acp_agent.py") for part in cmdline)
        and cwd == str(workspace)
    )
