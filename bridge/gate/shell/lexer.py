"""A conservative POSIX/bash lexer: words with their quoting, operators, heredocs, substitutions.

Why our own and not ``shlex`` or ``bashlex``: ``shlex`` knows neither ``$(…)``, ``$'…'``, heredocs
nor redirections, so it would hide exactly the constructs the gate must see; ``bashlex`` is GPL-3
and its failure modes are not ours to choose. This lexer knows the subset of bash that commands
written by a coding agent use, and anything outside it raises :class:`ShellSyntaxError`, which the
gate turns into ``unparsable_command`` — never into a pass.

A :class:`Word` keeps its value after quote removal split into parts:

* ``lit`` — literal text (quoted or not); ``~`` and ``$HOME`` are already the home directory;
* ``glob`` — an unquoted ``*``, ``?`` or ``[``;
* ``brace`` — an unquoted ``{``, ``,`` or ``}`` (brace expansion is decided later, in ``words``);
* ``tilde`` — an unquoted ``~`` right after ``{`` or ``,``: the home directory (its text) if brace
  expansion puts it at the start of a word, a plain ``~`` otherwise;
* ``dyn`` — anything only known at run time: ``$VAR``, ``${…}``, ``$((…))``, ``$(…)``, `` `…` ``,
  ``<(…)``, ``>(…)``, ``~user``.

Command and process substitutions are lexed recursively; their token streams ride on the word so
the parser and the checker can look inside them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "DYN_MARK",
    "MAX_NESTING",
    "Lexed",
    "Part",
    "ShellSyntaxError",
    "Token",
    "Word",
    "lex",
]

MAX_NESTING = 24
"""Deepest nesting of substitutions lexed; deeper input is refused as unparsable."""

DYN_MARK = "\x00"
"""Stands for a run-time value in :attr:`Word.value` (the gate refuses input containing NUL)."""

PartKind = Literal["lit", "glob", "brace", "tilde", "dyn"]
SubstKind = Literal["command", "backtick", "process", "arith", "param", "array"]


class ShellSyntaxError(ValueError):
    """The command is outside the subset this lexer and parser understand."""


@dataclass(frozen=True, slots=True)
class Part:
    """A piece of a word's value: see the module docstring for the kinds."""

    kind: PartKind
    text: str


@dataclass(frozen=True, slots=True)
class Word:
    """One shell word, quote-removed, with the substitutions it contains."""

    raw: str
    parts: tuple[Part, ...]
    substitutions: tuple[Lexed, ...] = ()
    quoted: bool = False

    @property
    def value(self) -> str:
        """The text after quote removal; run-time parts read as :data:`DYN_MARK`."""
        return "".join(DYN_MARK if part.kind == "dyn" else part.text for part in self.parts)

    @property
    def is_static(self) -> bool:
        """True when no part is only known at run time."""
        return all(part.kind != "dyn" for part in self.parts)


@dataclass(frozen=True, slots=True)
class Token:
    """A word, an operator (``;``, ``&&``, ``>``, …) or a newline.

    ``fd`` is the explicit file descriptor of a redirection operator (``2>`` → 2).
    """

    kind: Literal["word", "op", "newline"]
    text: str
    start: int
    end: int
    word: Word | None = None
    fd: int | None = None


@dataclass(frozen=True, slots=True)
class Lexed:
    """A token stream plus the heredoc bodies, in the order of their ``<<`` operators."""

    tokens: tuple[Token, ...]
    heredocs: tuple[Word, ...]
    kind: SubstKind = "command"
    text: str = ""
    """For ``arith`` (``$(( text ))``) and ``param`` (``${text}``): the expression as typed, which
    bash evaluates when it expands the word (no tokens)."""


_OPERATORS = (
    ";;&",
    "&>>",
    "<<<",
    "<<-",
    ";;",
    ";&",
    "&&",
    "&>",
    "||",
    "|&",
    "<<",
    "<>",
    "<&",
    ">>",
    ">|",
    ">&",
    ";",
    "&",
    "|",
    "(",
    ")",
    "<",
    ">",
)
_WORD_BREAK = frozenset(" \t\n;&|()<>")
_NAME_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_NAME_CHARS = _NAME_START | frozenset("0123456789")
_SPECIAL_PARAMS = frozenset("@*#?$!-0123456789")
_ANSI_SIMPLE = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}
_HEX = frozenset("0123456789abcdefABCDEF")
_AFTER_BRACE = ([Part("brace", "{")], [Part("brace", ",")])
_TILDE_PREFIX_ENDS = frozenset("'\"\\$`")
"""Characters that end a ``~user`` prefix: quotes and expansions are lexed as themselves."""
_ANSI_DIGITS = {"x": 2, "u": 4, "U": 8}


