"""``python -m tests.differential.report``: the differential tier as one table.

Each line of the corpus with the gate's verdict and what bash really did in the throwaway home,
and a last column saying whether the two agree (an attack the gate allowed, or ordinary work it
did not, is a ``MISS``). The tests assert the same; this prints the whole picture at once, for a
review or a closing note. ``--misses`` prints only the disagreements.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from bridge.gate import Outcome

from .corpus import ATTACKS, BENIGN
from .jail import bwrap_missing
from .trial import Bench
from .web import serve_scripts

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Print the table; exit 1 when any line disagrees, 2 when the jail cannot run."""
    parser = argparse.ArgumentParser(prog="python -m tests.differential.report")
    parser.add_argument("--misses", action="store_true", help="print only the disagreements")
    args = parser.parse_args(argv)
    missing = bwrap_missing()
    if missing is not None:
        print(missing, file=sys.stderr)
        return 2
    misses = 0
    with tempfile.TemporaryDirectory() as root, serve_scripts() as server:
        bench = Bench(Path(root), server)
        print(f"{'line':<34} {'gate':<6} {'agree':<6} effect / reasons")
        for line in (*ATTACKS, *BENIGN):
            if any(shutil.which(program) is None for program in line.needs):
                print(f"{line.kind + ':' + line.id:<34} {'-':<6} {'skip':<6} not installed")
                continue
            trial = bench.trial(line)
            allowed = trial.decision.outcome is Outcome.ALLOW
            if line.kind == "benign":
                ok = allowed and trial.ran.returncode == 0 and not trial.effects.harmful
            else:
                ok = trial.effects.harmful and not allowed
            misses += not ok
            if args.misses and ok:
                continue
            reasons = ",".join(trial.decision.reasons)
            print(
                f"{line.kind + ':' + line.id:<34} {trial.decision.outcome.value:<6} "
                f"{'yes' if ok else 'MISS':<6} {trial.effects.describe()}"
                f"{' (exit ' + str(trial.ran.returncode) + ')' if trial.ran.returncode else ''}"
                f"{' [' + reasons + ']' if reasons else ''}"
            )
    print(f"{misses} disagreement(s) over {len(ATTACKS) + len(BENIGN)} lines")
    return 1 if misses else 0


if __name__ == "__main__":
    raise SystemExit(main())
