"""``codedeck-bridge run`` as a subprocess for integration tests, and its control client.

The daemon runs exactly as a user runs it (``python -m bridge run``), against relays the test
started on 127.0.0.1, with the scripted agent (its log under ``<home>/scripted`` tells how
many times each input reached the agent). Tests can stop it cleanly (SIGTERM), kill it
(``kill -9``) and start it again on the same home.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from bridge.agents.scripted import count_executions
from bridge.control.client import ControlClient
from bridge.host.layout import HostPaths, host_alive, list_host_dirs, read_info
from bridge.nostr.keys import Keypair

__all__ = ["DaemonProcess", "forget_started", "home_with_agents", "kill_hosts_under", "started"]

REPO = Path(__file__).resolve().parents[2]
READY_MARK = " serving "

_STARTED: list[DaemonProcess] = []
"""The daemons started since the current test began: ``tests/conftest.py`` prints the end of
their logs when the test fails (a CI failure then says what the daemon saw), then forgets them."""


def started() -> list[DaemonProcess]:
    """The daemons started since :func:`forget_started` was last called."""
    return list(_STARTED)


def forget_started() -> None:
    """Called after each test."""
    _STARTED.clear()


class DaemonProcess:
    """One daemon home; :meth:`start` / :meth:`stop` / :meth:`kill` any number of times."""

    def __init__(
        self,
        home: Path,
        relays: Sequence[str],
        workspace: Path,
        *,
        machine: str = "testbox",
        extra_args: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self.home = home
        self.relays = list(relays)
        self.workspace = workspace
        self.machine = machine
        self.extra_args = list(extra_args)
        self.env = env or {}
        self.proc: subprocess.Popen[str] | None = None
        self.logs: list[str] = []
        self._log_path = home.parent / f"{home.name}.log"

    @property
    def log_text(self) -> str:
        return self._log_path.read_text() if self._log_path.exists() else ""

    def log_records(self) -> list[dict[str, Any]]:
        """The daemon's JSON log lines (non-JSON lines, e.g. a traceback, as ``{"raw": …}``)."""
        records: list[dict[str, Any]] = []
        for line in self.log_text.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                record = {"raw": line}
            records.append(record if isinstance(record, dict) else {"raw": line})
        return records

    def log_tail(self, lines: int) -> str:
        """The last `lines` lines of the daemon's log."""
        return "\n".join(self.log_text.splitlines()[-lines:])

    def log_size(self) -> int:
        """Bytes in the daemon's log so far (an offset for :meth:`log_since`)."""
        return self._log_path.stat().st_size if self._log_path.exists() else 0

    def log_since(self, offset: int) -> str:
        """The daemon's log from byte `offset` on."""
        if not self._log_path.exists():
            return ""
        with self._log_path.open("rb") as log:
            log.seek(offset)
            return log.read().decode("utf-8", errors="replace")

    def command(self) -> list[str]:
        args = [sys.executable, "-m", "bridge", "run", "--home", str(self.home)]
        for url in self.relays:
            args += ["--relay", url]
        args += ["--workspace", str(self.workspace), "--machine-name", self.machine]
        return args + self.extra_args

    async def start(self, timeout: float = 60.0) -> None:
        env = dict(os.environ)
        env["CODEDECK_AGENT"] = "scripted"  # tests drive the scripted agent unless told otherwise
        env.update(self.env)
        env["PYTHONPATH"] = str(REPO)
        env.pop("CODEDECK_HOME", None)
        env.pop("NOTIFY_SOCKET", None)
        log = self._log_path.open("a")
        offset = self._log_path.stat().st_size
        if self not in _STARTED:
            _STARTED.append(self)
        self.proc = subprocess.Popen(
            self.command(), stderr=log, stdout=subprocess.DEVNULL, env=env, cwd=REPO, text=True
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self._log_path.read_text()[offset:]
            if READY_MARK in text:
                return
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon exited with {self.proc.returncode}:\n{text}")
            await asyncio.sleep(0.05)
        self.kill()
        raise AssertionError("daemon did not become ready:\n" + self.log_text[offset:])

    async def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait; returns the exit status."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return await asyncio.to_thread(self.proc.wait, timeout)

    def kill(self) -> None:
        """``kill -9``: no shutdown of any kind."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def host_pids(self) -> list[int]:
        """The pids of the session hosts of this home that are alive now."""
        pids = []
        for paths in list_host_dirs(self.home):
            info = read_info(paths)
            if info is not None and host_alive(info):
                pids.append(info.pid)
        return pids

    def kill_hosts(self) -> None:
        """``kill -9`` every session host of this home (and, by PDEATHSIG, their agents)."""
        for pid in self.host_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while self.host_pids() and time.monotonic() < deadline:
            time.sleep(0.02)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    async def client(self) -> ControlClient:
        return await ControlClient.connect(self.home)

    async def call(self, method: str, **params: Any) -> Any:
        client = await self.client()
        try:
            return await client.call(method, params)
        finally:
            await client.close()

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Rows of a query on the daemon's store, the connection closed at once.

        ``with sqlite3.connect(...)`` only commits: the connection lingers until the garbage
        collector finds it, holding the WAL files of that moment open. Once the daemon closed the
        database (deleting them), every new connection of this process shares the stale state
        and reads "database disk image is malformed" (seen by the benchmark).
        """
        with contextlib.closing(sqlite3.connect(self.home / "bridge.db")) as conn:
            return conn.execute(sql, params).fetchall()

    def keypair(self) -> Keypair:
        [(secret,)] = self._read("SELECT secret_key FROM identity")
        return Keypair.from_secret(bytes(secret))

    def executions(self) -> dict[str, int]:
        """uid → how many times the scripted agent received it (across restarts)."""
        return count_executions(self.home / "scripted")

    def transcript(self, session_id: str) -> dict[int, str]:
        rows = self._read(
            "SELECT seq, entry FROM transcripts WHERE session_id = ? ORDER BY seq", (session_id,)
        )
        return {int(seq): str(entry) for seq, entry in rows}

    async def __aenter__(self) -> DaemonProcess:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if self.running:
                try:
                    await self.stop()
                except subprocess.TimeoutExpired:
                    self.kill()
        finally:
            # Hosts outlive a killed daemon by design; a test leaves none behind.
            self.kill_hosts()


def kill_hosts_under(root: Path) -> int:
    """``kill -9`` every live session host whose directory is under `root`; how many.

    The safety net of the integration and end-to-end tiers: hosts outlive a killed daemon by
    design, and no test may leave a process behind.
    """
    killed = 0
    pids = set(_host_processes_under(root))
    for info_file in root.rglob("hosts/*/host.json"):
        info = read_info(HostPaths(info_file.parent))
        if info is not None and host_alive(info):
            pids.add(info.pid)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            killed += 1
    return killed


def _host_processes_under(root: Path) -> list[int]:
    """Session host processes working in a directory under `root`, ``host.json`` or not.

    A host writes ``host.json`` once it serves; one its daemon launched just before the test
    stopped it is still starting when the test ends (seen in CI: two hosts, each with a Claude
    Code CLI, outlived their test). A host works in its own directory from its launch on.
    """
    pids = []
    root = root.resolve()  # /proc shows the real path
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if b"bridge.host" not in argv:
                continue
            cwd = Path(os.readlink(entry / "cwd"))
        except OSError:  # gone meanwhile, or not ours
            continue
        if cwd == root or root in cwd.parents:
            pids.append(int(entry.name))
    return pids


def home_with_agents(
    root: Path,
    agents: Mapping[str, Sequence[str] | str],
    labels: Mapping[str, str] | None = None,
    sandbox_writable: Sequence[Path] = (),
) -> Path:
    """A new bridge home under `root` whose config.toml has an ``[agents.<id>]`` table per agent
    (the id → its command: an argv list, or a command line; `labels` by id), and
    ``[sandbox] writable`` for an agent that keeps state outside its session folder (each path
    is made: the sandbox binds only what exists)."""
    home = root / "home"
    home.mkdir(mode=0o700)
    tables = []
    for agent_id, command in agents.items():
        argv = command if isinstance(command, str) else list(command)
        table = f"[agents.{agent_id}]\ncommand = {json.dumps(argv)}\n"
        if labels and agent_id in labels:
            table += f"label = {json.dumps(labels[agent_id])}\n"
        tables.append(table)
    if sandbox_writable:
        for path in sandbox_writable:
            path.mkdir(parents=True, exist_ok=True)
        paths = json.dumps([str(path) for path in sandbox_writable])
        tables.append(f"[sandbox]\nwritable = {paths}\n")
    (home / "config.toml").write_text("\n".join(tables))
    return home
