"""The agent installer's failure policy and fast path, with a fake npm (no registry traffic)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import agent_packages
from tests.support.agent_packages import (
    AgentPackage,
    AgentUnavailable,
    ensure_installed,
)

PKG = AgentPackage("@scope/fake-agent", "1.2.3")


@pytest.fixture
def agents_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "agents"
    monkeypatch.setattr(agent_packages, "AGENTS_DIR", path)
    return path


def test_prefix_keeps_pins_apart(agents_dir: Path) -> None:
    assert PKG.prefix == agents_dir / "@scope+fake-agent@1.2.3"
    assert PKG.package_dir == PKG.prefix / "node_modules" / "@scope" / "fake-agent"


def test_missing_node_or_npm_is_unavailable(
    agents_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(AgentUnavailable, match="node is not installed"):
        ensure_installed(PKG)


def test_the_opencode_stub_is_skipped_for_the_platform_binary(agents_dir: Path) -> None:
    modules = agent_packages.OPENCODE.prefix / "node_modules"
    (modules / ".bin").mkdir(parents=True)
    stub = modules / "opencode-ai" / "bin" / "opencode"
    stub.parent.mkdir(parents=True)
    stub.write_text("#!/bin/sh\necho 'postinstall script was not run'; exit 1\n")
    (modules / ".bin" / "opencode").symlink_to(stub)
    for name in ("opencode-linux-x64-baseline", "opencode-linux-x64"):
        binary = modules / name / "bin" / "opencode"
        binary.parent.mkdir(parents=True)
        binary.write_bytes(b"\x7fELF fake")
        binary.chmod(0o755)
    argv = agent_packages._agent_argv(agent_packages.OPENCODE)
    assert argv == [str(modules / "opencode-linux-x64" / "bin" / "opencode"), "acp"]
