"""Where a path lies: inside the workspace, hidden, under a system directory, a device, or unknown.

Paths are judged lexically: ``~`` is already the home directory (the lexer did it), relative
paths are joined to the current directory, then ``..`` is folded (``posixpath.normpath``).
Symlinks are not followed — the gate is a pure function and cannot look at the disk — so a
symlink inside the workspace that points out of it is judged by where it sits. That is the
accepted limit of a lexical check: making such a link is a card (``ln -s ~ h``), but a later
``rm -rf h/`` is judged as a delete inside the folder, and the sandbox (only the session's folder
is writable) is what stops it.

A word with a glob or (in lenient mode) a run-time part names "something under" the directory
its static prefix ends in: ``/etc/pass*`` → a subtree of ``/etc``; ``*`` → a subtree of the cwd.

The workspace has two extents. Reads may go anywhere under the configured roots; writes only
under the session's own folder (its cwd), the one place the sandbox leaves writable. Hidden
paths (the bridge home, key and token files, ``~/.ssh``, …: the list the sandbox hides, passed in
as data) are neither, whatever the roots: naming one is ``deny_list:secret_path``. A word that
names a path *at or below* a hidden path names it; so does a glob that can match one
(``~/.ss?/id_rsa``, ``~/.config/*``: bash's ``*`` does not match a leading dot, so ``~/*`` does
not). A recursive read or a glob whose base is only an *ancestor* of a hidden path (``grep -r x
~``, ``~/**``) is not: it would refuse every search of the home, and the sandbox hides the
content anyway.
"""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass

from bridge.gate.shell.lexer import Word

__all__ = [
    "SAFE_DEVICES",
    "SYSTEM_DIRS",
    "SYSTEM_EXEMPT",
    "Target",
    "Workspace",
    "is_device",
    "is_safe_device",
    "is_system",
    "is_under",
    "normalise",
    "reaches_hidden",
    "resolve",
]

SYSTEM_DIRS: tuple[str, ...] = (
    "/etc",
    "/usr",
    "/boot",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/var",
    "/sys",
    "/proc",
    # macOS: /etc and /var are symlinks into /private; /System and /Library are the OS's.
    "/private/etc",
    "/private/var",
    "/system",
    "/library",
)
"""Directories whose writes are ``system_write`` (compared case-insensitively, for macOS)."""

SYSTEM_EXEMPT: tuple[str, ...] = (
    "/var/tmp",
    "/var/folders",
    "/private/var/tmp",
    "/private/var/folders",
)
"""Temp directories under /var: outside the workspace (a card), but not system writes.
macOS puts ``$TMPDIR`` under ``/var/folders``."""

SAFE_DEVICES = frozenset(
    {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/stdin",
     "/dev/stdout", "/dev/stderr", "/dev/tty"}
)  # fmt: skip
"""Pseudo-devices that are fine to read and write (``/dev/fd/N`` too)."""

_NOT_DEVICES = ("/dev/shm", "/dev/pts", "/dev/mqueue")


def normalise(path: str) -> str:
    """Fold ``.``, ``..`` and duplicate slashes of an absolute path (``//x`` → ``/x``)."""
    folded = posixpath.normpath(path)
    return "/" + folded.lstrip("/") if folded.startswith("//") else folded


def is_under(path: str, base: str) -> bool:
    """``path`` is ``base`` or lies below it, by whole segments (``/ws/app-2`` ∉ ``/ws/app``)."""
    return base == "/" or path == base or path.startswith(base + "/")


def is_safe_device(path: str) -> bool:
    """``/dev/null`` and friends, ``/dev/fd/N``."""
    return path in SAFE_DEVICES or path.startswith("/dev/fd/")


def is_device(path: str) -> bool:
    """A real device node (a disk, a partition, …): under /dev, neither safe nor a tmpfs."""
    if not is_under(path, "/dev") or path == "/dev" or is_safe_device(path):
        return False
    return not any(is_under(path, base) for base in _NOT_DEVICES)


def is_system(path: str, *, subtree: bool = False) -> bool:
    """``path`` (or, with ``subtree``, something below it) lies in a system directory."""
    lowered = path.lower()
    if any(is_under(lowered, exempt) for exempt in SYSTEM_EXEMPT):
        return False
    if any(is_under(lowered, base) for base in SYSTEM_DIRS):
        return True
    # A subtree of "/" or "/private" reaches into the system directories.
    return subtree and any(is_under(base, lowered) for base in SYSTEM_DIRS)


@dataclass(frozen=True, slots=True)
class Target:
    """A resolved path; ``subtree`` when the word names entries somewhere below ``path``."""

    path: str
    subtree: bool = False


