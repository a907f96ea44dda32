"""A session host imports this package: it must stay lean (checked in a clean interpreter)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]


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
