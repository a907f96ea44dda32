"""The doctor's home, database and identity checks on homes the bridge cannot use or write.

In-process, with the kernel's answers faked at the edge (`os.statvfs` for a read-only mount,
`os.access` for a missing write permission); the real mount and the real mode 0500 are in
``tests/integration/ops/test_read_only_home.py``.
"""

from __future__ import annotations

import os
import types
from pathlib import Path

import pytest

import bridge.doctor.local
from bridge.doctor.local import check_database, check_home, check_identity
from bridge.doctor.model import Status
from store.errors import CorruptDatabase, DatabaseUnreadable
from store.readonly import ReadOnlyDatabase

READ_ONLY_FIX = (
    "pass --home with a directory on a writable file system, or remount that file system read-write"
)


def fake_read_only_mount(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    real = os.statvfs

    def statvfs(path: str | os.PathLike[str]) -> object:
        result = real(path)
        if Path(path).is_relative_to(root):
            return types.SimpleNamespace(f_flag=result.f_flag | os.ST_RDONLY)
        return result

    monkeypatch.setattr(os, "statvfs", statvfs)


@pytest.mark.parametrize("mode", [0o700, 0o755], ids=oct)
def test_a_home_on_a_read_only_file_system_fails_without_chmod_advice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: int
) -> None:
    home = tmp_path / "h"
    home.mkdir()
    home.chmod(mode)
    fake_read_only_mount(monkeypatch, home)
    check = check_home(home)
    assert check.status is Status.FAIL
    assert check.summary == (
        f"{home} is on a read-only file system: the bridge cannot create its lock, database and "
        "socket there"
    )
    assert check.fix == READ_ONLY_FIX


def test_a_missing_home_in_a_read_only_folder_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_read_only_mount(monkeypatch, tmp_path)
    check = check_home(tmp_path / "h")
    assert check.status is Status.FAIL
    assert check.summary == (
        f"{tmp_path / 'h'} does not exist, and its folder {tmp_path} is on a read-only file system"
    )
    assert check.fix == READ_ONLY_FIX


def test_a_home_without_write_permission_fails_with_chmod(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "h"
    home.mkdir(mode=0o500)
    home.chmod(0o500)
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: Path(path) != home)
    try:
        check = check_home(home)
    finally:
        home.chmod(0o700)
    assert check.status is Status.FAIL
    assert check.summary == (
        f"{home} is not writable by you (mode 0500): the bridge cannot create its lock, database "
        "and socket there"
    )
    assert check.fix == f"run `chmod u+w {home}`, or pass --home with a writable directory"


def test_a_private_writable_home_passes(tmp_path: Path) -> None:
    tmp_path.chmod(0o700)
    assert check_home(tmp_path).status is Status.PASS


def unreadable(home: Path) -> ReadOnlyDatabase:
    raise DatabaseUnreadable(
        f"cannot open {home}/bridge.db (unable to open database file): its folder {home} is on a "
        f"read-only file system: {READ_ONLY_FIX}"
    )


def corrupt(home: Path) -> ReadOnlyDatabase:
    raise CorruptDatabase(f"{home}/bridge.db is not a valid SQLite database")


def test_an_unreadable_database_is_not_sent_to_a_backup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bridge.doctor.local, "open_readonly", unreadable)
    database = check_database(tmp_path)
    identity = check_identity(tmp_path, None)
    for check in (database, identity):
        assert check.status is Status.FAIL
        assert check.summary.endswith(READ_ONLY_FIX)
        assert check.fix is None  # the summary carries the fix for its cause


def test_a_corrupt_database_is_still_sent_to_a_backup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bridge.doctor.local, "open_readonly", corrupt)
    assert "restore bridge.db from a backup" in (check_database(tmp_path).fix or "")
    assert "restore bridge.db from a backup" in (check_identity(tmp_path, None).fix or "")
