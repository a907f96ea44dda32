"""The chaos report: invariants with PASS/FAIL, fault counts, the workload, and a summary.

Plain text, meant to be pasted into an issue as is: every number in it comes from the ledger or
the final snapshot, and every FAIL carries the details needed to trace it (seed, input ids with
how they travelled, and the fault log around them).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tests.chaos.invariants import Verdict, render_verdicts
from tests.chaos.ledger import Ledger
from tests.chaos.plan import FaultKind

__all__ = ["ChaosReport"]


@dataclass
class ChaosReport:
    """The outcome of one run."""

    seed: int
    commands_planned: int
    elapsed: float
    ledger: Ledger
    verdicts: list[Verdict]
    work_dir: Path
    dedup_drops: int = 0
    """Events the daemon's engine dropped as already processed (from its log)."""
    harness_cpu: float = 0.0
    """CPU seconds of this process: relays, phones, the runner."""

    @property
    def ok(self) -> bool:
        return all(v.ok for v in self.verdicts)

    @property
    def failed(self) -> list[Verdict]:
        return [v for v in self.verdicts if not v.ok]

    def render(self, *, fault_log: bool = False, limit: int | None = 8) -> str:
        """The report; at most `limit` details per invariant (None: all of them)."""
        ledger = self.ledger
        lines = [
            f"chaos run: seed {self.seed}, {ledger.commands} commands "
            f"({self.commands_planned} planned), {self.elapsed:.1f} s",
            "",
            "faults injected:",
        ]
        for kind in FaultKind:
            lines.append(f"  {kind.value:<20} {ledger.faults[kind]:>5}")
        expects = Counter(r.expect.value for r in ledger.inputs.values())
        senders = Counter(r.phone for r in ledger.inputs.values())
        lines += [
            "",
            "workload:",
            "  commands: " + ", ".join(f"{t} {n}" for t, n in ledger.by_type.most_common()),
            "  inputs by expected outcome: "
            + ", ".join(f"{e} {n}" for e, n in sorted(expects.items())),
            "  inputs by phone: "
            + ", ".join(f"{p} {n}" for p, n in sorted(senders.items()))
            + f" (P3 unpaired @{ledger.unpaired_at})",
            f"  sessions: {len(ledger.sessions)} created, {len(ledger.closed_sessions())} closed",
            f"  events replayed {ledger.replayed}, second copies of duplicates "
            f"{ledger.duplicates_sent}, engine dedup drops {self.dedup_drops}",
            f"  daemon: {ledger.kills} kill -9, {ledger.graceful_stops} SIGTERM stop/start",
        ]
        lines.append(
            f"  CPU: daemon {sum(ledger.daemon_cpu.values()):.0f} s, relays + phones + runner "
            f"{self.harness_cpu:.0f} s, wall {self.elapsed:.0f} s"
        )
        if ledger.rss_samples:
            peak = max(kb for _, kb in ledger.rss_samples)
            last = ledger.rss_samples[-1][1]
            lines.append(
                f"  daemon RSS: peak {peak / 1024:.0f} MiB, last {last / 1024:.0f} MiB "
                f"({len(ledger.rss_samples)} samples)"
            )
        lines += ["", "invariants:"]
        lines += render_verdicts(self.verdicts, limit)
        if fault_log or not self.ok:
            lines += ["", "fault log:"] + [f"  {entry}" for entry in ledger.fault_log]
        failed = self.failed
        lines += [
            "",
            f"summary: {len(self.verdicts) - len(failed)}/{len(self.verdicts)} invariants passed"
            + (f"; FAILED: {', '.join(v.name for v in failed)}" if failed else "; zero violations"),
            f"work dir: {self.work_dir}",
        ]
        return "\n".join(lines)
