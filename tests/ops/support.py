"""Helpers for the operations tests: run the CLI as a process, make stores, fake installs."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from bridge.nostr.keys import Keypair
from store.db import open_bridge_db
from store.decisions import record_decision
from store.identity import save_identity
from store.migrations import Migration
from store.schema import BRIDGE_MIGRATIONS

__all__ = [
    "REPO",
    "CliResult",
    "RunningDaemon",
    "arun_cli",
    "clean_env",
    "fake_claude_install",
    "invoke",
    "make_store",
    "run_cli",
]

REPO = Path(__file__).resolve().parents[2]
_SCRUB = re.compile(
    r"CODEDECK_.*|ANTHROPIC_.*|CLAUDE_.*|NOTIFY_SOCKET|INVOCATION_ID|WATCHDOG_.*|JOURNAL_STREAM"
    r"|CREDENTIALS_DIRECTORY|PYTHONPATH"
)


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without anything that would change the bridge's behaviour, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not _SCRUB.fullmatch(k)}
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


@dataclass(frozen=True)
class CliResult:
    code: int
    stdout: str
    stderr: str


def run_cli(*args: str, env: Mapping[str, str] | None = None, timeout: float = 60) -> CliResult:
    """``python -m bridge ARGS`` as a process (for commands that need no server in this loop)."""
    done = subprocess.run(
        [sys.executable, "-m", "bridge", *args],
        capture_output=True,
        text=True,
        env=dict(env) if env is not None else clean_env(),
        cwd=REPO,
        timeout=timeout,
        check=False,
    )
    return CliResult(done.returncode, done.stdout, done.stderr)


def invoke(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    *args: str,
    **env: str,
) -> CliResult:
    """``main(args)`` in this process (much faster than a process), with a clean environment
    plus `env`, capturing stdout/stderr. Call it from a worker thread in async tests."""
    from bridge.cli.main import main

    for name in list(os.environ):
        if _SCRUB.fullmatch(name) and name != "PYTHONPATH":
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    try:
        code = main(list(args))
    except SystemExit as exc:  # argparse's usage errors and --help
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return CliResult(code, captured.out, captured.err)


async def arun_cli(
    *args: str, env: Mapping[str, str] | None = None, timeout: float = 90
) -> CliResult:
    """`run_cli` that keeps this event loop running (for servers the test serves meanwhile)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bridge",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(env) if env is not None else clean_env(),
        cwd=REPO,
    )
    try:
        async with asyncio.timeout(timeout):
            out, err = await proc.communicate()
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return CliResult(proc.returncode, out.decode(), err.decode())


async def make_store(
    home: Path,
    keypair: Keypair | None = None,
    *,
    decisions: Sequence[dict[str, object]] = (),
    migrations: Sequence[Migration] = BRIDGE_MIGRATIONS,
) -> None:
    """A bridge database in `home` (created 0700) with an identity and decision rows."""
    db = await open_bridge_db(home, migrations=migrations)
    try:
        if keypair is not None:
            await save_identity(db, keypair.secret)
        for row in decisions:
            await record_decision(db, **row)  # type: ignore[arg-type]
    finally:
        await db.close()


def fake_claude_install(
    root: Path, *, bundled: bool = True, on_path: bool = True
) -> dict[str, str]:
    """A stand-in claude-agent-sdk package (with a `_bundled/claude`) and a `claude` on PATH.

    Returns the environment entries (PYTHONPATH, PATH) that make the doctor find them.
    """
    package = root / "site" / "claude_agent_sdk"
    (package / "_bundled").mkdir(parents=True)
    (package / "__init__.py").write_text('"""A test stand-in."""\n')
    if bundled:
        cli = package / "_bundled" / "claude"
        cli.write_text("#!/bin/sh\necho '9.9.9 (Claude Code)'\n")
        cli.chmod(0o755)
    bin_dir = root / "bin"
    bin_dir.mkdir()
    if on_path:
        cli = bin_dir / "claude"
        cli.write_text("#!/bin/sh\necho '8.8.8 (Claude Code)'\n")
        cli.chmod(0o755)
    return {
        "PYTHONPATH": f"{root / 'site'}{os.pathsep}{REPO}",
        "PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin",
    }


class RunningDaemon:
    """``codedeck-bridge run`` as a process with its own embedded relay on a free port."""

    def __init__(self, home: Path, *args: str, env: Mapping[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bridge",
                "run",
                "--home",
                str(home),
                "--embedded-relay",
                "127.0.0.1:0",
                *args,
            ],
            stderr=subprocess.PIPE,
            text=True,
            env=dict(env) if env is not None else clean_env(),
            cwd=REPO,
        )
        self.lines: list[str] = []
        self._wait_ready()

    def _wait_ready(self) -> None:
        assert self.proc.stderr is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.lines.append(line)
            if " serving " in line:
                # Keep draining stderr: a full pipe would block the daemon's logging (and loop).
                self._drain = threading.Thread(target=self._read_rest, daemon=True)
                self._drain.start()
                return
        self.proc.kill()
        self.proc.wait()
        raise AssertionError("daemon did not start:\n" + "".join(self.lines))

    def _read_rest(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def stop(self) -> tuple[int, str]:
        """SIGTERM (SIGCONT first, in case a test stopped it), then the exit status and log."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._drain.join(timeout=10)
        return self.proc.returncode, "".join(self.lines)


# --- systemd units -------------------------------------------------------------------------------

PATH = "/opt/tools/bin:/usr/bin:/bin"
Cli = Callable[..., CliResult]
"""``cli(*args, **env)``: the CLI's ``main`` run in this process (the ``cli`` fixture)."""


def unit_lines(text: str) -> dict[str, list[str]]:
    """Key → values of the non-comment lines."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            out.setdefault(key, []).append(value)
    return out


# --- the sd_notify socket ------------------------------------------------------------------------


def drain(sock: socket.socket) -> list[str]:
    """Every datagram waiting in the socket, without blocking."""
    got = []
    sock.setblocking(False)
    try:
        while True:
            got.append(sock.recv(4096).decode())
    except BlockingIOError:
        return got
    finally:
        sock.setblocking(True)


def wait_for(sock: socket.socket, predicate: str, count: int = 1, timeout: float = 60) -> list[str]:
    """Datagrams until `count` of them contain `predicate` (fails after `timeout`)."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while sum(predicate in message for message in seen) < count:
        left = deadline - time.monotonic()
        assert left > 0, f"waited for {count}× {predicate!r}; got {seen!r}"
        sock.settimeout(left)
        try:
            seen.append(sock.recv(4096).decode())
        except TimeoutError:
            continue
    sock.settimeout(None)
    return seen
