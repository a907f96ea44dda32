"""The check of a CLI command's bridge home, made before the command touches it.

Two mistakes of a user's first hour would otherwise surface deep inside whatever trips on them (a
socket path that is "Not a directory", an empty list): so every command checks its home first.

- A home that is a file, or lies below one (``--home notes.txt``), is refused by every command,
  in one message that names the file. The daemon would refuse it too; the others would fail on
  some path inside it.
- A home that does not exist is refused by the commands that only read an existing bridge
  (`HOME_READERS`: ``status``, ``phones``, ``decisions``…), with where that home came from
  (``--home``, ``CODEDECK_HOME`` or the default): a typo in ``--home`` must not look like a
  bridge with no phones or no decisions, and must not create a home (``sessions close`` with no
  daemon takes the home's lock, which would). ``run``, ``desiide`` and ``service install`` create
  the home, and ``config show`` shows what ``run`` would use, so they accept a missing one;
  ``keys show`` checks it itself, since a key file does not need the home.

``doctor`` reports both in its own checks rather than refusing to run.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Final

from store.home import blocking_file, not_a_directory_message

__all__ = ["HOME_READERS", "home_error", "home_source", "missing_home_message"]

HOME_READERS: Final = frozenset({"status", "pair", "phones", "unpair", "sessions", "decisions"})


def home_source(flag: str | None, env: Mapping[str, str]) -> str:
    """Where the home in effect comes from: ``--home``, ``CODEDECK_HOME`` or ``default``."""
    if flag:
        return "--home"
    if env.get("CODEDECK_HOME"):
        return "CODEDECK_HOME"
    return "default"


def missing_home_message(home: Path, source: str) -> str:
    """The home does not exist: say whose setting named it and the two ways forward."""
    origin = {
        "--home": "given with --home",
        "CODEDECK_HOME": "from CODEDECK_HOME",
    }.get(source, "the default; --home or CODEDECK_HOME choose another")
    run = "codedeck-bridge run" if source != "--home" else f"codedeck-bridge run --home {home}"
    return (
        f"the bridge home {home} ({origin}) does not exist: pass --home with the home the bridge "
        f"runs with, or start the bridge once with `{run}` to create it"
    )


def home_error(command: str, home: Path, source: str) -> str | None:
    """Why `command` cannot use `home` (see the module docstring), or None when it can."""
    blocker = blocking_file(home)
    if blocker is not None:
        return not_a_directory_message(home, blocker)
    if command in HOME_READERS and not home.exists():
        return missing_home_message(home, source)
    return None
