"""One line, judged twice: by the gate, and by what bash really does to a throwaway home.

:class:`Bench` holds what every trial shares — a template home built once (its repositories made
inside the jail, so their paths are the jail's), the canaries in its secrets, and a web server on
127.0.0.1 (:mod:`tests.differential.web`) serving the scripts the download-then-run lines fetch. :meth:`Bench.trial` copies the
template, asks the gate, runs the line in the jail and measures the effects on disk.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from bridge.gate import GateContext, GateDecision, evaluate
from bridge.sandbox import hidden_paths as sandbox_hidden

from .corpus import Line
from .home import (
    PROJECT,
    Effects,
    arm_secrets,
    effects,
    make_canaries,
    remove_tree,
    secrets_read,
    setup_script,
    snapshot,
    write_home_files,
)
from .jail import JAIL_HOME, Ran, run_jailed
from .web import ScriptServer

__all__ = ["Bench", "Trial", "gate_context", "hidden_paths"]


def hidden_paths(home: str) -> tuple[str, ...]:
    """The paths the sandbox hides for a bridge whose home is ``~/.codedeck`` (its default)."""
    return sandbox_hidden(home, f"{home}/.codedeck")


def gate_context(home: str) -> GateContext:
    """The gate's view of a session in ``~/proj``, mode ``default``, workspace root ``~`` (the
    bridge's default), with the sandbox's hidden paths as its secrets."""
    return GateContext(
        mode="default",
        cwd=f"{home}/{PROJECT}",
        roots=(home,),
        home=home,
        secrets=hidden_paths(home),
    )


@dataclass(frozen=True, slots=True)
class Trial:
    """A line's verdict and what it did."""

    line: str
    decision: GateDecision
    ran: Ran
    effects: Effects

    def describe(self) -> str:
        """A few lines for an assertion message."""
        return (
            f"line: {self.line}\n"
            f"gate: {self.decision.outcome.value} {list(self.decision.reasons)}\n"
            f"bash: exit {self.ran.returncode}; {self.effects.describe()}\n"
            f"stderr: {self.ran.stderr.decode(errors='replace')[-400:]}"
        )


class Bench:
    """The template home and the web server every trial shares.

    Args:
        root: an empty directory for the template and the trials' homes.
        server: the running web server (what a line uploads to it counts as output).

    Raises:
        AssertionError: the template's repositories could not be made.
    """

    def __init__(self, root: Path, server: ScriptServer) -> None:
        self.root = root
        self.server = server
        self.url = server.url
        self.canaries = make_canaries()
        self.template = root / "template"
        self.template.mkdir()
        write_home_files(self.template, self.canaries)
        made = run_jailed(self.template, setup_script(), cwd=JAIL_HOME)
        assert made.returncode == 0, made.stderr.decode(errors="replace")
        self._count = 0

    def trial(self, line: Line) -> Trial:
        """Ask the gate about `line`, then run it in a fresh copy of the template."""
        command = line.render(JAIL_HOME, self.url)
        decision = evaluate("Bash", {"command": command}, gate_context(JAIL_HOME))
        self._count += 1
        home = self.root / f"home-{self._count}"
        shutil.copytree(self.template, home, symlinks=True)
        try:
            before = snapshot(home)
            arm_secrets(home)
            posted = len(self.server.posted)
            ran = run_jailed(home, command, cwd=f"{JAIL_HOME}/{PROJECT}")
            uploads = self.server.posted[posted:]
            read = secrets_read(home)
            after = snapshot(home)
            found = effects(
                home,
                before,
                after,
                self.canaries,
                output=(ran.stdout, ran.stderr, *uploads),
                read=read,
            )
            found.refused = ran.refused_write
        finally:
            remove_tree(home)
        return Trial(command, decision, ran, found)
