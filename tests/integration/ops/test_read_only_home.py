"""A home the bridge cannot write, for real: a read-only mount, and a directory of mode 0500.

The two causes need different fixes (a remount or another --home; a chmod), so each command must
name the right one: ``run`` refuses the home, ``keys show`` and ``decisions`` still read it, and
``doctor`` fails its home check without suggesting a restore from a backup.

A read-only file system is made with bubblewrap (``--ro-bind`` of the home onto itself, no root
needed); mode 0500 is enforced on a superuser too, by running the command without the
capabilities that override file permissions (``setpriv``). Each case runs the CLI as a process,
as the mount and the dropped capabilities apply to a process; the fast unit tests with the
errno faked at the edge are in ``tests/store/test_home.py`` and ``tests/ops/test_doctor_home.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge.nostr.keys import Keypair
from tests.ops.support import REPO, CliResult, clean_env, make_store

KEY = Keypair.from_secret("0d" * 32)
OFFLINE = ("relay", "lan", "claude", "agent", "sandbox", "clock", "registration", "credentials")
READ_ONLY_FIX = (
    "pass --home with a directory on a writable file system, or remount that file system read-write"
)


def _runs(argv: list[str]) -> bool:
    try:
        done = subprocess.run(argv, capture_output=True, timeout=30, check=False)
    except OSError:
        return False
    return done.returncode == 0


def run_as(prefix: list[str], *args: str) -> CliResult:
    done = subprocess.run(
        [*prefix, sys.executable, "-m", "bridge", *args],
        capture_output=True,
        text=True,
        env=clean_env(),
        cwd=REPO,
        timeout=60,
        check=False,
    )
    return CliResult(done.returncode, done.stdout, done.stderr)


def doctor_checks(prefix: list[str], home: Path) -> tuple[dict[str, dict[str, str]], str]:
    skips = [arg for name in OFFLINE for arg in ("--skip", name)]
    result = run_as(prefix, "doctor", "--home", str(home), "--json", *skips)
    assert result.code == 1, result.stderr
    return {c["name"]: c for c in json.loads(result.stdout)["checks"]}, result.stdout


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    asyncio.run(make_store(path, KEY))
    return path


def read_only(home: Path) -> list[str]:
    """The command prefix that mounts `home` read-only on itself (skips when bwrap cannot)."""
    bwrap = shutil.which("bwrap")
    prefix = [bwrap or "bwrap", "--dev-bind", "/", "/", "--ro-bind", str(home), str(home)]
    if bwrap is None or not _runs([*prefix, "true"]):
        pytest.skip("bubblewrap cannot make a read-only bind mount here")
    return prefix


@pytest.fixture
def unwritable(home: Path) -> Iterator[list[str]]:
    """`home` at mode 0500, and the prefix under which that mode binds (also for a superuser)."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
        if shutil.which("setpriv") is None or not _runs([*prefix, "true"]):
            pytest.skip("running as root and cannot drop the permission-override capabilities")
    home.chmod(0o500)
    try:
        yield prefix
    finally:
        home.chmod(0o700)


# --- a read-only file system ---------------------------------------------------------------------


def test_run_on_a_read_only_file_system_says_remount_or_another_home(home: Path) -> None:
    prefix = read_only(home)
    result = run_as(prefix, "run", "--home", str(home))
    assert result.code == 1
    assert result.stderr.splitlines()[-1] == (
        f"codedeck-bridge: the bridge home {home} is on a read-only file system: {READ_ONLY_FIX}"
    )
    home.chmod(0o755)  # a home the daemon would tighten: chmod cannot work there either
    loose = run_as(prefix, "run", "--home", str(home))
    assert "chmod" not in loose.stderr and loose.stderr.endswith(f"{READ_ONLY_FIX}\n")
    below = run_as(prefix, "run", "--home", str(home / "sub"))
    assert below.stderr.splitlines()[-1] == (
        f"codedeck-bridge: cannot create the bridge home {home}/sub: its folder {home} is on a "
        f"read-only file system: {READ_ONLY_FIX}"
    )
    assert sorted(p.name for p in home.iterdir()) == ["bridge.db"]


def test_the_readers_read_a_home_on_a_read_only_file_system(home: Path) -> None:
    prefix = read_only(home)
    keys = run_as(prefix, "keys", "show", "--home", str(home), "--json")
    assert keys.code == 0, keys.stderr
    assert json.loads(keys.stdout)["npub"] == KEY.npub
    decisions = run_as(prefix, "decisions", "--home", str(home), "--json")
    assert (decisions.code, json.loads(decisions.stdout)) == (0, [])


def test_doctor_fails_a_home_on_a_read_only_file_system(home: Path) -> None:
    checks, text = doctor_checks(read_only(home), home)
    assert checks["home"]["status"] == "fail"
    assert checks["home"]["summary"] == (
        f"{home} is on a read-only file system: the bridge cannot create its lock, database and "
        "socket there"
    )
    assert checks["home"]["fix"] == READ_ONLY_FIX
    assert checks["database"]["status"] == "pass" and checks["identity"]["status"] == "pass"
    assert "restore" not in text and "backup" not in text


# --- a directory without write permission --------------------------------------------------------


def test_run_in_a_home_without_write_permission_says_chmod(
    home: Path, unwritable: list[str]
) -> None:
    result = run_as(unwritable, "run", "--home", str(home))
    assert result.code == 1
    assert result.stderr.splitlines()[-1] == (
        f"codedeck-bridge: the bridge home {home} is not writable by you (mode 0500): run "
        f"`chmod u+w {home}`, or pass --home with a writable directory"
    )


def test_the_readers_and_doctor_in_a_home_without_write_permission(
    home: Path, unwritable: list[str]
) -> None:
    keys = run_as(unwritable, "keys", "show", "--home", str(home), "--json")
    assert keys.code == 0, keys.stderr
    assert json.loads(keys.stdout)["npub"] == KEY.npub
    checks, text = doctor_checks(unwritable, home)
    assert checks["home"]["summary"] == (
        f"{home} is not writable by you (mode 0500): the bridge cannot create its lock, database "
        "and socket there"
    )
    assert checks["home"]["fix"] == (
        f"run `chmod u+w {home}`, or pass --home with a writable directory"
    )
    assert "restore" not in text and "must exist and belong" not in text
