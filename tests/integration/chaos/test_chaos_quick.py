"""The quick chaos run of ``make test``: a few hundred commands, every fault kind, all invariants.

The same scenario as ``make chaos`` (``python -m tests.chaos --commands 10000``), shorter: each
fault kind is injected at least its planned minimum (relay restarts, an outage, a silent relay,
``kill -9`` restarts, fragments across a kill, the phone offline and restarted, duplicates,
replays, expired commands, clock skew, an unpairing, a fragment flood). On failure the report is
in the assertion message and the work directory (daemon log, relay databases) is kept.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos import ChaosConfig, FaultKind, run_chaos

pytestmark = pytest.mark.timeout(300)

QUICK_COMMANDS = 300
QUICK_SEED = 20_260_101


async def test_quick_chaos_run_holds_every_invariant(tmp_path: Path) -> None:
    report = await run_chaos(
        ChaosConfig(commands=QUICK_COMMANDS, seed=QUICK_SEED, work_dir=tmp_path / "chaos")
    )
    text = report.render()
    print(text)
    assert all(report.ledger.faults[kind] > 0 for kind in FaultKind), text
    assert report.ledger.commands >= QUICK_COMMANDS
    assert report.ok, text
