"""The bridge home (0700, ours) and private files (0600): creation, tightening, refusals."""

from __future__ import annotations

import errno
import logging
import os
import stat
import types
from pathlib import Path

import pytest

from store.errors import DatabaseUnreadable, InsecureHome
from store.home import (
    DEFAULT_HOME,
    blocking_file,
    create_private_file,
    ensure_home,
    read_only_reason,
    resolve_home,
    tighten_file_mode,
    unwritable_fix,
)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.mark.parametrize("umask_value", [0o000, 0o022, 0o077, 0o277], ids=oct)
def test_missing_home_is_created_0700_whatever_the_umask(
    tmp_path: Path, umask: None, umask_value: int
) -> None:
    os.umask(umask_value)
    home = tmp_path / "a" / "b" / ".codedeck"
    assert ensure_home(home) == home
    assert home.is_dir()
    assert mode_of(home) == 0o700


def test_existing_private_home_is_left_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home = tmp_path / "h"
    home.mkdir(mode=0o700)
    (home / "keep").write_text("x")
    with caplog.at_level(logging.WARNING):
        ensure_home(home)
    assert mode_of(home) == 0o700
    assert (home / "keep").read_text() == "x"
    assert caplog.records == []


@pytest.mark.parametrize("loose", [0o755, 0o750, 0o701, 0o777], ids=oct)
def test_loose_home_is_tightened_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, loose: int
) -> None:
    home = tmp_path / "h"
    home.mkdir()
    home.chmod(loose)
    with caplog.at_level(logging.WARNING, logger="store.home"):
        ensure_home(home)
    assert mode_of(home) == 0o700
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert f"(mode {loose:04o}); tightened it to 0700" in record.getMessage()
    assert str(home) in record.getMessage()


def test_home_that_is_a_file_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "h"
    home.write_text("not a dir")
    with pytest.raises(InsecureHome) as info:
        ensure_home(home)
    assert str(info.value) == (
        f"the bridge home {home} is a file, not a directory: pass --home with a directory "
        "(or move the file away)"
    )
    assert info.value.path == home


def test_home_of_another_user_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "h"
    home.mkdir(mode=0o755)
    owner = home.stat().st_uid
    monkeypatch.setattr(os, "geteuid", lambda: owner + 1)
    with pytest.raises(InsecureHome) as info:
        ensure_home(home)
    assert str(info.value) == (
        f"the bridge home {home} belongs to uid {owner}, not to you (uid {owner + 1}): "
        "pass --home with a folder of yours"
    )
    assert mode_of(home) == 0o755  # not taken away from its owner


def test_home_that_cannot_be_created_is_refused(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(InsecureHome) as info:
        ensure_home(blocker / "h")
    assert str(info.value) == (
        f"{blocker} is a file, not a directory, so it cannot hold the bridge home {blocker}/h: "
        "pass --home with a directory (or move the file away)"
    )


def test_home_through_a_symlink_is_followed(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o755)
    link = tmp_path / "link"
    link.symlink_to(real)
    assert ensure_home(link) == link
    assert mode_of(real) == 0o700


def test_resolve_home_defaults_and_expands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert Path("~/.codedeck") == DEFAULT_HOME
    assert resolve_home() == tmp_path / ".codedeck"
    assert resolve_home(None) == tmp_path / ".codedeck"
    assert resolve_home("~/x") == tmp_path / "x"
    monkeypatch.chdir(tmp_path)
    assert resolve_home("rel") == tmp_path / "rel"


def test_resolve_home_without_a_home_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os.path, "expanduser", lambda p: p)
    with pytest.raises(InsecureHome, match=r"cannot find your home directory .* pass --home"):
        resolve_home("~/.codedeck")


@pytest.mark.parametrize("umask_value", [0o000, 0o022, 0o277], ids=oct)
def test_private_file_is_created_0600(tmp_path: Path, umask: None, umask_value: int) -> None:
    os.umask(umask_value)
    path = tmp_path / "secret"
    assert create_private_file(path) is True
    assert mode_of(path) == 0o600
    assert path.read_bytes() == b""
    assert create_private_file(path) is False


def test_existing_loose_file_is_tightened(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "secret"
    path.write_bytes(b"data")
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="store.home"):
        assert create_private_file(path) is False
    assert mode_of(path) == 0o600
    assert path.read_bytes() == b"data"
    assert "(mode 0644); tightened it to 0600" in caplog.text


