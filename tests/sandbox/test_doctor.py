"""``doctor``'s sandbox line: available or why not, on or off, what is hidden and un-hidden."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.config import load_settings
from bridge.doctor import check_sandbox_support
from bridge.doctor.model import Status


def settings_in(home: Path, sandbox: str = ""):  # type: ignore[no-untyped-def]
    bridge = home / ".codedeck"
    bridge.mkdir(parents=True, exist_ok=True)
    (bridge / "config.toml").write_text(sandbox)
    return load_settings(flags={"home": str(bridge)}, env={})


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
