"""Real-CLI chaos runs: ``kill -9`` of the daemon, session hosts and Claude Code, invariants checked.

The scripted chaos run (:mod:`tests.chaos`) drives 10,000 commands through faulted relays, but its
agent has no permission channel: it cannot see what a kill does to a Claude Code CLI waiting on a
``PreToolUse`` check or a permission card. This tier runs the real bundled CLI against a local
mock API (:mod:`.model`) in session hosts, and kills the daemon, a host or a CLI at seven kill
points (:mod:`.plan`) while Bash calls append to ledger files on disk — execution is counted on
disk, refusals in Claude Code's own session files, never by what the bridge says.

``python -m tests.chaos.cli --kills 120 --seed 1`` (``make chaos-cli``) is the long run;
``tests/integration/chaos/test_chaos_cli_quick.py`` runs every kill point once or twice inside
``make test``. Modules: :mod:`.plan`, :mod:`.model`, :mod:`.world`, :mod:`.workload`,
:mod:`.faults`, :mod:`.procs`, :mod:`.observe`, :mod:`.ledger`, :mod:`.evidence`,
:mod:`.invariants`, :mod:`.report` and :mod:`.runner`.
"""

from tests.chaos.cli.plan import KillPoint, Plan, make_plan
from tests.chaos.cli.report import CliChaosReport
from tests.chaos.cli.runner import CliChaosConfig, run_cli_chaos

__all__ = ["CliChaosConfig", "CliChaosReport", "KillPoint", "Plan", "make_plan", "run_cli_chaos"]
