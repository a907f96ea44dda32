"""Text bash evaluates as code later: arithmetic, subscripts, prompt strings, indirection.

Bash evaluates an arithmetic expression recursively: a variable named in ``(( x ))``,
``$(( x ))``, ``let x``, ``[[ x -eq 1 ]]``, an indexed-array subscript or a substring offset is
itself evaluated, and a value such as ``a[$(id)]`` runs ``id`` while it is. The same holds for a
*name* that a builtin assigns to (``printf -v 'a[$(id)]'``, ``read``, ``unset``, ``declare``),
for ``${x@P}`` (prompt expansion runs substitutions), and for ``${!x}`` (the value names another
parameter, subscript included). None of these run anything when every word involved is a
literal the gate can read, so they are ``inline_code`` only when a value is unknown:

* a literal number or operator is fine;
* a variable is fine when this line gave it an integer before (``i=0``, ``for i in 1 2 3``,
  ``(( i = 0 ))``) or it is one of bash's own integer variables (``RANDOM``, ``LINENO``, …);
* anything else — a variable set elsewhere, an array element, a quote — is code.
"""

from __future__ import annotations

import re

from bridge.gate.commands.hooks import CODE_VARIABLE_NAMES, check_assignment
from bridge.gate.context import INLINE, UNPARSABLE, Call
from bridge.gate.line_memory import memory_of
from bridge.gate.shell.lexer import DYN_MARK, Part, Word
from bridge.gate.shell.words import drop_prefix, split_args

__all__ = [
    "BUILTIN_INTEGERS",
    "arithmetic_is_code",
    "check_declare",
    "check_name_builtin",
    "name_is_code",
    "note_assignment",
    "parameter_is_code",
]

BUILTIN_INTEGERS = frozenset(
    {"RANDOM", "SECONDS", "LINENO", "BASHPID", "EPOCHSECONDS", "PPID", "UID", "EUID", "OPTIND",
     "SRANDOM"}
)  # fmt: skip
"""Variables bash itself keeps as integers."""

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"[0-9][0-9A-Za-z_#@]*")
_ASSIGN_OPS = ("<<=", ">>=", "+=", "-=", "*=", "/=", "%=", "&=", "^=", "|=")
_SAFE_SPECIALS = frozenset("#?$!")
_LITERAL_SUBSCRIPT = re.compile(r"\s*(-?[0-9]+|@|\*)\s*")
_NAME_WITH_SUBSCRIPT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\[(.*)\])?", re.DOTALL)
_INTEGER = re.compile(r"[+-]?[0-9]+")
_LENGTH = re.compile(r"#([A-Za-z_][A-Za-z0-9_]*(\[(@|\*|[0-9]+)\])?)?")


def arithmetic_is_code(text: str, integers: set[str]) -> bool:
    """Would evaluating the arithmetic ``text`` evaluate a value the gate cannot see?

    ``integers`` holds the variables known to hold integers; names the expression assigns with
    ``=`` join it (their new value is a number whatever the right-hand side was, and that side
    was judged on its own).
    """
    if ";" in text or "," in text:
        # Evaluated left to right: "i=0; i<3; i++" reads i after it was assigned.
        parts = re.split(r"[;,]", text)
        return any([arithmetic_is_code(part, integers) for part in parts])
    assigned: list[str] = []
    risky = False
    index = 0
    while index < len(text):
        char = text[index]
        if char.isspace():
            index += 1
            continue
        number = _NUMBER.match(text, index)
        if number:
            index = number.end()
            continue
        if char == "$":
            following = text[index + 1 : index + 2]
            if following and following in _SAFE_SPECIALS:
                index += 2
                continue
            ident = _IDENT.match(text, index + 1)
            if ident is None:
                # "${…}", "$(…)", "$1": judged as their own substitution, but the value they
                # expand to is evaluated here.
                if text.startswith("${", index):
                    risky |= not _braced_integer(text, index, integers)
                    end = text.find("}", index)
                    index = end + 1 if end > 0 else index + 1
                else:
                    risky = True
                    index += 1
                continue
            risky |= ident.group() not in integers and ident.group() not in BUILTIN_INTEGERS
            index = ident.end()
            continue
        ident = _IDENT.match(text, index)
        if ident is None:
            if char in "'\"`\\":
                risky = True
            index += 1
            continue
        name = ident.group()
        index = ident.end()
        after = index
        while after < len(text) and text[after].isspace():
            after += 1
        if text.startswith("=", after) and not text.startswith("==", after):
            assigned.append(name)  # the target of "=" is not read
            continue
        if text.startswith("[", after):
            risky = True  # an array element: its value is unknown
            continue
        if text.startswith(_ASSIGN_OPS, after):
            assigned.append(name)
        risky |= name not in integers and name not in BUILTIN_INTEGERS
    integers.update(assigned)
    return risky


