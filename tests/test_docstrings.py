"""Docstrings and comments say what a thing is for and why it is shaped so: no measurements, no
tracker ids, no "was/now" stories.

A timing, a size or a speed-up measured once goes stale with the next change of the code, the
machine or a dependency; it belongs in ``docs/BENCHMARKS.md`` (written by ``make bench``), where it
is measured again. An issue number and a story of what the code did before belong in git, where
``git log -S`` and ``git blame`` find them. What stays in the text is the design: constants that
*are* the shape (a 64 KiB cap, a 300 s staleness rule, a 10-minute window), protocol limits, and
the ids of the spec's sections (``COR-2``, ``CDX-062``: the seeds name them, so a reader can look
them up).

Scanned: every ``.py`` file of ``bridge/``, ``relaypolicy/`` and ``store/`` — the module, class
and function docstrings, the attribute docstrings (a string right after an assignment) and every
comment (a run of comment lines is read as one text, so a phrase broken over two lines is still
seen). Whitespace is collapsed before matching, for the same reason.

Deliberately not patterns, because they describe the running program far more often than its
history: "no longer" ("a group that can no longer complete"), "now" ("the value now in force"),
"the old" ("the old daemon" of a restart, §8's "the old one gets no sync-end"), "previous" ("the
previous page's cursor"). Sentence-initial "Now" is a pattern: it starts the second half of a
"used to … Now …" story.
"""

from __future__ import annotations

import ast
import functools
import io
import itertools
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("bridge", "relaypolicy", "store")

# A unit of time, memory or size as measurements use them (a number before one is flagged only
# in the measurement-shaped contexts below, not on its own: "a 64 KiB cap" is the design).
_TIME = r"(?:ns|us|µs|ms|s)"
_SIZE = r"(?:bytes|B|KB|kB|KiB|MB|MiB|GB|GiB)"
_NUM = r"\d[\d,.]*(?:\s?[–-]\s?\d[\d,.]*)?"  # 0.86, 1,400, 2–4

#: Name → (pattern, why it is not a docstring's business). Matched case-insensitively unless the
#: pattern turns that off itself.
PATTERNS: dict[str, tuple[str, str]] = {
    # --- measurements
    "median/mean": (
        r"\b(?:medians?|averages?)\b|\bmeans?\s+of\s+\d",
        "a statistic of a benchmark run (docs/BENCHMARKS.md)",
    ),
    "percentile": (r"\bp(?:50|90|95|99)\b", "a latency percentile (docs/BENCHMARKS.md)"),
    "speed-up": (
        r"\b\d+(?:\.\d+)?[x×](?!\w)"
        r"|\b\d+(?:\.\d+)?\s?(?:x|×|times)\s+(?:faster|slower|quicker|cheaper|dearer|"
        r"smaller|larger|bigger)\b",
        "a measured ratio",
    ),
    "sub-millisecond timing": (r"\b\d+(?:\.\d+)?\s?(?:ns|us|µs)\b", "a measured cost"),
    "approximate quantity": (
        rf"~\s?\d[\d,.]*\s?(?:{_TIME}|{_SIZE}|min|%)(?!\w)",
        "'~N s', '~N MiB', '~N%' is what a measurement looks like",
    ),
    "fractional timing": (
        r"\b\d+\.\d+\s?(?:ms|s)\b(?!\w)",
        "a timing to the tenth is measured, not designed",
    ),
    "millisecond timing": (r"\b\d+\s?ms\b", "a timing in ms is measured, not designed"),
    "cost": (
        rf"\b(?:took|takes|taking|costs?|costing)\s+(?:~\s?|about\s+|around\s+|some\s+)?"
        rf"{_NUM}\s?(?:{_TIME}|MiB|MB|GiB|GB)\b|\bof\s+CPU\b",
        "what something cost on some machine, some day",
    ),
    "before → after": (
        rf"\bwent\s+from\b|\d[\d.]*\s?{_TIME}?\s*(?:→|->)\s*\d[\d.]*\s?{_TIME}\b",
        "a before/after number is a changelog",
    ),
    "measured number": (
        rf"\bmeasured\W+(?:at|as|to\s+be|about|around|~)\s*~?\s?(?:\d|one|two|three|four|five|six|"
        rf"seven|eight|nine|ten|a\s+dozen)\b"
        rf"|\bmeasured\W+~?\s?{_NUM}\s?(?:{_TIME}|{_SIZE}|%)(?!\w)"
        rf"|\b{_NUM}\s?(?:{_TIME}|{_SIZE})\b[\w\s,]{{0,25}}\bmeasured\b",
        "a number someone measured once",
    ),
    # --- tracker ids
    "issue number": (
        r"\b(?:issues?|tickets?|bugs?|PRs?|pull\s+requests?)\s+#?\d+"
        r"|(?<![\w&])#\d+\b|\b(?:the|this|that)\s+issue\b",
        "the tracker is history; say the rule itself",
    ),
    # --- was/now stories
    "used to": (
        r"(?<!\bis\s)(?<!\bare\s)(?<!\bbe\s)(?<!\bbeen\s)(?<!\bbeing\s)\bused\s+to\b",
        "what the code did before is in git",
    ),
    "previously/formerly": (r"\b(?:previously|formerly|originally)\b", "history"),
    "moved/renamed": (
        r"\bmoved\s+(?:here\s+)?(?:from|out\s+of)\b|\b(?:was|were|been)\s+renamed\b"
        r"|\brenamed\s+from\b",
        "where the code lived before is in git",
    ),
    "before the change": (
        r"\bbefore\s+(?:issue|the\s+(?:fix|change|rewrite|refactor|move))\b"
        r"|\b(?:it|this|which)\s+replaced\s+\w+\s*\)",
        "history",
    ),
    "it was N": (r"\b(?:it|this|that)\s+was\s+\d", "a former value is history"),
    "sentence-initial Now": (
        r"(?-i:(?:^|[.;:!?]\s)Now\b)",
        "'Now X' after a story of what was",
    ),
}

