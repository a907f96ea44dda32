"""The bridge home (0700, ours) and private files (0600): creation, tightening, refusals."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest

from store.errors import DatabaseUnreadable, InsecureHome
from store.home import (
    DEFAULT_HOME,
    create_private_file,
    ensure_home,
    resolve_home,
    tighten_file_mode,
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
