"""``service install`` writes units that ``systemd-analyze verify`` accepts (where it can run).

The CLI runs with ``--unit-dir`` (a temp folder); the machine's systemd is never touched.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bridge.service import (
    MARKER,
    SYSTEM_UNIT,
    USER_UNIT,
    installation_command,
)
from tests.ops.support import PATH, REPO, Cli, unit_lines


def verify(path: Path) -> None:
    """``systemd-analyze verify`` the unit where the tool exists and can run here."""
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed")
    done = subprocess.run(
        [tool, "verify", str(path)], capture_output=True, text=True, timeout=60, check=False
    )
    output = done.stdout + done.stderr
    if "Failed to initialize manager" in output or "Failed to lookup RuntimeDirectory" in output:
        pytest.skip(f"systemd-analyze cannot run here: {output.strip()[:200]}")
    ours = [line for line in output.splitlines() if path.name.split("@")[0] in line]
    assert done.returncode == 0 and ours == [], output


def test_install_writes_a_correct_user_unit(tmp_path: Path, cli: Cli) -> None:
    units = tmp_path / "units"
    home = tmp_path / "bridge home"
    result = cli(
        "service",
        "install",
        "--unit-dir",
        str(units),
        "--home",
        str(home),
        PATH=PATH,
    )
    assert result.code == 0, result.stderr
    unit = units / USER_UNIT
    assert f"{unit}: written" in result.stdout
    text = unit.read_text()
    keys = unit_lines(text)
    assert MARKER in text
    assert keys["Type"] == ["notify"] and keys["NotifyAccess"] == ["main"]
    assert keys["Restart"] == ["on-failure"] and keys["RestartPreventExitStatus"] == ["2"]
    assert keys["StartLimitBurst"] == ["5"] and keys["StartLimitIntervalSec"] == ["600"]
    assert keys["WatchdogSec"] == ["60s"] and keys["KillMode"] == ["process"]
    assert keys["NoNewPrivileges"] == ["yes"]
    assert "ProtectHome" not in keys and "PrivateTmp" not in keys
    # This installation: the tests run `python -m bridge`; from a source checkout that is not
    # pip-installed, the unit also needs PYTHONPATH.
    command, pythonpath = installation_command()
    assert command == (sys.executable, "-m", "bridge")
    assert keys["ExecStart"] == [f'{sys.executable} -m bridge run --home "{home}"']
    assert f"Environment=PATH={PATH}" in text
    if pythonpath is not None:
        assert pythonpath == str(REPO) and f"Environment=PYTHONPATH={REPO}" in text
    else:
        assert "PYTHONPATH" not in text
    assert keys["EnvironmentFile"] == [f"-{home}/service.env"]
    assert keys["WantedBy"] == ["default.target"]
    verify(unit)

    noted = cli("service", "show", CODEDECK_RELAYS="ws://127.0.0.1:1")
    assert noted.code == 0 and "Note:" not in noted.stdout  # show prints the unit only
    relays = cli(
        "service", "install", "--unit-dir", str(tmp_path / "u"), CODEDECK_RELAYS="ws://x:1"
    )
    assert "Note: CODEDECK_RELAYS is set in this shell but the service does not inherit it" in (
        relays.stdout
    )

    again = cli(
        "service",
        "install",
        "--unit-dir",
        str(units),
        "--home",
        str(home),
        PATH=PATH,
    )
    assert again.code == 0 and f"{unit}: unchanged" in again.stdout

    removed = cli("service", "uninstall", "--unit-dir", str(units))
    assert removed.code == 0 and f"{unit}: removed" in removed.stdout
    assert not unit.exists()
    nothing = cli("service", "uninstall", "--unit-dir", str(units))
    assert nothing.code == 0 and "nothing to remove" in nothing.stdout


def test_install_writes_the_system_template(tmp_path: Path, cli: Cli) -> None:
    result = cli(
        "service",
        "install",
        "--system",
        "--run-as",
        "nobody",
        "--no-path",
        "--unit-dir",
        str(tmp_path),
    )
    assert result.code == 0, result.stderr
    unit = tmp_path / SYSTEM_UNIT
    keys = unit_lines(unit.read_text())
    assert keys["User"] == ["%i"]
    assert keys["ExecStart"] == [f"{sys.executable} -m bridge run"]
    assert keys["After"] == ["network-online.target"]
    assert keys["ProtectSystem"] == ["full"]
    assert keys["EnvironmentFile"] == ["-/etc/codedeck-bridge/%i.env"]
    assert keys["WantedBy"] == ["multi-user.target"]
    assert not any(v.startswith("PATH=") for v in keys.get("Environment", []))
    verify(unit)
