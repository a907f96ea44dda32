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

from bridge.gate.commands.hooks import check_assignment
from bridge.gate.commands.long_options import LONG_OPTIONS
from bridge.gate.context import (
    BACKGROUND,
    INLINE,
    PRIVILEGED,
    UNPARSABLE,
    CommandEnv,
    Scope,
    enter_directory,
    write_label,
)
from bridge.gate.labels import deny_label
from bridge.gate.paths import resolve
from bridge.gate.shell.lexer import Part, ShellSyntaxError, Word, lex
from bridge.gate.shell.words import Args, drop_prefix, split_args

__all__ = ["WRAPPERS", "Unwrapped", "Wrapper", "command_string", "inline_shell"]

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


def command_string(code: Word, scope: Scope, env: CommandEnv) -> None:
    """A command an option or a script runs (``rsync -e``, ``git rebase -x``, ``tar
    --to-command``): judged like a line of its own when it is a literal, code when it is not."""
    if env.downloads(code):
        env.flag(deny_label("curl_pipe_sh"))
    if not code.is_static:
        env.flag(INLINE)
    elif code.value.strip():
        env.nested_script(code.value, scope.cwd)


def _rest(args: list[Word], parsed: Args) -> list[Word] | None:
    return args[parsed.positionals[0][0] :] if parsed.positionals else None


def _split(
    name: str,
    args: list[Word],
    env: CommandEnv,
    short: str = "",
    long: frozenset[str] = frozenset(),
) -> Args | None:
    """A wrapper's options, its long ones resolved against its table (``timeout --sig KILL``
    is ``--signal``); None (and ``unparsable_command``) when one is unknown, or ambiguous
    between options of which one takes a value: then which word is the command is not known."""
    table = LONG_OPTIONS.get(name)
    parsed = split_args(
        args, short_values=short, long_values=long, first_positional_ends=True, known_long=table
    )
    if table is None:
        return parsed
    readings: dict[int, list[str]] = {}
    for option in parsed.options:
        readings.setdefault(option.index, []).append(option.name)
    ambiguous = any(len(names) > 1 and set(names) & long for names in readings.values())
    if parsed.unknown or ambiguous:
        env.flag(UNPARSABLE)
        return None
    return parsed


