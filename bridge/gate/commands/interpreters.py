"""Where an interpreter takes its program from: inline (``-c``/``-e``), a module, a file, stdin.

Inline code is a floor (``inline_code``): the card must show the user code that is not in any
file they could review. A program read from stdin is inline code too when stdin is a pipe, a
heredoc or a here-string — and ``curl_pipe_sh`` when the pipe starts at a downloader.

Each interpreter's option table says which short flags carry the program, which take a value
(attached or as the next word), which take only an attached value (perl's ``-i.bak``), and which
take optional digits (perl's ``-l``, ``-0``). Getting these right is what keeps ``perl -MEnglish``
from reading as ``-E`` and ``perl -pi -e`` from losing its ``-e``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from bridge.gate.shell.lexer import Word

__all__ = [
    "SHELLS",
    "Interpreter",
    "ProgramSource",
    "interpreter_for",
    "program_source",
]

SHELLS = frozenset(
    {"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "yash", "posh", "fish", "csh", "tcsh",
     "rbash", "ksh93", "pdksh", "oksh", "loksh", "xonsh", "elvish", "nu", "osh", "ysh", "oil",
     "rc", "es", "ion", "murex", "hush", "msh"}
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Interpreter:
    """Option table of one interpreter family."""

    inline: str = ""
    """Short flags that carry inline code."""
    inline_is_flag: bool = False
    """Shells: ``-c`` is a flag and the code is the first operand."""
    inline_long: frozenset[str] = frozenset()
    values: str = ""
    """Short flags whose value is attached or the next word."""
    attached: str = ""
    """Short flags whose value can only be attached (the rest of the cluster)."""
    digits: str = ""
    """Short flags followed by optional digits."""
    long_values: frozenset[str] = frozenset()
    module: str = ""
    """Short flags naming a module to run (the program is not read from stdin)."""
    script: str = ""
    """Short flags naming the script file."""
    stdin: str = ""
    """Short flags that force reading the program from stdin (``bash -s``)."""
    is_shell: bool = False


_SHELL = Interpreter(
    inline="c",
    inline_is_flag=True,
    values="oO",
    long_values=frozenset({"--rcfile", "--init-file"}),
    stdin="s",
    is_shell=True,
)
_PYTHON = Interpreter(inline="c", values="WX", module="m")
_NODE = Interpreter(
    inline="ep",
    inline_long=frozenset({"--eval", "--print"}),
    values="r",
    long_values=frozenset(
        {
            "--require",
            "--import",
            "--loader",
            "--experimental-loader",
            "--input-type",
            "--conditions",
        }
    ),
)
_PERL = Interpreter(inline="eE", values="I", attached="ixdDCMm", digits="l0")
_RUBY = Interpreter(inline="e", values="IrCEF", attached="WTKx", digits="0")
_PHP = Interpreter(inline="rRBE", values="cdzt", script="f")
_SIMPLE_E = Interpreter(inline="e", values="l")
_SCRIPT_ONLY = Interpreter()
"""tclsh, wish: the first operand is the script; none means stdin."""
_EXPECT = Interpreter(inline="c", values="fD", script="f")
_GUILE = Interpreter(inline="c", values="lLxeC", script="s")
_SBCL = Interpreter(
    inline_long=frozenset({"--eval"}),
    long_values=frozenset(
        {"--load", "--core", "--dynamic-space-size", "--control-stack-size", "--tls-limit"}
    ),
)
_LISP = Interpreter(inline="xe", values="iMmlqcL")
_JULIA = Interpreter(inline="eE", values="JCLOpt", inline_long=frozenset({"--eval", "--print"}))

_BY_NAME: dict[str, Interpreter] = {
    **dict.fromkeys(SHELLS, _SHELL),
    "node": _NODE,
    "nodejs": _NODE,
    "bun": _NODE,
    "ruby": _RUBY,
    "osascript": _SIMPLE_E,
    "tclsh": _SCRIPT_ONLY,
    "wish": _SCRIPT_ONLY,
    "jimsh": _SCRIPT_ONLY,
    "expect": _EXPECT,
    "guile": _GUILE,
    "sbcl": _SBCL,
    "clisp": _LISP,
    "ecl": _LISP,
    "racket": _LISP,
    "gosh": _LISP,
    "chicken": _LISP,
    "csi": _LISP,
    "julia": _JULIA,
    "irb": _SCRIPT_ONLY,
    "jshell": _SCRIPT_ONLY,
    "ghci": _SCRIPT_ONLY,
    "runghc": _SCRIPT_ONLY,
    "gnuplot": _SIMPLE_E,
    "dc": Interpreter(inline="e", script="f"),
    "Rscript": _SIMPLE_E,
    "R": _SIMPLE_E,
}
_BY_PATTERN: tuple[tuple[re.Pattern[str], Interpreter], ...] = (
    (re.compile(r"(python|pypy)(\d+(\.\d+)*)?[mtd]?"), _PYTHON),
    (re.compile(r"perl(\d+(\.\d+)*)?"), _PERL),
    (re.compile(r"php(\d+(\.\d+)*)?(-cli)?"), _PHP),
    (re.compile(r"lua(jit|\d(\.\d)?)?"), _SIMPLE_E),
)


def interpreter_for(name: str) -> Interpreter | None:
    """The option table for a command name, or None if it is not an interpreter we know."""
    found = _BY_NAME.get(name)
    if found is not None:
        return found
    for pattern, interpreter in _BY_PATTERN:
        if pattern.fullmatch(name):
            return interpreter
    return None


@dataclass(frozen=True, slots=True)
class ProgramSource:
    """Where the program comes from.

    Exactly one of: ``inline`` (the code word, or None when ``-c`` had no operand), ``module``,
    ``script`` (the script word), ``stdin``.
    """

    has_inline: bool = False
    inline: Word | None = None
    module: bool = False
    script: Word | None = None
    stdin: bool = False


_STDIN_SCRIPTS = frozenset({"-", "/dev/stdin", "/dev/fd/0"})


def program_source(spec: Interpreter, args: Sequence[Word]) -> ProgramSource:
    """Scan an interpreter's arguments for where its program comes from."""
    index = 0
    state = _Cluster()
    while index < len(args):
        value = args[index].value
        following = args[index + 1] if index + 1 < len(args) else None
        if value == "--":
            index += 1
            break
        if value == "-" or not (value.startswith("-") or (spec.is_shell and value.startswith("+"))):
            break
        if value.startswith("--"):
            name, equals, _ = value.partition("=")
            if name in spec.inline_long:
                return ProgramSource(has_inline=True, inline=args[index] if equals else following)
            index += 2 if name in spec.long_values and not equals else 1
            continue
        state = _scan_cluster(spec, value, state)
        if state.inline:
            code = args[index] if state.inline == "attached" else following
            return ProgramSource(has_inline=True, inline=code)
        if state.module:
            return ProgramSource(module=True)
        if state.script:
            return ProgramSource(script=args[index] if state.script == "attached" else following)
        index += 2 if state.skip_next else 1
    operand = args[index] if index < len(args) else None
    if state.inline_flag:
        return ProgramSource(has_inline=True, inline=operand)
    if state.stdin_flag or operand is None or operand.value in _STDIN_SCRIPTS:
        return ProgramSource(stdin=True)
    return ProgramSource(script=operand)