#: Ids of the spec's sections and of the trackers the spec itself cites (the seeds and
#: /work/shared/spec name them): references a reader can follow, kept. Any other ``ABC-12`` is a
#: tracker id.
SPEC_IDS = frozenset(
    {
        "ADR-003",
        "ADR-004",
        "ADR-005",
        "ADR-010",
        "CDX-007",
        "CDX-012",
        "CDX-013",
        "CDX-050",
        "CDX-055",
        "CDX-061",
        "CDX-062",
        "CDX-093",
        "COR-1",
        "COR-2",
        "FND-2",
        "JEV-2",
        "MIP-00",
        "UI-3",
        "UI-4",
        "UI-5",
    }
)
#: Prefixes of standards, not trackers: NIP-44, BIP-340, UTF-8, ISO-8601, SHA-256, AES-256, GPL-3.
STANDARDS = frozenset({"NIP", "BIP", "UTF", "ISO", "SHA", "AES", "GPL", "RFC", "PEP"})
TRACKER_ID = re.compile(r"(?<![\w-])([A-Z]{2,5})-(\d+)\b")

#: Deliberate exceptions: (file, pattern name, text the match lies in, why it stays).
EXCEPTIONS: list[tuple[str, str, str, str]] = [
    (
        "bridge/relay/server.py",
        "millisecond timing",
        "TCP_DELACK_MIN``, 40 ms",
        "Linux's delayed-ACK timer, a kernel constant the design works around, not a measurement",
    ),
    (
        "bridge/runtime/hosts/agent_probe.py",
        "fractional timing",
        "(loadSession) in 2.3 s``",
        "an example of the line `describe` writes, whose format shows tenths of a second",
    ),
]


@dataclass(frozen=True)
class Text:
    """One docstring or comment block: where it starts, and its text."""

    path: str
    line: int
    kind: str
    text: str


def _docstrings(tree: ast.Module) -> list[tuple[int, str, str]]:
    """(line, kind, text) of every module, class, function and attribute docstring."""
    found: list[tuple[int, str, str]] = []
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        if isinstance(
            node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
        ) and (doc := ast.get_docstring(node, clean=False)):
            found.append((body[0].lineno, "docstring", doc))
        for before, stmt in itertools.pairwise(body):
            if (
                isinstance(before, ast.Assign | ast.AnnAssign)
                and isinstance(stmt, ast.Expr)
                and isinstance(stmt.value, ast.Constant)
                and isinstance(stmt.value.value, str)
            ):
                found.append((stmt.lineno, "attribute docstring", stmt.value.value))
    return found


def _comments(source: str) -> list[tuple[int, str, str]]:
    """(line, kind, text) of every run of comment lines (consecutive lines read as one)."""
    runs: list[tuple[int, str, str]] = []
    last_line = -2
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT:
            continue
        text = tok.string.lstrip("#").lstrip(":")
        line = tok.start[0]
        if runs and line == last_line + 1:
            start, kind, prev = runs[-1]
            runs[-1] = (start, kind, prev + "\n" + text)
        else:
            runs.append((line, "comment", text))
        last_line = line
    return runs


def collect() -> list[Text]:
    """Every docstring and comment of the scanned packages."""
    texts: list[Text] = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            source = path.read_text(encoding="utf-8")
            rel = path.relative_to(REPO).as_posix()
            for line, kind, text in _docstrings(ast.parse(source)) + _comments(source):
                texts.append(Text(rel, line, kind, text))
    return texts


def _collapse(text: str) -> tuple[str, list[int]]:
    """`text` with every run of whitespace as one space, and each character's line offset."""
    out: list[str] = []
    lines: list[int] = []
    line = 0
    for piece in re.finditer(r"\s+|\S+", text):
        chunk = piece.group()
        if chunk.isspace():
            out.append(" ")
            lines.append(line)
            line += chunk.count("\n")
        else:
            out.append(chunk)
            lines.extend([line] * len(chunk))
    return "".join(out), lines