def _plain(
    short: str = "", long: frozenset[str] = frozenset(), label: str = "", name: str = ""
) -> Wrapper:
    """A wrapper that runs its first operand: nice, stdbuf, setsid, nohup, …"""

    def unwrap(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
        if label:
            env.flag(label)
        parsed = _split(name, args, env, short, long)
        return (_rest(args, parsed) if parsed is not None else None), scope

    return unwrap


def _sudo(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    env.flag(PRIVILEGED)
    parsed = _split("sudo", args, env, "CDghpRrtTUu", _SUDO_LONG)
    if parsed is None:
        return None, scope
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
    parsed = _split("env", args, env, "uCSP", frozenset({"--unset", "--chdir", "--split-string"}))
    if parsed is None:
        return None, scope
    for _, directory in parsed.values("-C", "--chdir"):
        scope = scope.copy()
        enter_directory(scope, directory, env)
    rest = _rest(args, parsed) or []
    if rest and rest[0].value == "-":
        rest = rest[1:]  # "env -" is "env -i"
    for _, line in parsed.values("-S", "--split-string"):
        split = _split_string(line, env)
        if split is None:
            return None, scope
        rest = split + rest
    while rest and "=" in rest[0].value.lstrip("="):
        check_assignment(rest[0], scope, env)  # env: any NAME=VALUE before the command
        rest = rest[1:]
    return rest or None, scope


def _split_string(line: Word, env: CommandEnv) -> list[Word] | None:
    """``env -S 'bash -x'``: the words it splits into; None (and a label) when unknown."""
    if not line.is_static:
        env.flag(UNPARSABLE)
        return None
    try:
        tokens = lex(line.value, env.workspace.home).tokens
    except ShellSyntaxError:
        env.flag(UNPARSABLE)
        return None
    words = [token.word for token in tokens if token.word is not None]
    if len(words) != len(tokens):
        env.flag(UNPARSABLE)  # an operator: env -S does not run a shell line
        return None
    return words


def _command_builtin(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    parsed = split_args(args, first_positional_ends=True)
    if parsed.has("-v", "-V"):
        return None, scope  # only looks the name up
    return _rest(args, parsed), scope


def _timeout(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    parsed = _split("timeout", args, env, "sk", frozenset({"--signal", "--kill-after"}))
    rest = _rest(args, parsed) if parsed is not None else None
    return (rest[1:] if rest else None), scope  # the first operand is the duration


def _time(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    parsed = _split("time", args, env, "fo", frozenset({"--format", "--output"}))
    if parsed is None:
        return None, scope
    _edit([word for _, word in parsed.values("-o", "--output")], scope, env)
    return _rest(args, parsed), scope


def _xargs(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    parsed = _split("xargs", args, env, "adEILnPs", _XARGS_LONG)
    if parsed is None:
        return None, scope
    rest = _rest(args, parsed) or [Word("echo", (Part("lit", "echo"),))]
    replace = [word.value for _, word in parsed.values("-I", "--replace")]
    replace += ["{}"] if parsed.has("-i") else []
    if any(marker and marker in rest[0].value for marker in replace) or not rest[0].is_static:
        env.flag(UNPARSABLE)  # the program itself comes from the input
        return None, scope
    if replace:
        # Each input item takes the place of the marker: a value only known at run time.
        markers = [marker for marker in replace if marker]
        return [_INPUT if any(m in word.value for m in markers) else word for word in rest], scope
    return [*rest, _INPUT], scope  # the input items are appended as arguments


_INPUT = Word("{}", (Part("dyn", ""),))
"""An argument xargs reads from its input."""

_XARGS_LONG = frozenset(
    {"--arg-file", "--delimiter", "--eof", "--replace", "--max-lines", "--max-args",
     "--max-procs", "--max-chars", "--process-slot-var"}
)  # fmt: skip


def _watch(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    parsed = _split("watch", args, env, "nq", frozenset({"--interval", "--equexit", "--shotsdir"}))
    if parsed is None:
        return None, scope
    rest = _rest(args, parsed)
    if rest is None or parsed.has("-x", "--exec") or not all(w.is_static for w in rest):
        return rest, scope
    env.nested_script(" ".join(word.value for word in rest), scope.cwd)  # watch runs sh -c
    return None, scope


def _flock(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    """``flock [opts] FILE CMD…`` or ``flock [opts] FILE -c CMD`` (the lock file is not judged)."""
    parsed = _split(
        "flock", args, env, "wE", frozenset({"--timeout", "--wait", "--conflict-exit-code"})
    )
    if parsed is None:
        return None, scope
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
    if parsed.has("-X"):
        env.flag(INLINE)  # a command sent to a running session ("stuff" types keys)
    return _rest(args, parsed), scope


_TMUX_CODE = frozenset(
    {"send-keys", "send", "run-shell", "run", "split-window", "splitw", "respawn-pane",
     "respawnp", "respawn-window", "respawnw", "display-popup", "popup", "if-shell", "if",
     "pipe-pane", "pipep", "source-file", "source", "set-hook", "bind-key", "bind",
     "command-prompt", "confirm-before", "confirm", "display-menu", "menu"}
)  # fmt: skip


def _tmux(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    parsed = split_args(args, short_values="LSfcT", first_positional_ends=True)
    rest = _rest(args, parsed)
    if rest and rest[0].value in _TMUX_CODE:
        env.flag(INLINE)  # keys typed into a session, a hook, a shell command: unseen code
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


def _skip_operands(count: int, short: str = "", long: frozenset[str] = frozenset()) -> Wrapper:
    """A wrapper whose first ``count`` operands are its own (taskset's mask, faketime's time)."""

    def unwrap(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
        parsed = split_args(args, short_values=short, long_values=long, first_positional_ends=True)
        rest = _rest(args, parsed)
        return (rest[count:] if rest else None), scope

    return unwrap


def _taskset(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    """``taskset [-a] [-c] MASK CMD…``; ``taskset -p [MASK] PID`` runs nothing."""
    parsed = _split("taskset", args, env)
    if parsed is None or parsed.has("-p", "--pid"):
        return None, scope
    rest = _rest(args, parsed)
    return (rest[1:] if rest else None), scope


def _chrt(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    """``chrt [policy] [PRIORITY] CMD…``; ``chrt -p …`` changes a running process."""
    parsed = _split(
        "chrt",
        args,
        env,
        "TPD",
        frozenset({"--sched-runtime", "--sched-period", "--sched-deadline"}),
    )
    if parsed is None or parsed.has("-p", "--pid"):
        return None, scope
    rest = _rest(args, parsed)
    if rest and rest[0].value.isdigit():
        rest = rest[1:]
    return rest or None, scope


def _tracer(short: str, long: frozenset[str]) -> Wrapper:
    """strace, ltrace: ``-o |cmd`` pipes the trace into a command; ``-p PID`` alone runs none."""

    def unwrap(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
        parsed = split_args(args, short_values=short, long_values=long, first_positional_ends=True)
        for _, output in parsed.values("-o", "--output"):
            if output.value.startswith(("|", "!")):
                command_string(drop_prefix(output, 1), scope, env)
            else:
                _edit([output], scope, env)
        return _rest(args, parsed), scope

    return unwrap


_SCRIPT_LONG = frozenset(
    {"--command", "--echo", "--log-in", "--log-out", "--log-io", "--log-timing",
     "--logging-format", "--output-limit"}
)  # fmt: skip


def _script(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    """``script [-q] [-c CMD] [FILE]``: CMD runs through the shell; FILE is written."""
    parsed = split_args(
        args,
        short_values="cEIOBTm",
        long_values=_SCRIPT_LONG,
    )
    _edit([word for _, word in parsed.positionals], scope, env)
    for _, command in parsed.values("-c", "--command"):
        command_string(command, scope, env)
    return None, scope


def _shell_string(label: str, short: str, long: frozenset[str]) -> Wrapper:
    """``sg GROUP -c CMD``, ``runuser -u U -- CMD`` or ``-c CMD``: a command or a shell line."""

    def unwrap(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
        env.flag(label)
        parsed = split_args(args, short_values=short + "c", long_values=long | {"--command"})
        for _, command in parsed.values("-c", "--command"):
            inline_shell(command, scope, env)
            return None, scope
        operands = [word for _, word in parsed.positionals]
        if parsed.has("-u", "--user") or "--" in (word.value for word in args):
            return operands or None, scope
        return operands[1:] or None, scope  # sg GROUP CMD…

    return unwrap


def _capsh(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    """``capsh [--opts] -- ARGS``: ARGS go to bash (``-- -c CMD``)."""
    env.flag(PRIVILEGED)
    for index, word in enumerate(args):
        if word.value == "--":
            return [Word("bash", (Part("lit", "bash"),)), *args[index + 1 :]], scope
        if word.value.startswith(("--shell=", "==")):
            env.flag(UNPARSABLE)
            return None, scope
    return None, scope


def _chroot(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    env.flag(PRIVILEGED)
    parsed = split_args(
        args, long_values=frozenset({"--userspec", "--groups"}), first_positional_ends=True
    )
    rest = _rest(args, parsed)
    return (rest[1:] if rest else None), scope


def _entr(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    """``entr [-acdnprz] UTILITY…``; with ``-s`` the utility is a shell line."""
    parsed = split_args(args, first_positional_ends=True)
    rest = _rest(args, parsed)
    if parsed.has("-s") and rest:
        command_string(rest[0], scope, env)
        return None, scope
    return rest, scope


def _parallel(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    """GNU parallel: the command is a shell template filled from ``:::`` or stdin."""
    parsed = split_args(args, short_values="aCdEIjLNnPSs", long_values=_PARALLEL_LONG,
                        first_positional_ends=True)  # fmt: skip
    rest = _rest(args, parsed) or []
    end = next((i for i, word in enumerate(rest) if word.value.startswith(":::")), len(rest))
    template = rest[:end]
    if not template or not all(word.is_static for word in template):
        env.flag(INLINE)  # the commands come from the input
        return None, scope
    line = " ".join(word.value for word in template)
    if "{" in line:
        env.flag(INLINE)  # filled in from the input: not known here
    env.nested_script(line, scope.cwd)
    return None, scope


_PARALLEL_LONG = frozenset(
    {"--arg-file", "--colsep", "--delimiter", "--eof", "--jobs", "--max-lines", "--max-args",
     "--sshlogin", "--max-chars", "--tmpdir", "--workdir", "--results", "--joblog", "--env",
     "--basefile", "--return", "--transfer-file", "--timeout", "--tag-string", "--retries"}
)  # fmt: skip


def _systemd_run(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    """A transient unit: in the background unless waited for; a timer runs it later."""
    parsed = split_args(args, short_values="pEuHMsG", long_values=_SYSTEMD_RUN_LONG,
                        first_positional_ends=True)  # fmt: skip
    if any(option.name.startswith("--on-") for option in parsed.options):
        env.flag(INLINE)  # a timer: the command runs later
    if not parsed.has("--wait", "-P", "--pipe", "-t", "--pty", "--scope", "-S", "--shell"):
        env.flag(BACKGROUND)
    if not parsed.has("--user"):
        env.flag(PRIVILEGED)
    return _rest(args, parsed), scope


_SYSTEMD_RUN_LONG = frozenset(
    {"--unit", "--property", "--description", "--slice", "--setenv", "--host", "--machine",
     "--uid", "--gid", "--nice", "--working-directory", "--service-type", "--path-property",
     "--socket-property", "--timer-property", "--on-active", "--on-boot", "--on-startup",
     "--on-unit-active", "--on-unit-inactive", "--on-calendar", "--on-clock-change",
     "--on-timezone-change"}
)  # fmt: skip


def _later(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    """at, batch: commands from stdin or ``-f FILE``, run later; ``-l``/``-r``/``-c`` list."""
    parsed = split_args(args, short_values="qfmMtbuo")
    if not parsed.has("-l", "-r", "-d", "-c"):
        env.flag(INLINE)
    return None, scope


def _crontab(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    """Installing or editing a crontab is code run later; listing it is not."""
    parsed = split_args(args, short_values="uT")
    if not parsed.has("-l", "-T"):
        env.flag(INLINE)
    return None, scope


def _unparsed(args: list[Word], scope: Scope, env: CommandEnv) -> Unwrapped:
    """A wrapper the gate cannot read the options of: what it runs is not known."""
    env.flag(UNPARSABLE)
    return None, scope


_IONICE_LONG = frozenset({"--class", "--classdata", "--pid", "--pgid", "--uid"})
_STRACE_LONG = frozenset(
    {"--trace", "--output", "--attach", "--string-limit", "--user", "--env", "--signal",
     "--status", "--quiet", "--decode-fds", "--trace-path", "--columns", "--abbrev",
     "--verbose", "--raw", "--read", "--write", "--inject", "--fault", "--summary-columns",
     "--summary-sort-by", "--interruptible", "--detach-on", "--kill-on"}
)  # fmt: skip
_SETPRIV_LONG = frozenset(
    {"--reuid", "--regid", "--ruid", "--euid", "--rgid", "--egid", "--groups", "--inh-caps",
     "--ambient-caps", "--bounding-set", "--securebits", "--pdeathsig", "--selinux-label",
     "--apparmor-profile", "--landlock-access", "--landlock-rule", "--seccomp-filter"}
)  # fmt: skip
_NUMACTL_LONG = frozenset(
    {"--interleave", "--preferred", "--membind", "--physcpubind", "--cpunodebind",
     "--weighted-interleave", "--preferred-many"}
)  # fmt: skip


WRAPPERS: dict[str, Wrapper] = {
    "sudo": _sudo,
    "sudoedit": _sudoedit,
    "doas": _plain("uC", label=PRIVILEGED),
    "pkexec": _plain(long=frozenset({"--user"}), label=PRIVILEGED),
    "run0": _plain("uDg", frozenset({"--user", "--chdir", "--group"}), label=PRIVILEGED),
    "su": _su,
    "nohup": _plain(label=BACKGROUND, name="nohup"),
    "coproc": _plain(label=BACKGROUND),
    "setsid": _plain(label=BACKGROUND, name="setsid"),
    "disown": _disown,
    "env": _env,
    "command": _command_builtin,
    "builtin": _plain(),
    "exec": _plain("a"),
    "nice": _plain("n", frozenset({"--adjustment"}), name="nice"),
    "ionice": _plain("cnpPu", _IONICE_LONG, name="ionice"),
    "stdbuf": _plain("ioe", frozenset({"--input", "--output", "--error"}), name="stdbuf"),
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
    "taskset": _taskset,
    "chrt": _chrt,
    "strace": _tracer("eopsuEabIOPSUX", _STRACE_LONG),
    "ltrace": _tracer("eopsuaADFlnwxL", frozenset({"--output", "--library"})),
    "script": _script,
    "sg": _shell_string(PRIVILEGED, "", frozenset()),
    "runuser": _shell_string(PRIVILEGED, "ugGlsw", frozenset({"--user", "--group", "--shell"})),
    "capsh": _capsh,
    "chroot": _chroot,
    "nsenter": _plain("tSGrw", frozenset({"--target", "--setuid", "--setgid"}), PRIVILEGED),
    "unshare": _plain("SGRwl", frozenset({"--setuid", "--setgid", "--root", "--wd"})),
    "setpriv": _plain("", _SETPRIV_LONG),
    "numactl": _plain("ipmCNwP", _NUMACTL_LONG),
    "cgexec": _plain("g"),
    "firejail": _plain(),
    "proot": _plain("rRbmwSqkv", frozenset({"--rootfs", "--bind", "--mount", "--cwd"})),
    "faketime": _skip_operands(1, "p"),
    "catchsegv": _plain(),
    "valgrind": _plain(),
    "caffeinate": _plain("tw"),
    "systemd-inhibit": _plain(),
    "xvfb-run": _plain("efnpsw", frozenset({"--error-file", "--server-num", "--server-args"})),
    "dbus-run-session": _plain(),
    "chronic": _plain(),
    "entr": _entr,
    "parallel": _parallel,
    "systemd-run": _systemd_run,
    "at": _later,
    "batch": _later,
    "crontab": _crontab,
    "fakeroot": _plain("il", frozenset({"--lib", "--faked"})),
    "torsocks": _plain("udpaP"),
    "proxychains": _plain("f"),
    "proxychains4": _plain("f"),
    "daemonize": _unparsed,
    "start-stop-daemon": _unparsed,
}
