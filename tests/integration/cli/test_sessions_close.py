"""``sessions close ID|--all`` through a running daemon (a served fake handler), and ``status``'s
session hosts. The hosts are processes that pass for hosts (`tests.control.fake_hosts`); the
fake daemon stops them a moment after the close, as the daemon's runners would.

The path without a daemon (the store and real host directories) is in ``tests/ops``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bridge.control import ControlServer, SessionInfo
from bridge.host.layout import host_paths
from tests.cli.test_sessions_close import cli
from tests.control.fake_handler import FakeHandler
from tests.control.fake_hosts import FakeHosts

STOP_AFTER = 0.3  # the fake daemon's hosts exit this long after the close


def two_sessions(handler: FakeHandler, hosts: FakeHosts) -> dict[str, int]:
    """Sessions s-1 and s-2 with live hosts that exit shortly after the daemon closes them."""
    handler.sessions = [
        SessionInfo(sessionId="s-1", state="idle"),
        SessionInfo(sessionId="s-2", state="running"),
    ]
    pids = {sid: hosts.start(sid) for sid in ("s-1", "s-2")}

    def on_close(ids: list[str]) -> None:
        for sid in ids:
            asyncio.get_running_loop().call_later(STOP_AFTER, hosts.stop, sid)

    handler.on_close = on_close
    return pids


async def test_close_one_waits_until_its_host_is_gone(
    daemon: ControlServer,
    home: Path,
    handler: FakeHandler,
    hosts: FakeHosts,
    capsys: pytest.CaptureFixture[str],
) -> None:
    two_sessions(handler, hosts)
    assert await cli("sessions", "close", "s-1", "--home", str(home)) == 0
    assert not hosts.alive("s-1") and hosts.alive("s-2")
    assert capsys.readouterr().out == (
        "Closed 1 session(s) through the running daemon; their hosts have stopped and the "
        "phones are told:\n  s-1\n"
    )
    assert ("sessions_close", {"session_id": "s-1", "close_all": False}) in handler.calls


async def test_close_all_as_json(
    daemon: ControlServer,
    home: Path,
    handler: FakeHandler,
    hosts: FakeHosts,
    capsys: pytest.CaptureFixture[str],
) -> None:
    two_sessions(handler, hosts)
    # --home and --json before the action, as `sessions --home X` takes them too
    assert await cli("sessions", "--home", str(home), "--json", "close", "--all") == 0
    assert json.loads(capsys.readouterr().out) == {
        "closed": ["s-1", "s-2"],
        "daemon": True,
        "hostsStopped": 2,
    }
    assert not hosts.alive("s-1") and not hosts.alive("s-2")
    assert handler.sessions == []


async def test_a_host_that_does_not_stop_fails_after_the_wait(
    daemon: ControlServer,
    home: Path,
    handler: FakeHandler,
    hosts: FakeHosts,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("bridge.runtime.hosts.close.CLOSE_WAIT", 0.3)
    pid = hosts.start("s-1")  # nobody stops it
    assert await cli("sessions", "close", "s-1", "--json", "--home", str(home)) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {
        "closed": ["s-1"],
        "daemon": True,
        "stillRunning": {"s-1": pid},
    }
    log = host_paths(home, "s-1").log
    assert captured.err == (
        "codedeck-bridge: the daemon is closing 1 session(s), but after 0.3 s the host of s-1 "
        f"(pid {pid}) still runs (its log: {log}; stop it with `kill {pid}`)\n"
    )


async def test_status_without_a_daemon_counts_the_hosts_left_running(
    home: Path, hosts: FakeHosts, capsys: pytest.CaptureFixture[str]
) -> None:
    hosts.start("s-1")
    hosts.start("s-2")
    hosts.start("s-3", info=False)  # no host.json: not recognisable as a host, not counted
    assert await cli("status", "--home", str(home)) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[1] == (
        f"2 session host(s) still run under {home}: the next start adopts them "
        "(`codedeck-bridge sessions close --all` ends them)"
    )
    assert await cli("status", "--json", "--home", str(home)) == 1
    assert json.loads(capsys.readouterr().out)["hosts"] == {"running": 2}
