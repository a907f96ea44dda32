"""The report of a real-CLI chaos run: kill points, workload, invariants, summary.

Plain text in the shape of :mod:`tests.chaos.report`, meant to be pasted as is: every number
comes from the ledger or the final snapshot, and every FAIL carries the input ids, rounds and
intentions needed to trace it in the fault log (printed on failure) and the work directory (kept
on failure: the daemon's log, the hosts' logs, Claude Code's session files, the ledger files).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tests.chaos.cli.ledger import Ledger, Route
from tests.chaos.cli.plan import KillPoint
from tests.chaos.invariants import Verdict, render_verdicts

__all__ = ["CliChaosReport"]


@dataclass
class CliChaosReport:
    """The outcome of one run."""

    seed: int
    kills_planned: int
    elapsed: float
    ledger: Ledger
    verdicts: list[Verdict]
    work_dir: Path
    cli_version: str = ""
    model_requests: int = 0
    model_latency: float = 0.0
    harness_cpu: float = 0.0
    tree: str = ""
    """Which code ran: ``<git HEAD> + bridge/ <digest of its files>``."""

    @property
    def ok(self) -> bool:
        return all(v.ok for v in self.verdicts)

    @property
    def failed(self) -> list[Verdict]:
        return [v for v in self.verdicts if not v.ok]

    def render(self, *, fault_log: bool = False, limit: int | None = 8) -> str:
        """The report; at most `limit` details per invariant (None: all of them)."""
        ledger = self.ledger
        inputs = list(ledger.inputs.values())
        lines = [
            f"real-CLI chaos run: seed {self.seed}, {ledger.rounds} rounds "
            f"({self.kills_planned} kills planned), {len(inputs)} inputs, {self.elapsed:.1f} s",
            f"Claude Code {self.cli_version or '?'} against the chaos model (latency "
            f"{self.model_latency:g} s); sessions: "
            + ", ".join(f"{s[:8]} (now {mode})" for s, mode in ledger.sessions.items()),
            f"code: {self.tree or '?'}",
            "",
            "kill points (rounds; what the kill found):",
        ]
        rounds = ledger.kills_by_point()
        for point in KillPoint:
            seen = ledger.observations.get(point, Counter())
            found = "; ".join(f"{what} {n}" for what, n in seen.most_common())
            lines.append(f"  {point.value:<20} {rounds[point]:>4}   {found}")
        targets = Counter(k.target for k in ledger.kills)
        routes = Counter(r.route for r in inputs)
        denied = sum(1 for r in inputs if r.denied_on_purpose)
        slow = sum(1 for r in inputs if r.slow)
        lines += [
            "",
            "workload:",
            f"  inputs: {routes[Route.AUTO]} Bash auto-allowed, {routes[Route.CARD]} Bash with a "
            f"card ({denied} denied on purpose), {routes[Route.REPLY]} plain replies; {slow} "
            "streamed slowly",
            f"  processes killed (kill -9): daemon {targets['daemon']}, session host "
            f"{targets['host']}, Claude Code {targets['cli']}; daemon starts {ledger.daemon_starts}",
            f"  mode switches {ledger.mode_switches}; cards answered {len(ledger.answers)}, held "
            f"across a kill {len(ledger.held_cards)}; "
            f"model requests {self.model_requests}; stall syncs {ledger.stall_syncs}",
            f"  CPU: runner + relay + mock {self.harness_cpu:.1f} s, wall {self.elapsed:.0f} s",
            "",
            "invariants:",
        ]
        lines += render_verdicts(self.verdicts, limit)
        if fault_log or not self.ok:
            lines += ["", "fault log:"] + [f"  {entry}" for entry in ledger.fault_log]
        failed = self.failed
        lines += [
            "",
            f"summary: {len(self.verdicts) - len(failed)}/{len(self.verdicts)} invariants passed"
            + (
                f"; FAILED: {', '.join(v.name.split(':')[0] for v in failed)}"
                if failed
                else "; zero violations"
            ),
            f"work dir: {self.work_dir}" + ("" if self.ok else " (kept)"),
        ]
        return "\n".join(lines)
