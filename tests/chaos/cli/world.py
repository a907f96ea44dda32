"""Everything a real-CLI chaos run drives: a relay, the mock API, the daemon with Claude Code, a
phone, two sessions, and the ledger files.

* One :class:`~tests.support.relay.LoopbackRelay` on 127.0.0.1 carries all the traffic; it is
  never faulted (the scripted chaos run covers relays).
* :class:`~tests.chaos.cli.model.ChaosMock` is the Anthropic API, on 127.0.0.1, in this process.
* The daemon (``python -m bridge run``, ``CODEDECK_AGENT=claude``) runs the bundled Claude Code
  CLI in a session host per session, with the mock's offline environment (no retries, no
  nonessential traffic) and a private ``CLAUDE_CONFIG_DIR`` — which also marks every process of
  the run for the leftover check (:func:`~tests.chaos.cli.procs.processes_with_env`).
* The phone pairs through the QR window and stays online.
* Sessions: ``S1`` starts in mode ``default`` (a Bash call inside the workspace is allowed by the
  gate without a card; one that writes outside it hits the ``outside_workspace`` floor: a card)
  and ``S2`` in mode ``acceptEdits`` (every Bash call is a card); now and then the phone swaps
  their modes (:meth:`~tests.chaos.cli.workload.Workload.swap_modes`). Note that the gate's
  table differs from Claude Code's own: ``default`` auto-allows a command that writes inside the
  workspace; it is ``acceptEdits`` that asks for every command.
* Ledger files: ``workspace/ledger.txt`` (inside the workspace) and ``ledger-outside.txt`` (in
  the run's root, outside it; ``[sandbox] writable`` names it, as the agents run sandboxed). A
  Bash call appends its input's id to one of them: execution is counted on disk.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bridge.host.layout import host_paths
from bridge.protocol import CreateSessionCommand, ModeCommand
from tests.chaos.cli.model import DEFAULT_LATENCY, ChaosMock
from tests.support.daemon import DaemonProcess
from tests.support.phone import PhoneSimulator
from tests.support.relay import LoopbackRelay

__all__ = ["SESSION_MODES", "World"]

SESSION_MODES = ("default", "acceptEdits")
_MAX_SOCKET_PATH = 107  # sun_path is 108 bytes with its NUL
_SEEN_CAPACITY = 500_000


@dataclass
class World:
    """The running system of one run. Build with :meth:`start`, end with :meth:`close`."""

    root: Path
    relay: LoopbackRelay
    mock: ChaosMock
    daemon: DaemonProcess
    phone: PhoneSimulator | None = None
    sessions: list[str] = field(default_factory=list)

    @classmethod
    async def start(cls, root: Path, *, model_latency: float = DEFAULT_LATENCY) -> World:
        """Start the relay, the mock and the daemon; pair the phone (sessions:
        :meth:`open_sessions`)."""
        socket = host_paths(root.resolve() / "home", "x").socket
        if len(os.fsencode(socket)) > _MAX_SOCKET_PATH:
            raise ValueError(
                f"the work dir is too deep for unix sockets ({socket}): use a shorter one"
            )
        root.mkdir(parents=True, exist_ok=True)
        workspace = root / "workspace"
        workspace.mkdir(exist_ok=True)
        # Agents run sandboxed: only their session's folder is writable. The outside ledger is
        # written on purpose (a card), so the sandbox is told about it (it binds what exists).
        home = root / "home"
        home.mkdir(mode=0o700, exist_ok=True)
        outside = root / "ledger-outside.txt"
        outside.touch()
        (home / "config.toml").write_text(f'[sandbox]\nwritable = ["{outside}"]\n')
        relay = LoopbackRelay()
        await relay.start()
        mock = ChaosMock(model_latency)
        mock.start()
        env = {**mock.cli_env(root / "claude-config"), "CODEDECK_AGENT": "claude"}
        daemon = DaemonProcess(root / "home", [relay.url], workspace, machine="chaoscli", env=env)
        world = cls(root, relay, mock, daemon)
        try:
            await daemon.start(timeout=90)
            await world._pair()
        except BaseException:
            await world.close()
            raise
        return world

    async def _pair(self) -> None:
        opened = await self.daemon.call("pair.open", duration=600)
        phone = PhoneSimulator(
            relays=[self.relay.url], label="chaos-cli", seen_capacity=_SEEN_CAPACITY
        )
        self.phone = phone
        ack = await phone.pair(str(opened["url"]), timeout=30)
        if not ack.message.ok:
            raise RuntimeError(f"pairing failed: {ack.message.reason}")
        await phone.wait_for("sessions", timeout=30)

    async def open_sessions(self, timeout: float = 60.0) -> list[str]:
        """Create one session per mode of :data:`SESSION_MODES`; their ids."""
        phone = self.require_phone()
        for mode in SESSION_MODES:
            mark = phone.mark()
            await phone.send(CreateSessionCommand())
            ready = await phone.wait_for("session-ready", after=mark, timeout=timeout)
            session_id = str(ready.message.session.id)
            await phone.send(ModeCommand(sessionId=session_id, mode=mode))
            confirmed = functools.partial(_confirms, session_id, mode)
            await phone.wait_for("mode-confirmed", confirmed, after=mark, timeout=timeout)
            self.sessions.append(session_id)
        return list(self.sessions)

    def require_phone(self) -> PhoneSimulator:
        if self.phone is None:
            raise RuntimeError("the phone is not paired")
        return self.phone

    async def close(self) -> None:
        """Stop everything this run started (also after a failure)."""
        if self.phone is not None:
            with contextlib.suppress(Exception):  # teardown: the rest must still stop
                await self.phone.close()
        if self.daemon.running:
            try:
                await self.daemon.stop(timeout=30)
            except Exception:
                self.daemon.kill()
        self.daemon.kill_hosts()  # hosts outlive a killed daemon by design
        self.mock.stop()
        await self.relay.stop()

    # --- paths ------------------------------------------------------------------------------------

    @property
    def workspace(self) -> Path:
        return self.daemon.workspace

    @property
    def config_dir(self) -> Path:
        return self.root / "claude-config"

    @property
    def inside_ledger(self) -> Path:
        return self.workspace / "ledger.txt"

    @property
    def outside_ledger(self) -> Path:
        return self.root / "ledger-outside.txt"

    @property
    def home(self) -> Path:
        return self.daemon.home

    # --- reading ----------------------------------------------------------------------------------

    def ledger_marks(self) -> Counter[str]:
        """Input id → how many times a Bash call appended it, over both ledger files."""
        marks: Counter[str] = Counter()
        for path in (self.inside_ledger, self.outside_ledger):
            with contextlib.suppress(FileNotFoundError):
                marks.update(line.strip() for line in path.read_text().splitlines() if line.strip())
        return marks

    def marked(self, input_id: str) -> bool:
        return self.ledger_marks()[input_id] > 0

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """One read-only query against the daemon's database."""
        db = self.home / "bridge.db"
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10) as conn:
            return conn.execute(sql, params).fetchall()

    def log_records(self) -> list[dict[str, Any]]:
        """The daemon's JSON log lines (see :meth:`DaemonProcess.log_records`)."""
        return self.daemon.log_records()


def _confirms(session_id: str, mode: str, message: Any) -> bool:
    return bool(message.sessionId == session_id and message.mode == mode)
