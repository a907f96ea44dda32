"""``config show``, ``keys show``, ``decisions``, ``sessions``, ``run``'s session flags and the
CLI's error paths."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bridge.cli.main import main
from bridge.config import describe, load_settings
from bridge.control import ControlServer, control_socket_path
from bridge.nostr.keys import Keypair
from store.db import open_bridge_db
from store.decisions import list_decisions, read_decisions, record_decision
from store.readonly import NoDatabase, open_readonly
from store.schema import BRIDGE_MIGRATIONS
from tests.control.fake_handler import FakeHandler, short_home
from tests.ops.support import REPO, CliResult, invoke, make_store
from tests.support.tls import make_certificate

KEY = Keypair.from_secret("0a" * 32)
API_KEY = "sk-ant-api03-config-show-0123456789"


Cli = Callable[..., CliResult]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    """``main([...])`` in this process: ``cli(*args, **env)``."""
    return functools.partial(invoke, capsys, monkeypatch)


@pytest.fixture
def home() -> Iterator[Path]:
    with short_home() as path:
        yield path


def key_file(directory: Path, keypair: Keypair = KEY) -> Path:
    path = directory / "bridge.nsec"
    path.write_text(keypair.nsec + "\n")
    path.chmod(0o600)
    return path


# --- config show --------------------------------------------------------------------------------


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_config_show_never_prints_a_secret(home: Path, as_json: bool, cli: Cli) -> None:
    nsec_file = key_file(home)
    (home / "config.toml").write_text('machine_name = "desk"\n')
    json_flag = ["--json"] if as_json else []
    result = cli(
        "config",
        "show",
        "--home",
        str(home),
        *json_flag,
        CODEDECK_KEY_FILE=str(nsec_file),
        ANTHROPIC_API_KEY=API_KEY,
    )
    assert result.code == 0, result.stderr
    everything = result.stdout + result.stderr
    for secret in (KEY.nsec, KEY.secret_hex, API_KEY, API_KEY[7:]):
        assert secret not in everything
    if as_json:
        body = json.loads(result.stdout)
        settings = {row["name"]: row for row in body["settings"]}
        assert settings["machine_name"] == {
            "name": "machine_name",
            "value": "desk",
            "origin": f"file {home / 'config.toml'}",
        }
        assert settings["key_file"]["origin"] == "env CODEDECK_KEY_FILE"
        secrets = {row["name"]: row["state"] for row in body["secrets"]}
        assert secrets["ANTHROPIC_API_KEY"] == "set"
        assert secrets["ANTHROPIC_AUTH_TOKEN"] == "unset"
        assert secrets["bridge key"] == "set"
        assert body["host"] == "cli"
    else:
        assert "machine_name             desk  [file " in result.stdout
        assert "ANTHROPIC_API_KEY        set  [this environment]" in result.stdout
        assert str(nsec_file) in result.stdout  # the path is not a secret; its content is


def test_config_show_lists_every_setting_and_works_without_a_home(tmp_path: Path, cli: Cli) -> None:
    missing = tmp_path / "nowhere"
    result = cli("config", "show", "--home", str(missing), "--json")
    assert result.code == 0
    names = [row["name"] for row in json.loads(result.stdout)["settings"]]
    expected = [row[0] for row in describe(load_settings(flags={"home": str(missing)}, env={}))]
    assert names == expected
    assert not missing.exists()  # showing the configuration creates nothing


def test_config_show_lists_each_agent_with_its_command_and_origin(home: Path, cli: Cli) -> None:
    (home / "config.toml").write_text(
        '[agents.gemini]\nlabel = "Gemini CLI"\ncommand = "/opt/gemini --acp"\n'
        'env = { GEMINI_API_KEY = "agent-secret-value" }\n'
    )
    text = cli("config", "show", "--home", str(home))
    assert text.code == 0, text.stderr
    line = next(x for x in text.stdout.splitlines() if x.startswith("agents.gemini"))
    assert "Gemini CLI: /opt/gemini --acp (env: GEMINI_API_KEY)" in line
    assert f"[file {home / 'config.toml'} [agents.gemini]]" in line
    as_json = cli("config", "show", "--home", str(home), "--json")
    (gemini,) = json.loads(as_json.stdout)["agents"]
    assert gemini == {
        "id": "gemini",
        "label": "Gemini CLI",
        "command": ["/opt/gemini", "--acp"],
        "env": ["GEMINI_API_KEY"],
        "origin": f"file {home / 'config.toml'} [agents.gemini]",
    }
    assert "agent-secret-value" not in text.stdout + as_json.stdout


def test_config_show_with_an_invalid_file_is_a_usage_error(home: Path, cli: Cli) -> None:
    (home / "config.toml").write_text("relays = [1, 2]\n")
    result = cli("config", "show", "--home", str(home))
    assert result.code == 2
    assert result.stderr.startswith("codedeck-bridge: relays (file ")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_config_example_documents_every_setting_and_loads(tmp_path: Path) -> None:
    text = (REPO / "deploy" / "config.example.toml").read_text()
    # The agents' tables come last: a section of their own, checked below.
    example, marker, agents_part = text.partition("# --- other agents")
    assert marker
    settings = [row[0] for row in describe(load_settings(flags={"home": str(tmp_path)}, env={}))]
    for name in settings:
        # home: chosen by --home/CODEDECK_HOME, not by the file inside it; agents: tables
        if name != "home" and not name.startswith("agents."):
            assert f"\n#{name} = " in example, name
    # Uncomment one example line per setting (the last one of each) and load the result.
    chosen: dict[str, str] = {}
    for line in example.splitlines():
        if line.startswith("#") and " = " in line and not line.startswith("# "):
            chosen[line[1:].split(" = ")[0]] = line[1:]
    home = tmp_path / "home"
    home.mkdir()
    text = "\n".join(chosen.values()) + "\n"
    text = text.replace('["~/src", "~/work"]', f'["{tmp_path}"]')
    claude = tmp_path / "claude"
    claude.write_text("#!/bin/sh\n")
    text = text.replace('"~/.local/bin/claude"', f'"{claude}"')
    text = text.replace('"~/.config/codedeck/relay-admin.token"', f'"{tmp_path / "admin.token"}"')
    tls = make_certificate(tmp_path / "tls")
    text = text.replace('"/etc/codedeck/tls/fullchain.pem"', f'"{tls.cert}"')
    text = text.replace('"/etc/codedeck/tls/privkey.pem"', f'"{tls.key}"')
    (home / "config.toml").write_text(text)
    loaded = load_settings(flags={"home": str(home)}, env={})
    assert loaded.relays == ("wss://relay.example.com",)
    assert loaded.embedded_relay == ("0.0.0.0", 7777)
    assert loaded.machine_name == "laptop"
    assert loaded.agent == "claude" and loaded.claude_path == claude
    assert loaded.register_url == "https://relay.example.org"
    # The agents' tables, uncommented, load as documented.
    tables = "\n".join(
        line[1:] for line in agents_part.splitlines() if line.startswith("#") and line[1:2] != " "
    )
    (home / "config.toml").write_text(tables + "\n")
    agents = load_settings(flags={"home": str(home)}, env={"PATH": str(tmp_path)}).agents
    assert [(a.agent_id, a.label) for a in agents] == [
        ("opencode", "OpenCode"),
        ("gemini", "Gemini CLI"),
        ("codex", "Codex"),
    ]
    assert agents[0].command[1:] == ("acp",) and agents[1].command == ("gemini", "--acp")


# --- keys show ----------------------------------------------------------------------------------


async def test_keys_show_from_the_store_with_and_without_nsec(home: Path, cli: Cli) -> None:
    await make_store(home, KEY)
    plain = await asyncio.to_thread(cli, "keys", "show", "--home", str(home))
    assert plain.code == 0, plain.stderr
    assert f"npub:   {KEY.npub}" in plain.stdout and KEY.public_hex in plain.stdout
    assert KEY.nsec not in plain.stdout + plain.stderr
    assert KEY.secret_hex not in plain.stdout + plain.stderr
    assert plain.stderr == ""

    shown = await asyncio.to_thread(cli, "keys", "show", "--home", str(home), "--nsec", "--json")
    assert shown.code == 0
    body = json.loads(shown.stdout)
    assert body["nsec"] == KEY.nsec and body["npub"] == KEY.npub
    assert "WARNING" in shown.stderr and "impersonate" in shown.stderr
    assert KEY.nsec not in shown.stderr


def test_keys_show_from_a_key_file(home: Path, cli: Cli) -> None:
    other = Keypair.from_secret("0b" * 32)
    path = key_file(home, other)
    result = cli("keys", "show", CODEDECK_HOME=str(home), CODEDECK_KEY_FILE=str(path))
    assert result.code == 0
    assert other.npub in result.stdout and f"key file {path}" in result.stdout
    assert other.nsec not in result.stdout
    assert not (home / "bridge.db").exists()  # the store is not opened, let alone created


def test_keys_show_refuses_a_corrupt_database_politely(home: Path, cli: Cli) -> None:
    db = home / "bridge.db"
    garbage = b"\x00garbage" * 40
    db.write_bytes(garbage)
    result = cli("keys", "show", "--home", str(home))
    assert result.code == 1
    assert "cannot read the bridge identity" in result.stderr
    assert "is not a valid SQLite database" in result.stderr and "Move it aside" in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert db.read_bytes() == garbage


def test_keys_show_without_an_identity(tmp_path: Path, cli: Cli) -> None:
    (tmp_path / "new").mkdir()
    result = cli("keys", "show", "--home", str(tmp_path / "new"))
    assert result.code == 1
    assert "has no identity yet; start it once (`codedeck-bridge run`)" in result.stderr
    assert list((tmp_path / "new").iterdir()) == []


def test_keys_show_of_a_home_that_does_not_exist(tmp_path: Path, cli: Cli) -> None:
    missing = tmp_path / "new"
    result = cli("keys", "show", "--home", str(missing))
    assert result.code == 2 and result.stdout == ""
    assert result.stderr == (
        f"codedeck-bridge: the bridge home {missing} (given with --home) does not exist: pass "
        "--home with the home the bridge runs with, or start the bridge once with "
        f"`codedeck-bridge run --home {missing}` to create it\n"
    )
    assert not missing.exists()
    # A key file needs no home: it is read all the same.
    nsec_file = key_file(tmp_path)
    with_key = cli("keys", "show", "--home", str(missing), CODEDECK_KEY_FILE=str(nsec_file))
    assert with_key.code == 0 and f"npub:   {KEY.npub}" in with_key.stdout


# --- decisions ----------------------------------------------------------------------------------

ROWS = [
    {"at": "2025-01-31T12:00:00Z", "session_id": "s-1", "tool": "Bash", "outcome": "blocked",
     "reasons": ["rm_rf"], "detail": "rm -rf /"},
    {"at": "2025-01-31T12:00:05Z", "session_id": "s-2", "tool": "Edit", "outcome": "auto-allow"},
    {"at": "2025-01-31T12:01:00Z", "session_id": "s-1", "tool": "Bash", "outcome": "card",
     "reasons": ["outside_workspace", "privileged"]},
]  # fmt: skip


async def test_decisions_oldest_first_filtered_and_as_json(home: Path, cli: Cli) -> None:
    await make_store(home, KEY, decisions=ROWS)
    text = await asyncio.to_thread(cli, "decisions", "--home", str(home))
    assert text.code == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines == [
        "2025-01-31T12:00:00Z  s-1  Bash  blocked  [rm_rf]  rm -rf /",
        "2025-01-31T12:00:05Z  s-2  Edit  auto-allow  [-]",
        "2025-01-31T12:01:00Z  s-1  Bash  card  [outside_workspace,privileged]",
    ]
    one = await asyncio.to_thread(
        cli, "decisions", "--home", str(home), "--session", "s-1", "--limit", "1", "--json"
    )
    assert json.loads(one.stdout) == [
        {
            "id": 3,
            "at": "2025-01-31T12:01:00Z",
            "sessionId": "s-1",
            "tool": "Bash",
            "outcome": "card",
            "reasons": ["outside_workspace", "privileged"],
            "detail": None,
        }
    ]


async def test_decisions_read_while_the_daemon_holds_the_database(home: Path, cli: Cli) -> None:
    db = await open_bridge_db(home)
    try:
        await record_decision(db, at="t1", session_id="s", tool="Bash", outcome="card")
        assert [r.outcome for r in await list_decisions(db)] == ["card"]
        result = await asyncio.to_thread(cli, "decisions", "--home", str(home), "--json")
        assert [row["outcome"] for row in json.loads(result.stdout)] == ["card"]
        await record_decision(db, at="t2", session_id="s", tool="Bash", outcome="allowed")
        result = await asyncio.to_thread(cli, "decisions", "--home", str(home), "--json")
        assert [row["outcome"] for row in json.loads(result.stdout)] == ["card", "allowed"]
    finally:
        await db.close()


async def test_decisions_of_an_older_database_and_of_no_database(
    home: Path, tmp_path: Path, cli: Cli
) -> None:
    await make_store(home, KEY, migrations=BRIDGE_MIGRATIONS[:2])
    older = await asyncio.to_thread(cli, "decisions", "--home", str(home))
    assert older.code == 0 and older.stdout == "No permission decision recorded.\n"
    with open_readonly(home) as db:
        assert db.schema_version == 2 and read_decisions(db) == []
    (tmp_path / "x").mkdir()
    none = await asyncio.to_thread(cli, "decisions", "--home", str(tmp_path / "x"), "--json")
    assert none.code == 0 and json.loads(none.stdout) == []
    with pytest.raises(NoDatabase, match="start it once"):
        open_readonly(tmp_path / "x")


async def test_decisions_tolerate_a_malformed_reasons_value(home: Path, cli: Cli) -> None:
    db = await open_bridge_db(home)
    try:
        await db.execute(
            "INSERT INTO decisions (at, session_id, tool, outcome, reasons) VALUES (?,?,?,?,?)",
            ("t", "s\x1b[2J", "Bash", "card", "not json"),
        )
    finally:
        await db.close()
    result = await asyncio.to_thread(cli, "decisions", "--home", str(home))
    assert result.code == 0
    assert result.stdout == "t  s?[2J  Bash  card  [?]\n"  # escape sequences never reach the tty


def test_decisions_limit_out_of_range_is_a_usage_error(home: Path, cli: Cli) -> None:
    result = cli("decisions", "--home", str(home), "--limit", "0")
    assert result.code == 2 and "--limit must be between 1 and" in result.stderr


# --- sessions -----------------------------------------------------------------------------------


async def test_sessions_from_a_running_daemon(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    handler = FakeHandler()
    control = ControlServer(control_socket_path(home), handler)
    await control.start()
    try:
        code = await asyncio.to_thread(main, ["sessions", "--home", str(home)])
        text = capsys.readouterr().out
        code_json = await asyncio.to_thread(main, ["sessions", "--home", str(home), "--json"])
        body = json.loads(capsys.readouterr().out)
    finally:
        await control.close()
    expected = await handler.sessions_list()
    assert code == 0 and code_json == 0
    assert body == expected
    for session in expected:
        assert session["sessionId"] in text


def test_sessions_without_a_daemon(home: Path, cli: Cli) -> None:
    result = cli("sessions", "--home", str(home))
    assert result.code == 1
    assert result.stderr == (
        f"codedeck-bridge: no codedeck-bridge is running for {home}; start it with "
        f"`codedeck-bridge run --home {home}` or `systemctl --user start codedeck-bridge`\n"
    )


# --- run: what a stop does to the sessions ------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "keep"),
    [([], None), (["--keep-sessions"], True), (["--close-sessions"], False)],
    ids=["default", "keep", "close"],
)
def test_run_passes_the_session_choice_to_the_daemon(
    home: Path, flags: list[str], keep: bool | None, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """None lets the daemon choose: keep under systemd (INVOCATION_ID), close in the foreground."""
    seen: list[object] = []

    async def fake_run_daemon(settings: object, *, keep_sessions: bool | None = None) -> None:
        seen.append(keep_sessions)

    monkeypatch.setattr("bridge.runtime.daemon.run_daemon", fake_run_daemon)
    monkeypatch.setattr("bridge.cli.main._configure_logging", lambda *a, **k: None)
    result = cli("run", "--home", str(home), *flags)
    assert result.code == 0, result.stderr
    assert seen == [keep]


# --- error paths --------------------------------------------------------------------------------

USAGE = [
    ([], "usage: codedeck-bridge"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["config"], "the following arguments are required: ACTION"),
    (["keys"], "the following arguments are required: ACTION"),
    (["service"], "the following arguments are required: ACTION"),
    (["keys", "show", "--bogus"], "unrecognized arguments: --bogus"),
    (["decisions", "--limit", "many"], "invalid int value: 'many'"),
    (["run", "--log-format", "xml"], "invalid choice: 'xml'"),
    (
        ["run", "--keep-sessions", "--close-sessions"],
        "argument --close-sessions: not allowed with argument --keep-sessions",
    ),
    (["sessions", "close"], "one of the arguments ID --all is required"),
]


@pytest.mark.parametrize(("args", "message"), USAGE, ids=[" ".join(a) or "none" for a, _ in USAGE])
def test_usage_errors_exit_2_without_traceback(args: list[str], message: str, cli: Cli) -> None:
    result = cli(*args)
    assert result.code == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_a_home_that_is_a_file_is_a_one_line_error(tmp_path: Path, cli: Cli) -> None:
    file_home = tmp_path / "file"
    file_home.write_text("")
    for args in (["keys", "show"], ["decisions"], ["config", "show"]):
        result = cli(*args, "--home", str(file_home))
        assert result.code == 2, (args, result.stderr)
        assert result.stderr == (
            f"codedeck-bridge: the bridge home {file_home} is a file, not a directory: pass "
            "--home with a directory (or move the file away)\n"
        )


def test_every_command_has_help(cli: Cli) -> None:
    for args in (
        ["sessions"], ["sessions", "close"], ["decisions"], ["config", "show"], ["keys", "show"],
        ["doctor"], ["service", "install"], ["service", "uninstall"], ["service", "show"],
    ):  # fmt: skip
        result = cli(*args, "--help")
        assert result.code == 0 and "--home" in result.stdout, args
