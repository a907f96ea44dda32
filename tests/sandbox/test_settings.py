"""``[sandbox]`` in config.toml: defaults, values, and errors that name the setting and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.config import ConfigError, load_settings
from bridge.sandbox import SandboxSettings


def settings_with(tmp_path: Path, text: str) -> SandboxSettings:
    (tmp_path / "config.toml").write_text(text)
    return load_settings(flags={"home": str(tmp_path)}, env={}).sandbox


def test_the_defaults_sandbox_every_session_without_requiring_it(tmp_path: Path) -> None:
    assert settings_with(tmp_path, "") == SandboxSettings(enabled=True, required=False)


def test_every_key_is_read(tmp_path: Path) -> None:
    got = settings_with(
        tmp_path,
        '[sandbox]\nenabled = false\nrequired = true\nhide = ["~/work/.env"]\n'
        'unhide = ["~/.config/gh"]\nwritable = ["/srv/cache"]\nbwrap = "/opt/bwrap"\n',
    )
    assert got == SandboxSettings(
        enabled=False,
        required=True,
        hide=("~/work/.env",),
        unhide=("~/.config/gh",),
        writable=("/srv/cache",),
        bwrap="/opt/bwrap",
    )


ERRORS = [
    ("sandbox = 3", "expected a table [sandbox]"),
    ("[sandbox]\nenable = true", "unknown setting(s) enable"),
    ('[sandbox]\nenabled = "yes"', "sandbox.enabled"),
    ("[sandbox]\nrequired = 1", "sandbox.required"),
    ('[sandbox]\nhide = "~/.x"', "sandbox.hide"),
    ('[sandbox]\nunhide = ["relative/path"]', "is relative"),
    ('[sandbox]\nwritable = [""]', "sandbox.writable"),
    ('[sandbox]\nbwrap = "bwrap"', "sandbox.bwrap"),
]


@pytest.mark.parametrize(("text", "message"), ERRORS, ids=[m for _, m in ERRORS])
def test_a_bad_value_names_the_setting_and_the_file(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        settings_with(tmp_path, text)
    assert message in str(caught.value)
    assert str(tmp_path / "config.toml") in str(caught.value)
