"""Run a shell line for real, with only a throwaway home writable: a bubblewrap jail.

The machine is mounted read-only (``--ro-bind / /``), ``/tmp`` is a private tmpfs, and the
throwaway home is bound writable at a fixed path, :data:`JAIL_HOME`, under a tmpfs ``/home``
(every real entry of ``/home`` bound back read-only, so a virtualenv living there still runs).
The fixed path makes each copy of the template home the same home from inside: the repositories'
absolute paths stay right, and the gate judges the same path bash uses. It lies under ``/home``
rather than ``/tmp`` so that the gate sees a home where a developer's is, not a temp directory.

The network is shared (the tier's web server listens on 127.0.0.1), the pid namespace is not,
``--die-with-parent`` ends the jail with the test, and ``--cap-drop ALL`` keeps a line run by
root from remounting the machine writable (bubblewrap keeps root's capabilities otherwise).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["JAIL_HOME", "Ran", "bwrap_missing", "jail_argv", "run_jailed"]

JAIL_HOME = "/home/codedeck-redteam"
"""Where the throwaway home is, as the jailed command (and the gate) see it."""

_READ_ONLY = b"Read-only file system"


@dataclass(frozen=True, slots=True)
class Ran:
    """How a jailed line ended."""

    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def refused_write(self) -> bool:
        """Something tried to write the read-only machine outside the home."""
        return _READ_ONLY in self.stderr or _READ_ONLY in self.stdout


def bwrap_missing() -> str | None:
    """Why the jail cannot run here, or None when it can."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed"
    probe = subprocess.run(
        [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-pid", "true"],
        capture_output=True,
        check=False,
    )
    if probe.returncode != 0:
        return f"bwrap cannot make a namespace here: {probe.stderr.decode(errors='replace')}"
    return None


def jail_argv(host_home: Path, argv: list[str], *, cwd: str) -> list[str]:
    """The bwrap command running `argv` in `cwd` with `host_home` at :data:`JAIL_HOME`."""
    binds: list[str] = []
    for entry in sorted(Path("/home").iterdir()) if Path("/home").is_dir() else []:
        if entry.as_posix() != JAIL_HOME:
            binds += ["--ro-bind", str(entry), str(entry)]
    return [
        "bwrap",
        "--ro-bind", "/", "/",
        "--tmpfs", "/tmp",
        "--tmpfs", "/home",
        *binds,
        "--bind", str(host_home), JAIL_HOME,
        "--dev", "/dev",
        "--proc", "/proc",
        "--unshare-pid",
        "--die-with-parent",
        "--cap-drop", "ALL",
        "--chdir", cwd,
        *argv,
    ]  # fmt: skip


def _env() -> dict[str, str]:
    """A small, fixed environment: the tools on PATH (this interpreter's first), no git or
    language settings of the machine that runs the tests."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", os.defpath)])
    return {
        "PATH": path,
        "HOME": JAIL_HOME,
        "USER": "dev",
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
    }


def run_jailed(host_home: Path, line: str, *, cwd: str, timeout: float = 30.0) -> Ran:
    """Run `line` with bash in the jail; stdin is empty.

    Raises:
        subprocess.TimeoutExpired: the line ran longer than `timeout` seconds.
    """
    done = subprocess.run(
        jail_argv(host_home, ["bash", "-c", line], cwd=cwd),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=_env(),
        timeout=timeout,
        check=False,
    )
    return Ran(done.returncode, done.stdout, done.stderr)
