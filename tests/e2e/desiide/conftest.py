"""The editor of the Desiide e2e tests: the forked orchestrator on the Claude daemon's home."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support.daemon import DaemonProcess
from tests.support.desiide_client import DesiideClient


def call(tool: str, args: dict[str, Any]) -> str:
    """The mock API's directive for one call of an editor tool."""
    return f"[[tool: mcp__desiide__{tool} | {json.dumps(args)}]]"


@pytest.fixture
async def editor(claude_daemon: DaemonProcess) -> AsyncIterator[DesiideClient]:
    """``codedeck-bridge desiide`` on the daemon's home, initialized on its workspace."""
    client = DesiideClient(claude_daemon.home)
    await client.start()
    await client.initialize([str(claude_daemon.workspace)])
    try:
        yield client
    finally:
        await client.kill()
