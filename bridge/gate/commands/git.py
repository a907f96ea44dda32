"""``git``: global options, the force-push rule, and options and config keys that run code.

Force push (``-f``, ``--force``, ``--force-with-lease``, ``--force-if-includes``, ``--mirror``,
a ``+refspec``, ``-c remote.<r>.mirror=true``, a forced ``remote.<r>.push`` refspec) or a delete
(``--delete``, ``:branch``, ``--prune``) of a protected branch is ``force_push_protected``, in
``git push`` and in the plumbing ``git send-pack``. Long options are read the way git's
parse-options reads them (any unique prefix: ``--force-w``, ``--dele``, ``--mir``). Protected:
main, master, production, release* — and any destination that cannot be told from the line (no
refspec, so the current branch; ``HEAD``; a variable; a glob such as ``refs/heads/*``; every
branch with ``--all``), because a force push to the wrong branch cannot be taken back.

Commands git runs for an option are judged like command lines: ``rebase -x``, ``submodule
foreach``, ``bisect run``, ``filter-branch --*-filter``, ``difftool -x``, ``grep -O``,
``--upload-pack``/``--receive-pack``/``--exec``, ``send-email --*-cmd``. So are config keys that
hold a command (:mod:`.hooks`), given with ``-c``, ``--config-env`` or ``git config``.
"""

from __future__ import annotations

import re

from bridge.gate.commands.hooks import check_git_setting, git_key_runs_code
from bridge.gate.commands.long_options import LONG_OPTIONS, STRICT
from bridge.gate.commands.wrappers import command_string
from bridge.gate.context import (
    INLINE,
    OUTSIDE,
    UNPARSABLE,
    Call,
    Scope,
    check_lenient,
    check_read,
    enter_directory,
)
from bridge.gate.labels import deny_label
from bridge.gate.shell.lexer import Word
from bridge.gate.shell.words import drop_prefix, split_args

__all__ = ["PROTECTED_BRANCHES", "git_rule", "is_protected_branch"]

PROTECTED_BRANCHES = frozenset({"main", "master", "production"})
"""Protected by name; every branch starting with "release" is too."""

_PUSH_CONFIG = re.compile(r"remote\..+\.(mirror|push)", re.IGNORECASE)
_GLOB = re.compile(r"[*?\[]")
_COMMAND_OPTIONS = {
    "clone": ("-u", "--upload-pack", "--template"),
    "fetch": ("--upload-pack",),
    "pull": ("--upload-pack",),
    "ls-remote": ("--upload-pack",),
    "archive": ("--exec",),
    "difftool": ("-x", "--extcmd"),
    "instaweb": ("-d", "--httpd", "-b", "--browser"),
    "send-email": ("--to-cmd", "--cc-cmd", "--sendmail-cmd", "--header-cmd", "--smtp-server"),
    "filter-branch": (
        "--env-filter", "--tree-filter", "--index-filter", "--parent-filter", "--msg-filter",
        "--commit-filter", "--tag-name-filter", "--setup",
    ),
}  # fmt: skip
"""Options of a subcommand whose value is a command git runs (a value taken as a shell line)."""


_READ_ONLY_SUBCOMMANDS = frozenset(
    {"status", "log", "diff", "show", "blame", "annotate", "grep", "ls-files", "ls-tree",
     "ls-remote", "rev-parse", "rev-list", "describe", "shortlog", "cat-file", "show-ref",
     "for-each-ref", "name-rev", "help", "version", "whatchanged", "diff-tree", "diff-files",
     "diff-index", "merge-base", "count-objects", "check-ignore", "check-attr", "var"}
)  # fmt: skip
"""Subcommands that only read a repository: fine on one outside the session's folder."""


