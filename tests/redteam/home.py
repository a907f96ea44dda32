"""The throwaway home of the red-team tier, with the daemon on its defaults inside it.

A developer's home (:mod:`tests.differential.home`: ``~/proj`` cloned from a bare
``~/remote.git``, dotfiles, ``~/.ssh`` and ``~/.netrc`` holding canaries) where the daemon runs
as a user runs it: ``HOME`` is that home, the bridge home is ``~/.codedeck`` (its real database
holds the identity key), the workspace root is the home. The agent is the Claude Code CLI
(state in ``~/.claude``) or OpenCode (its XDG directories under the home, as a user's are).
:meth:`RedTeamHome.restore` puts back what one attack changed, so the next starts clean.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from tests.differential.home import (
    PROJECT,
    Snapshot,
    make_canaries,
    remove_tree,
    setup_script,
    snapshot,
    write_home_files,
)
from tests.support.daemon import DaemonProcess
from tests.support.mock_anthropic import MockAnthropic
from tests.support.opencode_env import opencode_env

__all__ = ["AGENT_STATE", "RedTeamHome"]

AGENT_STATE: tuple[str, ...] = (
    ".codedeck",  # the bridge's own home: the daemon writes it (the agent never sees it)
    ".codedeck.log",  # the test harness's daemon log, beside the bridge home
    ".claude",
    ".claude.json",
    ".config/opencode",
    ".local/share/opencode",
    ".local/state/opencode",
    ".gemini",  # made by the sandbox before an ACP agent's spawn, as every agent's state dir
    ".cache",
    ".npm",
)
"""What the daemon and the agent write outside the project by design (relative to the home):
the bridge home, the agent's own state and the caches; every other byte must stay as it was."""


_XDG_DIRS = (".config", ".cache", ".local/share", ".local/state")


class RedTeamHome:
    """The throwaway home and the daemon that runs in it.

    Args:
        home: a directory to make (its parent gets the pristine copy and the agent's test setup).
        sandbox: False writes ``[sandbox] enabled = false`` into the bridge's config.
        opencode: OpenCode's command (``opencode acp``): the home's agent is OpenCode, registered
            in the bridge's config as a user registers it; None: the Claude Code CLI.
    """

    def __init__(self, home: Path, *, sandbox: bool, opencode: Sequence[str] | None = None) -> None:
        self.home = home
        self.bridge_home = home / ".codedeck"
        self.opencode = list(opencode) if opencode is not None else None
        self.canaries = make_canaries()
        home.mkdir(parents=True)
        write_home_files(home, self.canaries, bridge_db=False)
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(home),
            "GIT_CONFIG_NOSYSTEM": "1",
        }
        subprocess.run(["bash", "-c", setup_script()], cwd=home, env=env, check=True)
        for rel in _XDG_DIRS:  # a user's home has them; an agent's state goes below them
            (home / rel).mkdir(parents=True, exist_ok=True)
        self.bridge_home.mkdir(mode=0o700)
        config = []
        if not sandbox:  # on by default: the daemon runs on its defaults unless told otherwise
            config.append("[sandbox]\nenabled = false\n")
        if self.opencode is not None:
            config.append(f"[agents.opencode]\ncommand = {json.dumps(self.opencode)}\n")
        if config:
            (self.bridge_home / "config.toml").write_text("\n".join(config))
        self.pristine = home.parent / f"{home.name}-pristine"
        shutil.copytree(home, self.pristine, symlinks=True)

    @property
    def agent(self) -> str:
        """The agent id a session asks for."""
        return "claude" if self.opencode is None else "opencode"

    @property
    def project(self) -> Path:
        """The session's folder."""
        return self.home / PROJECT

    def daemon(self, relay_url: str, mock: MockAnthropic) -> DaemonProcess:
        """The daemon on its defaults in this home, driving the agent against `mock`."""
        if self.opencode is None:
            env = mock.cli_env(self.home / ".claude")
        else:
            # OpenCode's own config allows bash and edits, as a user's might; the bridge still
            # asks for every call. Its state goes where a user's does: the XDG defaults.
            setup = opencode_env(
                mock, self.home.parent / "opencode", permission={"bash": "allow", "edit": "allow"}
            )
            env = {
                name: value
                for name, value in setup.items()
                if not name.startswith("XDG_") and name != "OPENCODE_PERMISSION"
            }
        env |= {"HOME": str(self.home), "CODEDECK_AGENT": "claude", "GIT_CONFIG_NOSYSTEM": "1"}
        return DaemonProcess(self.bridge_home, [relay_url], self.home, env=env)

    def bridge_canaries(self, daemon: DaemonProcess) -> dict[str, bytes]:
        """The bridge's secrets as they would leak: its key (hex, nsec, raw bytes) and the
        database file itself (its header)."""
        keypair = daemon.keypair()
        return {
            "bridge_secret_hex": keypair.secret_hex.encode(),
            "bridge_nsec": keypair.nsec.encode(),
            "bridge_secret_raw": keypair.secret,
            "bridge_db_file": b"SQLite format 3\x00",
        }

    def snapshot(self) -> Snapshot:
        """The home outside the project and :data:`AGENT_STATE`."""
        return snapshot(self.home, ignore=AGENT_STATE)

    def restore(self) -> None:
        """Put back what an attack changed: the project's content (in place: the agent works in
        it), every file outside it but :data:`AGENT_STATE`, and the bare repository's refs."""
        for entry in self.project.iterdir():
            _delete(entry)
        for entry in (self.pristine / PROJECT).iterdir():
            _copy(entry, self.project / entry.name)
        now = self.snapshot()
        was = snapshot(self.pristine, ignore=AGENT_STATE)
        for rel in sorted(set(now.entries) | set(was.entries), key=len):
            if now.entries.get(rel) == was.entries.get(rel):
                continue
            target = self.home / rel
            _delete(target)
            if rel in was.entries:
                _copy(self.pristine / rel, target)
        bare = self.home / "remote.git"
        for ref in now.refs.keys() - was.refs.keys():
            _git(bare, "update-ref", "-d", ref)
        for ref, sha in was.refs.items():
            if now.refs.get(ref) != sha:
                _git(bare, "update-ref", ref, sha)


def _git(bare: Path, *args: str) -> None:
    subprocess.run(["git", "--git-dir", str(bare), *args], check=True, capture_output=True)


def _delete(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        remove_tree(path)


def _copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir() and not source.is_symlink():
        shutil.copytree(source, target, symlinks=True)
    else:
        shutil.copy2(source, target, follow_symlinks=False)
