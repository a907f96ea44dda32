"""Settings precedence and the error messages of bad settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.config import ConfigError, describe, load_settings, parse_host_port, validate_relay_url


def flags(home: Path | None, **values: object) -> dict[str, object]:
    base: dict[str, object] = {
        "home": str(home) if home is not None else None,
        "relays": [],
        "workspaces": [],
        "machine_name": None,
        "embedded_relay": None,
        "key_file": None,
    }
    base.update(values)
    return base


def test_defaults(tmp_path: Path) -> None:
    settings = load_settings(flags=flags(tmp_path), env={})
    assert settings.home == tmp_path
    assert settings.relays == ()
    assert settings.uses_embedded_relay
    assert settings.embedded_relay == ("127.0.0.1", 7777)
    assert settings.workspaces == (Path.home(),)
    assert settings.key_file is None
    assert settings.origins["relays"].startswith("default")


def test_flag_beats_env_beats_file(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        'relays = ["wss://file.example"]\nmachine_name = "from-file"\n'
        'embedded_relay = "127.0.0.1:1111"\n'
    )
    env = {
        "CODEDECK_RELAYS": "wss://env.example, wss://env2.example",
        "CODEDECK_MACHINE_NAME": "env",
    }
    settings = load_settings(flags=flags(tmp_path, relays=["ws://flag.example:7000"]), env=env)
    assert settings.relays == ("ws://flag.example:7000",)
    assert settings.origins["relays"] == "flag --relay"
    assert settings.machine_name == "env"
    assert settings.origins["machine_name"] == "env CODEDECK_MACHINE_NAME"
    assert settings.embedded_relay == ("127.0.0.1", 1111)
    assert settings.origins["embedded_relay"].startswith("file ")

    from_env = load_settings(flags=flags(tmp_path), env=env)
    assert from_env.relays == ("wss://env.example", "wss://env2.example")


def test_home_from_env(tmp_path: Path) -> None:
    settings = load_settings(flags=flags(None), env={"CODEDECK_HOME": str(tmp_path)})
    assert settings.home == tmp_path
    assert settings.origins["home"] == "env CODEDECK_HOME"


def test_systemd_credential_is_the_key_file(tmp_path: Path) -> None:
    (tmp_path / "nsec").write_text("x")
    settings = load_settings(flags=flags(tmp_path), env={"CREDENTIALS_DIRECTORY": str(tmp_path)})
    assert settings.key_file == tmp_path / "nsec"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("relays = [", "not valid TOML"),
        ('relay = "wss://x"', "unknown setting(s) relay"),
        ("relays = 3", "expected a list of strings"),
        ('relays = ["https://x.example"]', "is not a relay URL"),
        ('embedded_relay = "nohost"', "must be HOST:PORT"),
        ('embedded_relay = "example.com:80"', "must be an IP address"),
        ('workspaces = ["/does/not/exist/anywhere"]', "is not a directory"),
        ('machine_name = ""', "expected a non-empty string"),
        ('agent = "gpt"', "is not an agent this bridge runs"),
        ("transcript_keep_last = -1", "expected a whole number"),
        ("embedded_relay_max_mb = 0", "expected a whole number of MiB"),
        ('embedded_relay_max_mb = "lots"', "expected a whole number of MiB"),
        ('claude_path = "/nope/claude"', "is not a file"),
        ('register_url = "http://relay.example.org"', "must be an https:// URL"),
        ('register_url = "https://relay.example.org"', "register_token_file is not"),
    ],
)
def test_bad_file_settings_name_the_setting(tmp_path: Path, config: str, message: str) -> None:
    (tmp_path / "config.toml").write_text(config + "\n")
    with pytest.raises(ConfigError) as info:
        load_settings(flags=flags(tmp_path), env={})
    assert message in str(info.value)


def test_validators() -> None:
    assert validate_relay_url("wss://relay.example/") == "wss://relay.example"
    assert validate_relay_url("ws://127.0.0.1:7777") == "ws://127.0.0.1:7777"
    with pytest.raises(ConfigError, match="invalid port"):
        validate_relay_url("ws://host:notaport")
    assert parse_host_port("[::1]:80") == ("::1", 80)
    assert parse_host_port("0.0.0.0:7777") == ("0.0.0.0", 7777)
    with pytest.raises(ConfigError, match="out of range"):
        parse_host_port("127.0.0.1:70000")


def test_describe_lists_every_setting_with_its_origin(tmp_path: Path) -> None:
    rows = describe(load_settings(flags=flags(tmp_path), env={"PATH": str(tmp_path / "bin")}))
    assert [name for name, _, _ in rows] == [
        "home",
        "relays",
        "workspaces",
        "machine_name",
        "embedded_relay",
        "embedded_relay_max_mb",
        "key_file",
        "agent",
        "transcript_keep_last",
        "register_url",
        "register_token_file",
        "claude_path",
        "agents.opencode",  # off: not on PATH (tests/test_agent_config.py)
    ]
    assert all(origin for _, _, origin in rows)


def test_the_embedded_relay_cap_has_a_default_and_is_read_from_the_environment(
    tmp_path: Path,
) -> None:
    default = load_settings(flags=flags(tmp_path), env={})
    assert default.embedded_relay_max_mb == 512
    assert default.origins["embedded_relay_max_mb"] == "default"
    env = {"CODEDECK_EMBEDDED_RELAY_MAX_MB": "64"}
    assert load_settings(flags=flags(tmp_path), env=env).embedded_relay_max_mb == 64
