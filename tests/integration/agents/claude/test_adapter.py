"""The stream-json → v10 entry adapter: table tests on raw CLI frames, and recorded CLI frames.

Frames are plain dicts exactly as the CLI prints them; every entry the adapter produces is held
to the wire contract with ``OutputEntry.model_validate`` (see :func:`checked`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_HEAVY = ("pydantic", "pydantic_core", "claude_agent_sdk", "bridge.protocol")


_REPORT_HEAVY = (
    f"heavy = {_HEAVY!r}\n"
    "print(sorted(m for m in sys.modules if any(m == h or m.startswith(h + '.') for h in heavy)))\n"
)


def _imported_heavy(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code + _REPORT_HEAVY],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


def test_the_modules_import_nothing_heavy_themselves() -> None:
    """The adapter and the renderer alone, with the package's ``__init__`` left out."""
    package = Path(__file__).parents[4] / "bridge" / "agents" / "claude"
    code = (
        "import sys, types, bridge.agents\n"
        "package = types.ModuleType('bridge.agents.claude')\n"
        f"package.__path__ = [{str(package)!r}]\n"
        "sys.modules['bridge.agents.claude'] = package\n"
        "import bridge.agents.claude.adapter, bridge.agents.tool_render\n"
    )
    assert _imported_heavy(code) == "[]"


def test_a_session_host_can_import_the_adapter() -> None:
    code = "import sys, bridge.agents.claude.adapter, bridge.agents.tool_render\n"
    assert _imported_heavy(code) == "[]"
