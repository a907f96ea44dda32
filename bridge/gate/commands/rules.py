"""Per-command rules: the deny list, and where commands write.

Each rule reads one simple command (its wrappers already looked through), flags labels, and
marks the arguments it judged as handled, so the generic path check does not judge them again:
``rm -rf /etc`` is ``deny_list:rm_rf``, not also ``outside_workspace``.

Deletes and writes are judged strictly (a run-time path is unknown, hence a card); deny rules
need a path that is known to be bad. Recursive delete: a target that is ``/``, the home or an
ancestor of it, a workspace root or an ancestor of one, or anything outside the workspace is
``rm_rf``; inside the workspace it is an ordinary call.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from bridge.gate.commands.command_options import COMMAND_OPTION_RULES
from bridge.gate.commands.git import git_rule
from bridge.gate.commands.long_options import LONG_OPTIONS, STRICT, resolve_long
from bridge.gate.commands.sed_script import sed_rule
from bridge.gate.commands.wrappers import command_string
from bridge.gate.context import (
    INLINE,
    OUTSIDE,
    UNPARSABLE,
    Call,
    check_lenient,
    check_link_source,
    check_read,
    check_write,
)
from bridge.gate.labels import deny_label
from bridge.gate.line_memory import note_written, runs_later
from bridge.gate.paths import Target, is_device, is_safe_device, is_system
from bridge.gate.shell.lexer import DYN_MARK, Part, Word
from bridge.gate.shell.words import Args, drop_prefix, split_args

__all__ = ["DELETERS", "DOWNLOADERS", "MKFS", "rule_for"]

Rule = Callable[[Call], None]

DELETERS = frozenset({"rm", "unlink", "rmdir", "shred", "srm"})
DOWNLOADERS = frozenset({"curl", "wget", "wget2", "fetch", "http", "https", "xh", "xhs"})
MKFS = frozenset({"mkfs", "mke2fs", "mkswap", "mkdosfs", "mkntfs", "mkexfatfs", "wipefs", "newfs"})
_POWER = frozenset({"shutdown", "reboot", "halt", "poweroff"})
_POWER_VERBS = frozenset(
    {"poweroff", "reboot", "halt", "suspend", "hibernate", "hybrid-sleep",
     "suspend-then-hibernate", "kexec", "soft-reboot", "sleep"}
)  # fmt: skip
_POWER_TARGETS = frozenset({"poweroff.target", "reboot.target", "halt.target", "kexec.target"})
_CHMOD_MODE = re.compile(r"-[rwxXstugoa,+=-]+")


def rule_for(name: str) -> Rule | None:
    """The rule for a command name, if one applies."""
    rule = _RULES.get(name)
    if rule is None and (name.startswith(("mkfs.", "newfs_"))):
        return _mkfs
    return rule


# -- deletes and writes --------------------------------------------------------------------


def strict_unknown(call: Call, program: str, args: Args) -> None:
    """A long option the table does not know, of a program whose options can destroy: ask."""
    if args.unknown and program in STRICT:
        call.env.flag(UNPARSABLE)


def _rm(call: Call) -> None:
    args = split_args(
        call.args,
        short_values="ns" if call.name == "shred" else "",
        known_long=LONG_OPTIONS["rm"] if call.name == "rm" else None,
    )
    strict_unknown(call, call.name, args)
    recursive = call.name == "rm" and (
        args.has("-r", "-R", "--recursive") or any(DYN_MARK in o.name for o in args.options)
    )
    call.handled.update(option.index for option in args.options)
    for index, word in args.positionals:
        if recursive:
            call.handled.add(index)
            _recursive_delete(call, call.target(word))
        else:
            check_write(call, index, word)
    if recursive and call.from_xargs:
        call.env.flag(OUTSIDE)  # the targets come from stdin: cannot be told


def _recursive_delete(call: Call, target: Target | None) -> None:
    workspace = call.workspace
    if target is None:
        call.env.flag(OUTSIDE)
        return
    path = target.path
    if target.subtree:
        bad = path == "/" or workspace.home_or_ancestor(path) or not workspace.within(path)
    else:
        bad = workspace.protected(path) or not workspace.within(path)
    if bad:
        call.env.flag(deny_label("rm_rf"))
    elif not workspace.writable(path):
        call.env.flag(OUTSIDE)  # in the workspace, outside the session's folder: a card


def _writes_all(short: str = "", long: frozenset[str] = frozenset()) -> Rule:
    """A command that writes every operand (touch, mkdir, tee, truncate)."""

    def rule(call: Call) -> None:
        args = split_args(call.args, short_values=short, long_values=long)
        for index, word in args.positionals:
            check_write(call, index, word)
            note_written(call.env, call.target(word))  # curl … | tee i.sh; bash i.sh

    return rule


def _copy_like(call: Call) -> None:
    """cp, mv, install, ln, rsync: the destination is written; mv also removes its sources."""
    args = split_args(
        call.args,
        short_values={"install": "tSmog", "rsync": "efTB"}.get(call.name, "tS"),
        long_values=_COPY_LONG,
        known_long=LONG_OPTIONS.get(call.name),
    )
    if call.name == "rsync":
        for index, command in args.values("-e", "--rsh", "--rsync-path"):
            call.handled.add(index)
            command_string(command, call.scope, call.env)
    positionals = list(args.positionals)
    if call.name == "rsync":
        positionals = [(i, w) for i, w in positionals if not _is_remote(w.value)]
    directory = args.values("-t", "--target-directory")
    if call.name == "mv" or (call.name == "install" and args.has("-d", "--directory")):
        destinations = positionals + directory
    elif directory:
        destinations = directory
    else:
        destinations = positionals[-1:] if len(args.positionals) >= 2 else []
    for index, word in destinations:
        check_write(call, index, word)
        target = call.target(word)
        if target is not None and runs_later(target.path):
            call.env.flag(INLINE)  # a git hook: runs on a later git command
    if call.name == "ln":
        for index, word in positionals if directory else positionals[:-1] or positionals:
            call.handled.add(index)
            check_link_source(call, word)
    if call.name == "mv":
        for _, word in positionals[:-1]:  # moving /, ~ or a root away is deleting it
            target = call.target(word)
            if target is not None and not target.subtree and call.workspace.protected(target.path):
                call.env.flag(deny_label("rm_rf"))


_COPY_LONG = frozenset(
    {"--target-directory", "--suffix", "--mode", "--owner", "--group", "--exclude", "--include",
     "--exclude-from", "--include-from", "--files-from", "--filter", "--rsh", "--rsync-path",
     "--temp-dir", "--compare-dest", "--copy-dest", "--link-dest", "--backup-dir", "--chmod",
     "--chown", "--log-file", "--password-file", "--port", "--timeout", "--bwlimit",
     "--partial-dir", "--out-format"}
)  # fmt: skip


def _is_remote(value: str) -> bool:
    """``host:path`` or ``rsync://…``: rsync writes elsewhere."""
    head = value.split("/", 1)[0]
    return value.startswith("rsync://") or (":" in head and not value.startswith("/"))


