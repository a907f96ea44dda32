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
from bridge.control import ControlServer
from tests.control.fake_handler import FakeHandler


async def cli(*argv: str) -> int:
    return await asyncio.to_thread(main, list(argv))


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
