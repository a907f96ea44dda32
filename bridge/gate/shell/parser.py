"""A recursive-descent parser for the bash subset the lexer accepts.

Grammar (bash's, trimmed to what matters for a risk check)::

    script    := list
    list      := and_or ((';' | '&' | NEWLINE) and_or)*
    and_or    := pipeline (('&&' | '||') NEWLINE* pipeline)*
    pipeline  := ['!'] ['time' ['-p']] command (('|' | '|&') NEWLINE* command)*
    command   := simple | compound redirect* | NAME '(' ')' compound
    compound  := '(' list ')' | '{' list '}' | '((' … '))' | '[[' … ']]'
               | if | while | until | for | select | case | 'function' NAME …

Control structures are kept only as "bodies plus words": for a risk check it does not matter
whether a body runs once, never or in a loop — every body is checked as if it ran. Anything the
grammar does not cover raises :class:`ShellSyntaxError` (the gate's ``unparsable_command``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from bridge.gate.shell.lexer import Lexed, ShellSyntaxError, Token, Word, lex

__all__ = [
    "MAX_PARSE_DEPTH",
    "REDIRECT_OPS",
    "AndOr",
    "Command",
    "Compound",
    "FunctionDef",
    "Pipeline",
    "Redirect",
    "Script",
    "SimpleCommand",
    "parse",
    "parse_shell",
]

MAX_PARSE_DEPTH = 48
"""Deepest nesting of compound commands parsed; deeper input is refused as unparsable."""

REDIRECT_OPS = frozenset({"<", ">", ">>", ">|", "<>", "<<", "<<-", "<<<", "<&", ">&", "&>", "&>>"})

CompoundKind = Literal[
    "subshell", "group", "arith", "cond", "if", "while", "until", "for", "select", "case"
]

_RESERVED = frozenset(
    {"!", "{", "}", "[[", "]]", "case", "do", "done", "elif", "else", "esac", "fi", "for",
     "function", "if", "in", "select", "then", "time", "until", "while"}
)  # fmt: skip
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_CASE_END = frozenset({";;", ";&", ";;&"})


@dataclass(frozen=True, slots=True)
class Redirect:
    """``[fd]op target``; ``body`` is the heredoc text for ``<<`` and ``<<-``."""

    op: str
    fd: int | None
    target: Word
    body: Word | None = None


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """``NAME=value … word … redirect …``."""

    assignments: tuple[Word, ...]
    words: tuple[Word, ...]
    redirects: tuple[Redirect, ...]


@dataclass(frozen=True, slots=True)
class Compound:
    """A compound command: its bodies, the words it evaluates itself, its redirections."""

    kind: CompoundKind
    bodies: tuple[Script, ...]
    words: tuple[Word, ...]
    redirects: tuple[Redirect, ...]
    text: str = ""
    """``arith``: the expression as typed; a C-style ``for``: ``((`` and its expressions;
    ``for``/``select`` over words: the loop variable's name."""


@dataclass(frozen=True, slots=True)
class FunctionDef:
    """``name() body`` — the body is checked as if it ran."""

    name: str
    body: Command


Command = SimpleCommand | Compound | FunctionDef


@dataclass(frozen=True, slots=True)
class Pipeline:
    """Commands joined by ``|``; each reads the previous one's output."""

    commands: tuple[Command, ...]


@dataclass(frozen=True, slots=True)
class AndOr:
    """Pipelines joined by ``&&`` / ``||``; ``background`` when terminated by ``&``."""

    pipelines: tuple[Pipeline, ...]
    background: bool


@dataclass(frozen=True, slots=True)
class Script:
    """A list of and-or items, in order."""

    items: tuple[AndOr, ...]


def parse_shell(source: str, home: str) -> Script:
    """Lex and parse a command line.

    Raises:
        ShellSyntaxError: the line is outside the supported subset.
    """
    return parse(lex(source, home))


def parse(lexed: Lexed) -> Script:
    """Parse a token stream (a whole line, or the inside of a substitution).

    Raises:
        ShellSyntaxError: the tokens do not form a complete script.
    """
    parser = _Parser(lexed)
    script = parser.parse_list(frozenset(), frozenset())
    token = parser.peek()
    if token is not None:
        raise ShellSyntaxError(f"unexpected {token.text!r}")
    if parser.heredoc_index != len(lexed.heredocs):
        raise ShellSyntaxError("here-document bodies do not match their operators")
    return script


class _Parser:
    def __init__(self, lexed: Lexed) -> None:
        self.tokens = lexed.tokens
        self.heredocs = lexed.heredocs
        self.index = 0
        self.heredoc_index = 0
        self.depth = 0

    # -- token helpers --------------------------------------------------------------------

    def peek(self, ahead: int = 0) -> Token | None:
        index = self.index + ahead
        return self.tokens[index] if index < len(self.tokens) else None

    def is_op(self, token: Token | None, *ops: str) -> bool:
        return token is not None and token.kind == "op" and token.text in ops

    def is_reserved(self, token: Token | None, words: frozenset[str]) -> bool:
        return (
            token is not None
            and token.kind == "word"
            and token.word is not None
            and not token.word.quoted
            and token.text in words
        )

    def expect_reserved(self, word: str) -> None:
        if not self.is_reserved(self.peek(), frozenset({word})):
            raise ShellSyntaxError(f"expected {word!r}")
        self.index += 1

    def expect_word(self) -> Word:
        token = self.peek()
        if token is None or token.kind != "word" or token.word is None:
            raise ShellSyntaxError("expected a word")
        self.index += 1
        return token.word

    def skip_newlines(self) -> None:
        while (token := self.peek()) is not None and token.kind == "newline":
            self.index += 1

    def at_stop(self, words: frozenset[str], ops: frozenset[str]) -> bool:
        token = self.peek()
        return token is None or self.is_op(token, *ops) or self.is_reserved(token, words)

    # -- lists and pipelines --------------------------------------------------------------

    def parse_list(self, words: frozenset[str], ops: frozenset[str]) -> Script:
        items: list[AndOr] = []
        self.skip_newlines()
        while not self.at_stop(words, ops):
            pipelines = self.parse_and_or()
            token = self.peek()
            background = False
            if self.is_op(token, ";", "&"):
                background = token is not None and token.text == "&"
                self.index += 1
            elif token is not None and token.kind == "newline":
                self.index += 1
            elif not self.at_stop(words, ops):
                raise ShellSyntaxError(f"unexpected {token.text if token else 'end'!r}")
            items.append(AndOr(pipelines, background))
            self.skip_newlines()
        return Script(tuple(items))

    def parse_and_or(self) -> tuple[Pipeline, ...]:
        pipelines = [self.parse_pipeline()]
        while self.is_op(self.peek(), "&&", "||"):
            self.index += 1
            self.skip_newlines()
            pipelines.append(self.parse_pipeline())
        return tuple(pipelines)

    def parse_pipeline(self) -> Pipeline:
        while self.is_reserved(self.peek(), frozenset({"!", "time"})):
            token = self.peek()
            self.index += 1
            following = self.peek()
            if (
                token is not None
                and token.text == "time"
                and following is not None
                and following.kind == "word"
                and following.text == "-p"
            ):
                self.index += 1
        commands = [self.parse_command()]
        while self.is_op(self.peek(), "|", "|&"):
            self.index += 1
            self.skip_newlines()
            commands.append(self.parse_command())
        return Pipeline(tuple(commands))

    # -- commands -------------------------------------------------------------------------

    def parse_command(self) -> Command:
        self.depth += 1
        if self.depth > MAX_PARSE_DEPTH:
            raise ShellSyntaxError("commands nested too deeply")
        try:
            return self._parse_command()
        finally:
            self.depth -= 1

    def _parse_command(self) -> Command:
        token = self.peek()
        if token is None:
            raise ShellSyntaxError("expected a command")
        if self.is_op(token, "("):
            following = self.peek(1)
            if (
                self.is_op(following, "(")
                and following is not None
                and following.start == token.end
            ):
                words, text = self.parse_arith()
                return self.with_redirects("arith", (), words, text)
            self.index += 1
            body = self.parse_list(frozenset(), frozenset({")"}))
            if not self.is_op(self.peek(), ")"):
                raise ShellSyntaxError("expected ')'")
            self.index += 1
            return self.with_redirects("subshell", (body,), ())
        if self.is_reserved(token, _RESERVED):
            return self.parse_reserved(token.text)
        if token.kind == "word" and self.is_op(self.peek(1), "(") and self.is_op(self.peek(2), ")"):
            return self.parse_function(token, skip=3)
        return self.parse_simple()

    def with_redirects(
        self,
        kind: CompoundKind,
        bodies: tuple[Script, ...],
        words: tuple[Word, ...],
        text: str = "",
    ) -> Compound:
        redirects: list[Redirect] = []
        while (
            (token := self.peek()) is not None and token.kind == "op" and token.text in REDIRECT_OPS
        ):
            redirects.append(self.parse_redirect())
        return Compound(kind, bodies, words, tuple(redirects), text)

    def parse_simple(self) -> SimpleCommand:
        assignments: list[Word] = []
        words: list[Word] = []
        redirects: list[Redirect] = []
        while (token := self.peek()) is not None:
            if token.kind == "word" and token.word is not None:
                if not words and _ASSIGNMENT.match(token.text):
                    assignments.append(token.word)
                else:
                    words.append(token.word)
                self.index += 1
            elif token.kind == "op" and token.text in REDIRECT_OPS:
                redirects.append(self.parse_redirect())
            else:
                break
        if not (assignments or words or redirects):
            token = self.peek()
            raise ShellSyntaxError(f"unexpected {token.text if token else 'end'!r}")
        return SimpleCommand(tuple(assignments), tuple(words), tuple(redirects))

    def parse_redirect(self) -> Redirect:
        token = self.peek()
        assert token is not None
        self.index += 1
        target = self.expect_word()
        body = None
        if token.text in ("<<", "<<-"):
            if self.heredoc_index >= len(self.heredocs):
                raise ShellSyntaxError("here-document without a body")
            body = self.heredocs[self.heredoc_index]
            self.heredoc_index += 1
        return Redirect(token.text, token.fd, target, body)

    def parse_function(self, name: Token, *, skip: int) -> FunctionDef:
        """``name ( ) body`` (skip 3 tokens) or, after ``function``, ``name body`` (skip 1)."""
        if name.word is None or not name.word.is_static:
            raise ShellSyntaxError("function name is not a plain word")
        self.index += skip
        self.skip_newlines()
        body = self.parse_command()
        if not isinstance(body, Compound):
            raise ShellSyntaxError("function body is not a compound command")
        return FunctionDef(name.word.value, body)

    def parse_arith(self) -> tuple[tuple[Word, ...], str]:
        """``(( … ))`` starting at the first ``(``: the words inside (for their substitutions)
        and the expression's text (tokens joined by blanks)."""
        self.index += 2
        depth = 0
        words: list[Word] = []
        texts: list[str] = []
        while True:
            token = self.peek()
            if token is None:
                raise ShellSyntaxError("unterminated (( … ))")
            texts.append(token.text)
            self.index += 1
            if self.is_op(token, "("):
                depth += 1
            elif self.is_op(token, ")"):
                if depth == 0:
                    closing = self.peek()
                    if (
                        not self.is_op(closing, ")")
                        or closing is None
                        or closing.start != token.end
                    ):
                        raise ShellSyntaxError("malformed (( … ))")
                    self.index += 1
                    return tuple(words), " ".join(texts[:-1])
                depth -= 1
            elif token.word is not None:
                if "'" in token.text and ("$(" in token.text or "`" in token.text):
                    # Bash expands (( … )) as if in double quotes: "(( '$(id)' ))" runs id,
                    # but the lexer read the quotes as quotes. Refused, never a pass.
                    raise ShellSyntaxError("a single quote inside (( … )) around a substitution")
                words.append(token.word)

    def parse_reserved(self, word: str) -> Command:
        self.index += 1
        if word == "{":
            body = self.parse_list(frozenset({"}"}), frozenset())
            self.expect_reserved("}")
            return self.with_redirects("group", (body,), ())
        if word == "[[":
            words: list[Word] = []
            while not self.is_reserved(self.peek(), frozenset({"]]"})):
                token = self.peek()
                if token is None:
                    raise ShellSyntaxError("unterminated [[ … ]]")
                if token.word is not None:
                    words.append(token.word)
                self.index += 1
            self.index += 1
            return self.with_redirects("cond", (), tuple(words))
        if word == "if":
            return self.parse_if()
        if word in ("while", "until"):
            condition = self.parse_list(frozenset({"do"}), frozenset())
            self.expect_reserved("do")
            body = self.parse_list(frozenset({"done"}), frozenset())
            self.expect_reserved("done")
            return self.with_redirects(
                "while" if word == "while" else "until", (condition, body), ()
            )
        if word in ("for", "select"):
            return self.parse_for("for" if word == "for" else "select")
        if word == "case":
            return self.parse_case()
        if word == "function":
            name = self.peek()
            if name is None or name.kind != "word":
                raise ShellSyntaxError("expected a function name")
            with_parens = self.is_op(self.peek(1), "(") and self.is_op(self.peek(2), ")")
            return self.parse_function(name, skip=3 if with_parens else 1)
        raise ShellSyntaxError(f"unexpected {word!r}")

    def parse_if(self) -> Compound:
        bodies: list[Script] = []
        while True:
            bodies.append(self.parse_list(frozenset({"then"}), frozenset()))
            self.expect_reserved("then")
            bodies.append(self.parse_list(frozenset({"elif", "else", "fi"}), frozenset()))
            token = self.peek()
            self.index += 1
            if self.is_reserved(token, frozenset({"elif"})):
                continue
            if self.is_reserved(token, frozenset({"else"})):
                bodies.append(self.parse_list(frozenset({"fi"}), frozenset()))
                self.expect_reserved("fi")
            elif not self.is_reserved(token, frozenset({"fi"})):
                raise ShellSyntaxError("expected 'fi'")
            return self.with_redirects("if", tuple(bodies), ())

    def parse_for(self, kind: Literal["for", "select"]) -> Compound:
        words: list[Word] = []
        text = ""
        token = self.peek()
        following = self.peek(1)
        if (
            self.is_op(token, "(")
            and self.is_op(following, "(")
            and token is not None
            and following is not None
            and following.start == token.end
        ):
            arith_words, expression = self.parse_arith()
            words.extend(arith_words)
            text = "((" + expression
        else:
            text = self.expect_word().value
            self.skip_newlines()
            if self.is_reserved(self.peek(), frozenset({"in"})):
                self.index += 1
                while (token := self.peek()) is not None and token.kind == "word":
                    assert token.word is not None
                    words.append(token.word)
                    self.index += 1
        if self.is_op(self.peek(), ";"):
            self.index += 1
        self.skip_newlines()
        if self.is_reserved(self.peek(), frozenset({"{"})):
            self.index += 1
            body = self.parse_list(frozenset({"}"}), frozenset())
            self.expect_reserved("}")
        else:
            self.expect_reserved("do")
            body = self.parse_list(frozenset({"done"}), frozenset())
            self.expect_reserved("done")
        return self.with_redirects(kind, (body,), tuple(words), text)

    def parse_case(self) -> Compound:
        words = [self.expect_word()]
        self.skip_newlines()
        self.expect_reserved("in")
        self.skip_newlines()
        bodies: list[Script] = []
        while not self.is_reserved(self.peek(), frozenset({"esac"})):
            if self.peek() is None:
                raise ShellSyntaxError("unterminated case")
            if self.is_op(self.peek(), "("):
                self.index += 1
            words.append(self.expect_word())
            while self.is_op(self.peek(), "|"):
                self.index += 1
                words.append(self.expect_word())
            if not self.is_op(self.peek(), ")"):
                raise ShellSyntaxError("expected ')' after a case pattern")
            self.index += 1
            bodies.append(self.parse_list(frozenset({"esac"}), _CASE_END))
            if self.is_op(self.peek(), *_CASE_END):
                self.index += 1
            self.skip_newlines()
        self.index += 1
        return self.with_redirects("case", tuple(bodies), tuple(words))
