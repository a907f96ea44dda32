"""``python -m tests.chaos --commands 10000 --seed N``: the full chaos run (``make chaos``).

Prints the report (invariants with PASS/FAIL, fault counts, workload, summary) and exits 1 when
any invariant failed, 0 otherwise. Progress goes to stderr every 500 commands.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from tests.chaos.runner import ChaosConfig, run_chaos

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tests.chaos",
        description="Drive the daemon through real relays under seeded faults; check invariants.",
    )
    parser.add_argument("--commands", type=int, default=10_000, help="commands to send")
    parser.add_argument("--seed", type=int, default=1, help="seed of the fault plan and workload")
    parser.add_argument("--work-dir", type=Path, help="keep everything here (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the work dir even on success")
    parser.add_argument(
        "--rss-limit-mb", type=int, default=400, help="fail if the daemon's RSS exceeds this"
    )
    parser.add_argument("--fault-log", action="store_true", help="print the fault log too")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--verbose", action="store_true", help="log the harness at INFO")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.CRITICAL,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )

    def progress(text: str) -> None:
        print(f"[chaos] {text}", file=sys.stderr, flush=True)

    config = ChaosConfig(
        commands=args.commands,
        seed=args.seed,
        work_dir=args.work_dir,
        keep=args.keep,
        rss_limit_mb=args.rss_limit_mb,
        progress=None if args.quiet else progress,
    )
    try:
        report = asyncio.run(run_chaos(config))
    except ValueError as exc:
        print(f"python -m tests.chaos: {exc}", file=sys.stderr)
        return 2
    print(report.render(fault_log=args.fault_log))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
