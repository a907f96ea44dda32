"""tree-sitter-bash as a differential oracle for the gate's own shell parser.

The gate parses shell lines with its own lexer and parser (``shell_lexer``, ``shell_parser``) and
refuses what they cannot read; tree-sitter-bash is an independent grammar of the same language,
used here only as a test oracle. Where our parser accepts a line, both must see the same:

* **command names** — the raw first word of every simple command anywhere in the line (lists,
  pipelines, compound bodies, function bodies, substitutions), as a multiset;
* **pipelines** — the number of commands of each top-level pipeline, in order, and of every
  pipeline of two or more commands anywhere, as a multiset;
* **substitutions** — how many ``$(…)``, `` `…` `` and ``<(…)``/``>(…)`` the line holds.

Order is compared where both trees keep it (the top-level list); nested parts are compared as
multisets, because our tree keeps a command's words and redirections apart.

Normalisations, each a place where tree-sitter-bash 0.25 reads bash 5.2's syntax differently:

1. ``time`` and ``time -p`` are a reserved word in bash (our parser drops them from the
   pipeline); tree-sitter reads a command named ``time``. Its name becomes the timed command's.
2. ``[ … ]`` is tree-sitter's ``test_command``; bash runs the ``[`` builtin, our parser a command
   named ``[``. (``[[ … ]]`` is a compound command in both.)
3. ``a | b > x | c``, ``a && b > x``: tree-sitter gives the redirection to everything before it
   (``(a | b) > x``); bash only to ``b``. And ``a | b | c || d`` is ``a | ((b | c) || d)`` to
   it. Such trees are opened up again (:func:`_statements`).
4. Backquotes inside backquotes: bash unescapes ``\\```, ``\\$`` and ``\\\\`` in a backquoted
   command and parses the result; tree-sitter parses the raw text and sees one level. The inside
   of a backquote that holds such an escape is parsed again, unescaped.

Every other disagreement on the corpus is listed in :data:`KNOWN_DISAGREEMENTS` (with which
side bash 5.2 takes, checked by running the line with a ``touch`` in place of the command) or in
:data:`TREE_SITTER_ERRORS` (our parser reads it, tree-sitter cannot) or :data:`OURS_REFUSES`
(the other way round); the test fails when a listed line starts to agree, or an unlisted one
disagrees — a new corpus line that tree-sitter reads differently has to be looked at.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import pytest
import tree_sitter_bash
from hypothesis import HealthCheck, given, settings
from tree_sitter import Language, Node, Parser

from bridge.gate.shell.lexer import Lexed, ShellSyntaxError, Word
from bridge.gate.shell.parser import (
    Command,
    FunctionDef,
    Redirect,
    Script,
    SimpleCommand,
    parse,
    parse_shell,
)
from tests.gate.test_gate import _LINES, CASES, EDGE_CASES, HOME

PARSER = Parser(Language(tree_sitter_bash.language()))
_BACKQUOTE_ESCAPE = re.compile(r"\\([$`\\])")


@dataclass(frozen=True, slots=True)
class Shape:
    """What both parsers must agree on for one line."""

    names: tuple[str, ...]
    """Command names, sorted."""
    top: tuple[int, ...]
    """Commands per top-level pipeline, in order."""
    pipelines: tuple[int, ...]
    """Commands per pipeline of two or more, anywhere, sorted."""
    substitutions: tuple[tuple[str, int], ...]
    """``$(`` / `` ` `` / ``<(`` counts, sorted by kind."""


class _Collector:
    def __init__(self) -> None:
        self.names: list[str] = []
        self.pipelines: list[int] = []
        self.substitutions: Counter[str] = Counter()

    def shape(self, top: list[int]) -> Shape:
        return Shape(
            tuple(sorted(self.names)),
            tuple(top),
            tuple(sorted(self.pipelines)),
            tuple(sorted(self.substitutions.items())),
        )


# -- our parser's shape ------------------------------------------------------------------------

_OUR_KINDS = {"command": "$(", "backtick": "`", "process": "<("}


def our_shape(line: str) -> Shape | None:
    """The shape of the line as our parser sees it; None when it refuses the line."""
    try:
        script = parse_shell(line, HOME)
    except ShellSyntaxError:
        return None
    found = _Collector()

    def word(value: Word) -> None:
        for sub in value.substitutions:
            lexed(sub)

    def lexed(sub: Lexed) -> None:
        if sub.kind == "array":  # a=( … ): its words, not a substitution
            for token in sub.tokens:
                if token.word is not None:
                    word(token.word)
            return
        if sub.kind in _OUR_KINDS:
            found.substitutions[_OUR_KINDS[sub.kind]] += 1
        # A substitution our parser refuses makes the line unparsable to the gate; here it
        # only has no inside to count.
        try:
            inner = parse(sub)
        except ShellSyntaxError:
            return
        body(inner)

    def redirects(items: tuple[Redirect, ...]) -> None:
        for redirect in items:
            word(redirect.target)
            if redirect.body is not None:
                word(redirect.body)

    def command(node: Command) -> None:
        if isinstance(node, SimpleCommand):
            if node.words:
                found.names.append(node.words[0].raw)
            for value in (*node.assignments, *node.words):
                word(value)
            redirects(node.redirects)
        elif isinstance(node, FunctionDef):
            command(node.body)
        else:
            for value in node.words:
                word(value)
            redirects(node.redirects)
            for inner in node.bodies:
                body(inner)

    def body(script: Script) -> None:
        for item in script.items:
            for pipeline in item.pipelines:
                if len(pipeline.commands) > 1:
                    found.pipelines.append(len(pipeline.commands))
                for node in pipeline.commands:
                    command(node)

    body(script)
    top = [len(p.commands) for item in script.items for p in item.pipelines]
    return found.shape(top)


# -- tree-sitter's shape -----------------------------------------------------------------------


def tree_sitter_shape(line: str) -> Shape | None:
    """The shape of the line as tree-sitter-bash sees it; None when its tree has an error."""
    found = _Collector()
    root = _tree_sitter_walk(line, found)
    if root is None:
        return None
    top = [len(pipeline) for child in _named(root) for pipeline in _statements(child)]
    return found.shape(top)


def _tree_sitter_walk(line: str, found: _Collector) -> Node | None:
    tree = PARSER.parse(line.encode("utf-8", "surrogatepass"))
    if tree.root_node.has_error:
        return None
    if not _walk(tree.root_node, found):
        return None
    return tree.root_node


def _named(node: Node) -> list[Node]:
    return [child for child in node.named_children if child.type != "comment"]


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "surrogatepass")


_SEQUENCES = ("list", "pipeline")


def _redirected_sequence(node: Node) -> Node | None:
    """The body of ``(a && b) > x``, tree-sitter's reading of ``a && b > x``; else None."""
    if node.type != "redirected_statement":
        return None
    body = node.child_by_field_name("body")
    return body if body is not None and body.type in _SEQUENCES else None


def _statements(node: Node) -> list[list[Node]]:
    """The pipelines of a statement, in order, as bash reads them (normalisation 3).

    tree-sitter gives a redirection after a member of a list or pipeline to everything before
    it: ``a && b > x | c`` is ``((a && b) > x) | c`` to it and ``a && ((b > x) | c)`` to bash.
    And it reads ``a | b | c || d`` as ``a | ((b | c) || d)``. A redirected sequence, or a list
    inside a pipeline (bash's grammar has none: it would need braces), is opened up again: its
    first pipeline continues the pipeline before it, its last the pipeline after it.
    """
    inner = _redirected_sequence(node)
    if inner is not None:
        return _statements(inner)
    if node.type == "list":
        return [pipeline for child in _named(node) for pipeline in _statements(child)]
    if node.type != "pipeline":
        return [[node]]
    pipelines: list[list[Node]] = []
    for child in _named(node):
        opened = child.type == "list" or _redirected_sequence(child) is not None
        pieces = _statements(child) if opened else [[child]]
        if pipelines:
            pipelines[-1].extend(pieces[0])
            pipelines.extend(pieces[1:])
        else:
            pipelines = pieces
    return pipelines


def _statement_root(node: Node) -> bool:
    """A list or pipeline not inside another one (a subshell or a substitution starts anew)."""
    parent = node.parent
    if parent is None or parent.type in _SEQUENCES:
        return False
    return _redirected_sequence(parent) != node  # counted with the redirected statement


def _walk(node: Node, found: _Collector) -> bool:
    """Collect names, pipelines and substitutions below ``node``; False on an inner error."""
    kind = node.type
    if kind == "command":
        name = node.child_by_field_name("name")
        if name is not None:
            found.names.append(_timed_name(node, _text(name)))
    elif kind in ("declaration_command", "unset_command"):
        found.names.append(_text(node.children[0]))  # export, declare, local, unset, …
    elif kind == "test_command" and node.children[0].type == "[":
        found.names.append("[")  # normalisation 2
    elif kind == "process_substitution":
        found.substitutions["<("] += 1
    elif kind == "command_substitution":
        backquoted = node.children[0].type == "`"
        found.substitutions["`" if backquoted else "$("] += 1
        inner = _text(node)[1:-1]
        if backquoted and _BACKQUOTE_ESCAPE.search(inner):  # normalisation 4
            return _tree_sitter_walk(_BACKQUOTE_ESCAPE.sub(r"\1", inner), found) is not None
    if (kind in _SEQUENCES or _redirected_sequence(node) is not None) and _statement_root(node):
        found.pipelines.extend(len(p) for p in _statements(node) if len(p) > 1)
    return all(_walk(child, found) for child in node.children)


def _timed_name(command: Node, name: str) -> str:
    """Normalisation 1: ``time [-p] cmd`` names ``cmd``."""
    if name != "time":
        return name
    arguments = [_text(child) for child in command.children_by_field_name("argument")]
    rest = arguments[1:] if arguments[:1] == ["-p"] else arguments
    return rest[0] if rest else name


# -- the corpus --------------------------------------------------------------------------------

KNOWN_DISAGREEMENTS: dict[str, str] = {
    # tree-sitter keeps the word of ${x:-word} opaque when it holds a backquote or <(…):
    "echo ${X:-`id`}": "bash runs id: ours",
    "echo ${y:-<(rm -rf ~)}": "bash runs the process substitution: ours",
    # tree-sitter reads '…' as a quote inside "${…}", $(( )) and heredocs; bash does not there.
    "echo \"${y:-'$(rm -rf ~)'}\"": "bash runs the rm: ours",
    "echo \"${y:-'`id`'}\"": "bash runs id: ours",
    "echo $(( '$(rm -rf ~)' ))": "bash runs the rm, then fails on the arithmetic: ours",
    "cat <<EOF\n${y:-'$(rm -rf ~)'}\nEOF": "bash runs the rm: ours",
    # ... except in the pattern of "${x#'…'}", where bash quotes too: our lexer reads a
    # substitution there on purpose (a card, not a pass).
    "echo \"${x#'$(id)'}\"": "bash runs nothing: tree-sitter (ours is stricter on purpose)",
}
"""Corpus lines whose shapes differ, and which side bash 5.2 takes."""

TREE_SITTER_ERRORS: dict[str, str] = {
    "{rm,-rf,/}": "brace expansion in command position (bash runs rm -rf /)",
    "rm -rf $~PATTERN": "a lone $ before ~ (bash: a literal $; zsh: a variable, which we take)",
    "cat <<EOF\n\\$(id) $HOME\nEOF": "an escaped $ in a heredoc body",
    'echo "${x:-it\'s}"': "an apostrophe in a double-quoted ${…} (bash prints it's)",
    "echo $(( <(rm -rf ~) ))": "<( in arithmetic (bash: an arithmetic error, nothing runs)",
}
"""Corpus lines our parser accepts and tree-sitter-bash cannot parse."""

OURS_REFUSES: dict[str, str] = {
    "(( '$(rm -rf ~)' ))": "on purpose: bash runs the rm (the quote does not hide it)",
    "((x << 2))\n2\n": "our lexer reads << as a heredoc in (( )) too: a card, never a pass",
    "echo $'\\ud800'": "on purpose: a lone surrogate is not a character bash can pass on",
}
"""Corpus lines tree-sitter-bash parses and our parser refuses (``unparsable_command``)."""

LINES = sorted(
    {case["input"]["command"] for case in CASES if isinstance(case["input"].get("command"), str)}
    | {command for command, _, _ in EDGE_CASES}
)


@pytest.mark.parametrize("line", LINES, ids=[line[:40] for line in LINES])
def test_both_parsers_see_the_same_line(line: str) -> None:
    ours, theirs = our_shape(line), tree_sitter_shape(line)
    if line in OURS_REFUSES:
        assert ours is None and theirs is not None, "no longer refused by ours alone: drop it"
    elif ours is None:
        assert theirs is None  # both refuse: unparsable_command, a card
    elif line in TREE_SITTER_ERRORS:
        assert theirs is None, "tree-sitter parses it now: drop it from TREE_SITTER_ERRORS"
    elif line in KNOWN_DISAGREEMENTS:
        assert theirs is not None and theirs != ours, "they agree now: drop it from the list"
    else:
        assert theirs == ours


def test_the_lists_name_corpus_lines_only() -> None:
    assert set(KNOWN_DISAGREEMENTS) <= set(LINES)
    assert set(TREE_SITTER_ERRORS) <= set(LINES)
    assert set(OURS_REFUSES) <= set(LINES)
    compared = [line for line in LINES if our_shape(line) is not None]
    assert len(compared) >= 350  # the oracle looks at most of the corpus, not a sample of it


# -- generated lines ---------------------------------------------------------------------------

# Where tree-sitter-bash is known to read bash differently (each checked against bash 5.2):
_TREE_SITTER_BLIND = re.compile(
    r"\$\{[^}]*(['`]|[<>]\()"  # ${…} holding a quote, backquote or <(…): the lists above
    r"|\(\([^)]*(['`]|[<>]\()"  # arithmetic holding one: the lists above
    r"|,`"  # "{a,`x`}": two words to tree-sitter, one to bash
    r"|[^\s;&|()<>][<>]\("  # "Y=x=<(id) true", "case a<(x) in": <(…) glued to a word
    r"|\\\$\("  # "[[ -n \$(id) ]]" (bash refuses it; ours reads the words), heredocs
    # "a | b | c\nd && f": after a pipeline of three or more, a newline and a later && or ||,
    # tree-sitter-bash folds the next line into the pipeline and loses its command (bash runs d).
    r"|\|[^\n|]*\|[^\n]*\n[\s\S]*(&&|\|\|)"
)


# Derandomized: each run explores the same 400 lines, so a tree-sitter quirk found later is a
# reviewed change to the lists above, not a red CI run on somebody else's commit.
@settings(
    max_examples=400,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(_LINES)
def test_both_parsers_see_the_same_generated_line(line: str) -> None:
    ours = our_shape(line)
    if ours is None or _TREE_SITTER_BLIND.search(line):
        return
    assert tree_sitter_shape(line) == ours


def test_the_shapes_themselves() -> None:
    line = "time sudo a | b > x | c && echo $(d) `e` <(f); for i in 1; do [ -x y ]; done"
    expected = Shape(
        names=("[", "b", "c", "d", "e", "echo", "f", "sudo"),
        top=(3, 1, 1),
        pipelines=(3,),
        substitutions=(("$(", 1), ("<(", 1), ("`", 1)),
    )
    assert our_shape(line) == expected
    assert tree_sitter_shape(line) == expected
    nested = "echo `echo \\`id\\``"
    assert our_shape(nested) == tree_sitter_shape(nested)
    assert our_shape(nested) is not None and our_shape(nested).substitutions == (("`", 2),)  # type: ignore[union-attr]