def _braced_integer(text: str, index: int, integers: set[str]) -> bool:
    """``${name}`` of a known integer, or a length (``${#x}``, ``${#a[@]}``), inside an
    arithmetic expression."""
    end = text.find("}", index)
    content = text[index + 2 : end] if end > 0 else ""
    return content in integers or _LENGTH.fullmatch(content) is not None


def parameter_is_code(text: str, integers: set[str]) -> bool:
    """Does expanding ``${text}`` evaluate a value as code?

    ``${x@P}`` (prompt expansion), ``${!x}`` (indirection: the value may name ``a[$(id)]``), a
    subscript or a substring offset that is not a literal number or a known integer.
    """
    body = text
    if body.startswith("#"):
        body = body[1:]  # ${#x}: the length
    if body.startswith("!"):
        name = _IDENT.match(body, 1)
        return name is None or body[name.end() :] not in ("[@]", "[*]", "*", "@")
    name = _IDENT.match(body)
    if name is None:
        return False  # $1, $@, ${#}, …: no subscript, no evaluation
    rest = body[name.end() :]
    if rest.startswith("["):
        close = _matching_bracket(rest)
        if close < 0:
            return True
        subscript = rest[1:close]
        if not _LITERAL_SUBSCRIPT.fullmatch(subscript) and arithmetic_is_code(
            subscript, set(integers)
        ):
            return True
        rest = rest[close + 1 :]
    if rest.startswith("@"):
        return rest[1:2] == "P"
    if rest.startswith(":") and rest[1:2] not in ("-", "=", "?", "+"):
        return arithmetic_is_code(rest[1:].replace(":", " "), set(integers))
    return False


def _matching_bracket(text: str) -> int:
    depth = 0
    for index, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth == 0:
                return index
    return -1


def name_is_code(word: Word, integers: set[str]) -> bool:
    """A word a builtin assigns to by name (``printf -v NAME``, ``read NAME``, ``declare``):
    code when it is not a plain literal name, its subscript is evaluated, or it is a variable
    that runs code (``PS4``, ``PROMPT_COMMAND``, ``BASH_ENV``, …)."""
    if not word.is_static:
        return True
    match = _NAME_WITH_SUBSCRIPT.fullmatch(word.value)
    if match is None:
        return True  # not a name: bash refuses it, but nothing is worth guessing
    if match.group(1) in CODE_VARIABLE_NAMES or match.group(1).startswith("BASH_FUNC_"):
        return True
    subscript = match.group(3)
    return subscript is not None and (
        not _LITERAL_SUBSCRIPT.fullmatch(subscript) and arithmetic_is_code(subscript, set(integers))
    )


def _integers(call: Call) -> set[str]:
    memory = memory_of(call.env)
    return memory.integers if memory is not None else set()


def note_assignment(name: str, value: Word, integers: set[str]) -> None:
    """``name=value``: the name holds an integer after it when the value is a literal one."""
    literal = value.is_static and _INTEGER.fullmatch(value.value) is not None
    arithmetic = value.raw.startswith("$((") and value.raw.endswith("))") and len(value.parts) == 1
    if literal or arithmetic:
        integers.add(name)
    else:
        integers.discard(name)


