"""The scripted agent's grammar: which texts are directives, and the `big N` content."""

from __future__ import annotations

import pytest

from bridge.agents.scripted_directives import (
    MAX_BIG_SIZE,
    MAX_LINES,
    Big,
    Crash,
    Directive,
    Echo,
    Invalid,
    Lines,
    Slow,
    Status,
    Think,
    big_content,
    parse_directive,
)

LINES_RANGE = f"lines takes a whole number from 1 to {MAX_LINES}"
BIG_RANGE = f"big takes a whole number from 1 to {MAX_BIG_SIZE}"
SLOW_RANGE = "slow takes a number of seconds from 0 to 3600"

CASES: list[tuple[str, Directive]] = [
    ("hello", Echo("hello")),
    ("  hello \n", Echo("  hello \n")),
    ("", Echo("")),
    ("/compact now", Echo("/compact now")),
    ("/lines 3", Echo("/lines 3")),
    ("lines 3", Lines(3)),
    ("  lines 3\n", Lines(3)),
    ("lines\t12", Lines(12)),
    (f"lines {MAX_LINES}", Lines(MAX_LINES)),
    ("lines of code", Echo("lines of code")),
    ("lines 3 4", Echo("lines 3 4")),
    ("Lines 3", Echo("Lines 3")),
    ("lines", Echo("lines")),
    ("lines 0", Invalid(LINES_RANGE)),
    ("lines -1", Invalid(LINES_RANGE)),
    ("lines abc", Invalid(LINES_RANGE)),
    ("lines 1e3", Invalid(LINES_RANGE)),
    ("lines ١٢", Invalid(LINES_RANGE)),
    (f"lines {MAX_LINES + 1}", Invalid(LINES_RANGE)),
    ("lines 9999999999999", Invalid(LINES_RANGE)),
    ("big 204800", Big(204800)),
    (f"big {MAX_BIG_SIZE}", Big(MAX_BIG_SIZE)),
    (f"big {MAX_BIG_SIZE + 1}", Invalid(BIG_RANGE)),
    ("big 0", Invalid(BIG_RANGE)),
    ("think", Think()),
    (" think ", Think()),
    ("think about it", Echo("think about it")),
    ("status", Status()),
    ("crash", Crash()),
    ("crash now", Echo("crash now")),
    ("slow 2", Slow(2.0)),
    ("slow 0", Slow(0.0)),
    ("slow 0.25", Slow(0.25)),
    ("slow 3600", Slow(3600.0)),
    ("slow 3600.5", Invalid(SLOW_RANGE)),
    ("slow inf", Invalid(SLOW_RANGE)),
    ("slow nan", Invalid(SLOW_RANGE)),
    ("slow 1e2", Invalid(SLOW_RANGE)),
    ("slow -1", Invalid(SLOW_RANGE)),
    ("slow .5", Invalid(SLOW_RANGE)),
]


@pytest.mark.parametrize(("text", "expected"), CASES, ids=[repr(text) for text, _ in CASES])
def test_parse_directive(text: str, expected: Directive) -> None:
    assert parse_directive(text) == expected


@pytest.mark.parametrize("size", [0, 1, 9, 10, 11, 99, 204_800])
def test_big_content_has_exactly_the_requested_length(size: int) -> None:
    content = big_content(size)
    assert len(content) == size
    assert content.isascii()


def test_big_content_cells_are_numbered_and_unique() -> None:
    content = big_content(204_800)
    cells = content.split("\n")[:-1]
    assert cells[:3] == ["00000000.", "00000001.", "00000002."]
    assert len(set(cells)) == len(cells) == 20_480
    # A swap of two equal-length fragments changes the text (a periodic filler would not).
    half = len(content) // 2
    assert content[half:] + content[:half] != content


def test_big_content_refuses_a_negative_size() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        big_content(-1)
