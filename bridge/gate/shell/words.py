"""Word helpers for the command rules: brace expansion and option parsing.

Brace expansion runs before any rule looks at an argument vector, because bash expands
``{rm,-rf,/}`` into three words — a check that looked at the unexpanded word would see a harmless
``{rm,-rf,/}``. Sequences (``{1..9}``) become a glob: their members never hold a ``/``.
"""

from __future__ import annotations

import itertools
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass

from bridge.gate.commands.long_options import resolve_long
from bridge.gate.shell.lexer import DYN_MARK, Part, Word

__all__ = [
    "MAX_BRACE_DEPTH",
    "MAX_BRACE_WORDS",
    "Args",
    "Option",
    "TooManyWords",
    "command_name",
    "drop_prefix",
    "expand_braces",
    "split_args",
]

MAX_BRACE_WORDS = 64
"""Most words one brace expansion may yield before the command counts as unparsable."""

MAX_BRACE_DEPTH = 32
"""Deepest nesting of braces expanded (also bounds the recursion)."""

_BLANKS = frozenset(" \t\n")
_SEQUENCE = re.compile(r"-?\d+\.\.-?\d+(\.\.-?\d+)?|[A-Za-z]\.\.[A-Za-z](\.\.-?\d+)?")


class TooManyWords(ValueError):
    """A brace expansion yields more than :data:`MAX_BRACE_WORDS` words."""


def expand_braces(word: Word) -> tuple[Word, ...]:
    """The words bash's brace expansion makes of ``word`` (the word itself if it has none).

    Raises:
        TooManyWords: more than :data:`MAX_BRACE_WORDS` results.
    """
    if not any(part.kind in ("brace", "tilde") for part in word.parts):
        return (word,)
    expanded = (_merge(parts) for parts in _expand(list(word.parts), 0))
    # Bash drops the empty words an expansion leaves ("{a,}" is just "a").
    return tuple(
        Word(word.raw, parts, word.substitutions, word.quoted) for parts in expanded if parts
    )


def _expand(parts: list[Part], depth: int) -> list[list[Part]]:
    """Bash's brace expansion over parts (``brace_gobbler`` in bash's ``braces.c``).

    The group of an opening brace ends at the first ``}`` at its level *after* a top-level comma
    (or ``..``) was seen; a ``}`` before that is literal, so ``{a},}`` is ``a}`` or nothing. An
    opening brace without such an end is literal.
    """
    if depth > MAX_BRACE_DEPTH:
        raise TooManyWords("brace expansion nested too deeply")
    for start, part in enumerate(parts):
        if part != Part("brace", "{") or _ignored_brace(parts, start):
            continue
        close, commas, sequence = _group_end(parts, start)
        if close is None:
            literal = [*parts[:start], Part("lit", "{"), *parts[start + 1 :]]
            return _expand(literal, depth + 1)
        if not commas:
            inside = parts[start + 1 : close]
            if sequence and len(inside) == 1 and _SEQUENCE.fullmatch(inside[0].text):
                middle = [Part("glob", "*")]  # {1..9}: members never hold a "/"
            else:
                middle = [Part("lit", "{"), *inside, Part("lit", "}")]
            return _expand([*parts[:start], *middle, *parts[close + 1 :]], depth + 1)
        results: list[list[Part]] = []
        for left, right in itertools.pairwise([start, *commas, close]):
            alternative = parts[:start] + parts[left + 1 : right] + parts[close + 1 :]
            results.extend(_expand(alternative, depth + 1))
            if len(results) > MAX_BRACE_WORDS:
                raise TooManyWords("brace expansion yields too many words")
        return results
    return [[_settle(part, index) for index, part in enumerate(parts)]]


def _settle(part: Part, index: int) -> Part:
    """After expansion: braces left are literal; a tilde that starts the word is the home."""
    if part.kind == "brace":
        return Part("lit", part.text)
    if part.kind == "tilde":
        return Part("lit", part.text if index == 0 else "~")
    return part


def _ignored_brace(parts: list[Part], start: int) -> bool:
    """Bash ignores an opening brace after whitespace (or at the start) followed by ``}`` or
    whitespace — ``find -exec rm {} +`` keeps its ``{}``."""
    before = parts[start - 1].text[-1:] if start else " "
    after = parts[start + 1] if start + 1 < len(parts) else None
    return before in _BLANKS and (
        after == Part("brace", "}") or (after is not None and after.text[:1] in _BLANKS)
    )


def _group_end(parts: list[Part], start: int) -> tuple[int | None, list[int], bool]:
    """Where the group opened at ``start`` ends, its top-level commas, and whether it has ``..``."""
    level = 0
    commas: list[int] = []
    sequence = False
    for index in range(start + 1, len(parts)):
        part = parts[index]
        if part.kind != "brace":
            if level == 0 and part.kind == "lit" and ".." in part.text:
                following = part.text[part.text.index("..") + 2 :]
                next_is_close = not following and parts[index + 1 : index + 2] == [
                    Part("brace", "}")
                ]
                sequence = sequence or not next_is_close
            continue
        if part.text == "{":
            level += 1
        elif part.text == "}":
            if level:
                level -= 1
            elif commas or sequence:
                return index, commas, sequence
        elif level == 0:
            commas.append(index)
    return None, commas, sequence


