"""``git``: global options, the force-push rule, and config keys that run code.

Force push (``-f``, ``--force``, ``--force-with-lease``, ``--mirror``, a ``+refspec``) or a
delete (``--delete``, ``:branch``) of a protected branch is ``force_push_protected``. Protected:
main, master, production, release* — and any destination that cannot be told from the line
(no refspec, so the current branch; ``HEAD``; a variable), because a force push to the wrong
branch cannot be taken back.
"""

from __future__ import annotations

from .context import Call, Scope, check_lenient, check_read, enter_directory
from .hooks import check_git_setting
from .labels import deny_label
from .shell_lexer import Word
from .words import drop_prefix, split_args

__all__ = ["PROTECTED_BRANCHES", "git_rule", "is_protected_branch"]

PROTECTED_BRANCHES = frozenset({"main", "master", "production"})
"""Protected by name; every branch starting with "release" is too."""


def git_rule(call: Call) -> None:
    """Check a ``git`` command line (after its wrappers)."""
    args = call.args
    index = 0
    scope = call.scope.copy()
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
                check_git_setting(key, drop_prefix(setting, len(key) + 1), scope, call.env)
            call.handled.add(index + 1)
            index += 2
        elif value in ("--config-env", "--namespace", "--exec-path", "--super-prefix"):
            call.handled.add(index + 1)
            index += 2
        elif value in ("--git-dir", "--work-tree") and index + 1 < len(args):
            check_read(call, index + 1, args[index + 1])
            index += 2
        elif value.startswith("-"):
            check_lenient(call, args[index])  # --git-dir=…, --work-tree=…
            index += 1
        else:
            break
    if index >= len(args):
        return
    rest = args[index + 1 :]
    call.handled.update(range(index, len(args)))
    if args[index].value == "push":
        _git_push(call, rest)
    elif args[index].value == "config":
        _git_config(call, rest, scope)
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


def _git_config(call: Call, rest: list[Word], scope: Scope) -> None:
    """``git config [--global] key value``: a key that runs commands stores code for later."""
    args = split_args(rest, short_values="f", long_values=frozenset({"--file", "--type"}))
    operands = [word for _, word in args.positionals]
    if len(operands) >= 2:
        check_git_setting(operands[0].value, operands[1], scope, call.env)


def _git_push(call: Call, rest: list[Word]) -> None:
    args = split_args(
        rest,
        short_values="o",
        long_values=frozenset({"--repo", "--receive-pack", "--exec", "--push-option"}),
    )
    force = args.has("-f", "--force", "--force-with-lease") or args.has("--mirror")
    delete = args.has("-d", "--delete")
    refspecs = [word for _, word in args.positionals[1:]]
    if not refspecs:
        # The current branch (or every branch): which one cannot be told from here.
        if args.has("--mirror") or (force and not args.has("--tags")):
            call.env.flag(deny_label("force_push_protected"))
        return
    for word in refspecs:
        if not word.is_static:
            if force or delete:
                call.env.flag(deny_label("force_push_protected"))
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
            destination in ("", "HEAD", "@") or is_protected_branch(destination)
        ):
            call.env.flag(deny_label("force_push_protected"))


def is_protected_branch(name: str) -> bool:
    """main, master, production, release* (``refs/heads/`` ignored, any case)."""
    branch = name.removeprefix("refs/heads/").lower()
    return branch in PROTECTED_BRANCHES or branch.startswith("release")
