"""The quick real-CLI chaos run of ``make test``: every kill point, the real Claude Code CLI.

The same scenario as ``make chaos-cli`` (``python -m tests.chaos.cli --kills 120``), shorter:
every kill point at least once — ``kill -9`` of the daemon right after a command reached the
relay, in the PreToolUse hook / the tool call, mid-stream, with a card pending on the phone,
during a resume; of a session host; of a Claude Code CLI — with Bash calls counted on disk and
refusals read from Claude Code's own files. On failure the report is the assertion message and
the work directory (daemon and host logs, Claude Code's session files, ledger files) is kept
under pytest's ``tmp_path``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.cli import CliChaosConfig, KillPoint, run_cli_chaos

pytestmark = pytest.mark.timeout(300)

QUICK_KILLS = 12
QUICK_SEED = 20_260_102


async def test_quick_cli_chaos(tmp_path: Path) -> None:
    # Short names: the session hosts' unix sockets live under the work dir (108 bytes at most).
    report = await run_cli_chaos(
        CliChaosConfig(kills=QUICK_KILLS, seed=QUICK_SEED, work_dir=tmp_path / "run")
    )
    text = report.render()
    print(text)
    hit = report.ledger.kills_by_point()
    assert all(hit[point] > 0 for point in KillPoint), text
    assert report.ok, text