def _dd(call: Call) -> None:
    for index, word in enumerate(call.args):
        value = word.value
        if value.startswith(("of=", "if=")):
            operand = drop_prefix(word, 3)
            if value.startswith("of="):
                check_write(call, index, operand)
            else:
                check_read(call, index, operand)
        call.handled.add(index)


def _permissions(call: Call) -> None:
    """chmod, chown, chgrp: system paths (or recursively / and ~) are denied."""
    rule = deny_label(call.name + "_system")
    recursive = reference = False
    first_operand_seen = False
    only_operands = False
    targets: list[tuple[int, Word]] = []
    for index, word in enumerate(call.args):
        value = word.value
        if only_operands or not value.startswith("-") or value == "-":
            if not first_operand_seen and not reference:
                first_operand_seen = True  # the mode, owner or group
                call.handled.add(index)
            else:
                targets.append((index, word))
            continue
        call.handled.add(index)
        if value == "--":
            only_operands = True
        elif value.startswith("--"):
            names = resolve_long(value.partition("=")[0], LONG_OPTIONS[call.name])
            if not names:
                call.env.flag(UNPARSABLE)
            recursive |= "--recursive" in names
            reference |= "--reference" in names
        elif call.name == "chmod" and not first_operand_seen and _CHMOD_MODE.fullmatch(value):
            first_operand_seen = True  # chmod -x file: a mode, not an option
        else:
            recursive |= "R" in value
    workspace = call.workspace
    if recursive and call.from_xargs:
        call.env.flag(OUTSIDE)  # more targets come from stdin
    for index, word in targets:
        call.handled.add(index)
        target = call.target(word)
        if target is None:
            call.env.flag(OUTSIDE)
            continue
        path = target.path
        if path == "/" or (recursive and workspace.home_or_ancestor(path)):
            call.env.flag(rule)  # even when the home is inside a workspace root
        elif workspace.writable(path) or is_safe_device(path):
            continue
        elif is_system(path, subtree=target.subtree) or is_device(path):
            call.env.flag(rule)
        else:
            call.env.flag(OUTSIDE)


_UNKNOWN = Word("{}", (Part("dyn", ""),))


def _inside(call: Call, word: Word) -> bool:
    target = call.target(word)
    return target is not None and call.workspace.within(target.path)


