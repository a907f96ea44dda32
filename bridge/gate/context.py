"""What a command rule sees: the call, its scope, the checker behind it, and path verdicts."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from bridge.gate.labels import deny_label
from bridge.gate.paths import (
    Target,
    Workspace,
    is_device,
    is_safe_device,
    is_system,
    reaches_hidden,
    resolve,
)
from bridge.gate.shell.lexer import Part, Word
from bridge.gate.shell.words import drop_prefix

__all__ = [
    "BACKGROUND",
    "INLINE",
    "OUTSIDE",
    "PRIVILEGED",
    "SECRET",
    "UNPARSABLE",
    "Call",
    "CommandEnv",
    "Facts",
    "Scope",
    "check_lenient",
    "check_link_source",
    "check_read",
    "check_secret_words",
    "check_write",
    "enter_directory",
    "read_label",
    "write_label",
]

OUTSIDE = "outside_workspace"
PRIVILEGED = "privileged"
BACKGROUND = "background_process"
INLINE = "inline_code"
UNPARSABLE = "unparsable_command"
SECRET = deny_label("secret_path")


@dataclass(slots=True)
class Scope:
    """The shell state a command runs in; ``cwd`` is None once a ``cd`` made it unknown."""

    cwd: str | None

    def copy(self) -> Scope:
        """A scope for a subshell: its ``cd`` does not leak out."""
        return Scope(self.cwd)


@dataclass(slots=True)
class Facts:
    """What a command does that matters to the pipeline around it."""

    download: bool = False
    """Fetches from the network (its output may be code)."""
    stdin_program: bool = False
    """An interpreter that reads its program from stdin."""
    find_system: bool = False
    """``find`` over /, a system directory or the home."""
    xargs_delete: bool = False
    """``xargs`` running rm, unlink, shred or rmdir."""
    deletes: bool = False
    """The command (after its wrappers) is rm, unlink, shred or rmdir."""

    def merge(self, other: Facts) -> None:
        """Fold another command's facts into these (for compound commands)."""
        self.download |= other.download
        self.stdin_program |= other.stdin_program
        self.find_system |= other.find_system
        self.xargs_delete |= other.xargs_delete
        self.deletes |= other.deletes


class CommandEnv(Protocol):
    """The checker, as the rules see it."""

    @property
    def workspace(self) -> Workspace:
        """The session's roots and home."""
        ...

    def flag(self, label: str) -> None:
        """Record a reason label."""
        ...

    def nested_script(self, source: str, cwd: str | None) -> bool:
        """Parse and check ``source`` as a shell script; True if it downloads."""
        ...

    def downloads(self, word: Word) -> bool:
        """True if a substitution inside ``word`` downloads from the network."""
        ...

    def check_argv(self, argv: list[Word], scope: Scope) -> Facts:
        """Check a command given as words (``find -exec``, ``screen``)."""
        ...

    def note_download(self, path: str) -> None:
        """Remember that this line writes a download to ``path``."""
        ...

    def downloaded(self, path: str) -> bool:
        """True if this line wrote a download to ``path`` earlier."""
        ...


@dataclass(slots=True)
class Call:
    """One simple command after the wrappers were looked through."""

    name: str
    args: list[Word]
    scope: Scope
    env: CommandEnv
    facts: Facts
    from_xargs: bool = False
    handled: set[int] = field(default_factory=set)

    @property
    def workspace(self) -> Workspace:
        """The session's roots and home."""
        return self.env.workspace

    def target(self, word: Word) -> Target | None:
        """Where ``word`` points, strictly (a run-time part makes it unknown)."""
        return resolve(word, self.scope.cwd, strict=True)


def write_label(target: Target | None, workspace: Workspace) -> str | None:
    """The label for writing (or removing) ``target``, None when that is fine.

    Fine means inside the session's folder; a hidden path is a deny rule wherever it is.
    """
    if target is None:
        return OUTSIDE
    path = target.path
    if workspace.hidden(path):
        return SECRET
    if workspace.writable(path):
        return None
    if is_device(path) or (target.subtree and path == "/dev"):
        return deny_label("dd_device")
    if is_safe_device(path):
        return None
    if is_system(path, subtree=target.subtree) and not workspace.within(path):
        return deny_label("system_write")
    return OUTSIDE


def read_label(target: Target | None, workspace: Workspace) -> str | None:
    """The label for reading ``target``, None when that is fine (anywhere in the roots)."""
    if target is None:
        return OUTSIDE
    if workspace.hidden(target.path):
        return SECRET
    if workspace.within(target.path) or is_safe_device(target.path):
        return None
    return OUTSIDE


def check_write(call: Call, index: int, word: Word) -> None:
    """Flag a write to ``word`` (argument ``index``) and mark it handled."""
    label = write_label(call.target(word), call.workspace)
    if label is not None:
        call.env.flag(label)
    call.handled.add(index)


def check_read(call: Call, index: int, word: Word) -> None:
    """Flag a read of ``word`` (argument ``index``), strictly, and mark it handled."""
    label = read_label(call.target(word), call.workspace)
    if label is not None:
        call.env.flag(label)
    call.handled.add(index)