def git_rule(call: Call) -> None:
    """Check a ``git`` command line (after its wrappers).

    git writes into the repository it runs in (objects, refs, the index, the work tree) without
    naming a path: a subcommand other than a read, run in a repository outside the session's
    folder (``git -C ../other commit``, ``cd ../other && git push``, ``--git-dir``), is a write
    outside it.
    """
    args = call.args
    index = 0
    scope = call.scope.copy()
    settings: list[tuple[str, Word]] = []
    elsewhere = False
    while index < len(args):
        value = args[index].value
        call.handled.add(index)
        if value == "-C" and index + 1 < len(args):
            call.handled.add(index + 1)
            enter_directory(scope, args[index + 1], call.env)
            index += 2
        elif value == "-c" and index + 1 < len(args):
            setting = args[index + 1]
            key, equals, _ = setting.value.partition("=")
            if equals:
                setting_value = drop_prefix(setting, len(key) + 1)
                check_git_setting(key, setting_value, scope, call.env)
                settings.append((key, setting_value))
            call.handled.add(index + 1)
            index += 2
        elif value.startswith("--config-env"):
            key = (value.partition("=")[2] or _value(args, index + 1)).partition("=")[0]
            if git_key_runs_code(key) or _PUSH_CONFIG.fullmatch(key):
                call.env.flag(INLINE)  # a command from an environment variable
            index += 1 if "=" in value else 2
        elif value.startswith("--exec-path="):
            call.env.flag(INLINE)  # git's own programs from another directory
            index += 1
        elif value in ("--namespace", "--super-prefix"):
            call.handled.add(index + 1)
            index += 2
        elif value in ("--git-dir", "--work-tree") and index + 1 < len(args):
            check_read(call, index + 1, args[index + 1])
            elsewhere = True
            index += 2
        elif value.startswith("-"):
            check_lenient(call, args[index])  # --git-dir=…, --work-tree=…
            elsewhere = elsewhere or value.startswith(("--git-dir=", "--work-tree="))
            index += 1
        else:
            break
    if index >= len(args):
        return
    rest = args[index + 1 :]
    call.handled.update(range(index, len(args)))
    subcommand = args[index].value
    elsewhere = elsewhere or scope.cwd is None or not call.env.workspace.writable(scope.cwd)
    if elsewhere and subcommand not in _READ_ONLY_SUBCOMMANDS:
        call.env.flag(OUTSIDE)  # it writes into a repository outside the session's folder
    if not args[index].is_static:
        call.env.flag(UNPARSABLE)  # a subcommand chosen at run time
    elif subcommand in ("push", "send-pack"):
        _git_push(call, rest, settings, subcommand)
    elif subcommand == "config":
        _git_config(call, rest, scope)
    else:
        _runs_commands(call, subcommand, rest, scope)
    if any(word.value.startswith("ext::") for word in rest):
        call.env.flag(INLINE)  # git's ext transport runs the rest of the URL as a command
    inner = Call(call.name, rest, scope, call.env, call.facts)
    skip_next = False
    for word in rest:
        value = word.value
        if skip_next:
            skip_next = False
        elif value in ("-m", "--message"):
            skip_next = True  # a commit message is not a path
        elif not value.startswith(("-m", "--message=")):
            check_lenient(inner, word)


def _value(args: list[Word], index: int) -> str:
    return args[index].value if index < len(args) else ""


def _runs_commands(call: Call, subcommand: str, rest: list[Word], scope: Scope) -> None:
    """Subcommands that run a command given on the line."""
    if subcommand == "rebase":
        parsed = split_args(
            rest,
            short_values="xsXC",
            long_values=frozenset({"--exec", "--onto", "--strategy", "--strategy-option"}),
            known_long=LONG_OPTIONS["git rebase"],
        )
        for _, command in parsed.values("-x", "--exec"):
            command_string(command, scope, call.env)
        if any(o.name == "--exec" and o.value is None for o in parsed.options):
            call.env.flag(UNPARSABLE)  # an ambiguous prefix of --exec
    elif subcommand in ("submodule", "bisect"):
        verb = "foreach" if subcommand == "submodule" else "run"
        words = [word.value for word in rest]
        if verb not in words:
            return
        after = rest[words.index(verb) + 1 :]
        _command_words(call, [w for w in after if w.value != "--recursive"], scope)
    elif subcommand == "grep":
        for word in rest:
            name, equals, _ = word.value.partition("=")
            if equals and "--open-files-in-pager".startswith(name) and len(name) > 3:
                command_string(drop_prefix(word, len(name) + 1), scope, call.env)
            elif word.value.startswith("-O") and len(word.value) > 2:
                command_string(drop_prefix(word, 2), scope, call.env)
    elif subcommand in _COMMAND_OPTIONS:
        names = _COMMAND_OPTIONS[subcommand]
        for position, word in enumerate(rest):
            name, equals, _ = word.value.partition("=")
            if not (name in names or (name.startswith("--") and _prefix_of(name, names))):
                continue
            if name == "--template":
                call.env.flag(INLINE)  # hooks copied from a template directory
            elif equals:
                command_string(drop_prefix(word, len(name) + 1), scope, call.env)
            elif position + 1 < len(rest):
                command_string(rest[position + 1], scope, call.env)
            else:
                call.env.flag(UNPARSABLE)
        for position, word in enumerate(rest[:-1]):
            if word.value in ("-c", "--config") and subcommand == "clone":
                key, equals, _ = rest[position + 1].value.partition("=")
                if equals:
                    setting = drop_prefix(rest[position + 1], len(key) + 1)
                    check_git_setting(key, setting, scope, call.env)