def _merge(parts: list[Part]) -> tuple[Part, ...]:
    merged: list[Part] = []
    for part in parts:
        if part.kind == "lit" and merged and merged[-1].kind == "lit":
            merged[-1] = Part("lit", merged[-1].text + part.text)
        elif part.kind != "lit" or part.text:
            merged.append(part)
    return tuple(merged)


def drop_prefix(word: Word, count: int) -> Word:
    """The word without the first ``count`` characters of its value (``--out=/x`` → ``/x``)."""
    parts: list[Part] = []
    for part in word.parts:
        size = 1 if part.kind == "dyn" else len(part.text)
        if count >= size:
            count -= size
            continue
        parts.append(Part(part.kind, part.text[count:]) if count else part)
        count = 0
    return Word(word.raw, tuple(parts), word.substitutions, word.quoted)


def command_name(word: Word) -> str:
    """The name a rule matches: the value's last path segment (``/bin/rm`` → ``rm``).

    zsh expands an unquoted ``=rm`` to the path of ``rm``, so a leading ``=`` is dropped.
    """
    value = word.value
    if word.raw.startswith("=") and len(value) > 1:
        value = value[1:]
    return posixpath.basename(value)


@dataclass(frozen=True, slots=True)
class Option:
    """One option: ``-r`` and ``-f`` for ``-rf``; ``--output`` with its value for ``--output=x``.

    ``index`` is the option word's position in the argument vector; ``value_index`` the value
    word's (``index`` itself when the value was attached, ``index + 1`` when separate).
    """

    name: str
    value: Word | None
    index: int
    value_index: int | None


@dataclass(frozen=True, slots=True)
class Args:
    """An argument vector split into options and ``(index, word)`` positionals."""

    options: tuple[Option, ...]
    positionals: tuple[tuple[int, Word], ...]
    unknown: tuple[str, ...] = ()
    """Long options that matched nothing in the ``known_long`` table given to :func:`split_args`."""

    def has(self, *names: str) -> bool:
        """True if any of the options was given."""
        return any(option.name in names for option in self.options)

    def values(self, *names: str) -> list[tuple[int, Word]]:
        """``(value_index, value)`` of every given option among ``names`` that has a value."""
        return [
            (option.value_index, option.value)
            for option in self.options
            if option.name in names and option.value is not None and option.value_index is not None
        ]


def split_args(
    args: Sequence[Word],
    *,
    short_values: str = "",
    long_values: frozenset[str] = frozenset(),
    first_positional_ends: bool = False,
    known_long: frozenset[str] | None = None,
) -> Args:
    """Split arguments the GNU way (options may follow positionals, ``--`` ends options).

    Args:
        args: the words after the command name.
        short_values: short options that take a value (``"o"`` for ``-o x`` / ``-ox``).
        long_values: long options that take a separate value (``"--output"``).
        first_positional_ends: POSIX mode — everything after the first positional is one.
        known_long: the program's long options (:data:`bridge.gate.commands.long_options.LONG_OPTIONS`): an
            abbreviation is resolved against it, and stands for every option it could be.
    """
    options: list[Option] = []
    unknown: list[str] = []
    positionals: list[tuple[int, Word]] = []
    index = 0
    only_positionals = False
    while index < len(args):
        word = args[index]
        value = word.value
        if only_positionals or not value.startswith("-") or value == "-":
            if first_positional_ends:
                positionals.extend((i, args[i]) for i in range(index, len(args)))
                break
            positionals.append((index, word))
        elif value == "--":
            only_positionals = True
            if first_positional_ends:
                positionals.extend((i, args[i]) for i in range(index + 1, len(args)))
                break
        elif value.startswith("--"):
            name, equals, _ = value.partition("=")
            names: tuple[str, ...] = (name,)
            if known_long is not None:
                names = resolve_long(name, known_long)
                if not names:
                    unknown.append(name)
                    names = (name,)
            if equals:
                attached = drop_prefix(word, len(name) + 1)
                options.extend(Option(each, attached, index, index) for each in names)
            elif len(names) == 1 and names[0] in long_values and index + 1 < len(args):
                options.append(Option(names[0], args[index + 1], index, index + 1))
                index += 1
            else:
                options.extend(Option(each, None, index, None) for each in names)
        else:
            for offset in range(1, len(value)):
                flag = value[offset]
                if flag in short_values and flag != DYN_MARK:
                    if offset + 1 < len(value):
                        attached = drop_prefix(word, offset + 1)
                        options.append(Option("-" + flag, attached, index, index))
                    elif index + 1 < len(args):
                        options.append(Option("-" + flag, args[index + 1], index, index + 1))
                        index += 1
                    else:
                        options.append(Option("-" + flag, None, index, None))
                    break
                options.append(Option("-" + flag, None, index, None))
        index += 1
    return Args(tuple(options), tuple(positionals), tuple(unknown))
