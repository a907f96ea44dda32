"""``doctor``: passing and failing against a real relay, the clock, Claude Code, credentials.

The CLI runs as a process while the test's loop serves the relay. Claude Code is a stand-in
(a fake ``claude_agent_sdk`` package with its ``_bundled/claude``, and a ``claude`` on PATH), so
the checks do not depend on what the machine has installed.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection, serve
from websockets.http11 import Request, Response

from bridge.doctor import (
    Status,
    check_claude,
    check_clock,
    check_credentials,
    probe_relay,
)
from bridge.nostr.event import sign_event
from bridge.nostr.keys import Keypair
from bridge.nostr.relay import RelayConnection
from tests.control.fake_handler import short_home
from tests.ops.support import (
    RunningDaemon,
    arun_cli,
    clean_env,
    fake_claude_install,
    invoke,
    make_store,
)
from tests.support.relay import LoopbackRelay

KEY = Keypair.from_secret("09" * 32)
API_KEY = "sk-ant-api03-doctor-test-0123456789"


@pytest.fixture
def home() -> Iterator[Path]:
    with short_home() as path:
        yield path


def doctor_env(tmp_path: Path, home: Path, **extra: str) -> dict[str, str]:
    """Fake Claude Code, no Claude login, the API key in the service's environment file."""
    (tmp_path / "claude-config").mkdir()
    env_file = home / "service.env"
    env_file.write_text(f"# for the service\nANTHROPIC_API_KEY={API_KEY}\n")
    env_file.chmod(0o600)
    return clean_env(
        CLAUDE_CONFIG_DIR=str(tmp_path / "claude-config"),
        **fake_claude_install(tmp_path),
        **extra,
    )


