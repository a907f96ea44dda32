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
    CliOptions,
    build_argv,
    bundled_cli_path,
    cli_env,
    exit_reason,
    sdk_version,
    spawn_cli,
)

from .conftest import FakeCli

REPO = Path(__file__).resolve().parents[3]

ARGV_CASES = [
    (
        "new conversation",
        CliOptions("plan", session_id="abc"),
        ["--permission-prompt-tool", "stdio", "--permission-mode", "plan", "--session-id=abc"],
    ),
    (
        "resume wins over a session id",
        CliOptions("default", model="opus", effort="low", resume="r", session_id="s"),
        [
            "--model",
            "opus",
            "--permission-prompt-tool",
            "stdio",
            "--permission-mode",
            "default",
            "--resume=r",
        ],
    ),
    (
        "no prompts (the model probe)",
        CliOptions("plan", permission_prompt=False),
        ["--permission-mode", "plan"],
    ),
]


@pytest.mark.parametrize(
    ("options", "middle"), [c[1:] for c in ARGV_CASES], ids=[c[0] for c in ARGV_CASES]
)
def test_argv(options: CliOptions, middle: list[str]) -> None:
    argv = build_argv("/bin/claude", options)
    head = ["/bin/claude", "--output-format", "stream-json", "--verbose"]
    tail = ["--setting-sources=user,project"]
    if options.effort:
        tail += ["--effort", options.effort]
    assert argv == [*head, *middle, *tail, "--input-format", "stream-json"]


def test_env_is_the_given_one_plus_the_sdk_variables() -> None:
    env = cli_env(
        {"A": "1", "CLAUDECODE": "1", "CLAUDE_CODE_ENTRYPOINT": "cli", "PWD": "/elsewhere"}, "/w"
    )
    assert env == {
        "A": "1",
        "PWD": "/w",
        "CLAUDE_CODE_ENTRYPOINT": "sdk-py",
        "CLAUDE_AGENT_SDK_VERSION": sdk_version(),
        "CLAUDE_CODE_SDK_READS_SESSION_STATE": "1",
    }


def test_the_bundled_cli_and_the_sdk_version_are_found_without_importing_the_sdk() -> None:
    path = bundled_cli_path()
    assert path is not None and path.name == "claude" and os.access(path, os.X_OK)
    source = (path.parent.parent / "_version.py").read_text()
    assert f'__version__ = "{sdk_version()}"' in source


@pytest.mark.parametrize(
    ("code", "reason"), [(0, "exit code 0"), (3, "exit code 3"), (-9, "killed by signal 9")]
)
def test_exit_reason(code: int, reason: str) -> None:
    assert exit_reason(code) == reason


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
