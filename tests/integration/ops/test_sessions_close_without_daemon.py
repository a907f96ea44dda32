"""``sessions close`` with no daemon running: the store changed in one transaction, the hosts
stopped and their directories removed, all under the home's lock.

The hosts are processes that pass for session hosts (`tests.control.fake_hosts`); the store is
a real bridge database. The path through a running daemon is in ``tests/cli``; both, against
the real daemon, in ``tests/integration/ops/test_sessions_close.py``."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge.host.layout import host_paths
from bridge.runtime.hosts.close import ClosedSessions
from bridge.service import ServiceError, close_every_session
from store import bridge_state
from store.db import open_bridge_db
from store.host_answers import save_answer
from store.lock import acquire_lock
from tests.control.fake_handler import short_home
from tests.control.fake_hosts import FakeHosts
from tests.ops.support import Cli

LISTED = ("s-1", "s-2")


PENDING = "s-new"


@pytest.fixture
def home() -> Iterator[Path]:
    with short_home() as path:
        yield path


@pytest.fixture
def hosts(home: Path) -> Iterator[FakeHosts]:
    fake = FakeHosts(home)
    try:
        yield fake
    finally:
        fake.close()


async def make_sessions(home: Path) -> None:
    """Two listed sessions and one being created, each with its rows in every table."""
    db = await open_bridge_db(home)
    try:
        await bridge_state.add_tombstone(db, "old")
        for sid in (*LISTED, PENDING):
            state = "starting" if sid == PENDING else "idle"
            await bridge_state.save_session(db, sid, {"cwd": "/w", "state": state})
            await bridge_state.append_transcript(db, sid, 1, json.dumps({"content": "hi"}))
            await bridge_state.add_inbox(db, f"u-{sid}", sid, "text", "in-1", 1)
            await save_answer(db, sid, "r-1", {"allow": True}, 1)
    finally:
        await db.close()


def rows(home: Path) -> dict[str, list[str]]:
    """Session ids per table (tombstones in order)."""
    with sqlite3.connect(home / "bridge.db") as conn:
        return {
            table: [str(r[0]) for r in conn.execute(f"SELECT {column} FROM {table} {order}")]
            for table, column, order in (
                ("sessions", "session_id", "ORDER BY session_id"),
                ("transcripts", "DISTINCT session_id", "ORDER BY session_id"),
                ("inbox", "session_id", "ORDER BY session_id"),
                ("host_answers", "session_id", "ORDER BY session_id"),
                ("tombstones", "session_id", "ORDER BY position"),
            )
        }


def test_close_all_without_a_daemon(home: Path, hosts: FakeHosts, cli: Cli) -> None:
    asyncio.run(make_sessions(home))
    for sid in (*LISTED, "orphan"):  # "orphan": a host whose session the store no longer has
        hosts.start(sid)
    result = cli("sessions", "close", "--all", "--home", str(home))
    assert result.code == 0, result.stderr
    assert result.stdout == (
        f"No codedeck-bridge runs for {home}: closed 3 session(s) in its store and stopped 3 "
        "session host(s):\n  s-1\n  s-2\n  s-new\n"
        "The phones see them removed when the bridge starts next.\n"
    )
    hosts.reap()
    assert not any(hosts.alive(sid) for sid in (*LISTED, "orphan"))
    assert not (home / "hosts").exists() or list((home / "hosts").iterdir()) == []
    # the pending session was never listed: no tombstone for it, as the engine's close
    assert rows(home) == {
        "sessions": [],
        "transcripts": [],
        "inbox": [],
        "host_answers": [],
        "tombstones": ["old", "s-1", "s-2"],
    }


def test_close_one_without_a_daemon_as_json(home: Path, hosts: FakeHosts, cli: Cli) -> None:
    asyncio.run(make_sessions(home))
    hosts.start("s-1")
    hosts.start("s-2")
    result = cli("sessions", "close", "s-2", "--json", "--home", str(home))
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout) == {"closed": ["s-2"], "daemon": False, "hostsStopped": 1}
    hosts.reap()
    assert hosts.alive("s-1") and not hosts.alive("s-2")
    assert not host_paths(home, "s-2").root.exists() and host_paths(home, "s-1").root.exists()
    assert rows(home) == {
        "sessions": ["s-1", "s-new"],
        "transcripts": ["s-1", "s-new"],
        "inbox": ["s-1", "s-new"],
        "host_answers": ["s-1", "s-new"],
        "tombstones": ["old", "s-2"],
    }


def test_an_unknown_session_changes_nothing(home: Path, hosts: FakeHosts, cli: Cli) -> None:
    asyncio.run(make_sessions(home))
    hosts.start("s-1")
    before = rows(home)
    result = cli("sessions", "close", "nope", "--home", str(home))
    assert result.code == 1
    assert result.stderr == (
        f"codedeck-bridge: there is no session nope in {home} (its sessions: s-1, s-2, s-new)\n"
    )
    assert rows(home) == before and hosts.alive("s-1")


def test_a_home_without_a_database_only_stops_left_over_hosts(
    home: Path, hosts: FakeHosts, cli: Cli
) -> None:
    hosts.start("gone")
    result = cli("sessions", "close", "--all", "--home", str(home))
    assert result.code == 0, result.stderr
    assert result.stdout == (
        f"No session in the store of {home} (no codedeck-bridge runs for it); stopped 1 "
        "session host(s) left over.\n"
    )
    hosts.reap()
    assert not hosts.alive("gone")
    assert not (home / "bridge.db").exists()  # nothing was created
    again = cli("sessions", "close", "--all", "--home", str(home))
    assert again.stdout == f"No session to close (no codedeck-bridge runs for {home}).\n"
    unknown = cli("sessions", "close", "s-1", "--home", str(home))
    assert unknown.code == 1
    assert unknown.stderr == (
        f"codedeck-bridge: there is no session s-1 in {home} (it has no session)\n"
    )


def test_a_lock_holder_that_does_not_answer(home: Path, hosts: FakeHosts, cli: Cli) -> None:
    asyncio.run(make_sessions(home))
    hosts.start("s-1")
    with acquire_lock(home) as lock:
        result = cli("sessions", "close", "--all", "--home", str(home))
    assert result.code == 1
    assert result.stderr == (
        f"codedeck-bridge: a codedeck-bridge process (pid {lock.pid}) holds {home} but does not "
        "answer on its control socket (it is starting, stopping or stuck): retry in a moment, "
        f"or stop it (`kill {lock.pid}`) and run this again\n"
    )
    assert rows(home)["sessions"] == [*LISTED, PENDING] and hosts.alive("s-1")


def test_service_uninstall_closes_through_the_same_path(home: Path, hosts: FakeHosts) -> None:
    hosts.start("gone")
    assert close_every_session(home, None) == ClosedSessions((), daemon=False, hosts_stopped=1)
    with acquire_lock(home), pytest.raises(ServiceError, match="does not answer"):
        close_every_session(home, None)