def lex(source: str, home: str) -> Lexed:
    """Split a command line into tokens.

    Args:
        source: the command line.
        home: the home directory, substituted for ``~`` and ``$HOME``.

    Raises:
        ShellSyntaxError: unterminated quotes or substitutions, a missing heredoc body, nesting
            deeper than :data:`MAX_NESTING`, or a construct outside the supported subset.
    """
    lexed, _ = _Lexer(source, 0, home, 0, until_paren=False).run()
    return lexed


class _WordBuilder:
    """Accumulates parts and substitutions of one word (merging adjacent literal text)."""

    def __init__(self) -> None:
        self.parts: list[Part] = []
        self.subs: list[Lexed] = []
        self.quoted = False

    def add(self, kind: PartKind, text: str) -> None:
        if kind == "lit" and self.parts and self.parts[-1].kind == "lit":
            self.parts[-1] = Part("lit", self.parts[-1].text + text)
        elif kind != "lit" or text:
            self.parts.append(Part(kind, text))


class _Lexer:
    def __init__(self, src: str, pos: int, home: str, depth: int, *, until_paren: bool) -> None:
        if depth > MAX_NESTING:
            raise ShellSyntaxError("substitutions nested too deeply")
        self.src = src
        self.pos = pos
        self.home = home
        self.depth = depth
        self.until_paren = until_paren
        self.tokens: list[Token] = []
        self.heredocs: list[Word] = []
        self.pending: list[tuple[str, bool, bool]] = []  # (delimiter, strip_tabs, quoted)
        self.expect_delimiter: bool | None = None  # strip_tabs of the pending "<<", if any

    # -- driver ---------------------------------------------------------------------------

    def run(self) -> tuple[Lexed, int]:
        src = self.src
        paren_depth = 0
        while True:
            self._skip_blanks()
            if self.pos >= len(src):
                if self.until_paren:
                    raise ShellSyntaxError("unterminated $( … )")
                if self.pending or self.expect_delimiter is not None:
                    raise ShellSyntaxError("here-document without a body")
                break
            char = src[self.pos]
            if char == "\n":
                self._expect_no_delimiter()
                self.tokens.append(Token("newline", "\n", self.pos, self.pos + 1))
                self.pos += 1
                self._read_heredoc_bodies()
                continue
            if char == "#":
                end = src.find("\n", self.pos)
                self.pos = len(src) if end < 0 else end
                continue
            if char in "<>" and src.startswith("(", self.pos + 1):
                self._read_word()
                continue
            if char in _WORD_BREAK:
                op = next(op for op in _OPERATORS if src.startswith(op, self.pos))
                if self.until_paren and op == ")" and paren_depth == 0:
                    self._expect_no_delimiter()
                    if self.pending:
                        raise ShellSyntaxError("here-document without a body")
                    end = self.pos + 1
                    break
                paren_depth += {"(": 1, ")": -1}.get(op, 0)
                self._emit_op(op, None)
                continue
            self._read_word()
        tokens = tuple(self.tokens)
        return Lexed(tokens, tuple(self.heredocs)), (end if self.until_paren else len(src))

    def _skip_blanks(self) -> None:
        src = self.src
        while self.pos < len(src):
            if src[self.pos] in " \t":
                self.pos += 1
            elif src.startswith("\\\n", self.pos):
                self.pos += 2
            else:
                return

    def _expect_no_delimiter(self) -> None:
        if self.expect_delimiter is not None:
            raise ShellSyntaxError("here-document operator without a delimiter")

    def _emit_op(self, op: str, fd: int | None) -> None:
        self._expect_no_delimiter()
        start = self.pos
        self.pos += len(op)
        self.tokens.append(Token("op", op, start, self.pos, fd=fd))
        if op in ("<<", "<<-"):
            self.expect_delimiter = op == "<<-"

    # -- words ----------------------------------------------------------------------------

    def _read_word(self) -> None:
        src = self.src
        start = self.pos
        word = _WordBuilder()
        while self.pos < len(src):
            char = src[self.pos]
            if char in "<>" and src.startswith("(", self.pos + 1):
                word.add("dyn", "")
                word.subs.append(self._sub_lexer(self.pos + 2, "process"))
                continue
            if char == "(" and _is_array_assignment(src[start : self.pos], word):
                word.add("dyn", "")
                word.subs.append(self._sub_lexer(self.pos + 1, "array"))
                continue
            if char in _WORD_BREAK:
                break
            self._read_unquoted(word, start)
        raw = src[start : self.pos]
        if (
            raw.isascii()
            and raw.isdigit()
            and not word.quoted
            and self.pos < len(src)
            and src[self.pos] in "<>"
            and not src.startswith("(", self.pos + 1)
        ):
            op = next(op for op in _OPERATORS if src.startswith(op, self.pos))
            if op[0] in "<>":
                self._emit_op(op, int(raw) if len(raw) < 6 else None)
                return
        token = Token(
            "word",
            raw,
            start,
            self.pos,
            Word(raw, tuple(word.parts), tuple(word.subs), word.quoted),
        )
        if self.expect_delimiter is not None:
            self.pending.append((_delimiter_text(token), self.expect_delimiter, word.quoted))
            self.expect_delimiter = None
        self.tokens.append(token)

    def _read_unquoted(self, word: _WordBuilder, start: int) -> None:
        src = self.src
        char = src[self.pos]
        if char == "\\":
            if self.pos + 1 >= len(src):
                raise ShellSyntaxError("trailing backslash")
            if src[self.pos + 1] == "\n":
                self.pos += 2
                return
            word.quoted = True
            word.add("lit", src[self.pos + 1])
            self.pos += 2
        elif char == "'":
            end = src.find("'", self.pos + 1)
            if end < 0:
                raise ShellSyntaxError("unterminated single quote")
            word.quoted = True
            word.add("lit", src[self.pos + 1 : end])
            self.pos = end + 1
        elif char == '"':
            word.quoted = True
            self._read_double(word)
        elif char == "$":
            self._read_dollar(word, in_double=False)
        elif char == "`":
            self._read_backtick(word)
        elif char in "*?[":
            word.add("glob", char)
            self.pos += 1
        elif char in "{,}":
            word.add("brace", char)
            self.pos += 1
        elif char == "~" and (self.pos == start or word.parts[-1:] in _AFTER_BRACE):
            # Bash expands braces before tildes: "{~,x}" is the home directory too.
            at_start = self.pos == start
            stops = "/" if at_start else "/,}"
            end = self.pos + 1
            while end < len(src) and src[end] not in _WORD_BREAK and src[end] not in stops:
                if src[end] in _TILDE_PREFIX_ENDS:
                    break  # the rest is lexed as usual: "~`rm -rf ~`" runs rm
                end += 1
            if end > self.pos + 1 or (end < len(src) and src[end] in _TILDE_PREFIX_ENDS):
                # ~user: someone else's home, somewhere under /. With a quote or an expansion
                # in the prefix bash keeps the "~" as typed; still no path to rely on.
                word.add("lit", "/")
                word.add("dyn", "")
            else:
                word.add("lit" if at_start else "tilde", self.home)
            self.pos = end
        else:
            word.add("lit", char)
            self.pos += 1

    def _read_double(self, word: _WordBuilder) -> None:
        src = self.src
        self.pos += 1
        while True:
            if self.pos >= len(src):
                raise ShellSyntaxError("unterminated double quote")
            char = src[self.pos]
            if char == '"':
                self.pos += 1
                word.add("lit", "")
                return
            if char == "\\" and self.pos + 1 < len(src):
                following = src[self.pos + 1]
                if following == "\n":
                    self.pos += 2
                    continue
                if following in '$`"\\':
                    word.add("lit", following)
                    self.pos += 2
                    continue
                word.add("lit", "\\")
                self.pos += 1
            elif char == "$":
                self._read_dollar(word, in_double=True)
            elif char == "`":
                self._read_backtick(word)
            else:
                word.add("lit", char)
                self.pos += 1

    def _read_dollar(self, word: _WordBuilder, *, in_double: bool) -> None:
        src = self.src
        following = src[self.pos + 1] if self.pos + 1 < len(src) else ""
        if following == "'" and not in_double:
            self._read_ansi_c(word)
        elif following == '"' and not in_double:
            self.pos += 1
            self._read_double(word)
        elif src.startswith("$((", self.pos):
            word.add("dyn", "")
            start = self.pos + 3
            inner = self._read_arithmetic(start)
            word.subs.append(Lexed((), (), "arith", src[start : self.pos - 2]))
            word.subs.extend(inner)
        elif following == "[":
            # "$[ x ]": bash's old arithmetic expansion; rare, and an expression evaluated.
            raise ShellSyntaxError("$[ … ] arithmetic")
        elif following == "(":
            word.add("dyn", "")
            word.subs.append(self._sub_lexer(self.pos + 2, "command"))
        elif following == "{":
            content_start = self.pos + 2
            subs = self._read_braced_parameter(content_start, unquoted=not in_double)
            if src[content_start : self.pos - 1] == "HOME":
                word.add("lit", self.home)
            else:
                word.add("dyn", "")
                word.subs.append(Lexed((), (), "param", src[content_start : self.pos - 1]))
                word.subs.extend(subs)
        elif following in _NAME_START:
            end = self.pos + 1
            while end < len(src) and src[end] in _NAME_CHARS:
                end += 1
            # Unquoted "$HOME{a,b}" is "$HOMEa $HOMEb": braces expand before parameters.
            brace_follows = not in_double and src.startswith("{", end)
            if src[self.pos + 1 : end] == "HOME" and not brace_follows:
                word.add("lit", self.home)
            else:
                word.add("dyn", "")
            self.pos = end
        elif following and following in _SPECIAL_PARAMS:
            word.add("dyn", "")
            self.pos += 2
        elif following and following in "~=^+" and not in_double:
            word.add("dyn", "")  # zsh: $~X, $=X, $^X, $+X expand X (bash: a plain "$")
            self.pos += 2
        else:
            word.add("lit", "$")
            self.pos += 1

    def _read_ansi_c(self, word: _WordBuilder) -> None:
        """``$'…'``: find the end the way bash's lexer does, then decode the escapes.

        A backslash always escapes the next character for the boundary, whatever the escape
        means, so decoding (``\\c'``, ``\\x'``) can never move where the string ends.
        """
        src = self.src
        end = self.pos + 2
        while True:
            if end >= len(src):
                raise ShellSyntaxError("unterminated $'…' quote")
            if src[end] == "\\":
                end += 2
            elif src[end] == "'":
                break
            else:
                end += 1
        word.quoted = True
        word.add("lit", _decode_ansi_c(src[self.pos + 2 : end]))
        self.pos = end + 1

    def _read_backtick(self, word: _WordBuilder) -> None:
        src = self.src
        self.pos += 1
        inner: list[str] = []
        while True:
            if self.pos >= len(src):
                raise ShellSyntaxError("unterminated backquote")
            char = src[self.pos]
            if char == "`":
                self.pos += 1
                break
            if char == "\\" and self.pos + 1 < len(src) and src[self.pos + 1] in "$`\\":
                inner.append(src[self.pos + 1])
                self.pos += 2
                continue
            inner.append(char)
            self.pos += 1
        lexed, _ = _Lexer("".join(inner), 0, self.home, self.depth + 1, until_paren=False).run()
        word.add("dyn", "")
        word.subs.append(Lexed(lexed.tokens, lexed.heredocs, "backtick"))

    def _sub_lexer(self, start: int, kind: SubstKind) -> Lexed:
        lexed, end = _Lexer(self.src, start, self.home, self.depth + 1, until_paren=True).run()
        self.pos = end
        return Lexed(lexed.tokens, lexed.heredocs, kind)

    def _read_arithmetic(self, start: int) -> list[Lexed]:
        """Skip ``$(( … ))`` from ``start`` (just inside), returning substitutions within it."""
        src = self.src
        self.pos = start
        depth = 0
        subs: list[Lexed] = []
        while True:
            if self.pos >= len(src):
                raise ShellSyntaxError("unterminated $(( … ))")
            char = src[self.pos]
            if char == "(":
                depth += 1
                self.pos += 1
            elif char == ")":
                if depth == 0:
                    if not src.startswith("))", self.pos):
                        raise ShellSyntaxError("malformed $(( … ))")
                    self.pos += 2
                    return subs
                depth -= 1
                self.pos += 1
            else:
                # Bash expands the expression "as if it were within double quotes": a single
                # quote is no quote there, and "$(( '$(id)' ))" runs id (then fails).
                subs.extend(self._skip_embedded(char, unquoted=False))

    def _read_braced_parameter(self, start: int, *, unquoted: bool) -> list[Lexed]:
        """Skip ``${ … }`` from ``start`` (just inside the brace), returning substitutions.

        ``unquoted``: the ``${…}`` is outside double quotes and heredocs. Only there do single
        quotes quote — bash runs the ``$(id)`` of ``"${x:-'$(id)'}"`` (it does quote inside the
        pattern of ``"${x#'…'}"``; a substitution found there too is a card, not a pass) — and
        only there does ``<(…)`` run: ``${x:-<(id)}``.
        """
        src = self.src
        self.pos = start
        depth = 0
        subs: list[Lexed] = []
        while True:
            if self.pos >= len(src):
                raise ShellSyntaxError("unterminated ${ … }")
            char = src[self.pos]
            if char == "}":
                self.pos += 1
                if depth == 0:
                    return subs
                depth -= 1
            elif src.startswith("${", self.pos):
                depth += 1
                self.pos += 2
            else:
                subs.extend(self._skip_embedded(char, unquoted=unquoted))

    def _skip_embedded(self, char: str, *, unquoted: bool) -> list[Lexed]:
        """Step over one character (or quoted run / substitution) inside ``$((…))`` or ``${…}``.

        ``unquoted``: a single quote starts a quoted run and ``<(``/``>(`` a process
        substitution; otherwise (double quotes, arithmetic) both are plain characters.
        """
        scratch = _WordBuilder()
        if char == "\\":
            self.pos += 2
        elif char in "<>" and unquoted and self.src.startswith("(", self.pos + 1):
            scratch.subs.append(self._sub_lexer(self.pos + 2, "process"))
        elif char == "'" and unquoted:
            end = self.src.find("'", self.pos + 1)
            if end < 0:
                raise ShellSyntaxError("unterminated single quote")
            self.pos = end + 1
        elif char == '"':
            self._read_double(scratch)
        elif char == "$":
            self._read_dollar(scratch, in_double=True)
        elif char == "`":
            self._read_backtick(scratch)
        else:
            self.pos += 1
        return scratch.subs

    # -- heredocs -------------------------------------------------------------------------

    def _read_heredoc_bodies(self) -> None:
        src = self.src
        for delimiter, strip_tabs, quoted in self.pending:
            lines: list[str] = []
            while True:
                if self.pos >= len(src):
                    raise ShellSyntaxError(f"here-document not terminated by {delimiter!r}")
                end = src.find("\n", self.pos)
                line = src[self.pos :] if end < 0 else src[self.pos : end]
                self.pos = len(src) if end < 0 else end + 1
                if strip_tabs:
                    line = line.lstrip("\t")
                if line == delimiter:
                    break
                lines.append(line + "\n")
            body = "".join(lines)
            if quoted:
                self.heredocs.append(Word(body, (Part("lit", body),), (), True))
            else:
                self.heredocs.append(self._heredoc_word(body))
        self.pending.clear()

    def _heredoc_word(self, body: str) -> Word:
        """Lex an unquoted heredoc body: ``$``, backquotes and ``\\`` keep their meaning."""
        inner = _Lexer(body, 0, self.home, self.depth + 1, until_paren=False)
        word = _WordBuilder()
        while inner.pos < len(body):
            char = body[inner.pos]
            if char == "\\" and inner.pos + 1 < len(body) and body[inner.pos + 1] in "$`\\\n":
                word.add("lit", body[inner.pos + 1])
                inner.pos += 2
            elif char == "$":
                inner._read_dollar(word, in_double=True)
            elif char == "`":
                inner._read_backtick(word)
            else:
                word.add("lit", char)
                inner.pos += 1
        return Word(body, tuple(word.parts), tuple(word.subs), False)