@dataclass(frozen=True, slots=True)
class _Cluster:
    """What one short-option cluster said; the two flags carry over to later clusters."""

    inline: Literal["", "attached", "next"] = ""
    script: Literal["", "attached", "next"] = ""
    module: bool = False
    skip_next: bool = False
    inline_flag: bool = False
    stdin_flag: bool = False


def _scan_cluster(spec: Interpreter, value: str, state: _Cluster) -> _Cluster:
    """Read one short-option cluster such as ``-lne`` or ``-pi.bak``."""
    inline_flag = state.inline_flag
    stdin_flag = state.stdin_flag
    position = 1
    while position < len(value):
        flag = value[position]
        rest = value[position + 1 :]
        where: Literal["attached", "next"] = "attached" if rest else "next"
        if flag in spec.inline and not spec.inline_is_flag:
            return _Cluster(inline=where, inline_flag=inline_flag, stdin_flag=stdin_flag)
        if flag in spec.module:
            return _Cluster(module=True)
        if flag in spec.script:
            return _Cluster(script=where)
        if flag in spec.values:
            return _Cluster(skip_next=not rest, inline_flag=inline_flag, stdin_flag=stdin_flag)
        if flag in spec.attached:
            break
        position += 1
        if flag in spec.digits:
            while position < len(value) and value[position].isdigit():
                position += 1
        inline_flag = inline_flag or flag in spec.inline
        stdin_flag = stdin_flag or flag in spec.stdin
    return _Cluster(inline_flag=inline_flag, stdin_flag=stdin_flag)
