"""One simple command: look through its wrappers, then apply the rule for what actually runs.

``sudo -E nice -n 5 timeout 60 env FOO=1 rm -rf /`` runs ``rm``; each wrapper on the way may add
a label (``privileged`` for sudo, ``background_process`` for nohup) or change the directory
(``env -C``). Then the command's rule runs (``rules.py``), or its interpreter table
(``interpreters.py``), and finally every argument no rule judged gets the generic path check.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .context import (
    BACKGROUND,
    INLINE,
    OUTSIDE,
    PRIVILEGED,
    UNPARSABLE,
    Call,
    CommandEnv,
    Facts,
    Scope,
    check_lenient,
    enter_directory,
    write_label,
)
from .hooks import check_alias, check_assignment, check_declare, check_trap
from .interpreters import Interpreter, interpreter_for, program_source
from .labels import deny_label
from .paths import Target, is_under, resolve
from .rules import DELETERS, rule_for
from .shell_lexer import Word
from .words import Args, command_name, split_args

__all__ = ["MAX_WRAPPERS", "SYSTEM_BIN_DIRS", "check_argv"]

MAX_WRAPPERS = 16
"""Most wrappers looked through in one command (``sudo env nice timeout …``)."""

SYSTEM_BIN_DIRS = ("/usr", "/bin", "/sbin", "/opt", "/nix", "/snap")
"""Running a program from here is running an installed tool, not touching a foreign path."""

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_AWK_EXEC = re.compile(r'system\s*\(|\|\s*getline|\|&|\|\s*"|>\s*"')
_STDIN_SCRIPTS = frozenset({"-", "/dev/stdin", "/dev/fd/0"})

Unwrapped = tuple[list[Word] | None, Scope]
Wrapper = Callable[[list[Word], Scope, CommandEnv], Unwrapped]


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
        head = argv[0]
        if not head.is_static:
            env.flag(UNPARSABLE)  # a command chosen at run time cannot be checked
            return facts
        _check_program_path(head, scope, env)
        name = command_name(head)
        args = argv[1:]
        wrapper = _WRAPPERS.get(name)
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
    _check_downloaded(target, env)
    if target is None or (
        not env.workspace.within(target.path)
        and not any(is_under(target.path, base) for base in SYSTEM_BIN_DIRS)
    ):
        env.flag(OUTSIDE)


# -- wrappers ------------------------------------------------------------------------------


def _check_downloaded(target: Target | None, env: CommandEnv) -> None:
    """Running a file this line downloaded is running code from the network."""
    if target is not None and not target.subtree and env.downloaded(target.path):
        env.flag(deny_label("curl_pipe_sh"))


def _rest(args: list[Word], parsed: Args) -> list[Word] | None:
    return args[parsed.positionals[0][0] :] if parsed.positionals else None


def _plain(short: str = "", long: frozenset[str] = frozenset(), label: str = "") -> Wrapper:
    """A wrapper that runs its first operand: nice, stdbuf, setsid, nohup, …"""

    def unwrap(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
        if label:
            env.flag(label)
        parsed = split_args(args, short_values=short, long_values=long, first_positional_ends=True)
        return _rest(args, parsed), scope

    return unwrap


def _sudo(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    env.flag(PRIVILEGED)
    parsed = split_args(
        args, short_values="CDghpRrtTUu", long_values=_SUDO_LONG, first_positional_ends=True
    )
    if parsed.has("-b", "--background"):
        env.flag(BACKGROUND)
    for _, directory in parsed.values("-D", "--chdir"):
        scope = scope.copy()
        enter_directory(scope, directory, env)
    if parsed.has("-e", "--edit"):
        _edit(args[parsed.positionals[0][0] :] if parsed.positionals else [], scope, env)
        return None, scope
    rest = _rest(args, parsed)
    # sudo(8): "Environment variables to be set for the command may also be passed on the
    # command line in the form of VAR=value" — ``sudo X=1 rm -rf /`` runs rm.
    while rest and _ASSIGNMENT.match(rest[0].value):
        check_assignment(rest[0], scope, env)
        rest = rest[1:]
    return rest, scope


_SUDO_LONG = frozenset(
    {"--close-from", "--chdir", "--group", "--host", "--prompt", "--chroot", "--role",
     "--command-timeout", "--type", "--other-user", "--user"}
)  # fmt: skip


def _sudoedit(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    env.flag(PRIVILEGED)
    parsed = split_args(args, short_values="CDghpRrtTUu", long_values=_SUDO_LONG)
    _edit([word for _, word in parsed.positionals], scope, env)
    return None, scope


def _edit(files: list[Word], scope: Scope, env: CommandEnv) -> None:
    for word in files:
        label = write_label(resolve(word, scope.cwd, strict=True), env.workspace)
        if label is not None:
            env.flag(label)


def _su(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    env.flag(PRIVILEGED)
    parsed = split_args(
        args, short_values="cgGsw", long_values=frozenset({"--command", "--shell", "--group"})
    )
    for _, command in parsed.values("-c", "--command"):
        _inline_shell(command, scope, env)
    return None, scope


def _env(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    parsed = split_args(
        args,
        short_values="uCSP",
        long_values=frozenset({"--unset", "--chdir", "--split-string"}),
        first_positional_ends=True,
    )
    for _, directory in parsed.values("-C", "--chdir"):
        scope = scope.copy()
        enter_directory(scope, directory, env)
    for _, line in parsed.values("-S", "--split-string"):
        if line.is_static:
            env.nested_script(line.value, scope.cwd)
        else:
            env.flag(UNPARSABLE)
        return None, scope
    rest = _rest(args, parsed)
    while rest and _ASSIGNMENT.match(rest[0].value):
        check_assignment(rest[0], scope, env)
        rest = rest[1:]
    return rest, scope


def _command_builtin(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    parsed = split_args(args, first_positional_ends=True)
    if parsed.has("-v", "-V"):
        return None, scope  # only looks the name up
    return _rest(args, parsed), scope


def _timeout(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    parsed = split_args(
        args,
        short_values="sk",
        long_values=frozenset({"--signal", "--kill-after"}),
        first_positional_ends=True,
    )
    rest = _rest(args, parsed)
    return (rest[1:] if rest else None), scope  # the first operand is the duration


def _time(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    parsed = split_args(
        args,
        short_values="fo",
        long_values=frozenset({"--format", "--output"}),
        first_positional_ends=True,
    )
    _edit([word for _, word in parsed.values("-o", "--output")], scope, env)
    return _rest(args, parsed), scope


def _xargs(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    parsed = split_args(
        args,
        short_values="adEILnPs",
        long_values=frozenset(
            {
                "--arg-file",
                "--delimiter",
                "--eof",
                "--replace",
                "--max-lines",
                "--max-args",
                "--max-procs",
                "--max-chars",
                "--process-slot-var",
            }
        ),
        first_positional_ends=True,
    )
    return (_rest(args, parsed) or [Word("echo", ())]), scope


def _watch(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    parsed = split_args(
        args, short_values="n", long_values=frozenset({"--interval"}), first_positional_ends=True
    )
    rest = _rest(args, parsed)
    if rest is None or parsed.has("-x", "--exec") or not all(w.is_static for w in rest):
        return rest, scope
    env.nested_script(" ".join(word.value for word in rest), scope.cwd)  # watch runs sh -c
    return None, scope


def _flock(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    """``flock [opts] FILE CMD…`` or ``flock [opts] FILE -c CMD`` (the lock file is not judged)."""
    parsed = split_args(
        args,
        short_values="wE",
        long_values=frozenset({"--timeout", "--conflict-exit-code"}),
        first_positional_ends=True,
    )
    rest = _rest(args, parsed)
    after = rest[1:] if rest else []
    if after and after[0].value in ("-c", "--command"):
        if len(after) > 1:
            _inline_shell(after[1], scope, env)
        return None, scope
    return after, scope


def _screen(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    parsed = split_args(args, short_values="SscpTtehX", first_positional_ends=True)
    if parsed.has("-d", "-D") and parsed.has("-m"):
        env.flag(BACKGROUND)
    return _rest(args, parsed), scope


def _tmux(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    parsed = split_args(args, short_values="LSfcT", first_positional_ends=True)
    rest = _rest(args, parsed)
    if not rest or rest[0].value not in ("new", "new-session", "new-window", "neww"):
        return None, scope
    inner = split_args(rest[1:], short_values="cnstxyeF", first_positional_ends=True)
    if inner.has("-d"):
        env.flag(BACKGROUND)
    command = _rest(rest[1:], inner)
    if command and len(command) == 1 and command[0].is_static:
        env.nested_script(command[0].value, scope.cwd)
        return None, scope
    return command, scope


def _runner(subcommands: frozenset[str]) -> Wrapper:
    """``uv run``, ``poetry run``, ``bundle exec``, …: the project's environment, then a command."""

    def unwrap(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
        if not args or args[0].value not in subcommands:
            return None, scope
        parsed = split_args(
            args[1:], short_values="pn", long_values=_RUNNER_LONG, first_positional_ends=True
        )
        return _rest(args[1:], parsed), scope

    return unwrap


_RUNNER_LONG = frozenset(
    {"--with", "--python", "--directory", "--project", "--package", "--env-file", "--extra",
     "--group", "--index", "--index-url", "--extra-index-url", "--with-requirements",
     "--with-editable", "--name", "--prefix"}
)  # fmt: skip


def _disown(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    env.flag(BACKGROUND)
    return None, scope


_WRAPPERS: dict[str, Wrapper] = {
    "sudo": _sudo,
    "sudoedit": _sudoedit,
    "doas": _plain("uC", label=PRIVILEGED),
    "pkexec": _plain(long=frozenset({"--user"}), label=PRIVILEGED),
    "run0": _plain("uDg", frozenset({"--user", "--chdir", "--group"}), label=PRIVILEGED),
    "su": _su,
    "nohup": _plain(label=BACKGROUND),
    "coproc": _plain(label=BACKGROUND),
    "setsid": _plain(label=BACKGROUND),
    "disown": _disown,
    "env": _env,
    "command": _command_builtin,
    "builtin": _plain(),
    "exec": _plain("a"),
    "nice": _plain("n", frozenset({"--adjustment"})),
    "ionice": _plain("cnpPu", frozenset({"--class", "--classdata", "--pid", "--pgid", "--uid"})),
    "stdbuf": _plain("ioe", frozenset({"--input", "--output", "--error"})),
    "time": _time,
    "timeout": _timeout,
    "xargs": _xargs,
    "watch": _watch,
    "flock": _flock,
    "screen": _screen,
    "tmux": _tmux,
    "busybox": _plain(),
    "uv": _runner(frozenset({"run"})),
    "poetry": _runner(frozenset({"run"})),
    "pipenv": _runner(frozenset({"run"})),
    "pdm": _runner(frozenset({"run"})),
    "conda": _runner(frozenset({"run"})),
    "bundle": _runner(frozenset({"exec"})),
}


# -- shells, interpreters and friends --------------------------------------------------------


def _inline_shell(code: Word, scope: Scope, env: CommandEnv) -> None:
    """``sh -c CODE`` and the like: inline code, checked like a line of its own."""
    env.flag(INLINE)
    if env.downloads(code):
        env.flag(deny_label("curl_pipe_sh"))
    if code.is_static:
        env.nested_script(code.value, scope.cwd)


def _interpreter(call: Call, spec: Interpreter) -> None:
    source = program_source(spec, call.args)
    if source.has_inline:
        if source.inline is None:
            call.env.flag(INLINE)
            return
        call.handled.update(i for i, word in enumerate(call.args) if word is source.inline)
        if spec.is_shell:
            _inline_shell(source.inline, call.scope, call.env)
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
            _check_downloaded(call.target(source.script), call.env)  # curl -o x.sh …; sh x.sh


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
    if call.env.downloads(script):
        call.env.flag(deny_label("curl_pipe_sh"))
        call.handled.add(0)
    elif script.value in _STDIN_SCRIPTS:
        call.facts.stdin_program = True
        call.handled.add(0)
    else:
        _check_downloaded(call.target(script), call.env)


def _awk(call: Call) -> None:
    parsed = split_args(
        call.args,
        short_values="fvFe",
        long_values=frozenset({"--file", "--assign", "--field-separator", "--source"}),
    )
    programs = parsed.values("-e", "--source")
    if not programs and not parsed.has("-f", "--file") and parsed.positionals:
        programs = [parsed.positionals[0]]
    for index, word in programs:
        call.handled.add(index)
        if _AWK_EXEC.search(word.value) or not word.is_static:
            call.env.flag(INLINE)  # awk that runs commands or writes files


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
    for index, word in enumerate(call.args):
        if word.value.lower() in _POWERSHELL_INLINE:
            call.env.flag(INLINE)
            call.handled.update((index, index + 1))
            return


_SPECIAL: dict[str, Callable[[Call], None]] = {
    "eval": _eval,
    "source": _source,
    ".": _source,
    **dict.fromkeys(("awk", "gawk", "mawk", "nawk"), _awk),
    **dict.fromkeys(("cd", "pushd", "popd"), _cd),
    "deno": _deno,
    "alias": check_alias,
    "trap": check_trap,
    **dict.fromkeys(("export", "declare", "typeset", "local", "readonly"), check_declare),
    **dict.fromkeys(("pwsh", "powershell", "powershell.exe", "pwsh.exe"), _powershell),
}
