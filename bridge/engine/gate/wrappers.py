"""Wrappers: commands that run another command given as their operands.

``sudo -E nice -n 5 timeout 60 env FOO=1 rm -rf /`` runs ``rm``. Each wrapper here parses its own
options (so an option's value is never taken for the command), may add a label on the way
(``privileged`` for sudo, ``background_process`` for nohup), may change the directory
(``env -C``), and returns the words of the command it runs — or None when it runs none, or
judged what it runs itself (a command string checked as a line of its own). A wrapper whose
options cannot be read is ``unparsable_command``: its command is not known.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .context import (
    BACKGROUND,
    INLINE,
    PRIVILEGED,
    UNPARSABLE,
    CommandEnv,
    Scope,
    enter_directory,
    write_label,
)
from .hooks import check_assignment
from .labels import deny_label
from .paths import Target, resolve
from .shell_lexer import Word
from .words import Args, split_args

__all__ = ["WRAPPERS", "Unwrapped", "Wrapper", "check_downloaded", "inline_shell"]

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")

Unwrapped = tuple[list[Word] | None, Scope]
Wrapper = Callable[[list[Word], Scope, CommandEnv], Unwrapped]


def inline_shell(code: Word, scope: Scope, env: CommandEnv) -> None:
    """``sh -c CODE`` and the like: inline code, checked like a line of its own."""
    env.flag(INLINE)
    if env.downloads(code):
        env.flag(deny_label("curl_pipe_sh"))
    if code.is_static:
        env.nested_script(code.value, scope.cwd)


def check_downloaded(target: Target | None, env: CommandEnv) -> None:
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
        inline_shell(command, scope, env)
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
            inline_shell(after[1], scope, env)
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


WRAPPERS: dict[str, Wrapper] = {
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
