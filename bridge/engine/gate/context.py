"""What a command rule sees: the call, its scope, the checker behind it, and path verdicts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from .labels import deny_label
from .paths import Target, Workspace, is_device, is_safe_device, is_system, resolve
from .shell_lexer import Word
from .words import drop_prefix

__all__ = [
    "BACKGROUND",
    "INLINE",
    "OUTSIDE",
    "PRIVILEGED",
    "UNPARSABLE",
    "Call",
    "CommandEnv",
    "Facts",
    "Scope",
    "check_lenient",
    "check_read",
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
    """The label for writing (or removing) ``target``, None when that is fine."""
    if target is None:
        return OUTSIDE
    path = target.path
    if workspace.within(path):
        return None
    if is_device(path) or (target.subtree and path == "/dev"):
        return deny_label("dd_device")
    if is_safe_device(path):
        return None
    if is_system(path, subtree=target.subtree):
        return deny_label("system_write")
    return OUTSIDE


def read_label(target: Target | None, workspace: Workspace) -> str | None:
    """The label for reading ``target``, None when that is fine."""
    if target is None:
        return OUTSIDE
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
