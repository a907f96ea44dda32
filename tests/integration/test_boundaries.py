"""The architecture's rules, checked: sans-I/O modules import no I/O, dependencies point one way,
every module declares ``__all__`` and the packages re-export their modules' names."""

from __future__ import annotations

import subprocess
import sys

from tests.test_boundaries import REPO


def printed_by(code: str) -> str:
    """What a fresh interpreter prints running `code` (imports are transitive: only a fresh
    process says what importing a module really loads)."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=REPO,
    )
    return done.stdout.strip()


def test_a_session_host_process_loads_only_what_it_needs() -> None:
    """The modules a host process really loads for either agent (imports are transitive)."""
    code = (
        "import sys, bridge.host.__main__, bridge.host.server, bridge.agents.claude, "
        "bridge.agents.scripted; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pydantic', 'claude_agent_sdk', 'websockets', 'aiosqlite', 'store', 'anyio', 'mcp') "
        "or m.startswith(('bridge.engine', 'bridge.gate', 'bridge.protocol', 'bridge.runtime', "
        "'bridge.nostr'))))"
    )
    assert printed_by(code) == "[]"


def test_the_daemon_starts_without_the_acp_sdk() -> None:
    """``codedeck-bridge run`` with Claude Code (or the scripted agent) never imports ``acp``:
    its pydantic models take 0.86 s of CPU to build, at every start (``agent_probe``)."""
    code = (
        "import sys, bridge.cli.main, bridge.runtime.daemon, bridge.agents.claude, "
        "bridge.agents.scripted, bridge.doctor; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'acp'))"
    )
    assert printed_by(code) == "[]"
