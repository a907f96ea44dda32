"""What one command line wrote earlier, for the rules that run files.

``curl -O https://x/i.sh && bash i.sh`` and ``echo 'rm -rf ~' > x.sh; bash x.sh`` each write a
file and then run it, all in one line: neither command alone is a risk. The checker remembers
the files the line wrote (a download, or anything else) and whether the command being checked
reads a download on its stdin (``curl … | tee i.sh``); running such a file is ``curl_pipe_sh``
for a download and ``inline_code`` for any other file the line wrote (its content is code the
card shows only as the command that wrote it). A download unpacked by an archiver (``curl … |
tar x``, ``unzip x.zip`` of a downloaded file) makes every later local program of the line
``inline_code``: which files it wrote cannot be told. It also keeps the variables the line gave an
integer value, for the arithmetic checks of :mod:`bridge.gate.commands.deferred`.

This is a protocol on top of the rules' ``CommandEnv``: the shell checker implements it; a rule
asks for it with :func:`memory_of` and does nothing when the environment has none.
"""

from __future__ import annotations

import re
from typing import Protocol, runtime_checkable

from bridge.gate.context import INLINE, CommandEnv
from bridge.gate.labels import deny_label
from bridge.gate.paths import Target

__all__ = ["LineMemory", "check_written", "memory_of", "note_written", "runs_later"]

_RUNS_LATER = re.compile(r"/\.git/(hooks(/|$)|config$|info/attributes$)|/\.gitattributes$")


@runtime_checkable
class LineMemory(Protocol):
    """The checker's memory of the files this line wrote."""

    def note_written(self, path: str) -> None:
        """Remember that this line writes ``path`` (a download when stdin is one)."""
        ...

    def written(self, path: str) -> bool:
        """True if this line wrote ``path`` earlier (not by a download)."""
        ...

    def downloaded(self, path: str) -> bool:
        """True if this line wrote a download to ``path`` earlier."""
        ...

    @property
    def stdin_is_download(self) -> bool:
        """The command being checked reads a download on its stdin (``curl … | tar x``)."""
        ...

    def note_unpacked(self) -> None:
        """Remember that this line unpacked a download into files it cannot name."""
        ...

    def unpacked(self) -> bool:
        """True if this line unpacked a download earlier."""
        ...

    @property
    def integers(self) -> set[str]:
        """Variables this line gave an integer value so far (see :mod:`bridge.gate.commands.deferred`)."""
        ...


def memory_of(env: CommandEnv) -> LineMemory | None:
    """The environment's memory, if it keeps one."""
    return env if isinstance(env, LineMemory) else None


def runs_later(path: str) -> bool:
    """A git hook or git's config: what is written there runs on a later git command."""
    return _RUNS_LATER.search(path) is not None


def note_written(env: CommandEnv, target: Target | None) -> None:
    """Remember a file this line writes (a single file, not a glob); a write into a git hook
    or git's config is ``inline_code``."""
    if target is not None and runs_later(target.path):
        env.flag(INLINE)
    memory = memory_of(env)
    if memory is not None and target is not None and not target.subtree:
        memory.note_written(target.path)


def check_written(env: CommandEnv, target: Target | None) -> None:
    """Running ``target``: a download of this line is ``curl_pipe_sh``, any file it wrote is
    ``inline_code``."""
    if target is None or target.subtree:
        return
    if env.downloaded(target.path):
        env.flag(deny_label("curl_pipe_sh"))
        return
    memory = memory_of(env)
    if memory is not None and (memory.written(target.path) or memory.unpacked()):
        env.flag(INLINE)  # what it runs may be a file the line wrote or unpacked
