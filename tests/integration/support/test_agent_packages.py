"""The agent installer's failure policy and fast path, with a fake npm (no registry traffic)."""

from __future__ import annotations

import os
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support import agent_packages
from tests.support.agent_packages import (
    AgentInstallError,
    ensure_installed,
)
from tests.support.test_agent_packages import PKG


@pytest.fixture
def agents_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "agents"
    monkeypatch.setattr(agent_packages, "AGENTS_DIR", path)
    return path


def fake_tools(bin_dir: Path, npm_script: str) -> str:
    """A PATH with a `node` that prints the version and an `npm` running `npm_script`."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, body in (("npm", npm_script), ("node", 'echo "1.2.3"')):
        tool = bin_dir / name
        tool.write_text(f"#!/bin/sh\n{body}\n")
        tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin"


# `npm install --prefix DIR spec …`: $3 is the prefix.
INSTALLS = """
mkdir -p "$3/node_modules/@scope/fake-agent"
echo '{"version": "1.2.3"}' > "$3/node_modules/@scope/fake-agent/package.json"
echo install >> "$3/../npm-calls"
"""


def test_a_failing_npm_fails_with_its_stderr(
    agents_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    script = 'echo "npm error 404 Not Found - @scope/fake-agent@1.2.3" >&2; exit 1'
    monkeypatch.setenv("PATH", fake_tools(tmp_path / "bin", script))
    with pytest.raises(AgentInstallError, match=r"failed \(exit 1\): npm error 404 Not Found"):
        ensure_installed(PKG)
    assert not (PKG.prefix / ".installed").exists()


def test_an_install_of_the_wrong_version_fails(
    agents_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", fake_tools(tmp_path / "bin", "exit 0"))
    with pytest.raises(AgentInstallError, match="left version None"):
        ensure_installed(PKG)


def test_installs_once_then_takes_the_fast_path(
    agents_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", fake_tools(tmp_path / "bin", INSTALLS))
    monkeypatch.setattr(agent_packages, "_agent_argv", lambda package: ["node", "x.js", "--acp"])
    assert ensure_installed(PKG) == PKG.prefix
    assert ensure_installed(PKG) == PKG.prefix
    assert (agents_dir / "npm-calls").read_text() == "install\n"
    assert (PKG.prefix / ".installed").read_text() == "@scope/fake-agent@1.2.3\n"


def test_a_binary_that_does_not_report_the_pin_fails_the_install(
    agents_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", fake_tools(tmp_path / "bin", INSTALLS))
    monkeypatch.setattr(agent_packages, "_agent_argv", lambda package: ["false", "--acp"])
    with pytest.raises(AgentInstallError, match="exited 1"):
        ensure_installed(PKG)
    assert not (PKG.prefix / ".installed").exists()


def test_concurrent_first_uses_install_once(
    agents_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The lock is an ``flock`` per open file: two threads contend like two processes do."""
    monkeypatch.setenv("PATH", fake_tools(tmp_path / "bin", "sleep 0.3\n" + INSTALLS))
    monkeypatch.setattr(agent_packages, "_agent_argv", lambda package: ["node", "x.js", "--acp"])
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda _: ensure_installed(PKG), range(2)))
    assert results == [PKG.prefix, PKG.prefix]
    assert (agents_dir / "npm-calls").read_text() == "install\n"
