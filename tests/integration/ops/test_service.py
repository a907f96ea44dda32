"""``service install|uninstall|show``: the units written, systemd-analyze, and the systemd calls.

Nothing here touches the machine's systemd: the CLI runs with ``--unit-dir`` (a temp folder),
and the flows that call ``systemctl`` get a fake `Systemd` that records the commands."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bridge.service import (
    USER_UNIT,
    installation_command,
)
from tests.ops.support import REPO, Cli


def test_a_foreign_unit_is_neither_overwritten_nor_removed_without_force(
    tmp_path: Path, cli: Cli
) -> None:
    unit = tmp_path / USER_UNIT
    unit.write_text("[Service]\nExecStart=/bin/true\n")
    refused = cli("service", "install", "--unit-dir", str(tmp_path))
    assert refused.code == 1
    assert "was not written by codedeck-bridge; move it away or pass --force" in refused.stderr
    assert unit.read_text() == "[Service]\nExecStart=/bin/true\n"
    kept = cli("service", "uninstall", "--unit-dir", str(tmp_path))
    assert kept.code == 1 and unit.exists()
    forced = cli("service", "uninstall", "--unit-dir", str(tmp_path), "--force")
    assert forced.code == 0 and not unit.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--run-as", "nobody"], "--run-as is for --system units"),
        (["--system", "--run-as", "root"], "the bridge does not run as root"),
        (["--system", "--run-as", "no-such-user-xyz"], "there is no account 'no-such-user-xyz'"),
        (["--credential", "/nonexistent/nsec"], "--credential: /nonexistent/nsec is not a file"),
    ],
    ids=["run-as-user-unit", "root", "unknown-account", "missing-credential"],
)
def test_usage_errors_exit_2_in_one_line(
    tmp_path: Path, args: list[str], message: str, cli: Cli
) -> None:
    result = cli("service", "install", "--unit-dir", str(tmp_path), *args)
    assert result.code == 2
    assert message in result.stderr and result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_show_prints_the_unit_and_credentials_become_load_credential(
    tmp_path: Path, cli: Cli
) -> None:
    credential = tmp_path / "bridge.nsec"
    credential.write_text("x")
    result = cli("service", "show", "--credential", str(credential), "--no-path")
    assert result.code == 0
    assert f"\nLoadCredential=nsec:{credential}\n" in result.stdout
    assert "#Environment=PATH=%h/.local/bin" in result.stdout


def test_installation_command_prefers_the_console_script(tmp_path: Path) -> None:
    script = tmp_path / "codedeck-bridge"
    script.write_text("#!/bin/sh\n")
    assert installation_command(str(script), sys.executable) == ((str(script),), None)
    command, _ = installation_command(str(REPO / "bridge" / "__main__.py"), sys.executable)
    assert command == (sys.executable, "-m", "bridge")
