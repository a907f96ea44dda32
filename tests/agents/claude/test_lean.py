"""A session host imports this package: it must stay lean (checked in a clean interpreter)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import bridge.agents.claude as package

REPO = Path(__file__).resolve().parents[3]
HEAVY = (
    "pydantic",
    "bridge.protocol",
    "bridge.engine",
    "bridge.runtime",
    "bridge.store",
    "bridge.nostr",
    "bridge.control",
    "claude_agent_sdk",
    "anyio",
    "mcp",
)


def test_importing_the_package_loads_nothing_heavy() -> None:
    code = (
        "import json, sys, resource; import bridge.agents.claude; "
        "print(json.dumps({'modules': sorted(sys.modules), "
        "'rss_kib': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, check=True, text=True
    ).stdout
    loaded = json.loads(out)["modules"]
    heavy = [m for m in loaded if m.split(".")[0] in HEAVY or m.startswith(HEAVY)]
    assert heavy == []


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