def _find(call: Call) -> None:
    args = call.args
    index = 0
    while (index < len(args) and args[index].value in ("-H", "-L", "-P", "-D")) or (
        index < len(args) and args[index].value.startswith("-O")
    ):
        index += 2 if args[index].value == "-D" else 1
    roots: list[tuple[int | None, Word]] = []
    while index < len(args) and not args[index].value.startswith(("-", "(", "!", ")", ",")):
        roots.append((index, args[index]))
        index += 1
    if not roots:
        roots.append((None, Word(".", (Part("lit", "."),))))
    delete = False
    while index < len(args):
        value = args[index].value
        call.handled.add(index)
        if value == "-delete":
            delete = True
        elif value in ("-exec", "-execdir", "-ok", "-okdir"):
            end = index + 1
            while end < len(args) and args[end].value not in (";", "+"):
                end += 1
            command = args[index + 1 : end]
            call.handled.update(range(index, end + 1))
            inside = all(_inside(call, word) for _, word in roots)
            scope = call.scope.copy()
            if not inside:
                # "{}" is each file found: a path under roots outside the workspace.
                command = [_UNKNOWN if "{}" in word.value else word for word in command]
                if value in ("-execdir", "-okdir"):
                    scope.cwd = None
            if command and call.env.check_argv(command, scope).deletes:
                delete = True
            index = end
        elif value in ("-fprint", "-fprint0", "-fls", "-fprintf") and index + 1 < len(args):
            check_write(call, index + 1, args[index + 1])
            index += 1
        index += 1
    workspace = call.workspace
    for root_index, word in roots:
        if root_index is not None:
            call.handled.add(root_index)
        target = call.target(word)
        system = target is not None and (
            target.path == "/"
            or workspace.home_or_ancestor(target.path)  # even when the home is in a root
            or (
                is_system(target.path, subtree=target.subtree) and not workspace.within(target.path)
            )
        )
        call.facts.find_system |= system
        if system and delete:
            call.env.flag(deny_label("find_delete_system"))
        elif root_index is not None:
            check_read(call, root_index, word)


# -- the rest of the deny list ---------------------------------------------------------------


def _mkfs(call: Call) -> None:
    call.env.flag(deny_label("mkfs"))
    call.handled.update(range(len(call.args)))


def _power(call: Call) -> None:
    call.env.flag(deny_label("shutdown"))
    call.handled.update(range(len(call.args)))


def _service_manager(call: Call) -> None:
    args = split_args(
        call.args,
        short_values="tpHMnos",
        long_values=frozenset({"--type", "--property", "--host", "--machine", "--signal"}),
    )
    operands = [word.value for _, word in args.positionals]
    if operands and (
        operands[0] in _POWER_VERBS
        or (operands[0] in ("isolate", "start") and any(o in _POWER_TARGETS for o in operands))
    ):
        _power(call)


def _init(call: Call) -> None:
    if any(word.value in ("0", "6") for word in call.args):
        _power(call)


# -- downloaders ---------------------------------------------------------------------------


def _curl(call: Call) -> None:
    call.facts.download = True
    args = split_args(
        call.args,
        short_values="oKdHuXAebcrTwxyzmFEQD",
        long_values=_CURL_LONG,
        known_long=LONG_OPTIONS["curl"],
    )
    for index, word in args.values("-o", "--output", "--output-dir", "-c", "--cookie-jar"):
        check_write(call, index, word)
    for _, word in args.values("-o", "--output"):
        _note_download(call, word)
    if args.has("-O", "--remote-name", "--remote-name-all"):
        directory = [word.value for _, word in args.values("--output-dir")]
        urls = [word for _, word in args.positionals] + [w for _, w in args.values("--url")]
        _note_remote_names(call, urls, directory[-1] if directory else "")
    for index, word in args.values(
        "-d",
        "--data",
        "--data-binary",
        "--data-urlencode",
        "-F",
        "--form",
        "--json",
        "-T",
        "--upload-file",
        "-K",
        "--config",
    ):
        call.handled.add(index)
        value = word.value
        at = value.find("@")
        if at >= 0 or value.startswith(("/", "~", "..")):
            path = value[at + 1 :] if at >= 0 else value
            check_lenient(call, Word(path, (Part("lit", path.split(";")[0]),)))


_CURL_LONG = frozenset(
    {"--output", "--output-dir", "--data", "--data-raw", "--data-binary", "--data-urlencode",
     "--json", "--header", "--user", "--request", "--user-agent", "--referer", "--cookie",
     "--cookie-jar", "--range", "--upload-file", "--write-out", "--proxy", "--max-time", "--form",
     "--config", "--cert", "--connect-timeout", "--retry", "--url"}
)  # fmt: skip


