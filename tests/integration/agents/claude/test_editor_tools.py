"""The ``editor_tools`` option: parsing, the CLI's flags, and the ``mcp_message`` handler."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bridge.host.events import Ready
from tests.agents.claude.conftest import FakeCli, Session


async def test_the_driver_starts_the_cli_with_the_editor_tools(
    start_session: Any, fake_cli: FakeCli, tmp_path: Path
) -> None:
    option = {"root": str(tmp_path), "allowed": ["read_file"]}
    session: Session = await start_session(options={"editor_tools": option})
    assert session.services.of(Ready)
    argv = fake_cli.log("start")[0]["argv"]
    assert argv[argv.index("--tools") + 1] == ""
    assert json.loads(argv[argv.index("--mcp-config") + 1])["mcpServers"] == {
        "desiide": {"type": "sdk", "name": "desiide"}
    }
    assert "--strict-mcp-config" in argv
