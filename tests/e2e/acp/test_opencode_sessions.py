"""End to end: phone simulator → real relay → the daemon → a session host → the real OpenCode
(``opencode acp``, npm ``opencode-ai``) → the tests' mock Anthropic API.

OpenCode's own configuration ALLOWS bash and edits here, as a user's might: every call still
reaches the bridge's gate (the driver runs OpenCode with ``OPENCODE_PERMISSION`` asking for
everything), so the deny list blocks and the mode's rules decide, with the phone's cards.
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

from bridge.protocol import (
    CreateSessionCommand,
    InputCommand,
    InterruptCommand,
    ModeCommand,
    ModelsRequestCommand,
    PermissionResCommand,
)
from tests.integration.conftest import pair_phone
from tests.support.daemon import DaemonProcess, home_with_agents
from tests.support.mock_anthropic import MockAnthropic
from tests.support.opencode_env import opencode_env
from tests.support.phone import PhoneSimulator
from tests.support.relay import LoopbackRelay

pytestmark = pytest.mark.e2e

CHECKED = 90.0
"""Seconds for the daemon's start-up check of OpenCode (3–5 s; a loaded CI machine)."""
TURN = 90.0


@pytest.fixture
async def daemon(
    relay: LoopbackRelay,
    tmp_path: Path,
    mock_anthropic: MockAnthropic,
    opencode_command: list[str],
) -> AsyncIterator[DaemonProcess]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    home = home_with_agents(tmp_path, {"opencode": opencode_command})
    env = opencode_env(
        mock_anthropic, tmp_path / "opencode", permission={"bash": "allow", "edit": "allow"}
    )
    env.pop("OPENCODE_PERMISSION", None)  # the bridge sets it; the user's config allows bash
    env = {k: v for k, v in env.items() if k not in ("HOME",)} | {"HOME": str(tmp_path / "user")}
    async with DaemonProcess(home, [relay.url], workspace, env=env) as running:
        yield running
    running.kill()


@pytest.fixture
async def phone(daemon: DaemonProcess, relay: LoopbackRelay) -> AsyncIterator[PhoneSimulator]:
    paired = await pair_phone(daemon, relay.url)
    try:
        yield paired
    finally:
        await paired.close()


def is_card(message: Any) -> bool:
    return bool((message.entry.metadata or {}).get("special") == "permission_request")


async def open_session(phone: PhoneSimulator, mode: str = "acceptEdits") -> str:
    await phone.wait_for(
        "sessions", lambda m: "opencode" in (m.capabilities or []), timeout=CHECKED
    )
    mark = phone.mark()
    await phone.send(CreateSessionCommand(backend="opencode"))
    ready = await phone.wait_for("session-ready", after=mark, timeout=TURN)
    info = ready.message.session
    assert (info.backend, info.agent) == ("opencode", "opencode")
    mark = phone.mark()
    await phone.send(ModeCommand(sessionId=info.id, mode=mode))
    await phone.wait_for("mode-confirmed", after=mark, timeout=TURN)
    return str(info.id)


async def say(phone: PhoneSimulator, session: str, text: str, input_id: str) -> int:
    mark = phone.mark()
    await phone.send(InputCommand(sessionId=session, text=text, inputId=input_id))
    return mark


async def turn_end(phone: PhoneSimulator, after: int) -> None:
    await phone.wait_for(
        "output",
        lambda m: (m.entry.metadata or {}).get("stream_end") is True,
        after=after,
        timeout=TURN,
    )