def test_private_file_refusals(tmp_path: Path) -> None:
    folder = tmp_path / "dir"
    folder.mkdir()
    with pytest.raises(DatabaseUnreadable, match=r"is not a regular file"):
        create_private_file(folder)
    target = tmp_path / "target"
    target.write_text("")
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(DatabaseUnreadable, match=r"is not a regular file \(a directory, symlink"):
        create_private_file(link)
    with pytest.raises(DatabaseUnreadable) as info:
        create_private_file(tmp_path / "missing" / "f")
    assert str(info.value) == (
        f"cannot create {tmp_path / 'missing' / 'f'}: the folder {tmp_path / 'missing'} "
        "does not exist"
    )


def test_private_file_of_another_user_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "f"
    path.write_text("")
    owner = path.stat().st_uid
    monkeypatch.setattr(os, "geteuid", lambda: owner + 7)
    with pytest.raises(DatabaseUnreadable, match=rf"belongs to uid {owner}, not to you"):
        tighten_file_mode(path)


def test_tighten_ignores_missing_files(tmp_path: Path) -> None:
    tighten_file_mode(tmp_path / "nope")  # no error: -wal/-shm come and go


# --- homes the bridge cannot write ---------------------------------------------------------------

READ_ONLY_FIX = (
    "pass --home with a directory on a writable file system, or remount that file system read-write"
)


def mount_read_only(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    """`root` and below as on a ``ro`` mount: statvfs says so, and chmod fails with EROFS.

    The real mount is in ``tests/integration/ops/test_read_only_home.py``; this fakes the two
    kernel answers the store reads, to keep the unit tier in-process.
    """
    real_statvfs, real_chmod = os.statvfs, os.chmod

    def inside(path: object) -> bool:
        return isinstance(path, (str, os.PathLike)) and Path(path).is_relative_to(root)

    def statvfs(path: str | os.PathLike[str]) -> object:
        result = real_statvfs(path)
        if not inside(path):
            return result
        return types.SimpleNamespace(f_flag=result.f_flag | os.ST_RDONLY)

    def chmod(path: str | os.PathLike[str], mode: int, **kwargs: object) -> None:
        if inside(path):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        real_chmod(path, mode, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "statvfs", statvfs)
    monkeypatch.setattr(os, "chmod", chmod)


@pytest.mark.parametrize("mode", [0o700, 0o755], ids=oct)
def test_a_home_on_a_read_only_file_system_is_refused_without_chmod_advice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: int
) -> None:
    home = tmp_path / "h"
    home.mkdir(mode=mode)
    home.chmod(mode)
    mount_read_only(monkeypatch, home)
    with pytest.raises(InsecureHome) as info:
        ensure_home(home)
    assert str(info.value) == (
        f"the bridge home {home} is on a read-only file system: {READ_ONLY_FIX}"
    )


def test_a_home_that_cannot_be_created_on_a_read_only_file_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mount_read_only(monkeypatch, tmp_path)
    real_mkdir = Path.mkdir

    def mkdir(self: Path, *args: object, **kwargs: object) -> None:
        if self.is_relative_to(tmp_path):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
        real_mkdir(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "mkdir", mkdir)
    with pytest.raises(InsecureHome) as info:
        ensure_home(tmp_path / "h")
    assert str(info.value) == (
        f"cannot create the bridge home {tmp_path}/h: its folder {tmp_path} is on a read-only "
        f"file system: {READ_ONLY_FIX}"
    )


def test_a_home_without_write_permission_is_refused_with_chmod(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "h"
    home.mkdir(mode=0o500)
    home.chmod(0o500)
    # The kernel's answer for a non-superuser (a superuser may write anyway: see the real test).
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: Path(path) != home)
    try:
        with pytest.raises(InsecureHome) as info:
            ensure_home(home)
    finally:
        home.chmod(0o700)
    assert str(info.value) == (
        f"the bridge home {home} is not writable by you (mode 0500): run `chmod u+w {home}`, or "
        "pass --home with a writable directory"
    )


def test_read_only_reason_of_writable_and_missing_folders(tmp_path: Path) -> None:
    assert read_only_reason(tmp_path) is None
    assert read_only_reason(tmp_path / "missing") is None


def test_unwritable_fix_for_another_users_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    owner = tmp_path.stat().st_uid
    monkeypatch.setattr(os, "geteuid", lambda: owner + 1)
    assert unwritable_fix(tmp_path, "is not writable by you (mode 0555)") == (
        "pass --home with a directory of yours"
    )


def test_blocking_file_finds_the_file_in_the_way(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.write_text("")
    assert blocking_file(notes) == notes
    assert blocking_file(notes / "a" / "b") == notes
    assert blocking_file(tmp_path / "missing" / "h") is None
    assert blocking_file(tmp_path) is None