@dataclass(frozen=True, slots=True)
class Workspace:
    """Where a session may read and write, and what it must never name.

    Attributes:
        roots: the configured workspace roots: reads anywhere below them are fine.
        home: the user's home directory.
        folder: the session's own folder (its cwd): writes are fine only below it (and inside
            a root). None: the roots are the write area too.
        secrets: the hidden paths: never readable, writable nor workspace.

    All paths are normalised and absolute.
    """

    roots: tuple[str, ...]
    home: str
    folder: str | None = None
    secrets: tuple[str, ...] = ()

    def hidden(self, path: str) -> bool:
        """``path`` is a hidden path or lies below one."""
        return any(is_under(path, secret) for secret in self.secrets)

    def within(self, path: str) -> bool:
        """``path`` may be read: a root or below one, and not hidden."""
        return any(is_under(path, root) for root in self.roots) and not self.hidden(path)

    def writable(self, path: str) -> bool:
        """``path`` may be written: inside the workspace and the session's folder."""
        return self.within(path) and (self.folder is None or is_under(path, self.folder))

    def home_or_ancestor(self, path: str) -> bool:
        """``path`` is the home directory or contains it (``/``, ``/home``, …)."""
        return is_under(self.home, path)

    def protected(self, path: str) -> bool:
        """Never to be deleted whole: ``/``, the home, a root, the session's folder, or an
        ancestor of one of them."""
        return (
            path == "/"
            or self.home_or_ancestor(path)
            or any(is_under(root, path) for root in self.roots)
            or (self.folder is not None and is_under(self.folder, path))
        )


_ANY_NAME = re.compile(r".*", re.DOTALL)


@functools.lru_cache(maxsize=1024)
def _component(pieces: tuple[tuple[str, str], ...]) -> tuple[re.Pattern[str], bool] | None:
    """One path component of a pattern as a regex, and whether it may match a leading dot.

    ``pieces`` are (kind, text) with kind ``lit`` or ``glob`` (``*``, ``?``, ``[``, or ``{`` of a
    tool's pattern). A bracket or brace makes the component match any name (the gate does not
    parse bracket expressions; matching more only ever denies more). None: a ``**`` component
    (any depth: an ancestor, never a denial by itself).
    """
    if all(kind == "glob" and text == "*" for kind, text in pieces) and len(pieces) >= 2:
        return None
    dot = bool(pieces) and pieces[0][0] == "lit" and pieces[0][1].startswith(".")
    if any(kind == "glob" and text in ("[", "{") for kind, text in pieces):
        return _ANY_NAME, dot
    regex = "".join(
        re.escape(text) if kind == "lit" else (".*" if text == "*" else ".")
        for kind, text in pieces
    )
    return re.compile(regex, re.DOTALL), dot or not any(kind == "glob" for kind, _ in pieces)