def _prefix_of(name: str, options: tuple[str, ...]) -> bool:
    return len(name) > 3 and any(option.startswith(name) for option in options)


def _command_words(call: Call, command: list[Word], scope: Scope) -> None:
    """``submodule foreach CMD…``, ``bisect run CMD…``: one word is a shell line, several are
    a program and its arguments (git quotes them for the shell)."""
    if len(command) == 1:
        command_string(command[0], scope, call.env)
    elif command:
        call.env.check_argv(command, scope.copy())


def _git_config(call: Call, rest: list[Word], scope: Scope) -> None:
    """``git config [--global|--file F] [set|--add] key value``: a key that runs commands stores
    code for later, and a remote's mirror or push refspec makes a later push a forced one."""
    args = split_args(
        rest,
        short_values="f",
        long_values=frozenset({"--file", "--type", "--blob", "--default", "--comment"}),
    )
    operands = [word for _, word in args.positionals]
    if operands and operands[0].value in ("set", "add", "replace-all"):
        operands = operands[1:]
    if len(operands) >= 2:
        key = operands[0].value
        check_git_setting(key, operands[1], scope, call.env)
        if git_key_runs_code(key) or _PUSH_CONFIG.fullmatch(key) or not operands[0].is_static:
            call.env.flag(INLINE)  # stored: it runs on later git commands, unseen


def _git_push(call: Call, rest: list[Word], settings: list[tuple[str, Word]], sub: str) -> None:
    program = "git " + sub
    args = split_args(
        rest,
        short_values="o",
        long_values=frozenset({"--repo", "--receive-pack", "--exec", "--push-option"}),
        known_long=LONG_OPTIONS[program],
    )
    if args.unknown and program in STRICT:
        call.env.flag(UNPARSABLE)
    for _, command in args.values("--receive-pack", "--exec"):
        command_string(command, call.scope, call.env)  # runs locally for a path remote
    configured: list[Word] = []
    mirror = args.has("--mirror")
    for key, value in settings:
        kind = _PUSH_CONFIG.fullmatch(key)
        if kind is not None and kind.group(1).lower() == "mirror":
            mirror |= value.value.lower() not in ("false", "no", "off", "0")
        elif kind is not None:
            configured.append(value)
    force = args.has("-f", "--force", "--force-with-lease", "--force-if-includes")
    delete = args.has("-d", "--delete")
    every = args.has("--all", "--branches")
    refspecs = [word for _, word in args.positionals[1:]] or configured
    protected = deny_label("force_push_protected")
    if mirror or (force and every) or (args.has("--prune") and _prunes_widely(refspecs)):
        call.env.flag(protected)
        return
    if not refspecs:
        # The current branch (or every branch): which one cannot be told from here.
        if force and not args.has("--tags"):
            call.env.flag(protected)
        return
    for word in refspecs:
        if not word.is_static:
            if force or delete or "+" in word.raw:
                call.env.flag(protected)
            continue
        spec = word.value
        plus = spec.startswith("+")
        spec = spec.removeprefix("+")
        source, colon, destination = spec.partition(":")
        if not colon:
            destination = source
        forced = force or plus
        deleting = delete or (bool(colon) and not source)
        if (forced or deleting) and (
            destination in ("", "HEAD", "@")
            or _GLOB.search(destination)
            or is_protected_branch(destination)
        ):
            call.env.flag(protected)


def _prunes_widely(refspecs: list[Word]) -> bool:
    """``--prune`` deletes remote refs without a local one: every ref a glob refspec covers."""
    return not refspecs or any(not w.is_static or _GLOB.search(w.value) for w in refspecs)


def is_protected_branch(name: str) -> bool:
    """main, master, production, release* (``refs/heads/`` ignored, any case)."""
    branch = name.lower().removeprefix("refs/").removeprefix("heads/")
    return branch in PROTECTED_BRANCHES or branch.startswith("release")
