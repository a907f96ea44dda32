"""A real daemon at DEBUG logs in the chosen format and never logs a secret."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bridge.nostr.keys import Keypair
from tests.ops.support import RunningDaemon, clean_env

KEY = Keypair.from_secret("07" * 32)


SECRETS = {
    "nsec": KEY.nsec,
    "anthropic": "sk-ant-api03-AbCdEf0123456789_-xyz",
    "bearer": "Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig",
    "assignment": "ANTHROPIC_AUTH_TOKEN=tok_live_0123456789",
}


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_daemon_log_format_and_no_secret_in_it(tmp_path: Path, fmt: str) -> None:
    """A real daemon at DEBUG with a key file: the chosen format, and the key never logged."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    key_file = home / "nsec"
    key_file.write_text(KEY.nsec + "\n")
    key_file.chmod(0o600)
    api_key = SECRETS["anthropic"]
    env = clean_env(ANTHROPIC_API_KEY=api_key)
    daemon = RunningDaemon(
        home, "--key-file", str(key_file), "--log-level", "DEBUG", "--log-format", fmt, env=env
    )
    code, log = daemon.stop()
    assert code == 0, log
    lines = [line for line in log.splitlines() if line.strip()]
    assert lines
    if fmt == "json":
        bodies = [json.loads(line) for line in lines]
        assert any(KEY.npub in body["message"] for body in bodies)
        assert {"time", "level", "logger", "message"} <= set(bodies[0])
    else:
        assert all(not line.startswith("{") for line in lines)
        assert any(" INFO    " in line for line in lines)
    for secret in (KEY.nsec, KEY.secret_hex, KEY.secret_hex.upper(), api_key):
        assert secret not in log
