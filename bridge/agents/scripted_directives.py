"""What the scripted agent does with a line of text: the directive grammar, as pure functions.

The scripted agent stands in for Claude Code in the daemon's integration tests, chaos runs and
benchmarks, so its behaviour must be predictable from the text alone. The grammar is small and
strict, so that ordinary prose is never mistaken for a directive:

- ``lines N`` → N assistant text entries ``line 1 of N`` … ``line N of N`` (throughput tests);
- ``big N`` → one assistant text entry of exactly N characters, :func:`big_content` (fragmentation);
- ``think`` → a ``thinking`` entry, then a text entry;
- ``slow S`` → a turn that waits S seconds (decimals allowed) before ending; interruptible;
- ``status`` → one text entry with the options in force (``mode=plan effort=high model=x``);
- ``crash`` → the agent ends (``AgentEnded``) and accepts no more input;
- anything else, unknown ``/commands`` included → one text entry ``echo: <text>``.

A directive is recognised only when the whole text, less surrounding whitespace, is the keyword
(``think``) or the keyword and exactly one argument (``lines 3``). "think about it" and "lines of
code" are prose and echoed. A keyword with one bad argument (``lines 0``, ``big x``, ``slow -1``) is
:class:`Invalid`: the agent answers with an ``error`` entry naming the accepted range, because a
test that typed ``lines 1e6`` wants to hear that, not to see an echo it did not ask for. Arguments
are capped so that a typo cannot make the agent allocate gigabytes or hang for a day.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "MAX_BIG_SIZE",
    "MAX_LINES",
    "MAX_SLOW_SECONDS",
    "THINKING_TEXT",
    "THOUGHT_TEXT",
    "Big",
    "Crash",
    "Directive",
    "Echo",
    "Invalid",
    "Lines",
    "Slow",
    "Status",
    "Think",
    "big_content",
    "parse_directive",
]

MAX_LINES = 100_000
"""Most entries one ``lines N`` turn produces."""
MAX_BIG_SIZE = 10_000_000
"""Most characters of a ``big N`` entry (10 MB: far past the 40,960-byte fragmentation limit)."""
MAX_SLOW_SECONDS = 3600.0
"""Longest ``slow S`` wait."""

THINKING_TEXT = "Thinking it over."
"""The content of the ``thinking`` entry of ``think``."""
THOUGHT_TEXT = "Done thinking."
"""The content of the text entry that follows it."""


@dataclass(frozen=True, slots=True)
class Echo:
    """Plain text (or an unknown command): answered ``echo: <text>``."""

    text: str


@dataclass(frozen=True, slots=True)
class Lines:
    """``lines N``."""

    count: int


@dataclass(frozen=True, slots=True)
class Big:
    """``big N``."""

    size: int


@dataclass(frozen=True, slots=True)
class Think:
    """``think``."""


@dataclass(frozen=True, slots=True)
class Slow:
    """``slow S``."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Status:
    """``status``."""


@dataclass(frozen=True, slots=True)
class Crash:
    """``crash``."""


@dataclass(frozen=True, slots=True)
class Invalid:
    """A directive keyword with an argument outside its range; `message` says what is accepted."""

    message: str


Directive = Echo | Lines | Big | Think | Slow | Status | Crash | Invalid

_NO_ARGUMENT: dict[str, Directive] = {"think": Think(), "status": Status(), "crash": Crash()}
# ASCII only: `str.isdecimal` would accept "١٢" and `float` would accept "1e3", "inf" and "nan".
_WITH_ARGUMENT = re.compile(r"(lines|big|slow)[ \t]+(\S+)", re.ASCII)
_INTEGER = re.compile(r"[0-9]{1,9}", re.ASCII)
_DECIMAL = re.compile(r"[0-9]{1,5}(?:\.[0-9]{1,6})?", re.ASCII)


def parse_directive(text: str) -> Directive:
    """Classify one input text (see the module docstring for the grammar).

    Args:
        text: the input exactly as the user typed it.

    Returns:
        The directive; :class:`Echo` carries `text` unchanged (whitespace included).
    """
    stripped = text.strip()
    if stripped in _NO_ARGUMENT:
        return _NO_ARGUMENT[stripped]
    match = _WITH_ARGUMENT.fullmatch(stripped)
    if match is None:
        return Echo(text)
    keyword, argument = match.groups()
    if keyword == "slow":
        if _DECIMAL.fullmatch(argument) and float(argument) <= MAX_SLOW_SECONDS:
            return Slow(float(argument))
        return Invalid(f"slow takes a number of seconds from 0 to {MAX_SLOW_SECONDS:g}")
    limit = MAX_LINES if keyword == "lines" else MAX_BIG_SIZE
    if _INTEGER.fullmatch(argument) and 1 <= int(argument) <= limit:
        return Lines(int(argument)) if keyword == "lines" else Big(int(argument))
    return Invalid(f"{keyword} takes a whole number from 1 to {limit}")


def big_content(size: int) -> str:
    """The `size`-character text of ``big N``: numbered 10-character cells, ``00000000.\\n`` ….

    Every cell is unique, so a receiver that reorders, drops or duplicates a fragment of the entry
    produces a different text, which a periodic filler (``"x" * N``) would hide. Pure ASCII: N
    characters are N bytes, so ``big 204800`` is exactly 200 KiB of content.

    Raises:
        ValueError: `size` is negative.
    """
    if size < 0:
        raise ValueError("size must not be negative")
    cells = -(-size // 10)
    return "".join(f"{index:08d}.\n" for index in range(cells))[:size]
