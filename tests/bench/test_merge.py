"""``python -m tests.bench --merge``: re-measured groups replace their own rows and notes only."""

from __future__ import annotations

from tests.bench.__main__ import ModuleResult, merge, table
from tests.bench.common import Row

EXISTING = """# Benchmarks

## Results

| group | case | ours | baseline | baseline is | ours / baseline |
|---|---|---:|---:|---|---:|
| crypto | sign | 1 ops/s | 2 | x | 0.50x |
| web (Chromium) | pairing | 900 ms | 50 | sim | 18.00x (lower is better) |
| zeta | other | 3 ops/s | – | – | – |

## Method

- crypto: a note that stays.
- web (Chromium): the old note.
- web (Chromium): measured 2026-01-01 00:00 UTC (`python -m tests.bench --merge`)
"""


def test_merge_replaces_the_measured_groups_and_keeps_the_others() -> None:
    result = ModuleResult(
        "bench_web",
        rows=[Row("web (Chromium)", "pairing", 700.0, 50.0, "sim", unit="ms")],
        notes=["web (Chromium): the new note."],
    )
    merged = merge(EXISTING, [result], table([result]))
    lines = merged.splitlines()
    rows = [line for line in lines if line.startswith("| ") and "group" not in line]
    assert [row.split("|")[1].strip() for row in rows] == ["crypto", "zeta", "web (Chromium)"]
    assert "| web (Chromium) | pairing | 700 ms | 50 | sim | 14.00x (lower is better) |" in lines
    assert "900 ms" not in merged and "the old note" not in merged and "2026-01-01" not in merged
    assert "- crypto: a note that stays." in lines
    assert "- web (Chromium): the new note." in lines
    assert sum("measured" in line for line in lines) == 1
