"""``doctor``'s sandbox line: available or why not, on or off, what is hidden and un-hidden."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bridge.config import load_settings
from bridge.doctor import check_sandbox_support
from bridge.doctor.model import Status
from bridge.sandbox import check_sandbox


def settings_in(home: Path, sandbox: str = ""):  # type: ignore[no-untyped-def]
    bridge = home / ".codedeck"
    bridge.mkdir(parents=True, exist_ok=True)
    (bridge / "config.toml").write_text(sandbox)
    return load_settings(flags={"home": str(bridge)}, env={})


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


def test_disabled_is_a_warning_with_the_fix(tmp_path: Path) -> None:
    settings = settings_in(tmp_path, "[sandbox]\nenabled = false\n")
    check = check_sandbox_support(settings, {"HOME": str(tmp_path), "PATH": ""})
    assert check.status is Status.WARN
    assert check.fix is not None and "enabled = false" in check.fix


@pytest.mark.parametrize(("required", "status"), [(False, Status.WARN), (True, Status.FAIL)])
def test_unavailable_says_why_and_how_to_fix(
    tmp_path: Path, required: bool, status: Status
) -> None:
    text = f"[sandbox]\nrequired = {str(required).lower()}\n"
    check = check_sandbox_support(settings_in(tmp_path, text), {"HOME": str(tmp_path), "PATH": ""})
    assert check.status is status
    assert "bubblewrap is missing" in check.summary
    assert check.fix is not None and "apt install bubblewrap" in check.fix
