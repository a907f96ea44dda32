"""The Makefile's installs: ``make run`` installs what running needs, the checks add ``[test]``.

Each test runs the real Makefile with ``make`` in a scratch directory whose ``.venv/bin`` holds
stand-ins that record how they were called (``python -m pip install …``, ``pytest``, …), so the
recipes run for real without installing anything.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
# Variables an outer make (``make test`` runs this test) or a shell would pass down.
INHERITED = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEFILES", "ARGS", "PYTEST_ARGS", "CHAOS_ARGS")
PROGRAMS = ("python", "pytest", "ruff", "mypy", "codedeck-bridge")
CHECK_TARGETS = ("unit", "lint", "typecheck", "pytest", "bench", "chaos", "chaos-cli")
RUN_INSTALL = "python -m pip install --quiet -e ."
TEST_INSTALL = "python -m pip install --quiet -e .[test]"


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A copy of the Makefile and pyproject.toml beside a ``.venv`` of recording stand-ins."""
    if shutil.which("make") is None:
        pytest.fail("make is not installed: the README's commands need it (apt-get install make)")
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    old = 1_000_000_000  # pyproject.toml older than anything the recipes touch
    os.utime(tmp_path / "pyproject.toml", (old, old))
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in PROGRAMS:
        program = bin_dir / name
        program.write_text(f'#!/bin/sh\necho "{name} $*" >> "{tmp_path}/calls"\n')
        program.chmod(0o755)
    return tmp_path


def make(checkout: Path, target: str) -> list[str]:
    """Run ``make TARGET`` in `checkout`; the stand-ins' calls it made, in order."""
    calls = checkout / "calls"
    calls.unlink(missing_ok=True)
    env = {key: value for key, value in os.environ.items() if key not in INHERITED}
    result = subprocess.run(
        ["make", "--no-print-directory", target],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return calls.read_text().splitlines() if calls.exists() else []


def installs(calls: list[str]) -> list[str]:
    return [call for call in calls if " pip install " in call]


def test_run_installs_the_project_without_the_test_extra(checkout: Path) -> None:
    calls = make(checkout, "run")
    assert installs(calls) == [RUN_INSTALL]
    assert calls[-1].startswith("codedeck-bridge run")
    assert make(checkout, "run") == ["codedeck-bridge run"]  # installed once


@pytest.mark.parametrize("target", CHECK_TARGETS)
def test_every_check_installs_the_test_extra(checkout: Path, target: str) -> None:
    assert installs(make(checkout, target)) == [TEST_INSTALL]


def test_test_installs_the_test_extra_once(checkout: Path) -> None:
    calls = make(checkout, "test")
    assert installs(calls) == [TEST_INSTALL]
    assert any(call.startswith("ruff check") for call in calls)
    assert any(call.startswith("mypy") for call in calls)
    assert any(call.startswith("pytest") for call in calls)


def test_the_test_install_covers_run(checkout: Path) -> None:
    make(checkout, "unit")
    assert installs(make(checkout, "run")) == []


def test_the_run_install_does_not_cover_the_checks(checkout: Path) -> None:
    make(checkout, "run")
    assert installs(make(checkout, "unit")) == [TEST_INSTALL]
    assert installs(make(checkout, "unit")) == []


def test_a_changed_pyproject_installs_again(checkout: Path) -> None:
    make(checkout, "unit")
    later = time.time() + 60  # newer than the stamps whatever the clock's granularity
    os.utime(checkout / "pyproject.toml", (later, later))
    assert installs(make(checkout, "run")) == [RUN_INSTALL]
    assert installs(make(checkout, "unit")) == [TEST_INSTALL]
