"""Errands: each kind feeds its answer back; failures are answers too; close cancels the rest.

The probes go to a local aiohttp server on 127.0.0.1 (plain http to loopback is allowed); the
Blossom download is injected (its transport has tests of its own in test_blossom.py)."""

from __future__ import annotations

from pathlib import Path

from bridge.engine.effects import (
    CreateFolder,
)
from bridge.engine.inputs import (
    FolderCreated,
    FoldersScanned,
)
from tests.runtime.test_errands import make_rig


async def test_create_folder_answers_then_rescans(tmp_path: Path) -> None:
    (tmp_path / "old").mkdir()
    fed = await make_rig([tmp_path]).run(CreateFolder("req-1", str(tmp_path), "new"))
    assert fed == [FolderCreated("req-1", "new"), FoldersScanned(("new", "old"))]
    assert (tmp_path / "new" / ".git").is_dir()
