"""``doctor``'s sandbox line: available or why not, on or off, what is hidden and un-hidden."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bridge.doctor import check_sandbox_support
from bridge.doctor.model import Status
from bridge.sandbox import check_sandbox
from tests.sandbox.test_doctor import settings_in


@pytest.mark.skipif(
    not check_sandbox(None, os.environ.get("PATH")).available, reason="bubblewrap cannot run here"
)
def test_available_lists_what_is_hidden_here_and_what_was_unhidden(tmp_path: Path) -> None:
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".config" / "gh").mkdir(parents=True)
    settings = settings_in(tmp_path, '[sandbox]\nunhide = ["~/.config/gh"]\nhide = ["~/.env"]\n')
    (tmp_path / ".env").write_text("K=V")
    check = check_sandbox_support(settings, {"HOME": str(tmp_path), "PATH": os.environ["PATH"]})
    assert check.status is Status.PASS
    assert check.details["hidden"] == [
        str(tmp_path / ".codedeck"),
        str(tmp_path / ".ssh"),
        str(tmp_path / ".env"),
    ]
    assert check.details["unhidden"] == [str(tmp_path / ".config" / "gh")]
    assert "un-hidden by config" in check.summary
