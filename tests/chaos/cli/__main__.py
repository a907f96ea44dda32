"""``python -m tests.chaos.cli --kills 120 --seed N``: the long real-CLI chaos run (``make chaos-cli``).

Prints the report (kill points, workload, invariants with PASS/FAIL, summary) and exits 1 when
any invariant failed, 0 otherwise (2: bad arguments). Progress goes to stderr every ten rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from tests.chaos.cli.model import DEFAULT_LATENCY
from tests.chaos.cli.plan import KillPoint
from tests.chaos.cli.runner import CliChaosConfig, run_cli_chaos

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tests.chaos.cli",
        description="kill -9 the daemon, session hosts and Claude Code mid-work; check invariants.",
    )
    parser.add_argument("--kills", type=int, default=120, help="kill rounds (at least 7)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the kill plan and workload")
    parser.add_argument(
        "--model-latency",
        type=float,
        default=DEFAULT_LATENCY,
        help="seconds the model waits before answering a new prompt (0: the mock's speed)",
    )
    parser.add_argument(
        "--only",
        type=_points,
        help="only these kill points, comma-separated (e.g. host-kill,cli-kill)",
    )
    parser.add_argument("--work-dir", type=Path, help="keep everything here (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the work dir even on success")
    parser.add_argument("--fault-log", action="store_true", help="print the fault log too")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--verbose", action="store_true", help="log the harness at INFO")
    return parser


def _points(text: str) -> tuple[KillPoint, ...]:
    try:
        return tuple(KillPoint(name.strip()) for name in text.split(",") if name.strip())
    except ValueError:
        names = ", ".join(p.value for p in KillPoint)
        raise argparse.ArgumentTypeError(f"kill points are: {names}") from None


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.CRITICAL,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )

    def progress(text: str) -> None:
        print(f"[chaos-cli] {text}", file=sys.stderr, flush=True)

    config = CliChaosConfig(
        kills=args.kills,
        seed=args.seed,
        points=args.only,
        work_dir=args.work_dir,
        keep=args.keep,
        model_latency=args.model_latency,
        progress=None if args.quiet else progress,
    )
    try:
        report = asyncio.run(run_cli_chaos(config))
    except ValueError as exc:
        print(f"python -m tests.chaos.cli: {exc}", file=sys.stderr)
        return 2
    print(report.render(fault_log=args.fault_log))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
