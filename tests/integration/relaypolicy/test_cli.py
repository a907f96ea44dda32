"""``codedeck-relaypolicy``: subcommands, exit codes, one-line errors, no tracebacks."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.strfry_plugin_policy import REPO_ROOT


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT)}


def test_python_dash_m_help() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "relaypolicy", "plugin", "--help"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=30,
        check=False,
    )
    assert result.returncode == 0
    assert "--registry" in result.stdout and "--config" in result.stdout


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serve_admin_runs_until_sigterm(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("a-long-enough-admin-token\n")
    token.chmod(0o600)
    port = _free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "relaypolicy",
            "serve-admin",
            "--registry",
            str(tmp_path / "r.db"),
            "--token-file",
            str(token),
            "--bind",
            f"127.0.0.1:{port}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2) as r:
                    assert json.load(r) == {"status": "ok"}
                    break
            except OSError:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                assert time.monotonic() < deadline, "serve-admin did not come up"
                time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0
    assert out == b""
    assert b"a-long-enough-admin-token" not in err
    assert b"admin API listening on" in err


@pytest.mark.parametrize(
    ("mode", "bind", "status", "message"),
    [
        (0o644, "127.0.0.1:0", 1, "chmod 600"),
        (0o600, "nonsense", 2, "--bind must be HOST:PORT"),
    ],
)
def test_serve_admin_refuses_to_start(
    tmp_path: Path, mode: int, bind: str, status: int, message: str
) -> None:
    token = tmp_path / "token"
    token.write_text("a-long-enough-admin-token\n")
    token.chmod(mode)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "relaypolicy",
            "serve-admin",
            "--registry",
            str(tmp_path / "r.db"),
            "--token-file",
            str(token),
            "--bind",
            bind,
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=30,
        check=False,
    )
    assert result.returncode == status
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().count("\n") == 0
