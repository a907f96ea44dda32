"""The mistakes of a user's first hour: where ``--home`` goes, a home that is a file, a home that
does not exist, and what ``status`` prints for a bridge with nothing yet.

In-process (`tests.ops.support.invoke`) except where the command must run as a process; the
read-only homes, which need a mount or dropped privileges, are in ``tests/integration/ops/test_read_only_home.py``.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from bridge.control import ControlServer
from bridge.control.client import ControlClient, ControlError
from bridge.nostr.keys import Keypair
from tests.control.fake_handler import FakeHandler
from tests.ops.support import CliResult, invoke, make_store

KEY = Keypair.from_secret("0b" * 32)
PHONE = Keypair.from_secret("0c" * 32)
OFFLINE = ("relay", "lan", "claude", "agent", "sandbox", "clock", "registration", "credentials")
Cli = Callable[..., CliResult]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    """``main([...])`` in this process: ``cli(*args, **env)``."""
    return functools.partial(invoke, capsys, monkeypatch)


def offline_doctor(cli: Cli, home: Path, *, before: bool = False) -> CliResult:
    skips = [arg for name in OFFLINE for arg in ("--skip", name)]
    where = ["--home", str(home)]
    args = [*where, "doctor", *skips] if before else ["doctor", *where, *skips]
    return cli(*args, "--json")


def missing_message(home: Path, origin: str, run: str) -> str:
    return (
        f"codedeck-bridge: the bridge home {home} ({origin}) does not exist: pass --home with the "
        f"home the bridge runs with, or start the bridge once with `{run}` to create it\n"
    )


# --- --home before the command -------------------------------------------------------------------


async def test_home_before_the_command_reaches_a_running_daemon(
    daemon: ControlServer, home: Path, handler: FakeHandler, cli: Cli
) -> None:
    handler.phones[PHONE.public_hex] = {"npub": PHONE.npub, "label": "Pixel", "pairedAt": None}
    for args in (["--home", str(home), "status"], ["status", "--home", str(home)]):
        result = await asyncio.to_thread(cli, *args)
        assert result.code == 0, (args, result.stderr)
        assert "is running" in result.stdout
    for args in (["--home", str(home), "phones"], ["phones", "--home", str(home)]):
        result = await asyncio.to_thread(cli, *args)
        assert result.code == 0 and f"Pixel  {PHONE.npub}" in result.stdout, args


async def test_home_before_the_command_for_the_offline_commands(
    home: Path, tmp_path: Path, cli: Cli
) -> None:
    await make_store(home, KEY)
    for where in (["--home", str(home), "keys", "show"], ["keys", "show", "--home", str(home)]):
        result = await asyncio.to_thread(cli, *where, "--json")
        assert result.code == 0 and json.loads(result.stdout)["npub"] == KEY.npub, where
    for where in (["--home", str(home), "decisions"], ["decisions", "--home", str(home)]):
        result = await asyncio.to_thread(cli, *where, "--json")
        assert result.code == 0 and json.loads(result.stdout) == [], where
    for args in (["--home", str(home), "sessions", "close", "--all"],
                 ["sessions", "--home", str(home), "close", "--all"],
                 ["sessions", "close", "--all", "--home", str(home)]):  # fmt: skip
        result = await asyncio.to_thread(cli, *args)
        assert result.code == 0 and result.stdout.startswith("No session to close"), args
    result = await asyncio.to_thread(offline_doctor, cli, home, before=True)
    assert json.loads(result.stdout)["home"] == str(home)


def test_a_home_after_the_command_wins_over_one_before(tmp_path: Path, cli: Cli) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    result = cli("--home", str(first), "config", "show", "--home", str(second), "--json")
    assert json.loads(result.stdout)["configFile"] == str(second / "config.toml")
    result = cli("--home", str(first), "config", "show", "--json")
    assert json.loads(result.stdout)["configFile"] == str(first / "config.toml")


def test_the_top_level_help_names_home(cli: Cli) -> None:
    result = cli("--help")
    assert result.code == 0 and "--home DIR" in result.stdout


# --- a home that is a file -----------------------------------------------------------------------

EVERY_COMMAND = [
    ["status"], ["status", "--json"], ["pair"], ["phones"], ["unpair", PHONE.npub], ["sessions"],
    ["sessions", "close", "--all"], ["decisions"], ["keys", "show"], ["config", "show"], ["run"],
    ["desiide"], ["service", "show"],
]  # fmt: skip


@pytest.mark.parametrize("args", EVERY_COMMAND, ids=" ".join)
def test_a_home_that_is_a_file_is_named_by_every_command(
    tmp_path: Path, args: list[str], cli: Cli
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a home")
    result = cli(*args, "--home", str(notes))
    assert (result.code, result.stdout) == (2, "")
    assert result.stderr == (
        f"codedeck-bridge: the bridge home {notes} is a file, not a directory: pass --home with a "
        "directory (or move the file away)\n"
    )
    below = cli("--home", str(notes / "bridge"), *args)
    assert below.code == 2
    assert below.stderr == (
        f"codedeck-bridge: {notes} is a file, not a directory, so it cannot hold the bridge home "
        f"{notes}/bridge: pass --home with a directory (or move the file away)\n"
    )
    assert notes.read_text() == "not a home"


def test_doctor_fails_the_home_that_is_a_file_and_suggests_no_restore(
    tmp_path: Path, cli: Cli
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("")
    result = offline_doctor(cli, notes)
    assert result.code == 1
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["home"]["status"] == "fail"
    assert checks["home"]["summary"] == f"{notes} is a file, not a directory"
    assert checks["home"]["fix"] == "pass --home with a directory (or move the file away)"
    for name in ("config", "database", "identity", "daemon"):
        assert checks[name]["status"] == "skip", name
    assert "restore" not in result.stdout and "backup" not in result.stdout
    text = cli("doctor", "--home", str(notes), *[a for n in OFFLINE for a in ("--skip", n)])
    assert "fix: pass --home with a directory (or move the file away)" in text.stdout
    assert text.stdout.count("FAIL") == 1


# --- a home that does not exist ------------------------------------------------------------------

READERS = [
    ["status"], ["status", "--json"], ["pair"], ["phones"], ["unpair", PHONE.npub], ["sessions"],
    ["sessions", "close", "--all"], ["sessions", "close", "s-1"], ["decisions"],
    ["decisions", "--json"], ["keys", "show"],
]  # fmt: skip


@pytest.mark.parametrize("args", READERS, ids=" ".join)
def test_a_missing_home_is_an_error_naming_its_source(
    tmp_path: Path, args: list[str], cli: Cli
) -> None:
    missing = tmp_path / "typo"
    given = cli(*args, "--home", str(missing))
    assert (given.code, given.stdout) == (2, "")
    assert given.stderr == missing_message(
        missing, "given with --home", f"codedeck-bridge run --home {missing}"
    )
    from_env = cli(*args, CODEDECK_HOME=str(missing))
    assert from_env.code == 2
    assert from_env.stderr == missing_message(missing, "from CODEDECK_HOME", "codedeck-bridge run")
    default = cli(*args, HOME=str(tmp_path))
    assert default.code == 2
    assert default.stderr == missing_message(
        tmp_path / ".codedeck",
        "the default; --home or CODEDECK_HOME choose another",
        "codedeck-bridge run",
    )
    assert not missing.exists() and not (tmp_path / ".codedeck").exists()


def test_config_show_and_doctor_accept_a_missing_home(tmp_path: Path, cli: Cli) -> None:
    missing = tmp_path / "new"
    shown = cli("config", "show", "--home", str(missing))
    assert shown.code == 0 and "(not present: defaults apply)" in shown.stdout
    doctor = offline_doctor(cli, missing)
    checks = {c["name"]: c["status"] for c in json.loads(doctor.stdout)["checks"]}
    assert checks["home"] == "warn"
    assert not missing.exists()


async def test_the_control_client_names_a_home_that_is_a_file(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("")
    with pytest.raises(ControlError) as info:
        await ControlClient.connect(notes)
    assert str(info.value) == (
        f"the bridge home {notes} is a file, not a directory: pass --home with a directory (or "
        "move the file away)"
    )
