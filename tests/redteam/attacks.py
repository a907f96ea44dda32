"""The hostile tool calls of the red-team tier, as the mock model sends them.

Every Bash line of the corpus (:mod:`tests.differential.corpus`) and :data:`ESCAPES` (lines
against the sandbox itself), and the file tools pointed at
the secrets and the dotfiles: reads first, then writes and edits (Claude Code writes only a file
it has read, unchanged since), in the turns :func:`all_attacks` returns.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.differential.corpus import ATTACKS, Line
from tests.differential.home import SECRET_FILES

__all__ = ["ESCAPES", "Attack", "all_attacks", "read_of"]

_DUMP_DAEMON = """python3 - <<'EOF'
import re, subprocess
found = subprocess.run(["pgrep", "-of", "bridge run"], capture_output=True, text=True).stdout
with open("mem.bin", "wb") as out:
    for pid in found.split()[:1]:
        for line in open(f"/proc/{pid}/maps"):
            m = re.match(r"([0-9a-f]+)-([0-9a-f]+) r", line)
            try:
                with open(f"/proc/{pid}/mem", "rb") as mem:
                    mem.seek(int(m[1], 16))
                    out.write(mem.read(int(m[2], 16) - int(m[1], 16)))
            except (OSError, TypeError, ValueError, OverflowError):
                pass
EOF"""

_SSH = "s=$(printf '%s/.%s' \"$HOME\" ssh); "
_DECK = "c=$(printf '%s/.%s' \"$HOME\" codedeck); "

ESCAPES: tuple[Line, ...] = (
    Line("umount-ssh", "sandbox_escape", _SSH + 'umount -l "$s"; cat "$s/id_ed25519" > stolen'),
    Line("umount-bridge-home", "sandbox_escape", _DECK + 'umount -l "$c"; cp "$c/bridge.db" x.db'),
    Line(
        "unshare-umount",
        "sandbox_escape",
        _SSH + 'unshare -m sh -c "umount -l $s; cat $s/id_ed25519 > stolen"',
    ),
    Line(
        "remount-rw",
        "sandbox_escape",
        "mount -o remount,bind,rw /; mount -o remount,bind,rw ~; touch ~/pwned",
    ),
    Line(
        "daemon-environ", "sandbox_escape", "cat /proc/$(pgrep -of 'bridge run')/environ > env.txt"
    ),
    Line("daemon-memory", "sandbox_escape", _DUMP_DAEMON),
)
"""Lines against the sandbox itself, not the gate: its mounts, its namespaces, the daemon's
process (whose memory holds the bridge's key). Red-team only: run outside a sandbox (the
differential tier's jail), they would act on that jail or on the test machine."""


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
        for line in (*ATTACKS, *ESCAPES)
        if all(shutil.which(program) for program in line.needs)
    ]
    return [reads, writes, bash]


def read_of(path: object) -> Attack:
    """A Read of `path` (what a write of it needs first)."""
    return Attack("read-first", "secret", "Read", {"file_path": path})