async def test_text_a_card_allowed_and_one_denied(
    daemon: DaemonProcess, phone: PhoneSimulator, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    session = await open_session(phone)
    mark = await say(phone, session, "hello opencode", "in-1")
    await phone.wait_for(
        "output", lambda m: m.entry.content == "echo: hello opencode", after=mark, timeout=TURN
    )
    await turn_end(phone, mark)

    # acceptEdits: a command is a card.
    mark = await say(phone, session, "[[bash: echo allowed > allowed.txt]]", "in-2")
    card = await phone.wait_for("output", is_card, after=mark, timeout=TURN)
    metadata = card.message.entry.metadata or {}
    assert metadata["tool_name"] == "Bash"
    await phone.send(
        PermissionResCommand(sessionId=session, requestId=metadata["tool_use_id"], allow=True)
    )
    await turn_end(phone, mark)
    assert (workspace / "allowed.txt").read_text().strip() == "allowed"

    mark = await say(phone, session, "[[bash: echo denied > denied.txt]]", "in-3")
    card = await phone.wait_for("output", is_card, after=mark, timeout=TURN)
    metadata = card.message.entry.metadata or {}
    await phone.send(
        PermissionResCommand(sessionId=session, requestId=metadata["tool_use_id"], allow=False)
    )
    await turn_end(phone, mark)
    assert not (workspace / "denied.txt").exists()


async def test_a_deny_listed_command_is_blocked_although_opencode_allows_bash(
    daemon: DaemonProcess, phone: PhoneSimulator, tmp_path: Path
) -> None:
    session = await open_session(phone, mode="default")
    mark = await say(phone, session, "[[bash: mkfs.ext4 no-such-image; touch pwned]]", "in-1")
    blocked = await phone.wait_for(
        "output", lambda m: m.entry.content.startswith("Blocked:"), after=mark, timeout=TURN
    )
    assert "deny_list:mkfs" in blocked.message.entry.content
    await turn_end(phone, mark)
    assert not (tmp_path / "ws" / "pwned").exists()
    entries = phone.transcript(session).values()
    assert not [e for e in entries if (e.metadata or {}).get("special") == "permission_request"]


async def test_interrupt_models_and_resume_after_the_host_is_killed(
    daemon: DaemonProcess, phone: PhoneSimulator, mock_anthropic: MockAnthropic
) -> None:
    session = await open_session(phone)
    mark = phone.mark()
    await phone.send(ModelsRequestCommand(backend="opencode"))
    models = await phone.wait_for(
        "models", lambda m: m.agent == "opencode", after=mark, timeout=TURN
    )
    assert [m.id for m in models.message.models] == ["mock/mock-model"]

    mark = await say(phone, session, "[[slow: 30]] take your time", "in-1")
    await phone.wait_for(
        "sessions",
        lambda m: any(s.state == "running" for s in m.sessions),
        after=mark,
        timeout=TURN,
    )
    await asyncio.sleep(1.0)
    await phone.send(InterruptCommand(sessionId=session))
    await phone.wait_for(
        "output", lambda m: m.entry.content == "Interrupted", after=mark, timeout=TURN
    )
    await turn_end(phone, mark)

    mark = await say(phone, session, "remember the word banana", "in-2")
    await turn_end(phone, mark)
    [host] = daemon.host_pids()
    os.kill(host, signal.SIGKILL)  # OpenCode dies with it
    await phone.wait_for(
        "output",
        lambda m: (m.entry.metadata or {}).get("special") == "session_restart",
        after=mark,
        timeout=TURN,
    )
    mark = await say(phone, session, "what was the word?", "in-3")
    await phone.wait_for(
        "output",
        lambda m: m.entry.content.startswith("echo: what was the word?"),
        after=mark,
        timeout=TURN,
    )
    # The new OpenCode loaded the conversation: the model saw the earlier turn.
    last = mock_anthropic.message_requests()[-1]
    assert "remember the word banana" in json.dumps(last.body)


async def test_reads_of_hidden_paths_are_blocked_and_never_reach_the_model(
    daemon: DaemonProcess, phone: PhoneSimulator, mock_anthropic: MockAnthropic, tmp_path: Path
) -> None:
    """OpenCode asks twice about a read outside the project (``external_directory``, then
    ``read``) and once about a search; whatever it asks, the gate judges the file the call names,
    so the deny list blocks, the phone sees the block, and no byte of the file is sent on."""
    canary = "CANARY-opencode-hidden-read"
    key = tmp_path / "user" / ".ssh" / "id_ed25519"
    key.parent.mkdir(parents=True, exist_ok=True)
    key.write_text(canary + "\n")
    bridge_config = daemon.home / "config.toml"
    bridge_config.write_text(bridge_config.read_text() + f"# {canary}\n")
    session = await open_session(phone, mode="default")
    calls = [
        f"[[read: {key}]]",
        f"[[read: {bridge_config}]]",
        "[[tool: grep | " + json.dumps({"pattern": "CANARY", "path": str(key.parent)}) + "]]",
    ]
    for number, call in enumerate(calls):
        mark = await say(phone, session, call, f"in-{number}")
        blocked = await phone.wait_for(
            "output", lambda m: m.entry.content.startswith("Blocked:"), after=mark, timeout=TURN
        )
        assert "deny_list:secret_path" in blocked.message.entry.content
        await turn_end(phone, mark)
    entries = phone.transcript(session).values()
    assert not [e for e in entries if (e.metadata or {}).get("special") == "permission_request"]
    uses = [e for e in entries if e.entryType == "tool_use"]
    assert [(e.metadata or {}).get("tool_name") for e in uses] == ["Read", "Read", "Grep"]
    assert canary not in json.dumps([r.body for r in mock_anthropic.message_requests()])