def by_name(report: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for check in report["checks"]:
        out.setdefault(check["name"], []).append(check)
    return out


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- the whole command --------------------------------------------------------------------------


async def test_doctor_passes_with_a_reachable_relay(
    home: Path, tmp_path: Path, relay: LoopbackRelay
) -> None:
    await make_store(home, KEY)
    env = doctor_env(tmp_path, home, CODEDECK_RELAYS=relay.url)
    result = await arun_cli("doctor", "--home", str(home), "--json", env=env)
    assert result.code == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    checks = by_name(report)
    assert report["ok"] is True
    statuses = {name: [c["status"] for c in found] for name, found in checks.items()}
    assert statuses == {
        "config": ["pass"],
        "home": ["pass"],
        "database": ["pass"],
        "identity": ["pass"],
        "daemon": ["warn"],  # not running is worth saying, not a failure
        "relay": ["pass"],
        "lan": ["skip"],
        "claude": ["pass"],
        "agent": ["skip"],  # no ACP agent configured, no OpenCode on the test's PATH
        "credentials": ["pass"],
        "sandbox": ["pass"],  # bubblewrap runs here (.ci/run installs it)
        "clock": ["skip"],  # LocalRelay sends no Date header, and holds no future event
        "registration": ["skip"],
    }
    relay_check = checks["relay"][0]
    assert relay_check["details"]["url"] == relay.url
    assert relay_check["details"]["connectMs"] >= 0 and relay_check["details"]["eoseMs"] >= 0
    assert KEY.npub in checks["identity"][0]["summary"]
    assert "9.9.9 (Claude Code)" in checks["claude"][0]["summary"]
    assert "8.8.8" in checks["claude"][0]["summary"]  # the one on PATH is reported too
    assert "ANTHROPIC_API_KEY" in checks["credentials"][0]["summary"]

    text = await arun_cli("doctor", "--home", str(home), env=env)
    assert text.code == 0
    assert f"  PASS  relay         {relay.url}: reachable (connect " in text.stdout
    assert text.stdout.rstrip().endswith("warning(s).")
    for secret in (API_KEY, KEY.nsec, KEY.secret_hex):
        assert secret not in text.stdout + text.stderr + result.stdout


async def test_doctor_fails_with_fixes_and_changes_nothing(home: Path, tmp_path: Path) -> None:
    await make_store(home, KEY)
    env = doctor_env(tmp_path, home, CODEDECK_RELAYS=f"ws://127.0.0.1:{closed_port()}")
    home.chmod(0o755)
    (home / "bridge.db").chmod(0o644)
    result = await arun_cli("doctor", "--home", str(home), env=env)
    assert result.code == 1
    out = result.stdout
    assert f"FAIL  home          {home} is accessible to other users (mode 0755)" in out
    assert f"fix: chmod 700 {home}" in out
    assert f"FAIL  database      readable by other users: {home}/bridge.db (0644)" in out
    assert f"fix: chmod 600 {home}/bridge.db" in out
    assert "FAIL  relay" in out and "connection refused" in out
    assert "fix: the relay is not running on that host and port" in out
    assert "check(s) failed" in out
    assert "Traceback" not in result.stderr
    # The doctor reports; it does not tighten (that would hide the exposure).
    assert home.stat().st_mode & 0o777 == 0o755
    assert (home / "bridge.db").stat().st_mode & 0o777 == 0o644


async def test_doctor_reports_a_corrupt_database_in_the_stores_words(
    home: Path, tmp_path: Path
) -> None:
    db = home / "bridge.db"
    db.write_bytes(b"not a database at all" * 10)
    db.chmod(0o600)
    env = doctor_env(tmp_path, home)
    result = await arun_cli("doctor", "--home", str(home), "--json", "--skip", "relay", env=env)
    assert result.code == 1
    checks = by_name(json.loads(result.stdout))
    assert checks["database"][0]["status"] == "fail"
    assert "is not a valid SQLite database" in checks["database"][0]["summary"]
    assert db.read_bytes() == b"not a database at all" * 10


async def test_doctor_with_the_daemon_running_probes_its_embedded_relay(
    home: Path, tmp_path: Path
) -> None:
    env = doctor_env(tmp_path, home)
    # The fake SDK on the path only answers doctor's version check: no Claude sessions here.
    daemon_env = {**env, "CODEDECK_AGENT": "scripted"}
    daemon = await asyncio.to_thread(RunningDaemon, home, env=daemon_env)
    try:
        result = await arun_cli("doctor", "--home", str(home), "--json", env=env)
    finally:
        code, log = await asyncio.to_thread(daemon.stop)
    assert code == 0, log
    checks = by_name(json.loads(result.stdout))
    assert checks["daemon"][0]["status"] == "pass"
    assert f"pid {daemon.proc.pid}" in checks["daemon"][0]["summary"]
    assert checks["relay"][0]["status"] == "pass"
    assert checks["relay"][0]["details"]["url"].startswith("ws://127.0.0.1:")
    assert checks["lan"][0]["status"] == "warn"  # loopback only: a phone cannot reach it
    assert "0.0.0.0:7777" in checks["lan"][0]["fix"]
    assert result.code == 0, result.stdout


def test_usage_errors(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    result = invoke(capsys, monkeypatch, "doctor", "--home", str(home), "--skip", "nonsense")
    assert result.code == 2 and "invalid choice: 'nonsense'" in result.stderr
    result = invoke(capsys, monkeypatch, "doctor", "--home", str(home), "--timeout", "0")
    assert result.code == 2 and "--timeout must be between" in result.stderr


# --- the clock ----------------------------------------------------------------------------------


async def _dated_relay(offset: float) -> Any:
    """A minimal relay whose handshake carries a Date header `offset` seconds from ours."""

    async def handler(ws: ServerConnection) -> None:
        async for message in ws:
            frame = json.loads(message)
            if frame[0] == "REQ":
                await ws.send(json.dumps(["EOSE", frame[1]]))

    def process_response(ws: ServerConnection, request: Request, response: Response) -> Response:
        del response.headers["Date"]
        response.headers["Date"] = email.utils.formatdate(time.time() + offset, usegmt=True)
        return response

    return await serve(handler, "127.0.0.1", 0, process_response=process_response)


@pytest.mark.parametrize(
    ("offset", "status", "words"),
    [
        (0, Status.PASS, "in step with"),
        (-120, Status.FAIL, "s ahead of"),
        (+120, Status.FAIL, "s behind"),
        (-12, Status.WARN, "s ahead of"),
    ],
    ids=["in-step", "ahead", "behind", "slightly-ahead"],
)
async def test_clock_against_the_relays_date_header(
    offset: float, status: Status, words: str
) -> None:
    server = await _dated_relay(offset)
    try:
        port = server.sockets[0].getsockname()[1]
        probe = await probe_relay(f"ws://127.0.0.1:{port}", timeout=10)
    finally:
        server.close()
        await server.wait_closed()
    assert probe.error is None and probe.skew is not None
    check = check_clock([probe])
    assert check.status is status, check
    assert words in check.summary
    if status is not Status.PASS:
        assert check.fix is not None and "timedatectl" in check.fix


async def test_a_future_event_hints_that_the_clock_is_behind(relay: LoopbackRelay) -> None:
    author = Keypair.generate()
    connection = RelayConnection(relay.url, author)
    await connection.connect()
    try:
        future = sign_event(author, 1, "from the future", created_at=int(time.time()) + 900)
        assert (await connection.publish(future)).accepted
    finally:
        await connection.close()
    check = check_clock([await probe_relay(relay.url)])
    assert check.status is Status.WARN
    assert "probably behind" in check.summary


def test_no_reachable_relay_skips_the_clock() -> None:
    assert check_clock([]).status is Status.SKIP


# --- Claude Code --------------------------------------------------------------------------------


def test_claude_missing_sdk_fails_with_the_pip_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("bridge.doctor.claude.importlib.util.find_spec", lambda name: None)
    check = check_claude({"PATH": "/nonexistent"})
    assert check.status is Status.FAIL
    assert check.fix is not None and "pip install claude-agent-sdk" in check.fix


async def test_claude_cli_missing_everywhere_fails(home: Path, tmp_path: Path) -> None:
    env = clean_env(**fake_claude_install(tmp_path, bundled=False, on_path=False))
    result = await arun_cli(
        "doctor", "--home", str(home), "--json", "--skip", "relay", "--skip", "clock", env=env
    )
    claude = by_name(json.loads(result.stdout))["claude"][0]
    assert result.code == 1
    assert claude["status"] == "fail"
    assert "no Claude Code CLI" in claude["summary"]
    assert "npm install -g @anthropic-ai/claude-code" in claude["fix"]


def test_claude_cli_that_fails_its_version_is_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = fake_claude_install(tmp_path, bundled=False)
    (tmp_path / "bin" / "claude").write_text("#!/bin/sh\necho 'broken install' >&2\nexit 3\n")
    monkeypatch.setattr(
        "bridge.doctor.claude.find_bundled_cli", lambda: (True, None)
    )  # the SDK, without a bundled CLI
    check = check_claude({"PATH": paths["PATH"]})
    assert check.status is Status.FAIL
    assert "broken install" in check.summary


# --- credentials --------------------------------------------------------------------------------


def test_credentials(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    config = tmp_path / "claude"
    config.mkdir()
    base = {"CLAUDE_CONFIG_DIR": str(config)}

    none = check_credentials(home, base)
    assert none.status is Status.FAIL
    assert "checked ANTHROPIC_API_KEY" in none.summary and none.fix is not None

    shell_only = check_credentials(home, {**base, "ANTHROPIC_API_KEY": API_KEY})
    assert shell_only.status is Status.WARN and "service does not" in shell_only.summary

    (config / ".credentials.json").write_text('{"claudeAiOauth": {}}')
    login = check_credentials(home, base)
    assert login.status is Status.PASS and "Claude Code login" in login.summary

    env_file = home / "service.env"
    env_file.write_text(f"ANTHROPIC_AUTH_TOKEN={API_KEY}\n")
    env_file.chmod(0o644)
    loose = check_credentials(home, base)
    assert loose.status is Status.FAIL and loose.fix == f"chmod 600 {env_file}"
    for check in (none, shell_only, login, loose):
        assert API_KEY not in repr(check)
    os.chmod(env_file, 0o600)
    assert check_credentials(home, base).status is Status.PASS


# --- the embedded relay on the LAN (no test binds anything but 127.0.0.1) -----------------------


async def test_lan_check_for_each_bind(monkeypatch: pytest.MonkeyPatch) -> None:
    from bridge.doctor import check_lan

    loopback = await check_lan("127.0.0.1", 7777, daemon_running=True)
    assert loopback.status is Status.WARN and loopback.fix is not None
    assert "0.0.0.0:7777" in loopback.fix
    specific = await check_lan("192.0.2.7", 7777, daemon_running=False)
    assert specific.status is Status.SKIP and "ws://192.0.2.7:7777" in specific.summary

    monkeypatch.setattr("bridge.runtime.edges.embedded_relay.lan_address", lambda: None)
    assert (await check_lan("0.0.0.0", 7777, daemon_running=True)).status is Status.FAIL

    monkeypatch.setattr("bridge.runtime.edges.embedded_relay.lan_address", lambda: "127.0.0.1")
    stopped = await check_lan("0.0.0.0", 7777, daemon_running=False)
    assert stopped.status is Status.SKIP and "ws://127.0.0.1:7777" in stopped.summary
    refused = await check_lan("0.0.0.0", closed_port(), daemon_running=True)
    assert refused.status is Status.FAIL and "does not accept connections" in refused.summary

    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    try:
        port = server.sockets[0].getsockname()[1]
        answering = await check_lan("0.0.0.0", port, daemon_running=True)
    finally:
        server.close()
        await server.wait_closed()
    assert answering.status is Status.PASS
    assert f"ufw allow {port}/tcp" in answering.summary
