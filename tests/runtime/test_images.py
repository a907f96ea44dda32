"""Saving uploaded images: modes, O_EXCL, and symlinks that must never be followed."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from bridge.engine.sessions.uploads import safe_image_name
from bridge.runtime.errands.images import ImageSaveError, save_image, save_image_async

DATA = b"\x89PNG\r\n\x1a\nimage-bytes"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_saves_with_private_modes(tmp_path: Path) -> None:
    path = save_image(tmp_path, "1-shot.png", DATA)
    assert path == tmp_path / ".codedeck" / "uploads" / "1-shot.png"
    assert path.read_bytes() == DATA
    assert mode(path) == 0o600
    assert mode(tmp_path / ".codedeck") == 0o700
    assert mode(tmp_path / ".codedeck" / "uploads") == 0o700


def test_existing_directories_are_tightened(tmp_path: Path) -> None:
    uploads = tmp_path / ".codedeck" / "uploads"
    uploads.mkdir(parents=True, mode=0o755)
    os.chmod(uploads, 0o755)
    save_image(tmp_path, "1-a.jpg", DATA)
    assert mode(uploads) == 0o700


def test_a_clash_never_overwrites(tmp_path: Path) -> None:
    first = save_image(tmp_path, "1-a.png", b"first")
    second = save_image(tmp_path, "1-a.png", b"second")
    third = save_image(tmp_path, "1-a.png", b"third")
    assert (first.name, second.name, third.name) == ("1-a.png", "1-a-1.png", "1-a-2.png")
    assert first.read_bytes() == b"first" and second.read_bytes() == b"second"


def test_symlinked_codedeck_dir_is_refused(tmp_path: Path) -> None:
    root, outside = tmp_path / "ws", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / ".codedeck").symlink_to(outside)
    with pytest.raises(ImageSaveError, match="not a plain directory"):
        save_image(root, "1-a.png", DATA)
    assert list(outside.iterdir()) == []


def test_symlinked_uploads_dir_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / ".codedeck").mkdir()
    (tmp_path / ".codedeck" / "uploads").symlink_to(outside)
    with pytest.raises(ImageSaveError, match="not a plain directory"):
        save_image(tmp_path, "1-a.png", DATA)
    assert list(outside.iterdir()) == []


def test_a_symlink_at_the_file_name_is_not_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    uploads = tmp_path / ".codedeck" / "uploads"
    uploads.mkdir(parents=True)
    (uploads / "1-a.png").symlink_to(victim)
    path = save_image(tmp_path, "1-a.png", DATA)
    assert path.name == "1-a-1.png" and victim.read_bytes() == b"precious"


def test_a_file_where_the_directory_should_be(tmp_path: Path) -> None:
    (tmp_path / ".codedeck").write_bytes(b"")
    with pytest.raises(ImageSaveError):
        save_image(tmp_path, "1-a.png", DATA)


def test_missing_root(tmp_path: Path) -> None:
    with pytest.raises(ImageSaveError, match="cannot open the workspace root"):
        save_image(tmp_path / "nope", "1-a.png", DATA)


@pytest.mark.parametrize(
    "name", ["", ".bashrc", "../x.png", "a/b.png", "a\\b.png", "a\x00.png", "x" * 256]
)
def test_unsafe_names_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ImageSaveError, match="unsafe"):
        save_image(tmp_path, name, DATA)
    assert not (tmp_path / ".codedeck").exists()


@pytest.mark.parametrize("hostile", ["../../x", ".bashrc", "\x00", "é" * 400, "/etc/passwd"])
def test_every_safe_name_is_accepted(tmp_path: Path, hostile: str) -> None:
    path = save_image(tmp_path, safe_image_name(hostile, "image/png", 1), DATA)
    assert path.parent == tmp_path / ".codedeck" / "uploads"


async def test_async_wrapper(tmp_path: Path) -> None:
    path = await save_image_async(tmp_path, "2-b.png", DATA)
    assert path.read_bytes() == DATA
