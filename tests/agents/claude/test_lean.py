"""A session host imports this package: its public names (that it stays lean is checked in a
clean interpreter in tests/integration/agents/claude/test_lean.py)."""

from __future__ import annotations

import bridge.agents.claude as package


def test_every_public_name_is_exported() -> None:
    names = set(package.__all__)
    assert len(names) == len(package.__all__)
    for module in (
        "adapter",
        "cli_process",
        "cli_protocol",
        "driver",
        "editor_tools",
        "environment",
        "handoff",
        "mcp_server",
        "models",
        "options",
        "permissions",
        "tool_calls",
        "transcript",
    ):
        exported = set(__import__(f"bridge.agents.claude.{module}", fromlist=["x"]).__all__)
        assert exported <= names, (module, exported - names)
    for name in (
        "claude_driver_factory",
        "provider_env",
        "scrub_vendor_env",
        "claude_config_dir",
        "fetch_models",
        "bundled_cli_path",
    ):
        assert name in names
