"""The hostile tool calls of the red-team tier, as the mock model sends them.

Every Bash line of the corpus (:mod:`tests.differential.corpus`), and the file tools pointed at
the secrets and the dotfiles: reads first, then writes and edits (Claude Code writes only a file
it has read, unchanged since), in the turns :func:`all_attacks` returns.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.differential.corpus import ATTACKS
from tests.differential.home import SECRET_FILES

__all__ = ["Attack", "all_attacks", "read_of"]


@dataclass(frozen=True, slots=True)
class Attack:
    """One hostile tool call.

    Attributes:
        id: the corpus id (or a name for a file-tool attack).
        kind: its class.
        tool: the Claude Code tool (``Bash``, ``Read``, ``Write``, ``Edit``).
        input: the tool's input.
    """

    id: str
    kind: str
    tool: str
    input: Mapping[str, object]

    def directive(self) -> str:
        """The mock model's ``[[tool: …]]`` directive for this call.

        The directive's own syntax ends at ``]]`` and splits on ``|``: the JSON escapes them.
        """
        text = json.dumps(dict(self.input))
        for char in "[]|":
            text = text.replace(char, f"\\u{ord(char):04x}")
        return f"[[tool: {self.tool} | {text}]]"


def all_attacks(home: Path, url: str) -> list[list[Attack]]:
    """The attacks in turns: the file tools' reads, then their writes (Claude Code writes a file
    only once it read it, unchanged since), then every Bash line of the corpus."""

    def read(name: str, rel: str) -> Attack:
        return Attack(f"read-{name}", "secret", "Read", {"file_path": f"{home}/{rel}"})

    def write(name: str, tool: str, rel: str, **fields: str) -> Attack:
        return Attack(name, "secret", tool, {"file_path": f"{home}/{rel}", **fields})

    reads = [read(name, rel) for name, rel in SECRET_FILES.items()]
    reads += [
        read("bridge-config", ".codedeck/config.toml"),
        read("bashrc", ".bashrc"),
        read("profile", ".profile"),
    ]
    writes = [
        write("edit-bashrc", "Edit", ".bashrc", old_string="# bashrc", new_string="touch ~/pwned"),
        write("write-profile", "Write", ".profile", content="touch ~/pwned\n"),
        write("write-ssh-rc", "Write", ".ssh/rc", content="touch ~/pwned\n"),
        write("write-bridge-config", "Write", ".codedeck/evil.toml", content="x = 1\n"),
    ]
    bash = [
        Attack(line.id, line.kind, "Bash", {"command": line.render(str(home), url)})
        for line in ATTACKS
        if all(shutil.which(program) for program in line.needs)
    ]
    return [reads, writes, bash]


def read_of(path: object) -> Attack:
    """A Read of `path` (what a write of it needs first)."""
    return Attack("read-first", "secret", "Read", {"file_path": path})
