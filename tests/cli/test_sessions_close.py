"""``sessions close ID|--all`` through a running daemon (a served fake handler), and ``status``'s
session hosts. The hosts are processes that pass for hosts (`tests.control.fake_hosts`); the
fake daemon stops them a moment after the close, as the daemon's runners would.

The path without a daemon (the store and real host directories) is in ``tests/ops``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bridge.cli.main import main
from bridge.control import ControlServer, SessionInfo
from bridge.host.layout import host_paths
from tests.control.fake_handler import FakeHandler
from tests.control.fake_hosts import FakeHosts

STOP_AFTER = 0.3  # the fake daemon's hosts exit this long after the close


async def cli(*argv: str) -> int:
    return await asyncio.to_thread(main, list(argv))


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


async def test_close_all_with_nothing_to_close(
    daemon: ControlServer, home: Path, handler: FakeHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    handler.sessions = []
    assert await cli("sessions", "close", "--all", "--home", str(home)) == 0
    assert capsys.readouterr().out == "No session to close.\n"


async def test_an_unknown_session_is_refused(
    daemon: ControlServer, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await cli("sessions", "close", "nope", "--home", str(home)) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "codedeck-bridge: there is no session nope; `codedeck-bridge sessions` lists them\n"
    )


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


async def test_a_daemon_that_keeps_listing_the_session_fails_after_the_wait(
    daemon: ControlServer,
    home: Path,
    handler: FakeHandler,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("bridge.runtime.hosts.close.CLOSE_WAIT", 0.2)
    handler.keep_listed = True
    assert await cli("sessions", "close", "--all", "--home", str(home)) == 1
    assert capsys.readouterr().err == (
        "codedeck-bridge: the daemon is closing 1 session(s), but after 0.2 s the daemon has "
        "not closed s-1 yet (check its log)\n"
    )


async def test_a_daemon_without_sessions_close(
    daemon: ControlServer,
    home: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bridge.control import connection, methods

    older = {name: spec for name, spec in methods.METHODS.items() if name != "sessions.close"}
    monkeypatch.setattr(connection, "METHODS", older)
    assert await cli("sessions", "close", "--all", "--home", str(home)) == 1
    err = capsys.readouterr().err
    assert err.startswith("codedeck-bridge: the running daemon (codedeck-bridge ")
    assert err.endswith("cannot close sessions; restart it so that it runs this version\n")


async def test_listing_is_unchanged_beside_close(
    daemon: ControlServer, home: Path, handler: FakeHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await cli("sessions", "--home", str(home)) == 0
    assert capsys.readouterr().out == "s-1  idle\n"
    assert await cli("sessions", "--json", "--home", str(home)) == 0
    assert json.loads(capsys.readouterr().out) == [{"sessionId": "s-1", "state": "idle"}]
    assert [name for name, _ in handler.calls] == ["sessions_list", "sessions_list"]


@pytest.mark.parametrize(
    "argv",
    [["sessions", "close"], ["sessions", "close", "s-1", "--all"], ["sessions", "shut"]],
    ids=["no-target", "id-and-all", "unknown-action"],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert "usage: codedeck-bridge sessions" in capsys.readouterr().err


# --- status: the session hosts -------------------------------------------------------------------


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
