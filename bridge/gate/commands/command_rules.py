"""One simple command: look through its wrappers, then apply the rule for what actually runs.

``sudo -E nice -n 5 timeout 60 env FOO=1 rm -rf /`` runs ``rm``; each wrapper on the way may add
a label (``privileged`` for sudo, ``background_process`` for nohup) or change the directory
(``env -C``). Then the command's rule runs (``rules.py``), or its interpreter table
(``interpreters.py``), and finally every argument no rule judged gets the generic path check.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from bridge.gate.commands.deferred import check_declare, check_name_builtin
from bridge.gate.commands.hooks import check_alias, check_trap
from bridge.gate.commands.interpreters import Interpreter, interpreter_for, program_source
from bridge.gate.commands.rules import DELETERS, rule_for
from bridge.gate.commands.wrappers import WRAPPERS, inline_shell
from bridge.gate.context import (
    INLINE,
    OUTSIDE,
    UNPARSABLE,
    Call,
    CommandEnv,
    Facts,
    Scope,
    check_lenient,
    enter_directory,
)
from bridge.gate.labels import deny_label
from bridge.gate.line_memory import check_written
from bridge.gate.paths import is_under, resolve
from bridge.gate.shell.lexer import Word
from bridge.gate.shell.words import command_name, split_args

__all__ = ["MAX_WRAPPERS", "SYSTEM_BIN_DIRS", "check_argv"]

MAX_WRAPPERS = 16
"""Most wrappers looked through in one command (``sudo env nice timeout …``)."""

SYSTEM_BIN_DIRS = ("/usr", "/bin", "/sbin", "/opt", "/nix", "/snap")
"""Running a program from here is running an installed tool, not touching a foreign path."""

_AWK_EXEC = re.compile(
    r"system\s*\(|(?<!\|)\|(?!\|)|\bprintf?\b[^;{}\n]*>|getline\s*<|@load|\bclose\s*\("
)
_AWK_STRING = re.compile(r'"(\\.|[^"\\])*"')
_AWK_REGEX = re.compile(r"(^|[(,~!{;&|\n])(\s*)/(\\.|[^/\\\n])*/")
_STDIN_SCRIPTS = frozenset({"-", "/dev/stdin", "/dev/fd/0"})


def check_argv(argv: list[Word], scope: Scope, env: CommandEnv) -> Facts:
    """Check one command given as (brace-expanded) words; flag labels on ``env``.

    Args:
        argv: the command name and its arguments; must not be empty.
        scope: the shell state; a ``cd`` changes it in place.
        env: the checker, which records labels and checks nested scripts.

    Returns:
        What the command does that matters to its pipeline.
    """
    facts = Facts()
    from_xargs = False
    for _ in range(MAX_WRAPPERS + 1):
        if not argv:
            return facts
        head = argv[0]
        if not head.is_static:
            env.flag(UNPARSABLE)  # a command chosen at run time cannot be checked
            return facts
        _check_program_path(head, scope, env)
        name = command_name(head)
        args = argv[1:]
        wrapper = WRAPPERS.get(name)
        if wrapper is None:
            break
        rest, scope = wrapper(args, scope, env)
        from_xargs |= name == "xargs"
        if not rest:
            return facts
        argv = rest
    else:
        env.flag(UNPARSABLE)  # "sudo nice sudo nice …": not worth looking through
        return facts
    call = Call(name, args, scope, env, facts, from_xargs)
    special = _SPECIAL.get(name)
    rule = rule_for(name)
    interpreter = interpreter_for(name)
    if special is not None:
        special(call)
    elif rule is not None:
        rule(call)
    elif interpreter is not None:
        _interpreter(call, interpreter)
    for index, word in enumerate(args):
        if index not in call.handled:
            check_lenient(call, word)
    facts.deletes = name in DELETERS
    facts.xargs_delete = from_xargs and facts.deletes
    return facts


def _check_program_path(head: Word, scope: Scope, env: CommandEnv) -> None:
    """``../other/run.sh`` or ``~/bin/tool`` runs a program from outside the workspace."""
    if "/" not in head.value:
        return
    target = resolve(head, scope.cwd, strict=True)
    check_written(env, target)
    if target is None or (
        not env.workspace.within(target.path)
        and not any(is_under(target.path, base) for base in SYSTEM_BIN_DIRS)
    ):
        env.flag(OUTSIDE)


# -- shells, interpreters and friends --------------------------------------------------------


def _interpreter(call: Call, spec: Interpreter) -> None:
    source = program_source(spec, call.args)
    if source.has_inline:
        if source.inline is None:
            call.env.flag(INLINE)
            return
        call.handled.update(i for i, word in enumerate(call.args) if word is source.inline)
        if spec.is_shell:
            inline_shell(source.inline, call.scope, call.env)
            return
        call.env.flag(INLINE)
        if call.env.downloads(source.inline):
            call.env.flag(deny_label("curl_pipe_sh"))
    elif source.stdin:
        call.facts.stdin_program = True
    elif source.script is not None:
        if call.env.downloads(source.script):
            call.env.flag(deny_label("curl_pipe_sh"))  # bash <(curl …)
        else:
            check_written(call.env, call.target(source.script))  # curl -o x.sh; sh x.sh


def _eval(call: Call) -> None:
    call.env.flag(INLINE)
    call.handled.update(range(len(call.args)))
    if any(call.env.downloads(word) for word in call.args):
        call.env.flag(deny_label("curl_pipe_sh"))
    if call.args and all(word.is_static for word in call.args):
        call.env.nested_script(" ".join(word.value for word in call.args), call.scope.cwd)


def _source(call: Call) -> None:
    if not call.args:
        return
    script = call.args[0]
    if not script.is_static and not call.env.downloads(script):
        call.env.flag(UNPARSABLE)  # which file is sourced is only known at run time
        call.handled.add(0)
    elif call.env.downloads(script):
        call.env.flag(deny_label("curl_pipe_sh"))
        call.handled.add(0)
    elif script.value in _STDIN_SCRIPTS:
        call.facts.stdin_program = True
        call.handled.add(0)
    else:
        check_written(call.env, call.target(script))


_AWK_LONG = frozenset(
    {"--file", "--assign", "--field-separator", "--source", "--include", "--load", "--exec"}
)


def _awk(call: Call) -> None:
    parsed = split_args(
        call.args,
        short_values="fvFeilE",
        long_values=_AWK_LONG,
    )
    if parsed.has("-l", "--load"):
        call.env.flag(INLINE)  # a compiled extension
    for _, program in parsed.values("-f", "--file", "-E", "--exec"):
        if program.value in _STDIN_SCRIPTS:
            call.facts.stdin_program = True
    programs = parsed.values("-e", "--source")
    if not programs and not parsed.has("-f", "--file", "-E", "--exec") and parsed.positionals:
        programs = [parsed.positionals[0]]
    for index, word in programs:
        call.handled.add(index)
        if not word.is_static or _awk_runs_or_writes(word.value):
            call.env.flag(INLINE)  # awk that runs commands or writes files


def _awk_runs_or_writes(program: str) -> bool:
    """``system()``, a pipe to or from a command, a ``print`` redirected to a file, a file read
    with ``getline <``: looked for outside string and regex literals."""
    text = _AWK_STRING.sub('""', program)
    text = _AWK_REGEX.sub(r"\1\2//", text)
    return _AWK_EXEC.search(text) is not None


def _cd(call: Call) -> None:
    parsed = split_args(call.args)
    call.handled.update(range(len(call.args)))
    operands = [word for _, word in parsed.positionals]
    if call.name == "popd":
        call.scope.cwd = None
        return
    if not operands:
        if call.name == "pushd":
            call.scope.cwd = None
            return
        call.scope.cwd = call.workspace.home
        if not call.workspace.within(call.workspace.home):
            call.env.flag(OUTSIDE)
        return
    if operands[0].value == "-" or operands[0].value.startswith("+"):
        call.scope.cwd = None
        call.env.flag(OUTSIDE)
        return
    enter_directory(call.scope, operands[0], call.env)


def _deno(call: Call) -> None:
    if call.args and call.args[0].value == "eval":
        call.env.flag(INLINE)
        call.handled.update(range(len(call.args)))
    elif call.args and call.args[0].value == "run" and any(w.value == "-" for w in call.args):
        call.facts.stdin_program = True


_POWERSHELL_INLINE = frozenset(
    {"-c", "-command", "-e", "-ec", "-en", "-enc", "-encoded", "-encodedcommand"}
)


def _powershell(call: Call) -> None:
    skip = False
    script = False
    for index, word in enumerate(call.args):
        value = word.value.lower()
        if value in _POWERSHELL_INLINE:
            call.env.flag(INLINE)
            call.handled.update((index, index + 1))
            return
        if skip:
            skip = False
        elif value in _POWERSHELL_VALUES:
            skip = True
        elif not value.startswith("-"):
            script = True
    if not script:
        call.facts.stdin_program = True  # no script and no command: it reads stdin


_POWERSHELL_VALUES = frozenset(
    {"-executionpolicy", "-ep", "-ex", "-workingdirectory", "-wd", "-outputformat", "-of", "-o",
     "-inputformat", "-if", "-inp", "-configurationname", "-config", "-windowstyle", "-w",
     "-version", "-v", "-settingsfile", "-settings", "-custompipename"}
)  # fmt: skip


_NAME_BUILTINS = (
    "let", "printf", "read", "mapfile", "readarray", "unset", "getopts", "wait", "test", "[",
    "enable", "hash",
)  # fmt: skip

_SPECIAL: dict[str, Callable[[Call], None]] = {
    "eval": _eval,
    "source": _source,
    ".": _source,
    **dict.fromkeys(("awk", "gawk", "mawk", "nawk"), _awk),
    **dict.fromkeys(("cd", "pushd", "popd"), _cd),
    "deno": _deno,
    **dict.fromkeys(_NAME_BUILTINS, check_name_builtin),
    "alias": check_alias,
    "trap": check_trap,
    **dict.fromkeys(("export", "declare", "typeset", "local", "readonly"), check_declare),
    **dict.fromkeys(("pwsh", "powershell", "powershell.exe", "pwsh.exe"), _powershell),
}
