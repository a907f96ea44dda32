"""The scripted driver from the outside: the events it emits, what it logs, how it ends.

Every driver runs against :class:`~tests.host.fakes.FakeServices`. The waits below are hang
guards, never timing assertions: each test waits for events to arrive, then compares the exact
event list."""

from __future__ import annotations

import subprocess
import sys


def test_the_driver_imports_none_of_the_daemon_stack() -> None:
    """A host runs the scripted agent: importing it must not pull in the wire or the engine."""
    code = (
        "import sys, bridge.agents.scripted\n"
        "heavy = ('pydantic', 'bridge.protocol', 'bridge.engine', 'claude_agent_sdk')\n"
        "print(sorted(m for m in sys.modules if any(m == h or m.startswith(h + '.') "
        "for h in heavy)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
