"""Run every ``tests/bench/bench_*.py``, print one table, write docs/BENCHMARKS.md.

Usage (from the repository root)::

    python -m tests.bench              # all modules; writes docs/BENCHMARKS.md
    python -m tests.bench crypto       # only modules whose name contains "crypto"; no file
    python -m tests.bench --merge web  # only those; their rows and notes replace their groups'
                                       # in docs/BENCHMARKS.md, the other groups' stay

A module that fails is shown as failed in the table; the others still run.
"""

from __future__ import annotations

import datetime as dt
import importlib
import os
import platform
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.bench.common import Row

__all__ = ["main"]

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent.parent
OUTPUT = REPO_ROOT / "docs" / "BENCHMARKS.md"


@dataclass
class ModuleResult:
    name: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None


def discover(filters: Sequence[str] = ()) -> list[str]:
    names = sorted(path.stem for path in BENCH_DIR.glob("bench_*.py"))
    if filters:
        names = [name for name in names if any(f in name for f in filters)]
    return names


def run_module(name: str) -> ModuleResult:
    result = ModuleResult(name)
    try:
        module = importlib.import_module(f"tests.bench.{name}")
        result.rows = list(module.run())
        notes = getattr(module, "notes", None)
        if notes is not None:
            result.notes = list(notes())
    except Exception as exc:  # one broken benchmark must not hide the others
        traceback.print_exc(file=sys.stderr)
        result.error = f"{type(exc).__name__}: {exc}"
    return result


LOWER_IS_BETTER = frozenset({"ms", "s", "MiB"})
"""Units of time and memory: for these rows a ratio below 1 means we are faster or leaner."""


def _number(value: float | None, unit: str) -> str:
    if value is None:
        return "–"
    if value >= 100:
        return f"{value:,.0f}"
    if unit == "ops/s":
        return f"{value:,.1f}"
    return f"{value:,.3g}"


def _ratio(row: Row) -> str:
    ratio = row.ratio
    if ratio is None:
        return "–"
    return f"{ratio:.2f}x" + (" (lower is better)" if row.unit in LOWER_IS_BETTER else "")


def table(results: Sequence[ModuleResult]) -> list[str]:
    lines = [
        "| group | case | ours | baseline | baseline is | ours / baseline |",
        "|---|---|---:|---:|---|---:|",
    ]
    for result in results:
        if result.error is not None:
            lines.append(f"| {result.name} | **failed**: {result.error} | – | – | – | – |")
            continue
        for row in result.rows:
            lines.append(
                f"| {row.group} | {row.name} | {_number(row.ours, row.unit)} {row.unit} "
                f"| {_number(row.baseline, row.unit)} | {row.baseline_name or '–'} "
                f"| {_ratio(row)} |"
            )
    return lines


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def document(results: Sequence[ModuleResult], lines: Sequence[str]) -> str:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    notes = [note for result in results for note in result.notes]
    parts = [
        "# Benchmarks",
        "",
        "Written by `make bench` (`python -m tests.bench`); do not edit by hand.",
        "",
        "## Machine",
        "",
        f"- date: {now}",
        f"- CPU: {cpu_model()}, {os.cpu_count()} logical cores (shared)",
        f"- Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.system()} {platform.release()}",
        "",
        "## Results",
        "",
        *lines,
        "",
        "## Method",
        "",
        "- Each ops/s case runs in rounds of at least 0.2 s (the iteration count is calibrated",
        "  first); 5 rounds per case, cases interleaved round-robin; the table shows the median",
        "  round in operations per second. The baselines use the same method, with the same",
        "  inputs, in the same run. Other units are explained in the notes below.",
        "- The ratio is ours / baseline: above 1 means we are faster for throughputs (…/s), below",
        "  1 for times (ms, s) and memory (MiB), marked *lower is better*. On a shared machine the",
        "  absolute numbers drift between runs; the ratios are what to compare.",
        *(f"- {note}" for note in notes),
        "",
    ]
    return "\n".join(parts)


def _group(row_line: str) -> str:
    return row_line.split("|")[1].strip()


def merge(existing: str, results: Sequence[ModuleResult], lines: Sequence[str]) -> str:
    """`existing` (a BENCHMARKS.md) with the groups of `results` replaced by their new rows/notes.

    A module can be re-measured alone (the browser's, say, on a machine where the hour-long full
    run would disturb others) without losing the other groups' numbers: their rows and notes stay
    as they were, and a note says which groups were measured when.
    """
    groups = {row.group for result in results for row in result.rows}
    new_rows = [line for line in lines[2:] if _group(line) in groups]
    new_notes = [f"- {note}" for result in results for note in result.notes]
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    stamp = f"- {', '.join(sorted(groups))}: measured {now} (`python -m tests.bench --merge`)"
    out: list[str] = []
    in_table = False
    for line in existing.splitlines():
        is_row = line.startswith("| ") and not line.startswith("| group |")
        if is_row and _group(line) in groups:
            in_table = True
            continue
        if in_table and not is_row:
            out.extend(new_rows)
            in_table = False
        elif is_row:
            in_table = True
        if line.startswith("- ") and any(line.startswith(f"- {group}") for group in groups):
            continue
        out.append(line)
    if in_table:
        out.extend(new_rows)
    while out and not out[-1].strip():
        out.pop()
    return "\n".join([*out, *new_notes, stamp, ""])


def main(argv: Sequence[str] | None = None) -> int:
    filters = list(sys.argv[1:] if argv is None else argv)
    merging = "--merge" in filters
    filters = [f for f in filters if f != "--merge"]
    names = discover(filters)
    if not names:
        print(f"no benchmark module matches {filters}", file=sys.stderr)
        return 2
    results = []
    for name in names:
        print(f"running {name} ...", file=sys.stderr, flush=True)
        results.append(run_module(name))
    lines = table(results)
    print("\n".join(lines))
    if not filters:
        OUTPUT.parent.mkdir(parents=True, exist_ok=True)
        OUTPUT.write_text(document(results, lines), encoding="utf-8")
        print(f"\nwrote {OUTPUT.relative_to(REPO_ROOT)}", file=sys.stderr)
    elif merging and OUTPUT.exists() and not any(result.error for result in results):
        OUTPUT.write_text(merge(OUTPUT.read_text(encoding="utf-8"), results, lines), "utf-8")
        print(f"\nmerged into {OUTPUT.relative_to(REPO_ROOT)}", file=sys.stderr)
    return 1 if any(result.error for result in results) else 0


if __name__ == "__main__":
    sys.exit(main())