def _wget(call: Call) -> None:
    call.facts.download = True
    args = split_args(
        call.args,
        short_values="OoaPeUtTwiBQlARDIX",
        long_values=_WGET_LONG,
        known_long=LONG_OPTIONS["wget"],
    )
    for index, word in args.values(
        "-O",
        "--output-document",
        "-o",
        "--output-file",
        "-a",
        "--append-output",
        "-P",
        "--directory-prefix",
    ):
        if word.value != "-":
            check_write(call, index, word)
        call.handled.add(index)
    for _, word in args.values("-O", "--output-document"):
        _note_download(call, word)
    if not args.has("-O", "--output-document"):
        prefix = [word.value for _, word in args.values("-P", "--directory-prefix")]
        urls = [word for _, word in args.positionals]
        _note_remote_names(call, urls, prefix[-1] if prefix else "", default="index.html")


_WGET_LONG = frozenset(
    {"--output-document", "--output-file", "--append-output", "--directory-prefix",
     "--user-agent", "--tries", "--timeout", "--input-file", "--header", "--post-data",
     "--post-file", "--body-file"}
)  # fmt: skip


def _note_download(call: Call, word: Word) -> None:
    target = call.target(word)
    if target is not None and not target.subtree:
        call.env.note_download(target.path)


def _note_remote_names(call: Call, urls: list[Word], directory: str, *, default: str = "") -> None:
    """``curl -O URL``, ``wget URL``: the download is saved under the URL's last segment."""
    for url in urls:
        if not url.is_static:
            continue
        path = url.value.split("#", 1)[0].split("?", 1)[0]
        if "://" in path:
            path = path.split("://", 1)[1]
            path = path.partition("/")[2]
        name = path.rsplit("/", 1)[-1] or default
        if name:
            saved = f"{directory.rstrip('/')}/{name}" if directory else name
            _note_download(call, Word(saved, (Part("lit", saved),)))


def _downloader(call: Call) -> None:
    call.facts.download = True


# -- commands whose first operand is a pattern -----------------------------------------------


def _pattern_first(short: str, long: frozenset[str]) -> Rule:
    """grep, rg, …: the first operand is a regex (``rg '/api/' src``), not a path."""

    def rule(call: Call) -> None:
        args = split_args(call.args, short_values=short, long_values=long)
        call.handled.update(index for index, _ in args.values("-e", "--regexp"))
        if not args.has("-e", "--regexp", "-f", "--file") and args.positionals:
            call.handled.add(args.positionals[0][0])

    return rule


_GREP_LONG = frozenset(
    {"--regexp", "--file", "--max-count", "--after-context", "--before-context", "--context",
     "--glob", "--iglob", "--type", "--type-not", "--threads", "--replace", "--max-depth",
     "--encoding", "--pre", "--sort", "--sortr", "--type-add", "--colors", "--max-columns",
     "--label", "--group-separator"}
)  # fmt: skip


def _no_paths(call: Call) -> None:
    """echo, printf, …: their words are printed, not opened."""
    call.handled.update(range(len(call.args)))


_RULES: dict[str, Rule] = {
    **dict.fromkeys(DELETERS, _rm),
    **dict.fromkeys(MKFS, _mkfs),
    **dict.fromkeys(_POWER, _power),
    "systemctl": _service_manager,
    "loginctl": _service_manager,
    "init": _init,
    "telinit": _init,
    "dd": _dd,
    "tee": _writes_all(),
    "touch": _writes_all("dtr", frozenset({"--date", "--reference"})),
    "mkdir": _writes_all("m", frozenset({"--mode"})),
    "truncate": _writes_all("sr", frozenset({"--size", "--reference"})),
    **dict.fromkeys(("cp", "mv", "install", "ln", "rsync"), _copy_like),
    "sed": sed_rule,
    **dict.fromkeys(("chmod", "chown", "chgrp"), _permissions),
    "find": _find,
    "git": git_rule,
    "curl": _curl,
    **dict.fromkeys(("wget", "wget2"), _wget),
    **dict.fromkeys(DOWNLOADERS - {"curl", "wget", "wget2"}, _downloader),
    **dict.fromkeys(("grep", "egrep", "fgrep", "zgrep"), _pattern_first("efmABCdD", _GREP_LONG)),
    "rg": _pattern_first("efgtTmABCjMrdE", _GREP_LONG),
    "ag": _pattern_first("ABCGgmp", _GREP_LONG),
    "ack": _pattern_first("ABCm", _GREP_LONG),
    **dict.fromkeys(("echo", "printf", ":", "true", "false"), _no_paths),
    **COMMAND_OPTION_RULES,
}
