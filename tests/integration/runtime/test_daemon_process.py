"""``codedeck-bridge run`` as a real process: start-up, the embedded relay, errors, shutdown."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge.nostr.event import sign_event
from bridge.nostr.keys import Keypair
from bridge.nostr.relay import PublishStatus, RelayConnection

REPO = Path(__file__).resolve().parents[2]
READY = re.compile(r"embedded relay listening on 127\.0\.0\.1:(\d+)")


def bridge_cmd(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "bridge", "run", "--home", str(home), *args]


def env() -> dict[str, str]:
    out = dict(os.environ)
    out["PYTHONPATH"] = str(REPO)
    out.pop("CODEDECK_HOME", None)
    return out


class Daemon:
    def __init__(self, home: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            bridge_cmd(home, "--embedded-relay", "127.0.0.1:0", *args),
            stderr=subprocess.PIPE,
            text=True,
            env=env(),
            cwd=REPO,
        )
        self.lines: list[str] = []
        self.port = self._wait_ready()

    def _wait_ready(self) -> int:
        assert self.proc.stderr is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.lines.append(line)
            if " serving " in line:
                for seen in self.lines:
                    if match := READY.search(seen):
                        return int(match.group(1))
        self.proc.kill()
        raise AssertionError("daemon did not start:\n" + "".join(self.lines))

    def stop(self, signum: int = signal.SIGTERM) -> tuple[int, str]:
        self.proc.send_signal(signum)
        _, rest = self.proc.communicate(timeout=30)
        return self.proc.returncode, "".join(self.lines) + rest


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "home"


def test_first_run_creates_a_private_home_and_identity_and_stops_on_sigterm(home: Path) -> None:
    daemon = Daemon(home)
    try:
        assert (home.stat().st_mode & 0o777) == 0o700
        assert (home / "bridge.db").stat().st_mode & 0o777 == 0o600
    finally:
        code, log = daemon.stop()
    assert code == 0, log
    assert "new: first run" in log
    with sqlite3.connect(home / "bridge.db") as conn:
        (secret,) = conn.execute("SELECT secret_key FROM identity").fetchone()
    keypair = Keypair.from_secret(bytes(secret))
    assert keypair.npub in log
    assert keypair.nsec not in log and keypair.secret_hex not in log

    again = Daemon(home)  # the lock was released and the same identity is reused
    code, log = again.stop(signal.SIGINT)
    assert code == 0, log
    assert keypair.npub in log and "new: first run" not in log


def test_embedded_relay_admits_the_bridge_and_refuses_strangers(home: Path) -> None:
    daemon = Daemon(home)
    try:
        with sqlite3.connect(home / "bridge.db") as conn:
            (secret,) = conn.execute("SELECT secret_key FROM identity").fetchone()
        bridge_key = Keypair.from_secret(bytes(secret))
        stranger = Keypair.generate()

        async def run() -> tuple[PublishStatus, str, PublishStatus]:
            connection = RelayConnection(f"ws://127.0.0.1:{daemon.port}", stranger)
            await connection.connect()
            try:
                now = int(time.time())
                tags = [["p", bridge_key.public_hex], ["expiration", str(now + 3600)]]
                refused = await connection.publish(
                    sign_event(stranger, 4515, "x", tags, created_at=now)
                )
                reply = [["p", stranger.public_hex], ["expiration", str(now + 3600)]]
                own = await connection.publish(
                    sign_event(bridge_key, 4516, "x", reply, created_at=now)
                )
                other_kind = await connection.publish(
                    sign_event(bridge_key, 1, "hi", created_at=now)
                )
                assert other_kind.status is PublishStatus.REJECTED  # a private relay
            finally:
                await connection.close()
            return refused.status, refused.message, own.status

        status, message, own_status = asyncio.run(run())
        assert status is PublishStatus.REJECTED
        assert "not a registered user" in message
        assert own_status is PublishStatus.ACCEPTED
    finally:
        daemon.stop()


def test_second_daemon_on_the_same_home_is_refused(home: Path) -> None:
    daemon = Daemon(home)
    try:
        second = subprocess.run(
            bridge_cmd(home, "--embedded-relay", "127.0.0.1:0"),
            capture_output=True,
            text=True,
            env=env(),
            cwd=REPO,
            timeout=60,
        )
        assert second.returncode == 1
        assert f"another codedeck-bridge (pid {daemon.proc.pid})" in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        daemon.stop()


@pytest.mark.parametrize(
    ("setup", "args", "code", "message"),
    [
        (lambda home: None, ["--relay", "http://nope"], 2, "is not a relay URL"),
        (
            lambda home: (home.mkdir(mode=0o700), (home / "config.toml").write_text("bogus = 1\n")),
            [],
            2,
            "unknown setting(s) bogus",
        ),
        (
            lambda home: (home.mkdir(mode=0o700), (home / "k").write_text("nsec1xyz\n")),
            ["--key-file", "{home}/k"],
            1,
            "chmod 600",
        ),
        (
            lambda home: (
                home.mkdir(mode=0o700),
                (home / "k").write_text("not a key\n"),
                (home / "k").chmod(0o600),
            ),
            ["--key-file", "{home}/k"],
            1,
            "does not hold a valid secret key",
        ),
    ],
    ids=["bad-relay", "unknown-config-key", "loose-key-file", "invalid-key-file"],
)
def test_user_errors_are_one_line_with_a_fix(
    home: Path, setup: object, args: list[str], code: int, message: str
) -> None:
    setup(home)  # type: ignore[operator]
    result = subprocess.run(
        bridge_cmd(home, *(arg.format(home=home) for arg in args)),
        capture_output=True,
        text=True,
        env=env(),
        cwd=REPO,
        timeout=60,
    )
    assert result.returncode == code, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_key_file_identity_is_used_and_never_logged(home: Path) -> None:
    home.mkdir(mode=0o700)
    keypair = Keypair.generate()
    key_file = home / "nsec"
    key_file.write_text(keypair.nsec + "\n")
    key_file.chmod(0o600)
    daemon = Daemon(home, "--key-file", str(key_file))
    code, log = daemon.stop()
    assert code == 0
    assert keypair.npub in log
    assert keypair.nsec not in log and keypair.secret_hex not in log
