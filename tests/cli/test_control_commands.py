"""``status``, ``pair``, ``phones``, ``unpair`` against a served fake handler, and with no daemon.

``main([...])`` runs in a worker thread (it starts its own event loop, as the real command does)
while the test's loop serves the control socket.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
from pathlib import Path

import pytest

from bridge.cli.main import main
from bridge.control import CONTROL_PROTOCOL_VERSION, ControlServer, control_socket_path
from bridge.nostr.keys import Keypair
from store.lock import acquire_lock
from tests.control.fake_handler import BRIDGE, TOKEN, FakeHandler, RefusingHandler

PHONE = Keypair.from_secret("02" * 32)
OTHER = Keypair.from_secret("03" * 32)


async def cli(*argv: str) -> int:
    return await asyncio.to_thread(main, list(argv))


def no_traceback(text: str) -> None:
    assert "Traceback" not in text


# --- status -------------------------------------------------------------------------------------


async def test_status_of_a_running_daemon(
    daemon: ControlServer, home: Path, handler: FakeHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    handler.phones[PHONE.public_hex] = {"npub": PHONE.npub, "label": "Pixel", "pairedAt": None}
    assert await cli("status", "--home", str(home)) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"codedeck-bridge 0.1.0 is running (pid {os.getpid()}, up 1 h 02 min)")
    assert f"npub:     {BRIDGE.npub}" in out
    assert "ws://127.0.0.1:7777  connected, last event" in out
    assert "wss://relay.example.org  backoff, last error: connection refused" in out
    assert f"Pixel  {PHONE.npub}  paired ?" in out
    assert "s-1  idle  fix the tests  in /w/app  host pid 4242" in out
    assert "session hosts: 1 running" in out
    assert "last command: never" in out


async def test_status_json_of_a_running_daemon(
    daemon: ControlServer, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await cli("status", "--json", "--home", str(home)) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["running"] is True
    assert set(status) == {
        "running", "pid", "startedAt", "version", "npub", "machine", "home", "relays",
        "embeddedRelay", "phones", "sessions", "lastCommandAt", "hosts",
    }  # fmt: skip
    assert status["relays"][1]["lastError"] == "connection refused"


async def test_status_without_a_daemon(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert await cli("status", "--home", str(home)) == 1
    captured = capsys.readouterr()
    assert captured.out == (
        f"no codedeck-bridge is running for {home}; start it with "
        f"`codedeck-bridge run --home {home}` or `systemctl --user start codedeck-bridge`\n"
    )
    assert captured.err == ""
    assert await cli("status", "--json", "--home", str(home)) == 1
    assert json.loads(capsys.readouterr().out) == {
        "running": False,
        "home": str(home),
        "lockHolder": None,
        "staleSocket": False,
        "message": captured.out.strip(),
        "hosts": {"running": 0},
    }


async def test_status_with_a_stale_socket(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(control_socket_path(home)))
    dead.close()
    assert await cli("status", "--json", "--home", str(home)) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["running"] is False
    assert report["staleSocket"] is True
    assert "is left over from a daemon that stopped" in report["message"]


async def test_status_when_the_lock_holder_does_not_answer(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with acquire_lock(home):
        assert await cli("status", "--home", str(home)) == 1
        out = capsys.readouterr().out
        assert f"a codedeck-bridge process (pid {os.getpid()}) holds {home}" in out
        assert f"`kill {os.getpid()}`" in out
        assert await cli("status", "--json", "--home", str(home)) == 1
        report = json.loads(capsys.readouterr().out)
    assert report["running"] is False
    assert report["lockHolder"] == {"pid": os.getpid()}


async def test_status_against_another_major(
    daemon: ControlServer,
    home: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("bridge.control.client.CONTROL_PROTOCOL_VERSION", "2.0.0")
    assert await cli("status", "--home", str(home)) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        "codedeck-bridge: the running codedeck-bridge daemon speaks control protocol "
        f"{CONTROL_PROTOCOL_VERSION}"
    )
    assert err.count("\n") == 1
    assert await cli("status", "--json", "--home", str(home)) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["running"] is True
    assert "update codedeck-bridge" in report["error"]


# --- pair ---------------------------------------------------------------------------------------


async def test_pair_shows_the_qr_waits_and_reports_the_phone(
    daemon: ControlServer, home: Path, handler: FakeHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    command = asyncio.create_task(cli("pair", "--home", str(home)))
    await asyncio.wait_for(handler.waiting.wait(), 30)
    handler.pair_now(PHONE, "Pixel 8")
    assert await command == 0
    out = capsys.readouterr().out
    assert "Scan this QR code with the CodeDeck app" in out
    assert "▀" in out and "█" in out  # the terminal QR code, in half blocks
    assert f"codedeck://pair?npub={BRIDGE.npub}&relays=ws%3A%2F%2F127.0.0.1%3A7777" in out
    assert "Waiting for a phone to pair: 10 min left" in out
    assert out.endswith(f"Paired Pixel 8 ({PHONE.npub}).\n")
    assert handler.calls[0] == ("pair_open", {"duration": 600.0})
    # The fake's only relay is loopback: `status` tells whether it is the embedded one (the
    # warning itself is tested in test_pair_reachability.py).
    assert [name for name, _ in handler.calls[1:]] == ["status", "pair_wait"]


async def test_pair_with_a_timeout_and_a_window_that_expires(
    daemon: ControlServer, home: Path, handler: FakeHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    command = asyncio.create_task(cli("pair", "--timeout", "90", "--home", str(home)))
    await asyncio.wait_for(handler.waiting.wait(), 30)
    handler.end_window("expired")
    assert await command == 1
    captured = capsys.readouterr()
    assert captured.err.endswith(  # after the fake's loopback-relay warning
        "\ncodedeck-bridge: the pairing window ended (expired) before a phone paired; "
        "run `codedeck-bridge pair` again\n"
    )
    assert handler.calls[0] == ("pair_open", {"duration": 90.0})
    assert "Waiting for a phone to pair: 2 min left" in captured.out  # 90 s, rounded up


async def test_pair_countdown_of_a_window_under_a_minute_in_seconds(
    daemon: ControlServer, home: Path, handler: FakeHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    command = asyncio.create_task(cli("pair", "--timeout", "30", "--home", str(home)))
    await asyncio.wait_for(handler.waiting.wait(), 30)
    handler.end_window("closed")
    assert await command == 1
    captured = capsys.readouterr()
    assert re.search(r"\nWaiting for a phone to pair: (2[0-9]|30) s left\n", captured.out)
    assert "the pairing window ended (closed)" in captured.err


async def test_pair_json_returns_at_once(
    daemon: ControlServer, home: Path, handler: FakeHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await cli("pair", "--json", "--home", str(home)) == 0
    window = json.loads(capsys.readouterr().out)
    assert list(window) == ["url", "npub", "token", "relays", "machine", "expiresAt", "webUrl"]
    assert window["webUrl"] is None  # the fake serves no embedded relay
    assert window["token"] == TOKEN
    assert window["npub"] == BRIDGE.npub
    assert window["relays"] == ["ws://127.0.0.1:7777"]
    assert [name for name, _ in handler.calls] == ["pair_open", "status"]  # status: the warning


async def test_a_phone_label_cannot_inject_terminal_escapes(
    daemon: ControlServer, home: Path, handler: FakeHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    command = asyncio.create_task(cli("pair", "--home", str(home)))
    await asyncio.wait_for(handler.waiting.wait(), 30)
    handler.pair_now(PHONE, "evil\x1b]0;owned\x07\u202e")
    assert await command == 0
    out = capsys.readouterr().out
    assert "\x07" not in out and "\u202e" not in out and "\x1b]" not in out
    assert f"Paired evil?]0;owned?? ({PHONE.npub})." in out


async def test_pair_refused_by_the_daemon(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    async with ControlServer(control_socket_path(home), RefusingHandler()):
        assert await cli("pair", "--home", str(home)) == 1
    captured = capsys.readouterr()
    assert captured.err == (
        "codedeck-bridge: the daemon is shutting down; try again once it has restarted\n"
    )
    assert captured.out == ""


async def test_pair_by_npub(
    daemon: ControlServer, home: Path, handler: FakeHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        await cli("pair", "--npub", PHONE.public_hex, "--label", "Tablet", "--home", str(home)) == 0
    )
    assert capsys.readouterr().out == f"Paired Tablet ({PHONE.npub}).\n"
    assert handler.calls == [("pair_npub", {"pubkey": PHONE.public_hex, "label": "Tablet"})]
    assert await cli("pair", "--npub", PHONE.npub, "--home", str(home)) == 0
    assert (
        capsys.readouterr().out
        == f"Phone ({PHONE.npub}) was already paired; its label is up to date.\n"
    )
    assert await cli("pair", "--npub", OTHER.npub, "--json", "--home", str(home)) == 0
    assert json.loads(capsys.readouterr().out) == {
        "npub": OTHER.npub,
        "label": "Phone",
        "alreadyPaired": False,
    }


USAGE_ERRORS = [
    (
        ["pair", "--timeout", "0"],
        "codedeck-bridge pair: --timeout must be between 1 and 3600 seconds",
    ),
    (
        ["pair", "--timeout", "nan"],
        "codedeck-bridge pair: --timeout must be between 1 and 3600 seconds",
    ),
    (["pair", "--label", "x"], "codedeck-bridge pair: --label needs --npub"),
    (["pair", "--npub", "npub1bad"], "codedeck-bridge pair: --npub: "),
    (["pair", "--npub", OTHER.nsec], "codedeck-bridge pair: --npub: "),
    (
        ["pair", "--npub", PHONE.npub, "--timeout", "60"],
        "codedeck-bridge pair: --timeout is for the pairing window",
    ),
    (["unpair", "zz"], "codedeck-bridge unpair: NPUB: expected an npub or 64 hex characters"),
    (
        ["pair", "--npub", PHONE.npub, "--label", "x" * 65],
        "codedeck-bridge pair: --label: label is longer than 64 characters",
    ),
    (
        ["pair", "--npub", PHONE.npub, "--label", "a\x1bb"],
        "codedeck-bridge pair: --label: label must not contain control characters",
    ),
]


@pytest.mark.parametrize(
    ("argv", "message"), USAGE_ERRORS, ids=[" ".join(a) for a, _ in USAGE_ERRORS]
)
async def test_usage_errors_before_connecting(
    home: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert await cli(*argv, "--home", str(home)) == 2
    err = capsys.readouterr().err
    assert err.startswith(message)
    assert err.count("\n") == 1
    assert OTHER.nsec not in err
    no_traceback(err)


# --- phones / unpair ----------------------------------------------------------------------------


async def test_phones(
    daemon: ControlServer, home: Path, handler: FakeHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await cli("phones", "--home", str(home)) == 0
    assert (
        capsys.readouterr().out == "No phone is paired; run `codedeck-bridge pair` to pair one.\n"
    )
    handler.phones[PHONE.public_hex] = {
        "npub": PHONE.npub,
        "label": "Pixel",
        "pairedAt": "2025-01-31T12:00:00Z",
    }
    assert await cli("phones", "--home", str(home)) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert line.startswith(f"Pixel  {PHONE.npub}  paired 2025-01-31 ")
    assert await cli("phones", "--json", "--home", str(home)) == 0
    assert json.loads(capsys.readouterr().out) == [
        {"npub": PHONE.npub, "label": "Pixel", "pairedAt": "2025-01-31T12:00:00Z"}
    ]


async def test_unpair(
    daemon: ControlServer, home: Path, handler: FakeHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    handler.phones[PHONE.public_hex] = {"npub": PHONE.npub, "label": "Pixel", "pairedAt": None}
    assert await cli("unpair", PHONE.public_hex, "--home", str(home)) == 0
    assert capsys.readouterr().out == (
        f"Unpaired Pixel ({PHONE.npub}): its commands are refused and nothing more is sent to it.\n"
    )
    assert handler.calls == [("phones_unpair", {"pubkey": PHONE.public_hex})]
    assert await cli("unpair", PHONE.npub, "--home", str(home)) == 1
    captured = capsys.readouterr()
    assert captured.err == (
        f"codedeck-bridge: {PHONE.npub} is not paired; `codedeck-bridge phones` lists the paired phones\n"
    )
    assert await cli("unpair", PHONE.npub, "--json", "--home", str(home)) == 1
    assert json.loads(capsys.readouterr().out) == {"unpaired": False, "npub": PHONE.npub}


# --- no daemon, help, usage ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["pair"],
        ["pair", "--json"],
        ["pair", "--npub", PHONE.npub],
        ["phones"],
        ["phones", "--json"],
        ["unpair", PHONE.npub],
    ],
    ids=lambda argv: " ".join(argv)[:20],
)
async def test_every_command_without_a_daemon(
    home: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    assert await cli(*argv, "--home", str(home)) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"codedeck-bridge: no codedeck-bridge is running for {home}; start it with "
        f"`codedeck-bridge run --home {home}` or `systemctl --user start codedeck-bridge`\n"
    )


async def test_the_default_home_comes_from_the_environment(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEDECK_HOME", str(home))
    assert await cli("phones") == 1
    assert f"running for {home}; start it with `codedeck-bridge run` or" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["status", "pair", "phones", "unpair"])
def test_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "--home DIR" in out
    assert f"usage: codedeck-bridge {command}" in out


@pytest.mark.parametrize(
    "argv", [["unpair"], ["pair", "--timeout", "soon"], ["status", "--bogus"], ["phones", "extra"]]
)
def test_argparse_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    no_traceback(capsys.readouterr().err)