def _decode_ansi_c(text: str) -> str:
    """Decode the escapes of a ``$'…'`` string (bash's table; unknown escapes stay as typed)."""
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char != "\\" or index + 1 >= len(text):
            out.append(char)
            index += 1
            continue
        code = text[index + 1]
        index += 2
        if code in _ANSI_SIMPLE:
            out.append(_ANSI_SIMPLE[code])
        elif code in "01234567":
            end = index
            while end < len(text) and end < index + 2 and text[end] in "01234567":
                end += 1
            out.append(chr(int(code + text[index:end], 8) & 0xFF))
            index = end
        elif code in _ANSI_DIGITS:
            end = index
            while end < len(text) and end < index + _ANSI_DIGITS[code] and text[end] in _HEX:
                end += 1
            if end == index:
                out.append("\\" + code)
                continue
            value = int(text[index:end], 16)
            if value > 0x10FFFF or 0xD800 <= value <= 0xDFFF:
                raise ShellSyntaxError("invalid code point in $'…'")
            out.append(chr(value))
            index = end
        elif code == "c" and index < len(text):
            out.append(chr(ord(text[index]) & 0x1F))
            index += 1
        else:
            out.append("\\" + code)
    return "".join(out)


def _is_array_assignment(prefix: str, word: _WordBuilder) -> bool:
    """``name=(`` or ``name+=(``: an array assignment, whose parentheses belong to the word."""
    if word.quoted or not prefix.endswith("="):
        return False
    name = prefix[:-2] if prefix.endswith("+=") else prefix[:-1]
    return bool(name) and name[0] in _NAME_START and all(c in _NAME_CHARS for c in name)


def _delimiter_text(token: Token) -> str:
    """A heredoc delimiter after quote removal (bash does not expand it)."""
    assert token.word is not None
    return "".join(part.text for part in token.word.parts) if token.word.is_static else token.text
