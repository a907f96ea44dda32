"""Walk a parsed command line and collect the labels of every command in it.

The decision for a line is the worst over its commands, so the walk visits all of them: every
item of a list, every stage of a pipeline, every body of a compound command (as if it ran), every
function body, and — recursively — every command substitution and every ``sh -c`` / ``eval``
string. It tracks the current directory through ``cd`` (scoped by subshells and pipeline stages)
so that ``cd / && rm -rf *`` is judged where it runs.

Pipelines carry two facts between stages: a downloader earlier in the pipe turns an interpreter
reading its program from stdin into ``curl_pipe_sh``; a ``find`` over system roots turns a later
``xargs rm`` into ``find_delete_system``.
"""

from __future__ import annotations

from typing import Literal

from bridge.gate.commands.command_rules import check_argv
from bridge.gate.commands.deferred import (
    arithmetic_is_code,
    name_is_code,
    note_assignment,
    parameter_is_code,
)
from bridge.gate.commands.hooks import check_assignment
from bridge.gate.context import (
    BACKGROUND,
    INLINE,
    UNPARSABLE,
    Facts,
    Scope,
    check_secret_words,
    read_label,
    write_label,
)
from bridge.gate.labels import deny_label
from bridge.gate.line_memory import check_written, note_written
from bridge.gate.paths import Workspace, resolve
from bridge.gate.shell.lexer import DYN_MARK, Lexed, Part, ShellSyntaxError, Word
from bridge.gate.shell.parser import (
    Command,
    Compound,
    FunctionDef,
    Redirect,
    Script,
    SimpleCommand,
    parse,
    parse_shell,
)
from bridge.gate.shell.words import TooManyWords, drop_prefix, expand_braces

__all__ = ["MAX_COMMAND_LENGTH", "MAX_SCRIPT_DEPTH", "ShellChecker", "check_shell"]

MAX_COMMAND_LENGTH = 256 * 1024
"""Longer command lines are not analysed (``unparsable_command``)."""

MAX_SCRIPT_DEPTH = 12
"""Deepest nesting of substitutions and ``sh -c`` strings analysed."""

Stdin = Literal["pipe", "inline", "file"] | None
_SUBSTITUTION = "command_substitution"
_ARITHMETIC_TESTS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})


def check_shell(command: str, cwd: str, workspace: Workspace) -> frozenset[str]:
    """The labels for a Bash command line run in ``cwd``. Never raises for any string."""
    checker = ShellChecker(workspace)
    if len(command) > MAX_COMMAND_LENGTH:
        checker.flag(UNPARSABLE)
    else:
        checker.nested_script(command, cwd)
    return frozenset(checker.labels)


