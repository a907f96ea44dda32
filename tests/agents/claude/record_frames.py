"""Re-record ``recorded_frames.json``: raw SDK frames of the real CLI against the mock API.

Run from the repository root: ``PYTHONPATH=. .venv/bin/python -m tests.agents.claude.record_frames``.
The adapter tests replay the frames through the SDK's own parser, so that the adapter is tested
against what this pinned CLI really sends (volatile values such as ids and paths are kept as
recorded; the tests only look at their shape).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    PermissionResultAllow,
    PermissionResultDeny,
    ToolPermissionContext,
)

from tests.support.mock_anthropic import MockAnthropic

__all__ = ["OUTPUT", "SCENARIOS", "record"]

OUTPUT = Path(__file__).with_name("recorded_frames.json")
SCENARIOS: dict[str, list[str]] = {
    "reply_with_thinking": ["[[think: Let me think.]] [[reply: Hello there]]"],
    "write_allowed": ["[[say: Writing it.]] [[write: {cwd}/a.txt | hi]]"],
    "write_denied": ["[[write: {cwd}/b.txt | no]]"],
    "api_errors": ["[[fail: 401 | invalid x-api-key]]", "[[fail: 500]]"],
    "exit_plan": ["[[exit_plan: 1. do it]]"],
}


async def _frames(mock: MockAnthropic, root: Path, prompts: list[str]) -> list[dict[str, Any]]:
    cwd = root / "cwd"
    cwd.mkdir()

    async def can_use_tool(
        name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResultAllow | PermissionResultDeny:
        if "b.txt" in str(tool_input.get("file_path", "")):
            return PermissionResultDeny(message="no thanks")
        return PermissionResultAllow()

    options = ClaudeAgentOptions(
        cwd=cwd,
        env=mock.cli_env(root / "config"),
        permission_mode="plan" if "exit_plan" in prompts[0] else "default",
        system_prompt={"type": "preset", "preset": "claude_code"},
        setting_sources=["user", "project"],
        can_use_tool=can_use_tool,
    )
    client = ClaudeSDKClient(options)
    await client.connect()
    frames: list[dict[str, Any]] = []
    try:
        assert client._query is not None
        raw = client._query.receive_messages()
        for prompt in prompts:
            await client.query(prompt.replace("{cwd}", str(cwd)))
            async for frame in raw:
                frames.append(frame)
                if frame.get("type") == "result":
                    break
    finally:
        await client.disconnect()
    return frames


async def record() -> None:
    recorded: dict[str, list[dict[str, Any]]] = {}
    with MockAnthropic() as mock:
        for name, prompts in SCENARIOS.items():
            with tempfile.TemporaryDirectory() as tmp:
                recorded[name] = await _frames(mock, Path(tmp), prompts)
    OUTPUT.write_text(json.dumps(recorded, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    asyncio.run(record())
