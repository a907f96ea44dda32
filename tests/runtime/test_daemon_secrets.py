"""The daemon hides the files it reads secrets from, besides its home: the gate's list."""

from __future__ import annotations

from pathlib import Path

from bridge.config import Settings
from bridge.runtime.daemon import bridge_secret_files
from bridge.sandbox.hidden import hidden_paths


def settings(tmp_path: Path, **fields: object) -> Settings:
    base: dict[str, object] = {
        "home": tmp_path / "home",
        "relays": (),
        "workspaces": (tmp_path,),
        "machine_name": "box",
        "embedded_relay": ("127.0.0.1", 7777),
        "key_file": None,
    }
    base.update(fields)
    return Settings(**base)  # type: ignore[arg-type]


def test_the_key_token_and_credential_directory_are_secret_files(tmp_path: Path) -> None:
    configured = settings(
        tmp_path,
        key_file=tmp_path / "keys" / "nsec",
        register_token_file=tmp_path / "relay.token",
    )
    files = bridge_secret_files(configured, {"CREDENTIALS_DIRECTORY": "/run/credentials/cb"})
    assert files == (
        str(tmp_path / "keys" / "nsec"),
        str(tmp_path / "relay.token"),
        "/run/credentials/cb",
    )
    hidden = hidden_paths(str(tmp_path), str(configured.home), secret_files=files)
    assert {str(configured.home), *files} <= set(hidden)


def test_without_them_only_the_home_is_the_bridges(tmp_path: Path) -> None:
    assert bridge_secret_files(settings(tmp_path), {}) == ()