class ShellChecker:
    """Collects labels over one command line; implements the rules' ``CommandEnv``."""

    def __init__(self, workspace: Workspace) -> None:
        self._workspace = workspace
        self.labels: set[str] = set()
        self._depth = 0
        # id → (the substitution, kept alive so its id stays unique; does it download?)
        self._downloads: dict[int, tuple[Lexed, bool]] = {}
        self._downloaded_files: set[str] = set()
        self._written_files: set[str] = set()
        self._stdin_download = False
        self._integers: set[str] = set()
        self._unpacked = False

    @property
    def workspace(self) -> Workspace:
        """The session's roots and home."""
        return self._workspace

    def flag(self, label: str) -> None:
        """Record a reason label."""
        self.labels.add(label)

    def nested_script(self, source: str, cwd: str | None) -> bool:
        """Parse and check a script (the line itself, ``sh -c`` code, ``eval`` text)."""
        if self._depth >= MAX_SCRIPT_DEPTH or DYN_MARK in source:
            self.flag(UNPARSABLE)
            return False
        try:
            script = parse_shell(source, self._workspace.home)
        except ShellSyntaxError:
            self.flag(UNPARSABLE)
            return False
        self._depth += 1
        try:
            return self._script(script, Scope(cwd), None).download
        finally:
            self._depth -= 1

    def downloads(self, word: Word) -> bool:
        """True if a substitution inside ``word`` downloads from the network."""
        return any(self._downloads.get(id(sub), (sub, False))[1] for sub in word.substitutions)

    def check_argv(self, argv: list[Word], scope: Scope) -> Facts:
        """Check a command given as words."""
        return check_argv(argv, scope, self)

    def note_download(self, path: str) -> None:
        """Remember that this line writes a download to ``path``."""
        self._downloaded_files.add(path)

    def downloaded(self, path: str) -> bool:
        """True if this line wrote a download to ``path`` earlier."""
        return path in self._downloaded_files

    def note_written(self, path: str) -> None:
        """Remember that this line writes ``path``: a download when stdin is one."""
        if self._stdin_download:
            self._downloaded_files.add(path)
        else:
            self._written_files.add(path)

    def written(self, path: str) -> bool:
        """True if this line wrote ``path`` earlier (not by a download)."""
        return path in self._written_files

    @property
    def stdin_is_download(self) -> bool:
        """The command being checked reads a download on its stdin."""
        return self._stdin_download

    def note_unpacked(self) -> None:
        """Remember that this line unpacked a download into files it cannot name."""
        self._unpacked = True

    def unpacked(self) -> bool:
        """True if this line unpacked a download earlier."""
        return self._unpacked

    @property
    def integers(self) -> set[str]:
        """Variables this line gave an integer value so far."""
        return self._integers

    # -- structure ------------------------------------------------------------------------

    def _script(self, script: Script, scope: Scope, stdin: Stdin) -> Facts:
        facts = Facts()
        for item in script.items:
            if item.background:
                self.flag(BACKGROUND)
            for pipeline in item.pipelines:
                commands = pipeline.commands
                if len(commands) == 1:
                    facts.merge(self._command(commands[0], scope, stdin))
                    continue
                facts.merge(self._pipeline(commands, scope, stdin))
        return facts

    def _pipeline(self, commands: tuple[Command, ...], scope: Scope, stdin: Stdin) -> Facts:
        facts = Facts()
        downloader = finder = False
        integers = set(self._integers)  # every stage runs in a subshell
        for index, command in enumerate(commands):
            outer, self._stdin_download = self._stdin_download, downloader
            try:
                stage = self._command(command, scope.copy(), stdin if index == 0 else "pipe")
            finally:
                self._stdin_download = outer
                self._integers.intersection_update(integers)
            if index == 0:
                facts.stdin_program = stage.stdin_program
                facts.xargs_delete = stage.xargs_delete
            else:
                if stage.stdin_program:
                    self.flag(deny_label("curl_pipe_sh") if downloader else INLINE)
                if stage.xargs_delete and finder:
                    self.flag(deny_label("find_delete_system"))
            downloader |= stage.download
            finder |= stage.find_system
        facts.download = downloader
        facts.find_system = finder
        return facts

    def _command(self, command: Command, scope: Scope, stdin: Stdin) -> Facts:
        if isinstance(command, SimpleCommand):
            return self._simple(command, scope, stdin)
        if isinstance(command, FunctionDef):
            if _spawns(command.body, command.name, hot=False):
                self.flag(deny_label("fork_bomb"))
            self._command(command.body, scope.copy(), None)
            return Facts()
        stdin = self._redirects(command.redirects, scope, stdin)
        for word in command.words:
            self._substitutions(word, scope)
        self._evaluated(command)
        inner = scope.copy() if command.kind == "subshell" else scope
        integers = set(self._integers)
        facts = Facts()
        for body in command.bodies:
            facts.merge(self._script(body, inner, stdin))
        if command.kind == "subshell":
            self._integers.intersection_update(integers)  # its assignments do not leak out
        return self._stdin_program(facts, stdin)

    def _evaluated(self, command: Compound) -> None:
        """``(( … ))``, ``for (( … ))``, ``[[ x -eq y ]]``: arithmetic on values (:mod:`bridge.gate.commands.deferred`)."""
        text = command.text
        if command.kind == "arith" or (command.kind == "for" and text.startswith("((")):
            if arithmetic_is_code(text.removeprefix("(("), self._integers):
                self.flag(INLINE)
        elif command.kind in ("for", "select") and text:
            if command.kind == "for" and all(
                word.is_static and word.value.isdigit() for word in command.words
            ):
                self._integers.add(text)
            else:
                self._integers.discard(text)
        elif command.kind == "cond":
            words = command.words
            for index, word in enumerate(words):
                operator = word.value if not word.quoted else ""
                if operator == "-v" and index + 1 < len(words):
                    if name_is_code(words[index + 1], self._integers):
                        self.flag(INLINE)
                elif operator in _ARITHMETIC_TESTS:
                    for operand in (words[index - 1 : index], words[index + 1 : index + 2]):
                        if any(self._operand_is_code(each) for each in operand):
                            self.flag(INLINE)

    def _operand_is_code(self, word: Word) -> bool:
        text = word.value if word.is_static else word.raw.replace('"', "")
        return arithmetic_is_code(text, set(self._integers))

    def _simple(self, command: SimpleCommand, scope: Scope, stdin: Stdin) -> Facts:
        for word in (*command.assignments, *command.words):
            self._substitutions(word, scope)
        for word in command.assignments:
            check_assignment(word, scope, self)
            name = word.value.partition("=")[0].removesuffix("+")
            if DYN_MARK in name or (
                "[" in name and name_is_code(Word(name, (Part("lit", name),)), self._integers)
            ):
                self.flag(INLINE)  # a[x]=1: the subscript is arithmetic
            value = drop_prefix(word, len(word.value) - len(word.value.partition("=")[2]))
            note_assignment(name, value, self._integers)
        check_secret_words(command.assignments, scope.cwd, self)
        stdin = self._redirects(command.redirects, scope, stdin)
        if not command.words:
            return Facts()
        try:
            argv = [expanded for word in command.words for expanded in expand_braces(word)]
        except TooManyWords:
            self.flag(UNPARSABLE)
            return Facts()
        if not argv:
            return Facts()  # "{,}": brace expansion left no word, so nothing runs
        check_secret_words(argv, scope.cwd, self)
        facts = check_argv(argv, scope, self)
        if facts.download:
            self._note_saved_output(command.redirects, scope)
        if facts.stdin_program and stdin == "file":
            for redirect in command.redirects:
                if redirect.op == "<" and redirect.fd in (None, 0):
                    check_written(self, resolve(redirect.target, scope.cwd, strict=True))
        return self._stdin_program(facts, stdin)

    def _note_saved_output(self, redirects: tuple[Redirect, ...], scope: Scope) -> None:
        """``curl URL > install.sh``: the file now holds a download."""
        for redirect in redirects:
            if redirect.op in (">", ">>", ">|", "&>", "&>>") and redirect.fd in (None, 1):
                target = resolve(redirect.target, scope.cwd, strict=True)
                if target is not None and not target.subtree:
                    self.note_download(target.path)

    def _stdin_program(self, facts: Facts, stdin: Stdin) -> Facts:
        """A program read from stdin is inline code when stdin is a heredoc or here-string."""
        if facts.stdin_program:
            if stdin == "inline":
                self.flag(INLINE)
            facts.stdin_program = stdin == "pipe"
        return facts

    # -- words and redirections -----------------------------------------------------------

    def _substitutions(self, word: Word, scope: Scope) -> None:
        for sub in word.substitutions:
            if sub.kind == "arith":
                if arithmetic_is_code(sub.text, self._integers):
                    self.flag(INLINE)
                continue
            if sub.kind == "param":
                if parameter_is_code(sub.text, self._integers):
                    self.flag(INLINE)
                continue
            if sub.kind == "array":
                for token in sub.tokens:
                    if token.word is not None:
                        self._substitutions(token.word, scope)
                continue
            download = False
            if self._depth >= MAX_SCRIPT_DEPTH:
                self.flag(_SUBSTITUTION)
                self.flag(UNPARSABLE)
            else:
                try:
                    script = parse(sub)
                except ShellSyntaxError:
                    self.flag(_SUBSTITUTION)
                    self.flag(UNPARSABLE)
                else:
                    if not _literal_heredoc(script):
                        self.flag(_SUBSTITUTION)
                    self._depth += 1
                    integers = set(self._integers)
                    try:
                        download = self._script(script, scope.copy(), None).download
                    finally:
                        self._depth -= 1
                        self._integers.intersection_update(integers)
            self._downloads[id(sub)] = (sub, download)

    def _redirects(self, redirects: tuple[Redirect, ...], scope: Scope, stdin: Stdin) -> Stdin:
        for redirect in redirects:
            self._substitutions(redirect.target, scope)
            if redirect.body is not None:
                self._substitutions(redirect.body, scope)
            op = redirect.op
            if op in ("<<", "<<-", "<<<"):
                if redirect.fd in (None, 0):
                    stdin = "inline"
                continue
            if op in (">&", "<&"):
                value = redirect.target.value
                if op == "<&" or value == "-" or value.rstrip("-").isdigit():
                    continue  # duplicates a descriptor, opens no file
            try:
                targets = expand_braces(redirect.target)
            except TooManyWords:
                self.flag(UNPARSABLE)
                continue
            for target in targets:
                resolved = resolve(target, scope.cwd, strict=True)
                label = (
                    read_label(resolved, self._workspace)
                    if op == "<"
                    else write_label(resolved, self._workspace)
                )
                if label is not None:
                    self.flag(label)
                if op != "<" and resolved is not None:
                    note_written(self, resolved)
            if op == "<" and redirect.fd in (None, 0):
                stdin = "file"
        return stdin


