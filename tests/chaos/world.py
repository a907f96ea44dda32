"""Everything a chaos run drives: three real relays, the daemon subprocess and three phones.

* Relays A and B (rust-nostr LocalRelay behind a :class:`~tests.support.relay.TcpProxy`, so a stop
  really cuts connections; LMDB-backed, so a restart keeps their events) carry all the traffic.
* Relay C is configured on the daemon only. It runs a :class:`FreezablePolicy`: normally it
  accepts, and while frozen it decides nothing, so it takes the daemon's events and never answers
  ``OK`` (the "silent relay" fault). Replays of old events are published through it too: it
  holds none of the phones' events, so it forwards them to the daemon as new.
* Phones: ``P1`` pairs through the QR window and suffers the phone faults (offline stretches,
  restarts from its state file, clock skew); ``P2`` is the observer that stays online (liveness
  waits watch its log); ``P3`` is unpaired mid-run. The phones use relays A and B only.
* The daemon runs the scripted agent, whose durable log says how often each input reached it.

The helpers here read the daemon's side of the truth straight from its files (SQLite is in WAL
mode, so reading while it runs is safe): the processed set, the cursor, the outbox, the scripted
agent's logs, its RSS from ``/proc``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bridge.agents.scripted_log import INPUTS_SUFFIX
from bridge.protocol import CreateSessionCommand
from tests.support.daemon import DaemonProcess
from tests.support.phone import PhoneSimulator
from tests.support.relay import LoopbackRelay

__all__ = [
    "PHONE_NAMES",
    "FreezablePolicy",
    "World",
]

PHONE_NAMES = ("P1", "P2", "P3")
_SEEN_CAPACITY = 500_000  # the phones' dedup memory: bigger than any run's event count


class FreezablePolicy:
    """Accept every event; while :attr:`frozen`, hold each one forever (no ``OK`` is sent).

    A held decision is only released (rejected) when the relay stops, which is how the run ends a
    silent stretch. LocalRelay handles one connection's messages in order, so one held event
    silences that whole connection, as a wedged relay would.
    """

    def __init__(self) -> None:
        self.frozen = False
        self.held = 0

    async def admit_event(self, event_json: dict[str, Any], source_ip: str) -> tuple[bool, str]:
        if self.frozen:
            self.held += 1
            await asyncio.Event().wait()
        return True, ""


@dataclass
class World:
    """The running system of one chaos run. Build with :meth:`start`, end with :meth:`close`."""

    root: Path
    relays: dict[str, LoopbackRelay]
    policy: FreezablePolicy
    daemon: DaemonProcess
    phones: dict[str, PhoneSimulator] = field(default_factory=dict)
    bridge_npub: str = ""

    # --- life cycle -------------------------------------------------------------------------------

    @classmethod
    async def start(cls, root: Path) -> World:
        """Start the relays and the daemon, pair the three phones."""
        root.mkdir(parents=True, exist_ok=True)
        workspace = root / "workspace"
        workspace.mkdir(exist_ok=True)
        policy = FreezablePolicy()
        relays = {
            "A": LoopbackRelay(lmdb_dir=root / "relay-a", proxied=True),
            "B": LoopbackRelay(lmdb_dir=root / "relay-b", proxied=True),
            "C": LoopbackRelay(policy=policy, proxied=True),
        }
        for relay in relays.values():
            await relay.start()
        daemon = DaemonProcess(
            root / "home",
            [relays[name].url for name in "ABC"],
            workspace,
            machine="chaosbox",
            env={"CODEDECK_AGENT": "scripted"},
        )
        world = cls(root, relays, policy, daemon)
        await daemon.start()
        await world._pair_phones()
        return world

    async def _pair_phones(self) -> None:
        opened = await self.daemon.call("pair.open", duration=600)
        self.bridge_npub = str(opened["npub"])
        main = self.new_phone("P1", online_relays=None)
        ack = await main.pair(str(opened["url"]), label="P1", timeout=30)
        if not ack.message.ok:
            raise RuntimeError(f"pairing P1 failed: {ack.message.reason}")
        await main.wait_for("sessions", timeout=30)
        # The pairing URL lists relay C too; phones talk through A and B only.
        await main.go_offline()
        main.relays = self.phone_relays()
        await main.go_online(timeout=30)
        self.phones["P1"] = main
        for name in ("P2", "P3"):
            phone = self.new_phone(name, online_relays=self.phone_relays())
            mark = phone.mark()
            await self.daemon.call("pair.npub", npub=phone.npub, label=name)
            await phone.go_online(timeout=30)
            await phone.wait_for("sessions", after=mark, timeout=30)
            self.phones[name] = phone

    def new_phone(self, name: str, *, online_relays: list[str] | None) -> PhoneSimulator:
        """A phone simulator with its state file under the run's root (loaded if it exists)."""
        return PhoneSimulator(
            bridge=self.bridge_npub or None,
            relays=online_relays or (),
            label=name,
            state_path=self.root / f"{name.lower()}.json",
            seen_capacity=_SEEN_CAPACITY,
            outbox_retry_seconds=30.0,
        )

    async def create_session(self, phone: PhoneSimulator, timeout: float = 60.0) -> str:
        """Create a session from `phone` and wait until it is ready; its id."""
        mark = phone.mark()
        await phone.send(CreateSessionCommand())
        ready = await phone.wait_for("session-ready", after=mark, timeout=timeout)
        return str(ready.message.session.id)

    async def close(self) -> None:
        """Stop everything this run started (idempotent enough to run after a failure)."""
        for phone in self.phones.values():
            # Teardown: one phone failing to close must not leak the rest.
            with contextlib.suppress(Exception):
                await phone.close()
        if self.daemon.running:
            try:
                await self.daemon.stop(timeout=30)
            except Exception:
                self.daemon.kill()
        self.daemon.kill_hosts()  # hosts outlive a killed daemon by design
        self.policy.frozen = False
        for relay in self.relays.values():
            await relay.stop()

    # --- topology ---------------------------------------------------------------------------------

    def phone_relays(self) -> list[str]:
        return [self.relays["A"].url, self.relays["B"].url]

    def relay_up(self, name: str) -> bool:
        return self.relays[name].running

    # --- the daemon's files -----------------------------------------------------------------------

    @property
    def db_path(self) -> Path:
        return self.daemon.home / "bridge.db"

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """One read-only query against the daemon's database."""
        with sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, timeout=10) as conn:
            return conn.execute(sql, params).fetchall()

    def processed(self, event_id: str) -> bool:
        return bool(self.query("SELECT 1 FROM processed WHERE event_id = ?", (event_id,)))

    def rewind_cursor(self, seconds_ago: int) -> int:
        """Move the ingest cursor back (the daemon must be down); returns the new value."""
        target = int(time.time()) - seconds_ago
        with sqlite3.connect(self.db_path, timeout=10) as conn:
            row = conn.execute("SELECT value FROM kv WHERE key = 'ingest.lastSeen'").fetchone()
            if row is not None and int(row[0]) > target:
                conn.execute(
                    "UPDATE kv SET value = ? WHERE key = 'ingest.lastSeen'", (str(target),)
                )
        return target

    def scripted_inputs(self) -> dict[str, list[tuple[str, str]]]:
        """session id → the (uid, text) the scripted agent logged, in order (torn lines skipped)."""
        found: dict[str, list[tuple[str, str]]] = {}
        directory = self.daemon.home / "scripted"
        if not directory.is_dir():
            return found
        for path in directory.glob(f"*{INPUTS_SUFFIX}"):
            session_id = path.name[: -len(INPUTS_SUFFIX)]
            rows: list[tuple[str, str]] = []
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    record = json.loads(line)
                    rows.append((str(record["uid"]), str(record["text"])))
                except (ValueError, KeyError, TypeError):
                    continue
            found[session_id] = rows
        return found

    def executed_texts(self) -> dict[str, Counter[str]]:
        """session id → how many times each text reached the agent."""
        return {
            sid: Counter(text for _, text in rows) for sid, rows in self.scripted_inputs().items()
        }

    def rss_kb(self) -> int | None:
        """The daemon's resident set size in KiB, or None when it is not running."""
        proc = self.daemon.proc
        if proc is None or proc.poll() is not None:
            return None
        try:
            status = Path(f"/proc/{proc.pid}/status").read_text()
        except OSError:
            return None
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return None

    def cpu_seconds(self) -> tuple[int, float] | None:
        """(pid, user + system CPU seconds so far) of the running daemon, or None."""
        proc = self.daemon.proc
        if proc is None or proc.poll() is not None:
            return None
        try:
            fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        ticks = os.sysconf("SC_CLK_TCK")
        return proc.pid, (int(fields[11]) + int(fields[12])) / ticks

    def log_records(self) -> list[dict[str, Any]]:
        """The daemon's JSON log lines (see :meth:`DaemonProcess.log_records`)."""
        return self.daemon.log_records()
