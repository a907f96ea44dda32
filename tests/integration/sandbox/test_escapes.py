"""The sandbox's own walls, attacked from inside with the tools a root shell has.

bubblewrap run by root keeps root's capabilities in the sandbox unless told otherwise, and with
``CAP_SYS_ADMIN`` a hidden mount can be unmounted and ``/`` remounted writable. Each attempt here
runs for real in the sandbox the bridge builds (:func:`bridge.sandbox.bwrap_argv`), whoever runs
the tests, and is judged by what it could read or write afterwards.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from bridge.sandbox import SandboxPolicy, bwrap_argv, check_sandbox

STATUS = check_sandbox(None, os.environ.get("PATH"))
pytestmark = pytest.mark.skipif(not STATUS.available, reason="bubblewrap cannot run here")

SECRET = "a-secret-the-agent-must-not-read"

ATTACKS = {
    "umount": "umount -l {hidden}",
    "umount-in-a-user-namespace": "unshare -Urm sh -c 'umount -l {hidden}; cat {hidden}/key'",
    "remount-root-writable": "mount -o remount,rw / && touch {outside}/pwned",
    "remount-hidden-writable": "mount -o remount,rw {hidden} && touch {hidden}/pwned",
    "mount-over-the-tmpfs": "mount --bind {outside} {hidden}",
}


def run_in_sandbox(tmp_path: Path, line: str) -> subprocess.CompletedProcess[str]:
    folder, hidden, outside = tmp_path / "proj", tmp_path / "keys", tmp_path / "outside"
    for path in (folder, hidden, outside):
        path.mkdir(exist_ok=True)
    (hidden / "key").write_text(SECRET)
    assert STATUS.bwrap is not None
    policy = SandboxPolicy(bwrap=STATUS.bwrap, cwd=str(folder), hidden_dirs=(str(hidden),))
    empty = tmp_path / "empty"
    empty.write_text("")
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    script = (
        line.format(hidden=hidden, outside=outside)
        + f"; cat {hidden}/key; grep CapEff /proc/self/status"
    )
    argv = bwrap_argv(policy, ["sh", "-c", script], tmp=str(tmp), empty_file=str(empty))
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_the_agent_cannot_undo_its_mounts(tmp_path: Path, name: str) -> None:
    done = run_in_sandbox(tmp_path, ATTACKS[name])
    assert SECRET not in done.stdout + done.stderr
    assert not (tmp_path / "outside" / "pwned").exists()
    assert not (tmp_path / "keys" / "pwned").exists()
    assert (tmp_path / "keys" / "key").read_text() == SECRET


def test_the_agent_has_no_capabilities(tmp_path: Path) -> None:
    done = run_in_sandbox(tmp_path, "true")
    assert "CapEff:\t0000000000000000" in done.stdout