def _literal_heredoc(script: Script) -> bool:
    """``$(cat <<'EOF' … EOF)``: the idiom agents use for commit messages and PR bodies.

    Its result is the heredoc's text, verbatim (the delimiter is quoted, so nothing in the body
    expands), and that text is on the card. It hides nothing, so it is not a
    ``command_substitution``; anything else in the substitution makes it one.
    """
    if len(script.items) != 1 or script.items[0].background:
        return False
    pipelines = script.items[0].pipelines
    if len(pipelines) != 1 or len(pipelines[0].commands) != 1:
        return False
    command = pipelines[0].commands[0]
    return (
        isinstance(command, SimpleCommand)
        and not command.assignments
        and len(command.words) == 1
        and command.words[0].value == "cat"
        and len(command.redirects) == 1
        and command.redirects[0].op in ("<<", "<<-")
        and command.redirects[0].fd in (None, 0)
        and command.redirects[0].body is not None
        and command.redirects[0].body.quoted
        and not command.redirects[0].body.substitutions
    )


def _spawns(command: Command, name: str, *, hot: bool) -> bool:
    """The function ``name`` calls itself in a pipeline or in the background (a fork bomb)."""
    if isinstance(command, SimpleCommand):
        return hot and bool(command.words) and command.words[0].value == name
    if isinstance(command, FunctionDef):
        return False
    for body in command.bodies:
        for item in body.items:
            for pipeline in item.pipelines:
                piped = item.background or len(pipeline.commands) > 1
                if any(_spawns(inner, name, hot=hot or piped) for inner in pipeline.commands):
                    return True
    return False