@dataclass(frozen=True)
class Hit:
    """One match: where, which pattern, and the text around it."""

    path: str
    line: int
    name: str
    context: str

    def excepted_by(self, exception: tuple[str, str, str, str]) -> bool:
        path, name, snippet, _ = exception
        return self.path == path and self.name == name and snippet in self.context


def hits(texts: list[Text]) -> list[Hit]:
    """Every pattern and tracker-id match in `texts`, exceptions included."""
    compiled = {name: re.compile(rx, re.IGNORECASE) for name, (rx, _) in PATTERNS.items()}
    out: list[Hit] = []
    for t in texts:
        flat, lines = _collapse(t.text)
        matches: list[tuple[str, re.Match[str]]] = [
            (name, m) for name, rx in compiled.items() for m in rx.finditer(flat)
        ]
        matches += [
            ("tracker id", m)
            for m in TRACKER_ID.finditer(flat)
            if m.group(1) not in STANDARDS and m.group(0) not in SPEC_IDS
        ]
        for name, m in matches:
            context = flat[max(0, m.start() - 60) : m.end() + 60]
            out.append(Hit(t.path, t.line + lines[m.start()], name, context))
    return out


@functools.cache
def tree_hits() -> tuple[Hit, ...]:
    """The matches in the packages, scanned once for the tests that read them."""
    return tuple(hits(collect()))


def test_no_measurements_tracker_ids_or_history_in_docstrings() -> None:
    found = [
        f"{h.path}:{h.line}: [{h.name}] …{h.context}…"
        for h in tree_hits()
        if not any(h.excepted_by(e) for e in EXCEPTIONS)
    ]
    assert not found, (
        "Docstrings and comments say what a thing is for and why it is shaped so; numbers go to "
        "docs/BENCHMARKS.md, history to git:\n" + "\n".join(found)
    )


def test_every_exception_is_still_needed() -> None:
    """An exception that matches nothing any more is dead weight: remove it."""
    found = tree_hits()
    for exception in EXCEPTIONS:
        assert any(h.excepted_by(exception) for h in found), f"stale exception: {exception}"


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("took 1.04 s (median of 20)", "median/mean"),
        ("0.815 → 0.685 s", "before → after"),
        ("takes 0.86 s of CPU", "cost"),
        ("OpenCode takes 2–4 s", "cost"),
        ("(130 s measured)", "measured number"),
        ("(measured: about nine writes)", "measured number"),
        ("measured at ~2 ms", "measured number"),
        ("(It was 25/s with a burst of 300)", "it was N"),
        ("startup 571 ms", "millisecond timing"),
        ("the SDK is ~5.7x faster", "speed-up"),
        ("3x faster", "speed-up"),
        ("pydantic (~20 MB)", "approximate quantity"),
        ("85 us of a shared core", "sub-millisecond timing"),
        ("issue 28's closing note", "issue number"),
        ("see #27", "issue number"),
        ("the issue's burst", "issue number"),
        ("The engine used to keep", "used to"),
        ("previously, a thread", "previously/formerly"),
        ("it was\n    renamed", "moved/renamed"),
        ("moved from runtime/", "moved/renamed"),
        ("(it replaced aiosqlite)", "before the change"),
        ("before issue 12", "before the change"),
        ("lived in the daemon. Now each session", "sentence-initial Now"),
    ],
)
def test_patterns_catch(text: str, name: str) -> None:
    rx = re.compile(PATTERNS[name][0], re.IGNORECASE)
    assert rx.search(_collapse(text)[0]), (name, text)


@pytest.mark.parametrize(
    "text",
    [
        "a window of 10 minutes",
        "chunks of 50 lines",
        "the body is capped at 64 KiB",
        "a stale command (older than 300 s)",
        "up to 25 % shorter",
        "bounded by 3 x ``ok_timeout``",
        "a value that is used to build the key",
        "sessions the store no longer has",
        "the value now in force",
        "0x1f",
        "NIP-44 and BIP-340 over UTF-8",
        "Task lifecycle (COR-2), CDX-062",
    ],
)
def test_patterns_spare_design_constants(text: str) -> None:
    flat = _collapse(text)[0]
    for name, (rx, _) in PATTERNS.items():
        assert not re.search(rx, flat, re.IGNORECASE), (name, text)
    for m in TRACKER_ID.finditer(flat):
        assert m.group(1) in STANDARDS or m.group(0) in SPEC_IDS, m.group(0)


def test_a_tracker_id_is_caught() -> None:
    ids = [m.group(0) for m in TRACKER_ID.finditer("see CDX-999 and ENG-12, not TEST-NET-1")]
    assert ids == ["CDX-999", "ENG-12"]
    assert all(i not in SPEC_IDS for i in ids)
