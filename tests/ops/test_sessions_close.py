"""``sessions close`` with no daemon running, on a home that does not exist: a usage error that
creates nothing.

With hosts to stop (processes that pass for session hosts) and a real bridge database:
``tests/integration/ops/test_sessions_close_without_daemon.py``; through a running daemon:
``tests/cli``; against the real daemon: ``tests/integration/ops/test_sessions_close.py``.
"""

from __future__ import annotations

from pathlib import Path

from tests.ops.support import Cli


def test_a_home_that_does_not_exist(tmp_path: Path, cli: Cli) -> None:
    missing = tmp_path / "nowhere"
    message = (
        f"codedeck-bridge: the bridge home {missing} (given with --home) does not exist: pass "
        "--home with the home the bridge runs with, or start the bridge once with "
        f"`codedeck-bridge run --home {missing}` to create it\n"
    )
    for target in ("--all", "s-1"):
        result = cli("sessions", "close", target, "--home", str(missing))
        assert (result.code, result.stdout, result.stderr) == (2, "", message)
    assert not missing.exists()
