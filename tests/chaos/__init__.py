"""Chaos runs: the daemon under seeded faults, through real relays, with invariants checked.

``python -m tests.chaos --commands 10000`` (``make chaos``) is the full run;
``tests/integration/chaos/test_chaos_quick.py`` runs a few hundred commands in ``make test``. Modules: :mod:`.plan` (the
seeded fault schedule, pure), :mod:`.world` (relays, daemon, phones), :mod:`.workload` (the
command mix and the liveness waits), :mod:`.faults` (the injectors), :mod:`.ledger` (what was
sent and what must come of it), :mod:`.invariants`, :mod:`.report` and :mod:`.runner`.
"""

from tests.chaos.plan import FaultKind, Plan, make_plan
from tests.chaos.report import ChaosReport
from tests.chaos.runner import ChaosConfig, run_chaos

__all__ = ["ChaosConfig", "ChaosReport", "FaultKind", "Plan", "make_plan", "run_chaos"]
