"""``sed``: its script can run commands and open files, so the script is read, not skipped.

GNU sed's ``e COMMAND`` runs a shell command, ``e`` alone and the ``s///e`` flag run the pattern
space (text from the input: unknown), ``w FILE``/``W FILE`` and ``s///w FILE`` write a file, and
``r FILE``/``R FILE`` read one. The script is parsed command by command (addresses, ``!``,
blocks, each command's own argument syntax); a literal ``e COMMAND`` is judged as a shell line,
the pattern-space forms are ``inline_code``, written files are write targets and read files read
targets. A script the parser cannot follow is ``unparsable_command``; a script only known at run
time is ``inline_code`` (it may hold any of these). ``--sandbox`` makes sed refuse them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bridge.gate.commands.long_options import LONG_OPTIONS
from bridge.gate.context import INLINE, UNPARSABLE, Call, check_write, read_label
from bridge.gate.line_memory import note_written
from bridge.gate.shell.lexer import Part, Word
from bridge.gate.shell.words import split_args

__all__ = ["SedAction", "parse_sed", "sed_rule"]

_SIMPLE = frozenset("=dDgGhHnNpPxzF")
_OPTIONAL_ARGUMENT = frozenset("qQlLv")
_TO_LINE_END = frozenset("aic")
_LABEL = frozenset("btT")
_FILE = frozenset("rRwW")
_SAFE_FILES = frozenset({"/dev/stdout", "/dev/stderr", "/dev/stdin"})
_FLAGS_BEFORE_SUFFIX = frozenset("nErsuz")


@dataclass(frozen=True, slots=True)
class SedAction:
    """Something a sed script does besides editing text."""

    kind: Literal["exec", "read", "write"]
    argument: str
    """The command of ``e COMMAND`` (empty: the pattern space), or the file name."""


class SedSyntaxError(ValueError):
    """The script is outside what the parser follows."""


def parse_sed(script: str) -> list[SedAction]:
    """The actions of a GNU sed script.

    Raises:
        SedSyntaxError: the parser cannot follow the script.
    """
    parser = _Parser(script)
    parser.run()
    return parser.actions


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.actions: list[SedAction] = []

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip_blanks(self, *, newlines: bool = False) -> None:
        while self.peek() in (" \t\n;" if newlines else " \t") and self.peek():
            self.pos += 1

    def to_line_end(self) -> str:
        end = self.text.find("\n", self.pos)
        end = len(self.text) if end < 0 else end
        value = self.text[self.pos : end]
        self.pos = end
        return value

    def run(self) -> None:
        while True:
            self.skip_blanks(newlines=True)
            if self.pos >= len(self.text):
                return
            if self.peek() == "#":
                self.to_line_end()
                continue
            self.address()
            self.skip_blanks()
            if self.peek() == ",":
                self.pos += 1
                self.skip_blanks()
                if self.peek() in "+~":
                    self.pos += 1
                self.address()
            self.skip_blanks()
            while self.peek() == "!":
                self.pos += 1
                self.skip_blanks()
            self.command()

    def address(self) -> None:
        char = self.peek()
        if char.isdigit():
            while self.peek().isdigit() or self.peek() == "~":
                self.pos += 1
        elif char == "$":
            self.pos += 1
        elif char in ("/", "\\"):
            if char == "\\":
                self.pos += 1
            delimiter = self.peek()
            if not delimiter or delimiter == "\n":
                raise SedSyntaxError("bad address delimiter")
            self.pos += 1
            self.delimited(delimiter)
            while self.peek() in ("I", "M") and self.peek():
                self.pos += 1

    def delimited(self, delimiter: str) -> str:
        """Read up to the unescaped ``delimiter`` (consumed); the text before it."""
        start = self.pos
        while True:
            char = self.peek()
            if not char:
                raise SedSyntaxError("unterminated expression")
            if char == "\\":
                self.pos += 2
                continue
            self.pos += 1
            if char == delimiter:
                return self.text[start : self.pos - 1]

    def command(self) -> None:
        char = self.peek()
        self.pos += 1
        if char in ("{", "}") or char in _SIMPLE:
            return
        if char in _OPTIONAL_ARGUMENT:
            self.skip_blanks()
            while self.peek().isalnum() or self.peek() == ".":
                self.pos += 1
        elif char in _TO_LINE_END:
            self.text_argument()
        elif char == ":" or char in _LABEL:
            self.skip_blanks()
            while self.peek() and self.peek() not in ";\n":
                self.pos += 1
        elif char in _FILE:
            self.skip_blanks()
            kind: Literal["read", "write"] = "read" if char in "rR" else "write"
            self.actions.append(SedAction(kind, self.to_line_end()))
        elif char == "e":
            self.skip_blanks()
            self.actions.append(SedAction("exec", self.to_line_end().strip()))
        elif char == "s":
            self.substitute()
        elif char == "y":
            delimiter = self.peek()
            if not delimiter or delimiter in "\\\n":
                raise SedSyntaxError("bad y delimiter")
            self.pos += 1
            self.delimited(delimiter)
            self.delimited(delimiter)
        else:
            raise SedSyntaxError(f"unknown command {char!r}")

    def text_argument(self) -> None:
        """``a text``, ``a\\`` + lines: up to a line end not escaped by a backslash."""
        while self.pos < len(self.text):
            char = self.peek()
            if char == "\\":
                self.pos += 2
                continue
            if char == "\n":
                return
            self.pos += 1

    def substitute(self) -> None:
        delimiter = self.peek()
        if not delimiter or delimiter in "\\\n":
            raise SedSyntaxError("bad s delimiter")
        self.pos += 1
        self.delimited(delimiter)
        self.delimited(delimiter)
        while True:
            char = self.peek()
            if char == "e":
                self.actions.append(SedAction("exec", ""))
            elif char == "w":
                self.pos += 1
                self.skip_blanks()
                self.actions.append(SedAction("write", self.to_line_end()))
                return
            elif not char or char not in "gpiImM0123456789":
                return
            self.pos += 1


def sed_rule(call: Call) -> None:
    """Check a sed command line: its scripts, its ``-i`` files and what the scripts open."""
    words = [_suffix_free(word) for word in call.args]
    args = split_args(
        words,
        short_values="efl",
        long_values=frozenset({"--expression", "--file", "--line-length"}),
        known_long=LONG_OPTIONS["sed"],
    )
    positionals = list(args.positionals)
    scripts = args.values("-e", "--expression")
    if not args.has("-e", "--expression", "-f", "--file") and positionals:
        scripts = [positionals.pop(0)]
    call.handled.update(index for index, _ in scripts)
    for index, word in args.values("-f", "--file"):
        call.handled.add(index)
        if word.value in _SAFE_FILES or word.value == "-":
            call.facts.stdin_program = True  # the script comes from stdin
    sandbox = args.has("--sandbox")
    for _, script in scripts:
        if not script.is_static:
            if not sandbox:
                call.env.flag(INLINE)  # known only at run time: may hold "e" or "w"
            continue
        try:
            actions = parse_sed(script.value)
        except SedSyntaxError:
            call.env.flag(UNPARSABLE)
            continue
        if not sandbox:
            _judge(call, actions)
    if args.has("-i", "--in-place"):
        for index, word in positionals:
            check_write(call, index, word)
            note_written(call.env, call.target(word))


def _judge(call: Call, actions: list[SedAction]) -> None:
    for action in actions:
        if action.kind == "exec":
            if action.argument:
                call.env.nested_script(action.argument, call.scope.cwd)
            else:
                call.env.flag(INLINE)  # runs the pattern space: text from the input
            continue
        if action.argument in _SAFE_FILES:
            continue
        word = Word(action.argument, (Part("lit", action.argument),))
        target = call.target(word)
        if action.kind == "write":
            check_write(call, -1, word)
            note_written(call.env, target)
        else:
            label = read_label(target, call.workspace)
            if label is not None:
                call.env.flag(label)


def _suffix_free(word: Word) -> Word:
    """``-i.bak`` / ``-ni~``: everything after ``i`` in a cluster is the backup suffix."""
    value = word.value
    if not value.startswith("-") or value.startswith("--") or "i" not in value:
        return word
    head = value[1 : value.index("i")]
    if not set(head) <= _FLAGS_BEFORE_SUFFIX:
        return word
    cut = "-" + head + "i"
    return Word(cut, (Part("lit", cut),))
