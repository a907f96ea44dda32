"""One full Claude Code round trip through the bridge: ``input`` → first assistant text.

Phone simulator → a real relay on 127.0.0.1 → the daemon → the real Claude Code CLI (bundled with
claude-agent-sdk) → a local mock of the Anthropic API that answers at once. The baseline is the
same path with the scripted agent in place of Claude Code, measured in the same run: the
difference is what Claude Code itself adds (its turn, its tool-less request to the mock).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from bridge.protocol import CreateSessionCommand, InputCommand, ModeCommand
from tests.bench.common import Row
from tests.integration.conftest import pair_phone
from tests.support.daemon import DaemonProcess
from tests.support.mock_anthropic import MockAnthropic
from tests.support.relay import LoopbackRelay

__all__ = ["notes", "run"]

TURNS = 15


async def _round_trips(agent: str, mock: MockAnthropic, base: Path) -> list[float]:
    workspace = base / f"ws-{agent}"
    workspace.mkdir()
    env = {"CODEDECK_AGENT": agent, **mock.cli_env(base / f"claude-{agent}")}
    relay = LoopbackRelay()
    await relay.start()
    daemon = DaemonProcess(base / f"home-{agent}", [relay.url], workspace, env=env)
    try:
        async with daemon:
            phone = await pair_phone(daemon, relay.url)
            try:
                mark = phone.mark()
                await phone.send(CreateSessionCommand())
                ready = await phone.wait_for("session-ready", after=mark, timeout=120)
                session = str(ready.message.session.id)
                await phone.send(ModeCommand(sessionId=session, mode="default"))
                times: list[float] = []
                for n in range(TURNS + 1):
                    mark = phone.mark()
                    text = f"[[reply: answer {n}]]" if agent == "claude" else f"answer {n}"
                    expected = f"answer {n}" if agent == "claude" else f"echo: answer {n}"
                    start = time.perf_counter()
                    await phone.send(InputCommand(sessionId=session, text=text))
                    await phone.wait_for(
                        "output",
                        lambda m, e=expected: m.entry.content == e,
                        after=mark,
                        timeout=120,
                    )
                    if n:  # the first turn warms the CLI up
                        times.append((time.perf_counter() - start) * 1000)
                    await phone.wait_for(
                        "output",
                        lambda m: (m.entry.metadata or {}).get("stream_end") is True,
                        after=mark,
                        timeout=120,
                    )
                return times
            finally:
                await phone.close()
    finally:
        await relay.stop()


async def _measure() -> tuple[list[float], list[float]]:
    with MockAnthropic() as mock, tempfile.TemporaryDirectory(prefix="cdb-claude-") as tmp:
        base = Path(tmp)
        claude = await _round_trips("claude", mock, base)
        scripted = await _round_trips("scripted", mock, base)
    return claude, scripted


def run() -> list[Row]:
    claude, scripted = asyncio.run(_measure())
    return [
        Row(
            "claude",
            f"input → first assistant text, Claude Code + mock API, p50 ({TURNS} turns)",
            statistics.median(claude),
            statistics.median(scripted),
            "scripted agent, same path",
            unit="ms",
        ),
        Row(
            "claude",
            "input → first assistant text, Claude Code + mock API, max",
            max(claude),
            max(scripted),
            "scripted agent, same path",
            unit="ms",
        ),
    ]


def notes() -> list[str]:
    return [
        "claude: phone simulator → LocalRelay (127.0.0.1) → daemon → the bundled Claude Code CLI "
        "→ a local mock of the Anthropic API answering at once; time from publishing `input` to "
        "the phone receiving the first assistant text, after one warm-up turn. Baseline: the "
        "scripted agent on the same path in the same run (lower is better)."
    ]
