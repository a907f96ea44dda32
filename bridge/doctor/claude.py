"""Doctor check: is there a Claude Code CLI for the sessions, and which one?

The bridge drives Claude Code through ``claude-agent-sdk``, which runs the CLI it bundles
(``claude_agent_sdk/_bundled/claude``) and falls back to ``claude`` on ``PATH``. The check looks
for both the same way, runs ``--version`` on each it finds, and says which one sessions use.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from bridge.doctor.model import Check, Status
from bridge.records import record

__all__ = ["ClaudeCli", "check_claude", "cli_version", "find_bundled_cli", "find_path_cli"]

VERSION_TIMEOUT: Final = 30.0
_INSTALL_CLAUDE: Final = "install Claude Code (npm install -g @anthropic-ai/claude-code)"


@record
class ClaudeCli:
    """One Claude Code binary and what ``--version`` said (or why it failed)."""

    path: str
    version: str | None
    error: str | None = None


def find_bundled_cli() -> tuple[bool, str | None]:
    """(is claude-agent-sdk installed, the path of its bundled CLI or None)."""
    try:
        spec = importlib.util.find_spec("claude_agent_sdk")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        return False, None
    bundled = Path(spec.origin).parent / "_bundled" / "claude"
    return True, str(bundled) if bundled.is_file() else None


def find_path_cli(env: Mapping[str, str]) -> str | None:
    """``claude`` on this environment's PATH."""
    return shutil.which("claude", path=env.get("PATH", os.defpath))


def cli_version(path: str, env: Mapping[str, str]) -> ClaudeCli:
    """Run ``<path> --version`` (bounded by `VERSION_TIMEOUT`)."""
    try:
        done = subprocess.run(
            [path, "--version"],
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return ClaudeCli(path, None, f"`{path} --version` did not finish in {VERSION_TIMEOUT:g} s")
    except OSError as exc:
        return ClaudeCli(path, None, f"cannot run {path}: {exc.strerror or exc}")
    lines = (done.stdout or "").strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = ((done.stderr or "").strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return ClaudeCli(path, None, f"`{path} --version` failed: {tail[:200]}")
    return ClaudeCli(path, lines[0].strip()[:100])


def check_claude(env: Mapping[str, str]) -> Check:
    """The Claude Code CLI that sessions would use, with its version."""
    sdk, bundled_path = find_bundled_cli()
    on_path = find_path_cli(env)
    bundled = cli_version(bundled_path, env) if bundled_path else None
    path_cli = cli_version(on_path, env) if on_path else None
    details = {
        "sdkInstalled": sdk,
        "bundled": None if bundled is None else {"path": bundled.path, "version": bundled.version},
        "onPath": None
        if path_cli is None
        else {"path": path_cli.path, "version": path_cli.version},
    }
    if not sdk:
        found = f" (`claude` on PATH: {on_path})" if on_path else ""
        return Check(
            "claude",
            Status.FAIL,
            f"claude-agent-sdk is not installed; the bridge drives Claude Code through it{found}",
            fix="pip install claude-agent-sdk (in the bridge's environment; it bundles the CLI)",
            details=details,
        )
    used = bundled if bundled is not None else path_cli
    if used is None:
        return Check(
            "claude",
            Status.FAIL,
            "no Claude Code CLI: claude-agent-sdk bundles none here and `claude` is not on PATH",
            fix=f"reinstall claude-agent-sdk for this platform, or {_INSTALL_CLAUDE}",
            details=details,
        )
    if used.error is not None:
        return Check(
            "claude",
            Status.FAIL,
            used.error,
            fix=f"reinstall claude-agent-sdk, or {_INSTALL_CLAUDE}",
            details=details,
        )
    which = "the CLI bundled with claude-agent-sdk" if used is bundled else "`claude` on PATH"
    summary = f"sessions use {which}: {used.version} ({used.path})"
    if used is bundled and path_cli is not None:
        also = path_cli.version or path_cli.error or "?"
        summary += f"; also on PATH: {path_cli.path} ({also})"
    return Check("claude", Status.PASS, summary, details=details)