# -- builtins that name variables or evaluate arithmetic ------------------------------------


def check_name_builtin(call: Call) -> None:
    """``let``, ``printf -v``, ``read``, ``unset``, ``mapfile``, ``wait -p``, ``getopts``,
    ``test -v``/``[ -v``, ``enable -f``, ``hash -p``: what they evaluate or assign by name."""
    name = call.name
    args = call.args
    integers = _integers(call)
    flag = call.env.flag
    if name == "let":
        call.handled.update(range(len(args)))
        for word in args:
            if not word.is_static or arithmetic_is_code(word.value, integers):
                flag(INLINE)
    elif name == "printf":
        call.handled.update(range(len(args)))
        parsed = split_args(args, short_values="v", first_positional_ends=True)
        for _, target in parsed.values("-v"):
            if name_is_code(target, integers):
                flag(INLINE)
            else:
                integers.discard(target.value)
    elif name in ("read", "mapfile", "readarray", "unset", "getopts"):
        call.handled.update(range(len(args)))
        short = {"read": "adeinNptu", "mapfile": "dnOsuCc", "readarray": "dnOsuCc"}.get(name, "")
        parsed = split_args(args, short_values=short)
        names = [word for _, word in parsed.positionals]
        if name == "getopts":
            names = names[1:2]
        names += [word for _, word in parsed.values("-a")]
        if name == "unset" and parsed.has("-f"):
            return
        for word in names:
            if name_is_code(word, integers):
                flag(INLINE)
            integers.discard(word.value)
    elif name == "wait":
        parsed = split_args(args, short_values="p")
        for index, word in parsed.values("-p"):
            call.handled.add(index)
            if name_is_code(word, integers):
                flag(INLINE)
    elif name in ("test", "["):
        for index, word in enumerate(args[:-1]):
            if word.value == "-v" and name_is_code(args[index + 1], integers):
                flag(INLINE)
    elif name == "enable":
        if split_args(args, short_values="f").has("-f"):
            flag(INLINE)  # loads a builtin from a shared object
    elif name == "hash":
        if split_args(args, short_values="p").has("-p"):
            flag(INLINE)  # "hash -p /x/evil ls" makes ls run another program
    else:
        flag(UNPARSABLE)


def check_declare(call: Call) -> None:
    """``export``, ``declare``, ``typeset``, ``local``, ``readonly``: assignments as arguments.

    Each name is checked like any assigned name; with ``-i`` the value is arithmetic, and with
    ``-n`` the value is itself a name (a reference to ``a[$(id)]`` runs ``id`` when expanded).
    """
    integers = _integers(call)
    integer_attribute = reference = False
    for index, word in enumerate(call.args):
        value = word.value
        if value.startswith(("-", "+")) and "=" not in value:
            call.handled.add(index)
            integer_attribute |= value.startswith("-") and "i" in value
            reference |= value.startswith("-") and "n" in value
            continue
        call.handled.add(index)
        name, equals, _ = value.partition("=")
        name = name.removesuffix("+")
        target = Word(name, (Part("lit", name),)) if DYN_MARK not in name else word
        if name_is_code(target, integers):
            call.env.flag(INLINE)
        if not equals:
            continue
        check_assignment(word, call.scope, call.env)
        assigned = drop_prefix(word, len(value) - len(value.partition("=")[2]))
        if word.quoted and assigned.value.startswith("(") and ("$" in value or "`" in value):
            call.env.flag(INLINE)  # declare 'a=([0]=$(id))': bash expands the compound value
        if reference and name_is_code(assigned, integers):
            call.env.flag(INLINE)
        if integer_attribute and (
            not assigned.is_static or arithmetic_is_code(assigned.value, integers)
        ):
            call.env.flag(INLINE)
        note_assignment(name, assigned, integers)
