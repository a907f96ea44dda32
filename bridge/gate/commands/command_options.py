"""Programs whose options or input run commands: tar, vim, emacs, make, ssh, gdb, D-Bus.

Each rule finds the option that carries a command and judges the command like a command line
when it is a literal (``tar --to-command='rm -rf ~'`` is ``rm_rf``), or flags it when it is
code the gate cannot read (an editor's ``-c`` command, a make ``--eval``, a debugger script):

* tar: ``--checkpoint-action=exec=``, ``--to-command``, ``--use-compress-program``/``-I``,
  ``--rsh-command``, ``--info-script``/``--new-volume-script``/``-F``; where an extraction writes
  (``-C``, ``-P``) and what ``--remove-files`` deletes;
* vi/vim/nvim/ex/view: ``-c``, ``--cmd``, ``+cmd`` (a line number is fine), ``-S``, ``-s``,
  ``-u``: ``:!`` runs a shell, so any editor command is ``inline_code``; Ex mode reads its
  commands from stdin;
* emacs, emacsclient: ``--eval``, ``-f``, ``-l``, ``--script``;
* make: a makefile read from stdin (``-f -``), ``--eval``, ``SHELL=`` with more than a program;
* ssh, scp, sftp: ``-o ProxyCommand``/``LocalCommand``/… run locally; ``-F`` a config that may;
  a remote command runs elsewhere (``inline_code``: the gate cannot judge the other machine);
* gdb, lldb: commands given on the line (``-ex``, ``-x``, ``-o``, …) can run a shell;
* dbus-send, gdbus, busctl: a power method is ``shutdown``; any system-bus call is
  ``privileged``;
* tar ``-x``, unzip, 7z, unrar of a download of this line: the files it unpacks cannot be named,
  so a local program the line runs afterwards is ``inline_code`` (:mod:`bridge.gate.line_memory`);
* npm, pnpm, yarn: ``config set`` of a key that names a program (``script-shell``, ``editor``,
  ``git``, …) runs it later;
* nc/ncat ``-e``/``-c``, socat ``EXEC:``/``SYSTEM:``: a program wired to a socket;
  ``man -P``, ``zip -TT``: a command as an option's value; ed reads commands (``!``) on stdin.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from bridge.gate.commands.long_options import LONG_OPTIONS
from bridge.gate.commands.wrappers import command_string
from bridge.gate.context import (
    INLINE,
    OUTSIDE,
    PRIVILEGED,
    UNPARSABLE,
    Call,
    check_read,
    check_write,
)
from bridge.gate.labels import deny_label
from bridge.gate.line_memory import memory_of
from bridge.gate.shell.lexer import Word
from bridge.gate.shell.words import Option, drop_prefix, split_args

__all__ = ["COMMAND_OPTION_RULES"]

_TAR_VALUES = "fCbFgHIKLNTVX"
_TAR_LONG_VALUES = frozenset(
    {"--file", "--directory", "--blocking-factor", "--info-script", "--new-volume-script",
     "--format", "--listed-incremental", "--use-compress-program", "--starting-file",
     "--newer", "--after-date", "--files-from", "--label", "--exclude-from", "--to-command",
     "--rsh-command", "--rmt-command", "--checkpoint-action", "--exclude", "--transform", "--xform", "--owner",
     "--group", "--mode", "--mtime", "--suffix", "--record-size", "--tape-length",
     "--index-file", "--level", "--occurrence", "--pax-option", "--strip-components",
     "--warning", "--sort", "--hole-detection", "--xattrs-include", "--xattrs-exclude"}
)  # fmt: skip
_TAR_COMMANDS = frozenset(
    {"-I", "--use-compress-program", "--to-command", "--rsh-command", "--rmt-command", "-F",
     "--info-script", "--new-volume-script"}
)  # fmt: skip
_TAR_CREATE = frozenset({"-c", "--create", "-r", "--append", "-u", "--update", "-A",
                         "--catenate", "--concatenate", "--delete"})  # fmt: skip
_TAR_EXTRACT = frozenset({"-x", "--extract", "--get"})
_OLD_STYLE = re.compile(r"[A-Za-z]+")


def _tar(call: Call) -> None:
    args = call.args
    options: list[Option] = []
    rest_at = 0
    if args and args[0].is_static and _OLD_STYLE.fullmatch(args[0].value):
        # "tar czf out.tgz src": the first word is a cluster; its values follow, in order.
        call.handled.add(0)
        rest_at = 1
        for letter in args[0].value:
            if letter in _TAR_VALUES and rest_at < len(args):
                options.append(Option("-" + letter, args[rest_at], 0, rest_at))
                call.handled.add(rest_at)
                rest_at += 1
            else:
                options.append(Option("-" + letter, None, 0, None))
    parsed = split_args(
        args[rest_at:],
        short_values=_TAR_VALUES,
        long_values=_TAR_LONG_VALUES,
        known_long=LONG_OPTIONS["tar"],
    )
    for option in parsed.options:
        call.handled.add(option.index + rest_at)
        if option.value_index is not None:
            call.handled.add(option.value_index + rest_at)
        options.append(option)
    names = {option.name for option in options}
    extract = bool(names & _TAR_EXTRACT)
    for option in options:
        value = option.value
        if option.name == "--checkpoint-action":
            if value is None:
                call.env.flag(UNPARSABLE)
            elif value.value.startswith("exec="):
                command_string(drop_prefix(value, 5), call.scope, call.env)
        elif option.name in _TAR_COMMANDS:
            if value is None:
                call.env.flag(UNPARSABLE)
            else:
                command_string(value, call.scope, call.env)
        elif option.name in ("-C", "--directory") and value is not None:
            if extract:
                check_write(call, -1, value)
            else:
                check_read(call, -1, value)
        elif option.name in ("-f", "--file") and value is not None and value.value != "-":
            if names & _TAR_CREATE:
                check_write(call, -1, value)
            else:
                check_read(call, -1, value)
    if extract:
        archives = [o.value for o in options if o.name in ("-f", "--file") and o.value]
        _note_unpacked(call, archives, from_stdin=not archives or archives[-1].value == "-")
    if extract and names & {"-P", "--absolute-names"}:
        call.env.flag(OUTSIDE)  # members with absolute paths land where they say
    if "--remove-files" in names:
        for index, word in parsed.positionals:
            check_write(call, index + rest_at, word)


def _note_unpacked(call: Call, archives: list[Word], *, from_stdin: bool) -> None:
    """An archive that is a download of this line, unpacked: its files are unknown code."""
    memory = memory_of(call.env)
    if memory is None:
        return
    downloaded = any(
        (target := call.target(word)) is not None and call.env.downloaded(target.path)
        for word in archives
    )
    if downloaded or (from_stdin and memory.stdin_is_download):
        memory.note_unpacked()


def _unzip(call: Call) -> None:
    """unzip, 7z, unrar: unpacking a download of this line; ``-d DIR`` is written."""
    parsed = split_args(call.args, short_values="dP")
    archives = [word for _, word in parsed.positionals]
    _note_unpacked(call, archives, from_stdin=False)
    for _, directory in parsed.values("-d"):
        check_write(call, -1, directory)


_NPM_CODE_KEYS = frozenset(
    {"script-shell", "shell", "editor", "git", "node-options", "onload-script", "browser",
     "viewer", "init-module", "globalconfig", "userconfig", "prefix", "ignore-scripts"}
)  # fmt: skip


def _package_manager(call: Call) -> None:
    """``npm config set script-shell ./x``: a setting that runs a program later."""
    values = [word.value for word in call.args]
    if values[:2] in (["config", "set"], ["set"]) or values[:1] == ["set"]:
        keys = [value.split("=", 1)[0] for value in values[2 if values[0] == "config" else 1 :]]
        if any(key.lstrip("-") in _NPM_CODE_KEYS for key in keys[:1]):
            call.env.flag(INLINE)


_VI_NAMES = (
    "vi", "vim", "nvim", "ex", "exim", "view", "gvim", "vimdiff", "rvim", "rview", "gview",
    "evim", "nvi",
)  # fmt: skip
_VIM_CODE = frozenset({"-c", "--cmd", "-S", "-s", "-u", "-U", "-x"})
_VIM_SAFE_RC = frozenset({"NONE", "NORC", "DEFAULTS"})
_LINE_NUMBER = re.compile(r"\+\d*")


def _vim(call: Call) -> None:
    ex_mode = call.name in ("ex", "exim")
    for index, word in enumerate(call.args):
        value = word.value
        following = call.args[index + 1].value if index + 1 < len(call.args) else ""
        if value in ("-u", "-U") and following in _VIM_SAFE_RC:
            continue
        if value in _VIM_CODE or (value.startswith("+") and not _LINE_NUMBER.fullmatch(value)):
            call.env.flag(INLINE)  # an editor command: ":!" runs a shell
        elif value.startswith("-") and not value.startswith("--") and set(value[1:]) & set("eE"):
            ex_mode = True
    if ex_mode:
        call.facts.stdin_program = True  # Ex mode reads its commands from stdin


_EMACS_CODE = re.compile(r"--?(eval|funcall|load|script|f|l|e|x)(=.*)?")


def _emacs(call: Call) -> None:
    for word in call.args:
        if _EMACS_CODE.fullmatch(word.value.split("=", 1)[0]):
            call.env.flag(INLINE)


_MAKE_LONG_VALUES = frozenset(
    {"--directory", "--file", "--makefile", "--include-dir", "--old-file", "--assume-old",
     "--what-if", "--new-file", "--assume-new", "--eval"}
)  # fmt: skip


def _make(call: Call) -> None:
    parsed = split_args(
        call.args,
        short_values="CfIoWE",
        long_values=_MAKE_LONG_VALUES,
        known_long=LONG_OPTIONS["make"],
    )
    for _, makefile in parsed.values("-f", "--file", "--makefile"):
        if makefile.value in ("-", "/dev/stdin", "/dev/fd/0"):
            call.facts.stdin_program = True
    if parsed.has("-E", "--eval"):
        call.env.flag(INLINE)
    for _, word in parsed.positionals:
        name, equals, value = word.value.partition("=")
        shell = equals and name.strip(" :+?") in ("SHELL", ".SHELLFLAGS", "MAKESHELL")
        if shell and (not word.is_static or not re.fullmatch(r"[\w./+-]*", value)):
            call.env.flag(INLINE)


_SSH_LOCAL = frozenset({"proxycommand", "localcommand", "knownhostscommand"})
_SSH_CODE = frozenset(
    {"pkcs11provider", "securitykeyprovider", "include", "match", "permitlocalcommand"}
)


def _ssh(call: Call) -> None:
    program = call.name
    short = {"ssh": "BbcDEeFIiJLlmOoPpQRSWw", "scp": "cFiJloPSX", "sftp": "BbcDFiJloPRSsX"}
    parsed = split_args(
        call.args, short_values=short.get(program, short["ssh"]), first_positional_ends=True
    )
    call.handled.update(option.index for option in parsed.options)
    for _, setting in parsed.values("-o"):
        key, _, value = re.sub(r"[\s=]+", " ", setting.value.strip(), count=1).partition(" ")
        if key.lower() in _SSH_LOCAL:
            call.env.flag(INLINE)
            if setting.is_static and value.strip():
                call.env.nested_script(value, call.scope.cwd)
        elif key.lower() in _SSH_CODE or not setting.is_static:
            call.env.flag(INLINE)
    for _, config in parsed.values("-F"):
        if config.value not in ("/dev/null", "none"):
            call.env.flag(INLINE)  # a config file can hold a ProxyCommand
    for _, command in parsed.values("-S", "-D") if program in ("scp", "sftp") else ():
        command_string(command, call.scope, call.env)
    if program == "ssh" and len(parsed.positionals) > 1:
        call.env.flag(INLINE)  # a remote command: runs on another machine
        call.handled.update(index for index, _ in parsed.positionals[1:])


_DEBUGGER_CODE = re.compile(
    r"--?(ex|iex|eval-command|init-eval-command|x|ix|command|init-command|batch|o|one-line"
    r"|s|source|O|S|k|one-line-before-file|source-before-file|one-line-on-crash)(=.*)?"
)


def _debugger(call: Call) -> None:
    if any(_DEBUGGER_CODE.fullmatch(word.value) for word in call.args):
        call.env.flag(INLINE)  # debugger commands: "shell", "!" and "run" run programs


_POWER_METHOD = re.compile(
    r".*\b(PowerOff|Reboot|Halt|Suspend|Hibernate|HybridSleep|SuspendThenHibernate|KExec)\b.*"
)


def _dbus(call: Call) -> None:
    call.handled.update(range(len(call.args)))
    values = [word.value for word in call.args]
    if any(_POWER_METHOD.fullmatch(value) for value in values):
        call.env.flag(deny_label("shutdown"))
    elif any(value in ("--system", "system", "-y") for value in values):
        call.env.flag(PRIVILEGED)


_NETCAT_EXEC = frozenset({"-e", "-c", "--exec", "--sh-exec", "--lua-exec"})
_SOCAT_EXEC = re.compile(r"(?i)(exec|system):(.*)")


def _netcat(call: Call) -> None:
    """nc/ncat ``-e PROG``/``-c CMD``: a program wired to a socket (a remote shell)."""
    for index, word in enumerate(call.args):
        name, equals, _ = word.value.partition("=")
        if name in _NETCAT_EXEC:
            call.env.flag(INLINE)
            if equals:
                command_string(drop_prefix(word, len(name) + 1), call.scope, call.env)
            elif index + 1 < len(call.args):
                command_string(call.args[index + 1], call.scope, call.env)


def _socat(call: Call) -> None:
    """socat ``EXEC:cmd``/``SYSTEM:cmd`` addresses run a command wired to the other address."""
    for word in call.args:
        match = _SOCAT_EXEC.fullmatch(word.value)
        if match is not None:
            call.env.flag(INLINE)
            command = match.group(2).split(",", 1)[0]
            if word.is_static and command:
                call.env.nested_script(command, call.scope.cwd)


def _command_option(short: str, long: tuple[str, ...]) -> Callable[[Call], None]:
    """A program with one option whose value is a command: ``man -P``, ``zip -TT``."""

    def rule(call: Call) -> None:
        for index, word in enumerate(call.args):
            name, equals, _ = word.value.partition("=")
            if name in long and equals:
                command_string(drop_prefix(word, len(name) + 1), call.scope, call.env)
            elif word.value == short or name in long:
                if index + 1 < len(call.args):
                    command_string(call.args[index + 1], call.scope, call.env)
            elif short and word.value.startswith(short) and len(word.value) > len(short):
                command_string(drop_prefix(word, len(short)), call.scope, call.env)

    return rule


def _ed(call: Call) -> None:
    """ed reads its commands from stdin, and ``!`` runs a shell."""
    call.facts.stdin_program = True


COMMAND_OPTION_RULES: dict[str, Callable[[Call], None]] = {
    "tar": _tar,
    "gtar": _tar,
    "bsdtar": _tar,
    **dict.fromkeys(_VI_NAMES, _vim),
    **dict.fromkeys(("emacs", "emacsclient", "xemacs"), _emacs),
    **dict.fromkeys(("make", "gmake", "bmake", "pmake"), _make),
    **dict.fromkeys(("ssh", "scp", "sftp", "slogin", "autossh"), _ssh),
    **dict.fromkeys(("gdb", "gdb-multiarch", "lldb", "cgdb"), _debugger),
    **dict.fromkeys(("dbus-send", "gdbus", "busctl", "qdbus"), _dbus),
    **dict.fromkeys(("unzip", "7z", "7za", "unrar"), _unzip),
    **dict.fromkeys(("npm", "pnpm", "yarn"), _package_manager),
    **dict.fromkeys(("nc", "ncat", "netcat", "nc.traditional", "nc.openbsd"), _netcat),
    "socat": _socat,
    "man": _command_option("-P", ("--pager", "--html")),
    "zip": _command_option("-TT", ("--unzip-command",)),
    "ed": _ed,
}
"""Rules by command name (consulted by :func:`.rules.rule_for`)."""
