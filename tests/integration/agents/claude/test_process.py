"""The CLI process: argv and environment, its death with the host, stopping, exit reasons."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bridge.agents.claude import (
    spawn_cli,
)
from tests.agents.claude.conftest import FakeCli

REPO = Path(__file__).resolve().parents[4]


async def test_stop_escalates_to_sigkill_and_reaps(tmp_path: Path) -> None:
    script = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('x', flush=True); time.sleep(60)"
    process = await spawn_cli(
        [sys.executable, "-c", script], dict(os.environ), str(tmp_path), label="t"
    )
    assert await process.stdout.readline() == b"x\n"
    started = time.monotonic()
    assert await process.stop(term_timeout=0.3) == -signal.SIGKILL
    assert time.monotonic() - started < 5
    with pytest.raises(ProcessLookupError):
        os.kill(process.pid, 0)
    assert await process.stop() == -signal.SIGKILL  # idempotent


async def test_the_cli_holds_its_own_stdin_open(tmp_path: Path) -> None:
    """Closing our end is not an EOF for the CLI: it holds a copy of the write end."""
    script = "import sys; print('x', flush=True); sys.stdin.read(); print('eof', flush=True)"
    process = await spawn_cli(
        [sys.executable, "-c", script], dict(os.environ), str(tmp_path), label="t"
    )
    assert await process.stdout.readline() == b"x\n"
    process.stdin.close()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(process.stdout.readline(), 0.5)
    await process.stop()


async def test_stderr_is_kept_and_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    script = "import sys; [print(f'line {i}', file=sys.stderr) for i in range(8)]; print('x' * 900, file=sys.stderr)"
    with caplog.at_level("INFO"):
        process = await spawn_cli(
            [sys.executable, "-c", script], dict(os.environ), str(tmp_path), label="t"
        )
        assert await process.wait() == 0
        await process.stop()
    assert list(process.stderr_tail) == ["line 4", "line 5", "line 6", "line 7", "x" * 500]
    assert "line 0" in caplog.text


def test_the_cli_dies_with_its_host_and_never_sees_an_end_of_input(
    fake_cli: FakeCli, tmp_path: Path
) -> None:
    """kill -9 of the process running the driver while a prompt waits: the CLI dies at once,
    by SIGKILL, without reading EOF (which would make a real CLI record a refusal)."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    harness = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.agents.claude.driver_harness",
            str(fake_cli.path),
            str(cwd),
            json.dumps(fake_cli.env()),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert harness.stdout is not None
        assert harness.stdout.readline() == b"ASKED\n"
        pid = int(fake_cli.log("start")[0]["pid"])
        os.kill(harness.pid, signal.SIGKILL)
        harness.wait(5)
        deadline = time.monotonic() + 1.0
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not _alive(pid), "the CLI outlived its host"
    finally:
        harness.kill()
        harness.wait(5)
    kinds = [record["kind"] for record in fake_cli.log()]
    assert "eof" not in kinds and "sigterm" not in kinds
    assert fake_cli.answers("can_use_tool") == []  # it was still waiting when it died


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie counts as dead: it runs no code)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
