"""The gate fails closed: an adversarial corpus that must never be auto-allowed, a benign one
that must stay auto-allowed, and a fuzz test that the gate never raises.

Every adversarial line is judged in mode ``default`` (where a call without labels is allowed) in a
session whose workspace is ``/home/u/proj``; each row holds the outcome it must get and one label
that must be among its reasons (the one that explains the outcome). The lines are the classes of
the attacks that once passed: abbreviated long options, code bash evaluates later, options that
run commands, force-push spellings, download-then-run, and wrappers. Payloads are literal where
the gate judges the command inside (``rm -rf ~`` must still block through ``tar --to-command``)
and run-time values where it cannot (``"$CMD"`` must ask).

The benign rows are everyday development: they must stay ``allow`` with no reason at all, or the
gate is not worth its cards.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.gate import GateContext, GateDecision, Outcome, evaluate
from bridge.gate.commands.deferred import arithmetic_is_code, parameter_is_code
from bridge.gate.commands.long_options import LONG_OPTIONS, resolve_long
from bridge.gate.commands.sed_script import SedAction, SedSyntaxError, parse_sed
from bridge.sandbox import hidden_paths
from tests.gate.gate_adversarial_corpus import ADVERSARIAL, BENIGN

CONTEXT = GateContext(mode="default", cwd="/home/u/proj", roots=("/home/u/proj",), home="/home/u")
DEFAULTS = GateContext(
    mode="default",
    cwd="/home/u/proj",
    roots=("/home/u",),
    home="/home/u",
    secrets=hidden_paths("/home/u", "/home/u/.codedeck"),
)
"""The bridge on its defaults: the whole home is the workspace root, the session in ``~/proj``."""


def bash(command: str) -> GateDecision:
    return evaluate("Bash", {"command": command}, CONTEXT)


@pytest.mark.parametrize(("line", "outcome", "label"), ADVERSARIAL, ids=[r[0] for r in ADVERSARIAL])
def test_adversarial_line_is_never_allowed(line: str, outcome: str, label: str) -> None:
    decision = bash(line)
    assert decision.outcome.value == outcome, decision
    assert label in decision.reasons, decision


@pytest.mark.parametrize("line", BENIGN)
def test_benign_line_stays_allowed(line: str) -> None:
    assert bash(line) == GateDecision(Outcome.ALLOW, ())


UNREAD_SCRIPTS = frozenset({". ~/.evil"})
"""Lines that run a script by name from elsewhere in the workspace: the gate does not read
scripts (a known limit), and with the home as the root such a script is inside it."""


@pytest.mark.parametrize(("line", "outcome", "label"), ADVERSARIAL, ids=[r[0] for r in ADVERSARIAL])
def test_adversarial_line_is_never_allowed_on_the_defaults(
    line: str, outcome: str, label: str
) -> None:
    decision = evaluate("Bash", {"command": line}, DEFAULTS)
    if line in UNREAD_SCRIPTS:
        assert decision.outcome is Outcome.ALLOW
    else:
        assert decision.outcome is not Outcome.ALLOW, decision
    if outcome == "block":
        assert decision.outcome is Outcome.BLOCK, decision


@pytest.mark.parametrize("line", BENIGN)
def test_benign_line_stays_allowed_on_the_defaults(line: str) -> None:
    assert evaluate("Bash", {"command": line}, DEFAULTS) == GateDecision(Outcome.ALLOW, ())


def test_the_corpora_are_large_and_distinct() -> None:
    assert len(ADVERSARIAL) >= 250 and len(BENIGN) >= 150
    assert len({row[0] for row in ADVERSARIAL}) == len(ADVERSARIAL)
    assert not {row[0] for row in ADVERSARIAL} & set(BENIGN)


# -- the pieces ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("program", "name", "expected"),
    [
        ("rm", "--recu", ("--recursive",)),
        ("rm", "--recursive", ("--recursive",)),
        ("rm", "--no-p", ("--no-preserve-root",)),
        ("rm", "--frob", ()),
        ("git push", "--force", ("--force",)),  # exact beats a longer option
        ("git push", "--force-w", ("--force-with-lease",)),
        ("git push", "--forc", ("--force", "--force-if-includes", "--force-with-lease")),
        ("git push", "--no-verify", ("--no-verify",)),
        (
            "git push",
            "--no-forc",
            ("--no-force", "--no-force-if-includes", "--no-force-with-lease"),
        ),
        ("tar", "--to-c", ("--to-command",)),
        ("tar", "--checkpoint", ("--checkpoint",)),
        ("tar", "--checkpoint-a", ("--checkpoint-action",)),
    ],
)
def test_long_options_resolve_to_every_option_they_could_be(
    program: str, name: str, expected: tuple[str, ...]
) -> None:
    assert resolve_long(name, LONG_OPTIONS[program]) == expected


@pytest.mark.parametrize(
    ("script", "actions"),
    [
        ("s/a/b/g", []),
        ("1e rm -rf x", [SedAction("exec", "rm -rf x")]),
        ("e", [SedAction("exec", "")]),
        ("s/a/b/e", [SedAction("exec", "")]),
        ("s|a|b|gw out.txt", [SedAction("write", "out.txt")]),
        ("/x/{w a.txt\n}", [SedAction("write", "a.txt")]),
        ("$r /etc/hosts", [SedAction("read", "/etc/hosts")]),
        ("s/e/w/;p", []),  # "e" and "w" in the pattern and replacement are text
        ("y/ew/we/", []),
        ("/start/,/end/!d;1i\\\nhello", []),
        ("\\,x,d", []),
        ("a text with e and w", []),
        ("# comment e\nW log", [SedAction("write", "log")]),
    ],
)
def test_sed_scripts_are_read_command_by_command(script: str, actions: list[SedAction]) -> None:
    assert parse_sed(script) == actions


@pytest.mark.parametrize("script", ["s/a/b", "k", "y/a", "s"])
def test_sed_scripts_the_parser_cannot_follow_are_refused(script: str) -> None:
    with pytest.raises(SedSyntaxError):
        parse_sed(script)


@pytest.mark.parametrize(
    ("text", "known", "is_code"),
    [
        ("1 + 2", set(), False),
        ("0x1F + 2#101 + 16#ff", set(), False),
        ("i + 1", set(), True),
        ("i + 1", {"i"}, False),
        ("$i + 1", {"i"}, False),
        ("${i} + 1", {"i"}, False),
        ("i = 0 ; i < 3 ; i++", set(), False),
        ("x = x", set(), True),
        ("a[0]", set(), True),
        ("RANDOM % 6", set(), False),
        ("$# > 0", set(), False),
        ("$1 > 0", set(), True),
        ("'1'", set(), True),
        ("${#x} > 3", set(), False),
        ("${#a[@]} + ${n}", {"n"}, False),
        ("${x} + 1", set(), True),
        ("$(id) + 1", set(), True),
    ],
)
def test_arithmetic_is_code_unless_every_value_is_known(
    text: str, known: set[str], is_code: bool
) -> None:
    assert arithmetic_is_code(text, set(known)) is is_code


@pytest.mark.parametrize(
    ("text", "is_code"),
    [
        ("x", False),
        ("x:-default", False),
        ("x%.py", False),
        ("#x", False),
        ("x@Q", False),
        ("x@P", True),
        ("!x", True),
        ("!x[@]", False),
        ("!prefix*", False),
        ("x:1:2", False),
        ("x:i", True),
        ("a[0]", False),
        ("a[@]", False),
        ("a[i]", True),
        ("a[$(id)]", True),
    ],
)
def test_parameter_expansions_that_evaluate(text: str, is_code: bool) -> None:
    assert parameter_is_code(text, set()) is is_code


# -- never raises ------------------------------------------------------------------------------

_ATOMS = st.sampled_from(
    ["rm", "-rf", "~", "{,}", "{a,b}", "{", "}", ",", "$(", ")", "(", "`", "'", '"', "$((",
     "))", "((", "[[", "]]", "${", "$[", "x", "a[$(id)]", "<<EOF", "<<-'E'", "EOF", "\n", ";",
     "&&", "||", "|", "&", "<(", ">(", ">", "<", "\\", "\x00", "$'\\x00'", "git", "push",
     "--force-w", "--", "sed", "e", "s/a/b/e", "w", "tar", "--to-c=", "=", "!", "#", "*", "?",
     "[", "$x", "${x@P}", "${!x}", "for", "do", "done", "case", "esac", "in", "function",
     "f()", "let", "declare", "printf", "-v", "read", "env", "-S", "xargs", "-I{}", "find",
     "-exec", "\\;", "+", "curl", "bash", "sh", "-c", "eval", "ssh", "-o", "awk", "vim",
     "make", "-f", "-", "trap", "PS4=$(", "\t", "\r", "\u00a0", "\udc80", "é"]
)  # fmt: skip
_GRAMMAR = st.one_of(
    st.lists(_ATOMS, max_size=40).map(" ".join),
    st.lists(_ATOMS, max_size=40).map("".join),
)
_DEEP = st.tuples(
    st.sampled_from(["$(", "(", "{ ", "`", "$((", "${", "[[ ", "<(", "((", "sh -c '", "eval ",
                     "{a,", "$(echo ", "a[", "'\"", "\\"]),
    st.integers(0, 400),
).map(lambda pair: pair[0] * pair[1] + "rm -rf ~")  # fmt: skip
_BYTES = st.binary(max_size=200).map(lambda raw: raw.decode("utf-8", "surrogateescape"))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=200), _GRAMMAR, _DEEP, _BYTES))
def test_evaluate_never_raises(command: str) -> None:
    decision = evaluate("Bash", {"command": command}, CONTEXT)
    assert isinstance(decision, GateDecision)
    if "\x00" in command:
        assert decision.outcome is not Outcome.ALLOW  # a NUL byte is never a plain command