def enter_directory(scope: Scope, word: Word, env: CommandEnv) -> None:
    """``cd word``: move ``scope`` there, flagging a directory outside the workspace.

    An unknown directory (a run-time value, a glob) leaves the cwd unknown, so every later
    relative path of the line is judged unknown too — ``cd "$D" && rm -rf *`` is never a pass.
    """
    target = resolve(word, scope.cwd, strict=True)
    if target is not None and env.workspace.hidden(target.path):
        env.flag(SECRET)
    if target is None or target.subtree:
        if target is None or not env.workspace.within(target.path):
            env.flag(OUTSIDE)
        scope.cwd = None
        return
    if not env.workspace.within(target.path):
        env.flag(OUTSIDE)
    scope.cwd = target.path


def _looks_like_path(value: str) -> bool:
    return (
        value.startswith("/")
        or value == ".."
        or value.startswith("../")
        or "/../" in value
        or value.endswith("/..")
    )


def check_lenient(call: Call, word: Word) -> None:
    """Flag an ordinary argument that names a path outside the workspace.

    Only words that look like paths count (absolute, ``~``, or climbing with ``..``): a
    relative name without ``..`` stays below the cwd, and every other word — a URL, a regex,
    a branch name — would otherwise raise cards for nothing. ``--opt=/path`` counts by its value.
    """
    value = word.value
    if value.startswith("-"):
        name, equals, _ = value.partition("=")
        if not equals:
            return
        word = drop_prefix(word, len(name) + 1)
        value = word.value
    if not _looks_like_path(value):
        return
    label = read_label(resolve(word, call.scope.cwd, strict=False), call.workspace)
    if label is not None:
        call.env.flag(label)


def check_link_source(call: Call, word: Word) -> None:
    """``ln [-s] source name``: a link to a path outside the session's folder is a way out of it.

    Writes through ``name`` land at ``source`` (``ln -s ~ h && rm -rf h/``), and the gate cannot
    follow links later, so the source is judged as a write: outside the session's folder it is
    a card (a system file too: ``ln -s /etc/nginx/nginx.conf .``), and so is a source the gate
    cannot resolve.
    """
    target = call.target(word)
    if target is not None and call.workspace.hidden(target.path):
        call.env.flag(SECRET)
    elif target is None or not call.workspace.writable(target.path):
        call.env.flag(OUTSIDE)


def check_secret_words(words: Iterable[Word], cwd: str | None, env: CommandEnv) -> None:
    """Deny any word of a command that names a hidden path (``deny_list:secret_path``).

    Every word counts, whatever the program: a path is a path to ``cat``, ``cp``, ``tar`` and
    ``ssh -i`` alike, and which arguments a program reads as paths is not ours to guess. Besides
    the word itself, the value of ``name=value`` or ``--opt=value`` counts (``dd if=…``,
    ``--key-file=~/.ssh/id``), judged as the start of a longer path (``d=~/.ss; cat ${d}h/id``).
    A relative word is resolved against ``cwd``, and a plain one (no glob, no run-time part) also
    against every directory the same command names (``tar cf s.tar -C ~ .ssh``: which option
    changes the directory is the program's). A glob that can match a hidden path names it (:func:`.paths.reaches_hidden`).
    """
    workspace = env.workspace
    if not workspace.secrets:
        return
    words = list(words)
    bases = [cwd, *_named_directories(words, cwd, workspace.home)]
    for word in words:
        if _names_hidden(word, bases, workspace):
            env.flag(SECRET)
            return


_MAX_BASES = 8


def _named_directories(words: list[Word], cwd: str | None, home: str) -> list[str]:
    """The paths a command names (absolute, or climbing with ``..``), as bases for its other
    words."""
    bases: list[str] = []
    for word in words:
        value = _home_expanded(word.value, home)
        if not word.is_static or not (value.startswith("/") or value.split("/")[0] == ".."):
            continue
        target = resolve(Word(value, (Part("lit", value),)), cwd, strict=True)
        if target is not None and target.path not in bases:
            bases.append(target.path)
        if len(bases) == _MAX_BASES:
            break
    return bases


def _home_expanded(value: str, home: str) -> str:
    return home + value[1:] if value == "~" or value.startswith("~/") else value


def _names_hidden(word: Word, bases: list[str | None], workspace: Workspace) -> bool:
    """``word`` (relative: under any of ``bases``) names a hidden path."""
    candidates = [[(part.kind, part.text) for part in word.parts]]
    value = word.value
    equals = value.find("=")
    if equals > 0:
        after = [(part.kind, part.text) for part in drop_prefix(word, equals + 1).parts]
        candidates.append([*after, ("dyn", "")])  # a value may be the start of a longer path
    for pieces in candidates:
        if pieces and pieces[0][0] == "lit":
            # not expanded by bash after "--opt=", but the program may do it itself
            pieces[0] = ("lit", _home_expanded(pieces[0][1], workspace.home))
        absolute = bool(pieces) and pieces[0][0] == "lit" and pieces[0][1].startswith("/")
        plain = all(kind == "lit" for kind, _ in pieces)  # a glob is judged in the cwd only
        for base in bases if plain and not absolute else bases[:1]:
            if reaches_hidden(pieces, base, workspace.secrets):
                return True
    return False