def _split(pieces: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """Pattern pieces cut into path components at the ``/`` of literal text."""
    components: list[list[tuple[str, str]]] = [[]]
    for kind, text in pieces:
        if kind != "lit":
            components[-1].append((kind, text))
            continue
        first, *rest = text.split("/")
        if first:
            components[-1].append(("lit", first))
        for chunk in rest:
            components.append([("lit", chunk)] if chunk else [])
    return [component for component in components if component]


def _reaches(
    components: list[list[tuple[str, str]]], names: list[str], stem: str | None = None
) -> bool:
    """The pattern's components match ``names`` (a hidden path) from the start, or go below it.

    ``stem``: the literal start of one more component a run-time part completes (``~/.ss$X``,
    ``d=~/.ss; cat ${d}h``): it reaches the hidden path when it starts the hidden path's *last*
    name after every earlier component matched. A stem of an earlier name (``~/.conf$X`` for
    ``~/.config/gh``) is only an ancestor's (as ``~/$X`` is).
    """
    index = 0
    for component in components:
        if index == len(names):
            return True  # the hidden path matched: the rest lies below it
        compiled = _component(tuple(component))
        if compiled is None:
            continue  # "**": only its zero-depth reading is checked (an ancestor otherwise)
        regex, dot = compiled
        name = names[index]
        if (name.startswith(".") and not dot) or not regex.fullmatch(name):
            return False
        index += 1
    if stem and index == len(names) - 1 and names[index].startswith(stem):
        return True
    return index >= len(names)


def reaches_hidden(
    pieces: Sequence[tuple[str, str]], cwd: str | None, secrets: Sequence[str]
) -> bool:
    """A path pattern names a hidden path, or something below one.

    Args:
        pieces: the pattern as (kind, text): ``lit`` text, ``glob`` characters, ``dyn`` for a
            run-time part (the pattern is judged by what comes before it: an unknown part could
            be anything, and only a prefix that already reached a hidden path, or split the
            hidden path's last name, is a denial).
        cwd: the directory a relative pattern is relative to (None: unknown, never a denial).
        secrets: the hidden paths, absolute and normalised.
    """
    if all(kind != "glob" and kind != "dyn" for kind, _ in pieces):
        text = "".join(text for _, text in pieces)  # the common case: a plain path
        if not text or (not text.startswith("/") and cwd is None):
            return False
        return _under_any(normalise(posixpath.join(cwd or "/", text)), _index(tuple(secrets))[0])
    static: list[tuple[str, str]] = []
    cut = False
    for kind, text in pieces:
        if kind == "dyn":
            cut = True
            break
        static.append(("glob" if kind == "glob" else "lit", text))
    if not static:
        return False
    if not (static[0][0] == "lit" and static[0][1].startswith("/")):
        if cwd is None:
            return False
        static.insert(0, ("lit", cwd.rstrip("/") + "/"))
    components = _split(static)
    stem: str | None = None
    if cut and not (static[-1][0] == "lit" and static[-1][1].endswith("/")):
        # The component the run-time part is in could be any name that starts as it does.
        partial = components.pop()
        if all(kind == "lit" for kind, _ in partial):
            stem = "".join(text for _, text in partial)
    components = _fold(components)
    literal: list[str] = []  # the leading components without a glob: only secrets there count
    for component in components:
        if any(kind != "lit" for kind, _ in component):
            break
        literal.append("".join(text for _, text in component))
    prefix = "/" + "/".join(literal)
    exact, ancestors = _index(tuple(secrets))
    if not (prefix in ancestors or _under_any(prefix, exact)):
        return False  # no hidden path lies below or above where the pattern starts to vary
    for secret in secrets:
        if not (is_under(secret, prefix) or is_under(prefix, secret)):
            continue
        names = [name for name in secret.split("/") if name]
        if _reaches(components, names, stem):
            return True
    return False


@functools.lru_cache(maxsize=16)
def _index(secrets: tuple[str, ...]) -> tuple[frozenset[str], frozenset[str]]:
    """The hidden paths as a set, and the set of their proper ancestors (``/``, ``/home``, …)."""
    ancestors: set[str] = set()
    for secret in secrets:
        parent = posixpath.dirname(secret)
        while parent not in ancestors and parent != secret:
            ancestors.add(parent)
            secret, parent = parent, posixpath.dirname(parent)
    return frozenset(secrets), frozenset(ancestors)


def _under_any(path: str, exact: frozenset[str]) -> bool:
    """``path`` is one of ``exact`` or lies below one (walking up its ancestors)."""
    while True:
        if path in exact:
            return True
        parent = posixpath.dirname(path)
        if parent == path:
            return False
        path = parent


def _fold(components: list[list[tuple[str, str]]]) -> list[list[tuple[str, str]]]:
    """Fold literal ``.`` and ``..`` components, as the path checks do (``posixpath.normpath``)."""
    folded: list[list[tuple[str, str]]] = []
    for component in components:
        literal = (
            "".join(text for kind, text in component)
            if all(kind == "lit" for kind, _ in component)
            else None
        )
        if literal == ".":
            continue
        if literal == "..":
            if folded:
                folded.pop()
            continue
        folded.append(component)
    return folded


def resolve(word: Word, cwd: str | None, *, strict: bool) -> Target | None:
    """Where a (brace-expanded) word points.

    Args:
        word: the word, after brace expansion.
        cwd: the current directory, or None when a ``cd`` made it unknown.
        strict: a word with a run-time part is unknown (None) when strict; when lenient it is
            judged by its static prefix, and a word without one is not a path at all (None).

    Returns:
        The target, or None when it cannot be told.
    """
    text: list[str] = []
    subtree = False
    dynamic = False
    for part in word.parts:
        if part.kind in ("glob", "dyn"):
            subtree = True
            dynamic = part.kind == "dyn"
            break
        text.append(part.text)
    prefix = "".join(text)
    if (dynamic and (strict or not prefix)) or not (prefix or subtree):
        return None  # unknown, or "" (which names no file at all)
    if subtree:
        prefix = prefix[: prefix.rfind("/") + 1]
    if not prefix.startswith("/"):
        if cwd is None:
            return None
        prefix = posixpath.join(cwd, prefix) if prefix else cwd
    return Target(normalise(prefix), subtree)
