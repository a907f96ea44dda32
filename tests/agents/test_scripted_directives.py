"""The scripted agent's grammar: which texts are directives, their replies, the `big N` content."""

from __future__ import annotations

import orjson
import pytest

from bridge.agents.scripted_directives import (
    MAX_BIG_SIZE,
    MAX_LINES,
    Ask,
    Big,
    Check,
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
    permission_reply,
    verdict_reply,
)
from bridge.host.driver import PermissionAnswer, ToolVerdict

LINES_RANGE = f"lines takes a whole number from 1 to {MAX_LINES}"
BIG_RANGE = f"big takes a whole number from 1 to {MAX_BIG_SIZE}"
SLOW_RANGE = "slow takes a number of seconds from 0 to 3600"
ASK_FORM = "ask takes a tool name, then optionally one JSON object"
CHECK_FORM = "check takes a tool name, then optionally one JSON object"

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
    ("ask Bash", Ask("Bash")),
    ("  ask\tBash \n", Ask("Bash")),
    ('ask Bash {"command": "ls"}', Ask("Bash", {"command": "ls"})),
    (
        'ask Bash\n{\n  "command": "ls",\n  "n": [1, 2.5, null]\n}',
        Ask("Bash", {"command": "ls", "n": [1, 2.5, None]}),
    ),
    ("ask AskUserQuestion {}", Ask("AskUserQuestion")),
    ("ask mcp__files__read_file", Ask("mcp__files__read_file")),
    ("ask Web_Fetch2", Ask("Web_Fetch2")),
    ('check Bash {"command": "rm -rf /"}', Check("Bash", {"command": "rm -rf /"})),
    ("check Write", Check("Write")),
    ("ask me anything", Echo("ask me anything")),
    ("ask me", Echo("ask me")),
    ("check this out", Echo("check this out")),
    ("check it", Echo("check it")),
    ("ask", Echo("ask")),
    ("Ask Bash", Echo("Ask Bash")),
    ("ask Bash{}", Echo("ask Bash{}")),
    ("ask Bäsh", Echo("ask Bäsh")),
    ("ask mcp__", Echo("ask mcp__")),
    ("ask\nBash", Echo("ask\nBash")),
    (f"ask B{'x' * 64}", Echo(f"ask B{'x' * 64}")),
    (f"ask B{'x' * 63}", Ask(f"B{'x' * 63}")),
    ("ask Bash please", Invalid(ASK_FORM)),
    ("ask Bash [1, 2]", Invalid(ASK_FORM)),
    ('ask Bash "ls"', Invalid(ASK_FORM)),
    ('ask Bash {"a": 1} {"b": 2}', Invalid(ASK_FORM)),
    ('ask Bash {"a": NaN}', Invalid(ASK_FORM)),
    ('ask Bash {"a": 1e400}', Invalid(ASK_FORM)),
    ('ask Bash {"a": "\\ud800"}', Invalid(ASK_FORM)),
    ("check Bash {", Invalid(CHECK_FORM)),
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


PERMISSION_REPLY_CASES: list[tuple[PermissionAnswer, str]] = [
    (PermissionAnswer(allow=True), "allowed Bash"),
    (PermissionAnswer(allow=True, always=True), "allowed Bash (always)"),
    (PermissionAnswer(allow=False, message="too risky"), "denied Bash: too risky"),
    (PermissionAnswer(allow=False), "denied Bash: "),
    (PermissionAnswer(allow=False, always=True, message="no"), "denied Bash: no"),
    (
        PermissionAnswer(allow=True, updated_input={"command": "ls", "flags": ["-l", "-a"]}),
        'allowed Bash input={"command":"ls","flags":["-l","-a"]}',
    ),
    (
        PermissionAnswer(allow=True, always=True, updated_input={}),
        "allowed Bash (always) input={}",
    ),
    (
        PermissionAnswer(allow=False, message="edit it", updated_input={"é": "ü"}),
        'denied Bash: edit it input={"é":"ü"}',
    ),
]


@pytest.mark.parametrize(
    ("answer", "expected"), PERMISSION_REPLY_CASES, ids=[c[1] for c in PERMISSION_REPLY_CASES]
)
def test_permission_reply(answer: PermissionAnswer, expected: str) -> None:
    assert permission_reply("Bash", answer) == expected


def test_permission_reply_input_reads_back_as_the_answer() -> None:
    updated = {"answers": {"Which color?": 'blue, "dark"\nor light'}, "n": 1}
    reply = permission_reply("AskUserQuestion", PermissionAnswer(True, updated_input=updated))
    prefix = "allowed AskUserQuestion input="
    assert reply == prefix + '{"answers":{"Which color?":"blue, \\"dark\\"\\nor light"},"n":1}'
    assert orjson.loads(reply[len(prefix) :]) == updated


@pytest.mark.parametrize(
    ("verdict", "expected"),
    [
        (ToolVerdict("deny", "blocked by the gate"), "verdict deny: blocked by the gate"),
        (ToolVerdict("ask", "risky"), "verdict ask: risky"),
        (ToolVerdict("none"), "verdict none: "),
    ],
)
def test_verdict_reply(verdict: ToolVerdict, expected: str) -> None:
    assert verdict_reply(verdict) == expected
