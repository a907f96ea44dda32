"""The Makefile's web rule: the checks install web/node_modules (``npm ci``), ``make run`` never.

As in ``tests/integration/ops/test_make_targets.py``, the real Makefile runs in a scratch
directory whose ``.venv/bin`` and ``PATH`` hold stand-ins that record their calls, so the recipes
run for real and nothing is installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
INHERITED = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEFILES", "ARGS", "PYTEST_ARGS", "CI")
PROGRAMS = ("python", "pytest", "ruff", "mypy", "codedeck-bridge")
NPM_CI = "npm ci --no-audit --no-fund --loglevel=error"


def stand_in(path: Path, name: str, calls: Path) -> None:
    path.write_text(f'#!/bin/sh\necho "{name} $*" >> "{calls}"\n')
    path.chmod(0o755)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """The Makefile, pyproject.toml and web/package-lock.json, with recording stand-ins."""
    make = shutil.which("make")
    if make is None:
        pytest.fail("make is not installed: the README's commands need it (apt-get install make)")
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "web").mkdir()
    (tmp_path / "web" / "package-lock.json").write_text("{}\n")
    old = 1_000_000_000
    for name in ("pyproject.toml", "web/package-lock.json"):
        os.utime(tmp_path / name, (old, old))
    venv_bin = tmp_path / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    for name in PROGRAMS:
        stand_in(venv_bin / name, name, tmp_path / "calls")
    tools = tmp_path / "tools"
    tools.mkdir()
    npm = tools / "npm"
    # The stand-in npm makes node_modules as `npm ci` would, so the recipe's stamp lands in it.
    npm.write_text(f'#!/bin/sh\necho "npm $*" >> "{tmp_path}/calls"\nmkdir -p node_modules\n')
    npm.chmod(0o755)
    (tools / "mkdir").symlink_to(shutil.which("mkdir") or "/bin/mkdir")
    (tools / "touch").symlink_to(shutil.which("touch") or "/usr/bin/touch")
    return tmp_path


def make(
    checkout: Path, target: str, *, npm: bool = True, ci: bool = False
) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in INHERITED}
    tools = checkout / "tools"
    if not npm:
        (tools / "npm").unlink(missing_ok=True)
    env["PATH"] = str(tools)  # only the stand-ins: a real npm on this machine is not seen
    if ci:
        env["CI"] = "1"
    (checkout / "calls").unlink(missing_ok=True)
    return subprocess.run(
        [shutil.which("make") or "make", "--no-print-directory", target],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def calls(checkout: Path) -> list[str]:
    path = checkout / "calls"
    return path.read_text().splitlines() if path.exists() else []


def npm_calls(checkout: Path) -> list[str]:
    return [call for call in calls(checkout) if call.startswith("npm ")]


def test_run_needs_no_npm(checkout: Path) -> None:
    result = make(checkout, "run")
    assert result.returncode == 0, result.stderr
    assert npm_calls(checkout) == []
    assert not (checkout / "web" / "node_modules").exists()


@pytest.mark.parametrize("target", ["pytest", "bench", "test"])
def test_the_checks_install_the_web_packages_once(checkout: Path, target: str) -> None:
    result = make(checkout, target)
    assert result.returncode == 0, result.stderr
    assert npm_calls(checkout) == [NPM_CI]
    assert make(checkout, target).returncode == 0
    assert npm_calls(checkout) == []  # the stamp is newer than the lockfile


def test_a_changed_lockfile_installs_again(checkout: Path) -> None:
    assert make(checkout, "pytest").returncode == 0
    later = time.time() + 60
    os.utime(checkout / "web" / "package-lock.json", (later, later))
    assert make(checkout, "pytest").returncode == 0
    assert npm_calls(checkout) == [NPM_CI]


def test_without_npm_the_checks_run_locally_and_say_why_tests_skip(checkout: Path) -> None:
    result = make(checkout, "pytest", npm=False)
    assert result.returncode == 0, result.stderr
    assert "npm is missing" in result.stderr and "apt-get install nodejs npm" in result.stderr
    assert any(call.startswith("pytest") for call in calls(checkout))


def test_without_npm_ci_stops(checkout: Path) -> None:
    result = make(checkout, "pytest", npm=False, ci=True)
    assert result.returncode != 0
    assert "npm is missing; CI runs the web client's checks" in result.stderr
    assert not any(call.startswith("pytest") for call in calls(checkout))
