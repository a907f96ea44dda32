"""The session host's journal: seqs never renumbered, torn tails recovered, damage loud."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.host.test_journal import entry, journal_at


def test_a_second_writer_is_refused(tmp_path: Path) -> None:
    with journal_at(tmp_path) as journal:
        journal.append(entry(0))
        code = (
            "import sys\n"
            "from pathlib import Path\n"
            "from bridge.host.journal import Journal, JournalLocked\n"
            "try:\n"
            "    Journal.open(Path(sys.argv[1]))\n"
            "except JournalLocked as exc:\n"
            "    print(exc)\n"
            "    sys.exit(3)\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code, str(journal.path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 3, done.stderr
        assert "open in another process" in done.stdout
        journal.trim(1)  # the journal file is replaced; the lock still holds
        done = subprocess.run(
            [sys.executable, "-c", code, str(journal.path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 3, done.stderr
    with journal_at(tmp_path) as journal:  # released at close
        assert journal.next_seq == 2


def test_the_host_package_imports_none_of_the_daemon_stack() -> None:
    """What a host process pays at start: the journal without relays, store or engine."""
    code = (
        "import sys, bridge.host\n"
        "heavy = ('bridge.runtime', 'bridge.engine', 'bridge.nostr', 'bridge.control', 'store',\n"
        "         'relaypolicy', 'websockets', 'aiosqlite', 'pydantic', 'claude_agent_sdk')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy or\n"
        "             any(m == h or m.startswith(h + '.') for h in heavy)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
