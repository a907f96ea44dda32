"""The availability check, run for real: the bwrap here, and one that cannot make a sandbox."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from bridge.sandbox import check_sandbox


def test_a_program_that_cannot_make_a_sandbox_is_reported(tmp_path: Path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    support = check_sandbox(str(fake), None)
    assert not support.available
    assert "uid map" in support.reason
    assert "unprivileged_userns" in support.fix


def test_bwrap_is_found_and_a_sandbox_runs_here() -> None:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    support = check_sandbox(None, os.environ.get("PATH"))
    assert support.available, support.reason
    assert support.bwrap == shutil.which("bwrap")
