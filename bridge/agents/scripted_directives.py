"""What the scripted agent does with a line of text: the directive grammar, as pure functions.

The scripted agent stands in for Claude Code in the daemon's integration tests, chaos runs and
benchmarks, so its behaviour must be predictable from the text alone. The grammar is small and
strict, so that ordinary prose is never mistaken for a directive:

=========================  =======================================================================
``lines N``                N assistant text entries ``line 1 of N`` … ``line N of N`` (throughput)
``big N``                  one assistant text entry of exactly N characters, :func:`big_content`
                           (fragmentation)
``think``                  a ``thinking`` entry, then a text entry
``slow S``                 a turn that waits S seconds (decimals allowed) before ending;
                           interruptible
``status``                 one text entry with the options in force
                           (``mode=plan effort=high model=x``)
``crash``                  the agent ends (the driver's ``run`` returns) and accepts no more input
``ask <Tool> [{json}]``    a permission prompt for the call (a card); the state is
                           ``waiting_permission`` (``waiting_question`` for ``AskUserQuestion``)
                           until it is answered, then one text entry, :func:`permission_reply`
``check <Tool> [{json}]``  the daemon's pre-tool check of the call, then one text entry,
                           :func:`verdict_reply`
anything else              one text entry ``echo: <text>``, unknown ``/commands`` included
=========================  =======================================================================

A directive is recognised only when the whole text, less surrounding whitespace, is the keyword
(``think``) or the keyword and exactly one argument (``lines 3``). "think about it" and "lines of
code" are prose and echoed. A keyword with one bad argument (``lines 0``, ``big x``, ``slow -1``) is
:class:`Invalid`: the agent answers with an ``error`` entry naming the accepted range, because a
test that typed ``lines 1e6`` wants to hear that, not to see an echo it did not ask for. Arguments
are capped so that a typo cannot make the agent allocate gigabytes or hang for a day.

``ask`` and ``check`` take a tool name, then optionally (after whitespace, newlines allowed) one
JSON object, the call's input: ``ask Bash {"command": "ls"}``. A tool name is what Claude Code
calls its tools: PascalCase ASCII (``Bash``, ``AskUserQuestion``) or an MCP tool
(``mcp__server__tool``), so "ask me" and "check this" stay prose. A tool name followed by anything
but one JSON object (``ask Bash please``) is :class:`Invalid`. The JSON is read with ``orjson``:
``NaN``, ``Infinity`` and lone surrogates are refused, so the input survives the host's journal.
These two directives let the fast test tiers exercise what the session host does with callbacks
that wait for the daemon (parked across a daemon's ``kill -9``, withdrawn by an interrupt).
"""

from __future__ import annotations

import re
from dataclasses import field
from typing import Any

import orjson

from bridge.host.driver import PermissionAnswer, ToolVerdict
from bridge.records import record

__all__ = [
    "MAX_BIG_SIZE",
    "MAX_LINES",
    "MAX_SLOW_SECONDS",
    "THINKING_TEXT",
    "THOUGHT_TEXT",
    "Ask",
    "Big",
    "Check",
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
    "permission_reply",
    "verdict_reply",
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


@record
class Echo:
    """Plain text (or an unknown command): answered ``echo: <text>``."""

    text: str


@record
class Lines:
    """``lines N``."""

    count: int


@record
class Big:
    """``big N``."""

    size: int


@record
class Think:
    """``think``."""


@record
class Slow:
    """``slow S``."""

    seconds: float


@record
class Status:
    """``status``."""


@record
class Crash:
    """``crash``."""


@record
class Ask:
    """``ask <Tool> [{json}]``: a permission prompt for one call."""

    tool_name: str
    tool_input: dict[str, Any] = field(default_factory=dict)


@record
class Check:
    """``check <Tool> [{json}]``: the daemon's pre-tool check of one call."""

    tool_name: str
    tool_input: dict[str, Any] = field(default_factory=dict)


@record
class Invalid:
    """A directive keyword with an argument outside its range; `message` says what is accepted."""

    message: str


Directive = Echo | Lines | Big | Think | Slow | Status | Crash | Ask | Check | Invalid

_NO_ARGUMENT: dict[str, Directive] = {"think": Think(), "status": Status(), "crash": Crash()}
# ASCII only: `str.isdecimal` would accept "١٢" and `float` would accept "1e3", "inf" and "nan".
_WITH_ARGUMENT = re.compile(r"(lines|big|slow)[ \t]+(\S+)", re.ASCII)
_INTEGER = re.compile(r"[0-9]{1,9}", re.ASCII)
_DECIMAL = re.compile(r"[0-9]{1,5}(?:\.[0-9]{1,6})?", re.ASCII)
# The tool name ends at the first whitespace; the rest (newlines included) is the JSON input.
_WITH_TOOL = re.compile(r"(ask|check)[ \t]+(\S+)(?:\s+(.+))?", re.ASCII | re.DOTALL)
_TOOL_NAME = re.compile(r"[A-Z][A-Za-z0-9_]{0,63}|mcp__[A-Za-z0-9_-]{1,120}", re.ASCII)


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
    tool = _WITH_TOOL.fullmatch(stripped)
    if tool is not None:
        return _parse_tool_directive(text, *tool.groups())
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


def _parse_tool_directive(text: str, keyword: str, name: str, rest: str | None) -> Directive:
    """``ask`` / ``check``: prose unless `name` is a tool name; Invalid when `rest` is no object."""
    if _TOOL_NAME.fullmatch(name) is None:
        return Echo(text)
    tool_input: object = {}
    if rest is not None:
        try:
            tool_input = orjson.loads(rest)
        except orjson.JSONDecodeError:
            tool_input = None
    if not isinstance(tool_input, dict):
        return Invalid(f"{keyword} takes a tool name, then optionally one JSON object")
    return Ask(name, tool_input) if keyword == "ask" else Check(name, tool_input)


def permission_reply(tool_name: str, answer: PermissionAnswer) -> str:
    """The text entry after an ``ask``: how the prompt was answered.

    ``allowed Bash``, ``allowed Bash (always)`` or ``denied Bash: <message>``, then
    `` input=<compact JSON>`` when the answer changed the call's input.
    """
    if answer.allow:
        reply = f"allowed {tool_name} (always)" if answer.always else f"allowed {tool_name}"
    else:
        reply = f"denied {tool_name}: {answer.message}"
    if answer.updated_input is not None:
        reply += " input=" + orjson.dumps(dict(answer.updated_input)).decode()
    return reply


def verdict_reply(verdict: ToolVerdict) -> str:
    """The text entry after a ``check``: ``verdict <decision>: <reason>``."""
    return f"verdict {verdict.decision}: {verdict.reason}"


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
