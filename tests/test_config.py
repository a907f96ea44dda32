"""Settings precedence and the error messages of bad settings."""

from __future__ import annotations

import os
import socket
from dataclasses import fields
from pathlib import Path

import pytest

from bridge.config import (
    SETTINGS,
    ConfigError,
    Settings,
    describe,
    load_settings,
    parse_host_port,
    validate_relay_url,
)


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
        ("transcript_keep_last = inf", "expected a whole number"),
        ("transcript_keep_last = nan", "expected a whole number"),
        ("transcript_keep_last = 4.9", "expected a whole number"),
        ("embedded_relay_max_mb = inf", "expected a whole number of MiB"),
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
        "embedded_relay_cert",
        "embedded_relay_key",
        "key_file",
        "agent",
        "transcript_keep_last",
        "register_url",
        "register_token_file",
        "claude_path",
        "push",
        "web_client_url",
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


# Every setting that has all three layers, with a distinct value for each layer, what that value
# resolves to, and the setting's default: (setting, flag, env, file TOML, resolved flag, resolved
# env, resolved file, default value, default origin). ``{d}`` is the test's directory. Extra file
# lines (a register URL needs a token file and the other way round) come from _NEEDS.
_LAYERS: list[tuple[str, object, str, str, object, object, object, object, str]] = [
    (
        "relays",
        ["ws://flag.example:7000"],
        "wss://env.example",
        '["wss://file.example/"]',
        ("ws://flag.example:7000",),
        ("wss://env.example",),
        ("wss://file.example",),
        (),
        "default (none: use the embedded relay)",
    ),
    (
        "workspaces",
        ["{d}/f"],
        "{d}/e",
        '["{d}/c"]',
        ("{d}/f",),
        ("{d}/e",),
        ("{d}/c",),
        (str(Path.home()),),
        "default (your home directory)",
    ),
    (
        "machine_name",
        "flag-box",
        " env-box ",
        '"file-box"',
        "flag-box",
        "env-box",
        "file-box",
        None,
        "default (host name)",
    ),
    (
        "embedded_relay",
        "127.0.0.1:1",
        "[::1]:2",
        '"0.0.0.0:3"',
        ("127.0.0.1", 1),
        ("::1", 2),
        ("0.0.0.0", 3),
        ("127.0.0.1", 7777),
        "default",
    ),
    (
        "key_file",
        "flag.key",
        "{d}/env.key",
        '"file.key"',
        "flag.key",
        "{d}/env.key",
        "file.key",
        None,
        "default (identity kept in the store)",
    ),
    (
        "agent",
        "scripted",
        "claude",
        '"scripted"',
        "scripted",
        "claude",
        "scripted",
        "claude",
        "default (Claude Code)",
    ),
    (
        "claude_path",
        "{d}/f/claude",
        "{d}/e/claude",
        '"{d}/c/claude"',
        "{d}/f/claude",
        "{d}/e/claude",
        "{d}/c/claude",
        None,
        "default (the CLI bundled with claude-agent-sdk)",
    ),
    (
        "register_url",
        "https://flag.example/admin",
        "https://env.example",
        '"http://localhost:8080"',
        "https://flag.example/admin",
        "https://env.example",
        "http://localhost:8080",
        None,
        "default (no relay registration)",
    ),
    (
        "register_token_file",
        "flag.token",
        "env.token",
        '"file.token"',
        "flag.token",
        "env.token",
        "file.token",
        None,
        "",  # no default: with register_url set it is required (test below)
    ),
    (
        "transcript_keep_last",
        1,
        " 2 ",
        "3",
        1,
        2,
        3,
        5000,
        "default (5000 per session)",
    ),
    (
        "embedded_relay_max_mb",
        10,
        "20",
        "30",
        10,
        20,
        30,
        512,
        "default",
    ),
    ("push", "off", "no", "true", False, False, True, True, "default (on)"),
    (
        "web_client_url",
        "https://a.example",
        "https://b.example/",
        '"http://localhost:8080"',
        "https://a.example/",
        "https://b.example/",
        "http://localhost:8080/",
        None,
        "default (the page the embedded relay serves, if it runs)",
    ),
]
_NEEDS = {
    "register_url": 'register_token_file = "needed.token"\n',
    "register_token_file": 'register_url = "https://needed.example"\n',
}
_FLAG_OF = {"relays": "--relay", "workspaces": "--workspace"}
_PATHS = frozenset({"workspaces", "key_file", "claude_path", "register_token_file"})


def _expect(name: str, value: object, home: Path) -> object:
    """The resolved value as the Settings field holds it (paths as Path, lists as tuples)."""
    if isinstance(value, str):
        value = value.replace("{d}", str(home))
        return Path(value) if name in _PATHS else value
    if isinstance(value, tuple) and name in _PATHS:
        return tuple(Path(str(item).replace("{d}", str(home))) for item in value)
    return value


@pytest.mark.parametrize("row", _LAYERS, ids=[row[0] for row in _LAYERS])
def test_each_setting_takes_flag_then_env_then_file_then_default(
    tmp_path: Path, row: tuple[str, object, str, str, object, object, object, object, str]
) -> None:
    name, flag, env_value, file_value, from_flag, from_env, from_file, default, default_origin = row
    for sub in ("f", "e", "c"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "claude").write_text("#!/bin/sh\n")
    if isinstance(flag, str):
        flag = flag.replace("{d}", str(tmp_path))
    elif isinstance(flag, list):
        flag = [item.replace("{d}", str(tmp_path)) for item in flag]
    env_var = "CODEDECK_" + name.upper()
    env = {env_var: env_value.replace("{d}", str(tmp_path))}
    config = tmp_path / "config.toml"
    config.write_text(
        f"{name} = {file_value.replace('{d}', str(tmp_path))}\n" + _NEEDS.get(name, "")
    )
    flag_name = _FLAG_OF.get(name, "--" + name.replace("_", "-"))

    layers = [
        (flags(tmp_path, **{name: flag}), env, from_flag, f"flag {flag_name}"),
        (flags(tmp_path), env, from_env, f"env {env_var}"),
        (flags(tmp_path), {env_var: ""}, from_file, f"file {config}"),
    ]
    for given, environ, expected, origin in layers:
        settings = load_settings(flags=given, env=environ)
        assert getattr(settings, name) == _expect(name, expected, tmp_path), origin
        assert settings.origins[name] == origin

    if name == "register_token_file":
        return
    config.write_text(_NEEDS.get(name, ""))
    settings = load_settings(flags=flags(tmp_path), env={})
    if name == "machine_name":
        assert settings.machine_name == (socket.gethostname() or "codedeck")
    else:
        assert getattr(settings, name) == _expect(name, default, tmp_path)
    assert settings.origins[name] == default_origin


def test_every_origin_of_an_unconfigured_bridge(tmp_path: Path) -> None:
    settings = load_settings(flags=flags(tmp_path), env={"PATH": str(tmp_path / "bin")})
    assert list(settings.origins.items()) == [
        ("home", "flag --home"),
        ("relays", "default (none: use the embedded relay)"),
        ("workspaces", "default (your home directory)"),
        ("machine_name", "default (host name)"),
        ("embedded_relay", "default"),
        ("key_file", "default (identity kept in the store)"),
        ("agent", "default (Claude Code)"),
        ("claude_path", "default (the CLI bundled with claude-agent-sdk)"),
        ("register_url", "default (no relay registration)"),
        ("register_token_file", "default (none)"),
        ("transcript_keep_last", "default (5000 per session)"),
        ("embedded_relay_max_mb", "default"),
        ("embedded_relay_cert", "default (none: plain ws:// and http://)"),
        ("embedded_relay_key", "default (none)"),
        ("push", "default (on)"),
        ("web_client_url", "default (the page the embedded relay serves, if it runs)"),
        (
            "agents.opencode",
            "default: `opencode` is not on PATH (install OpenCode, or set agents.opencode.command)",
        ),
        ("sandbox", "default (on)"),
    ]


def test_home_layers_and_an_empty_home_flag(tmp_path: Path) -> None:
    from_env = load_settings(flags={"home": ""}, env={"CODEDECK_HOME": str(tmp_path)})
    assert from_env.home == tmp_path
    assert from_env.origins["home"] == "env CODEDECK_HOME"
    from_default = load_settings(flags={}, env={"HOME": str(tmp_path)})
    assert from_default.origins["home"] == "default"


def test_an_empty_flag_is_given_but_an_empty_variable_is_not(tmp_path: Path) -> None:
    env = {"CODEDECK_MACHINE_NAME": ""}
    assert (
        load_settings(flags=flags(tmp_path), env=env).origins["machine_name"].startswith("default")
    )
    with pytest.raises(ConfigError) as info:
        load_settings(flags=flags(tmp_path, machine_name=""), env={})
    assert str(info.value) == "machine_name (flag --machine-name): expected a non-empty string"


def test_the_systemd_credential_sits_below_every_key_file_setting(tmp_path: Path) -> None:
    env = {"CREDENTIALS_DIRECTORY": str(tmp_path)}
    no_credential = load_settings(flags=flags(tmp_path), env=env)
    assert no_credential.key_file is None
    assert no_credential.origins["key_file"] == "default (identity kept in the store)"
    (tmp_path / "nsec").write_text("x")
    credential = load_settings(flags=flags(tmp_path), env=env)
    assert credential.origins["key_file"] == "systemd credential nsec"
    (tmp_path / "config.toml").write_text('key_file = "~/mine.key"\n')
    configured = load_settings(flags=flags(tmp_path), env=env)
    assert configured.key_file == Path.home() / "mine.key"
    assert configured.origins["key_file"] == f"file {tmp_path / 'config.toml'}"


def test_the_token_file_is_read_only_with_a_register_url(tmp_path: Path) -> None:
    env = {"CODEDECK_REGISTER_TOKEN_FILE": "token"}
    alone = load_settings(flags=flags(tmp_path), env=env)
    assert alone.register_token_file is None
    assert alone.origins["register_token_file"] == "default (none)"
    with pytest.raises(ConfigError) as info:
        load_settings(flags=flags(tmp_path), env={"CODEDECK_REGISTER_URL": "https://r.example"})
    assert str(info.value) == (
        "register_url is set but register_token_file is not: give the file that holds "
        "the relay's admin token (CODEDECK_REGISTER_TOKEN_FILE or register_token_file)"
    )


def test_lists_split_and_drop_repeats(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    env = {
        "CODEDECK_RELAYS": "wss://one.example, wss://two.example/,wss://one.example",
        "CODEDECK_WORKSPACES": os.pathsep.join([str(tmp_path / "a"), str(tmp_path / "b"), ""]),
    }
    settings = load_settings(flags=flags(tmp_path), env=env)
    assert settings.relays == ("wss://one.example", "wss://two.example")
    assert settings.workspaces == (tmp_path / "a", tmp_path / "b")
    commas = {"CODEDECK_WORKSPACES": f"{tmp_path / 'a'},{tmp_path / 'a'}"}
    assert load_settings(flags=flags(tmp_path), env=commas).workspaces == (tmp_path / "a",)
    (tmp_path / "config.toml").write_text("relays = []\n")
    empty = load_settings(flags=flags(tmp_path), env={})
    assert empty.relays == ()
    assert empty.origins["relays"] == f"file {tmp_path / 'config.toml'}"


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        (
            "RELAYS",
            "https://x",
            "relays (env CODEDECK_RELAYS): 'https://x' is not a relay URL; "
            "use ws://host:port or wss://host (for example wss://relay.example.org)",
        ),
        (
            "WORKSPACES",
            "/does/not/exist",
            "workspaces (env CODEDECK_WORKSPACES): /does/not/exist "
            "is not a directory; create it or fix the path",
        ),
        (
            "EMBEDDED_RELAY",
            "127.0.0.1:x",
            "embedded_relay (env CODEDECK_EMBEDDED_RELAY): port 'x' is not a number",
        ),
        (
            "AGENT",
            "gpt",
            "agent (env CODEDECK_AGENT): 'gpt' is not an agent this bridge runs; "
            "use one of claude, scripted",
        ),
        (
            "CLAUDE_PATH",
            "/nope/claude",
            "claude_path (env CODEDECK_CLAUDE_PATH): /nope/claude is "
            "not a file; point it at the claude executable, or remove the setting to use the "
            "bundled CLI",
        ),
        (
            "REGISTER_URL",
            "ftp://r",
            "register_url (env CODEDECK_REGISTER_URL): 'ftp://r' must be "
            "an https:// URL of the relay's admin API (http:// only for localhost)",
        ),
        (
            "TRANSCRIPT_KEEP_LAST",
            "many",
            "transcript_keep_last (env "
            "CODEDECK_TRANSCRIPT_KEEP_LAST): expected a whole number of transcript lines to keep per "
            "session (0 keeps everything)",
        ),
        (
            "EMBEDDED_RELAY_MAX_MB",
            "0",
            "embedded_relay_max_mb (env CODEDECK_EMBEDDED_RELAY_MAX_MB)"
            ": expected a whole number of MiB (at least 1) the embedded relay may keep",
        ),
    ],
)
def test_bad_variables_name_the_setting_the_variable_and_the_fix(
    tmp_path: Path, variable: str, value: str, message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(flags=flags(tmp_path), env={f"CODEDECK_{variable}": value})
    assert str(info.value) == message


@pytest.mark.parametrize("config", ["transcript_keep_last = true", "embedded_relay_max_mb = true"])
def test_booleans_are_not_numbers(tmp_path: Path, config: str) -> None:
    (tmp_path / "config.toml").write_text(config + "\n")
    with pytest.raises(ConfigError, match="expected a whole number"):
        load_settings(flags=flags(tmp_path), env={})


def test_push_takes_a_switch_and_refuses_anything_else(tmp_path: Path) -> None:
    for text, expected in (("ON", True), ("0", False), (" yes ", True), ("Off", False)):
        assert load_settings(flags=flags(tmp_path), env={"CODEDECK_PUSH": text}).push is expected
    with pytest.raises(ConfigError, match=r"^push \(env CODEDECK_PUSH\): expected true or false"):
        load_settings(flags=flags(tmp_path), env={"CODEDECK_PUSH": "maybe"})
    (tmp_path / "config.toml").write_text("push = 0\n")
    with pytest.raises(ConfigError, match=r"^push \(file .*\): expected true or false"):
        load_settings(flags=flags(tmp_path), env={})


def test_the_first_bad_setting_is_the_one_reported(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        'claude_path = "/nope"\nembedded_relay_max_mb = 0\ntranscript_keep_last = -1\n'
    )
    with pytest.raises(ConfigError, match=r"^claude_path"):
        load_settings(flags=flags(tmp_path), env={})


def test_an_unknown_key_lists_the_known_ones(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("bogus = 1\n")
    with pytest.raises(ConfigError) as info:
        load_settings(flags=flags(tmp_path), env={})
    assert str(info.value) == (
        f"{tmp_path / 'config.toml'}: unknown setting(s) bogus; known settings are agent, agents, "
        "claude_path, embedded_relay, embedded_relay_cert, embedded_relay_key, "
        "embedded_relay_max_mb, key_file, machine_name, push, "
        "register_token_file, register_url, relays, sandbox, transcript_keep_last, web_client_url, "
        "workspaces"
    )


def test_describe_shows_each_value_as_config_show_prints_it(tmp_path: Path) -> None:
    (tmp_path / "claude").write_text("#!/bin/sh\n")
    (tmp_path / "config.toml").write_text(
        f'relays = ["wss://a.example", "wss://b.example"]\nworkspaces = ["{tmp_path}"]\n'
        'machine_name = "box"\nembedded_relay = "0.0.0.0:7000"\nkey_file = "/k"\n'
        f'agent = "scripted"\nclaude_path = "{tmp_path / "claude"}"\n'
        'register_url = "https://r.example"\nregister_token_file = "/t"\n'
        "transcript_keep_last = 0\nembedded_relay_max_mb = 9\npush = false\n"
    )
    rows = describe(load_settings(flags=flags(tmp_path), env={"PATH": ""}))
    values = {name: value for name, value, _ in rows}
    assert values == {
        "home": str(tmp_path),
        "relays": "wss://a.example, wss://b.example",
        "workspaces": str(tmp_path),
        "machine_name": "box",
        "embedded_relay": "0.0.0.0:7000",
        "embedded_relay_max_mb": "9",
        "embedded_relay_cert": "(none)",
        "embedded_relay_key": "(none)",
        "key_file": "/k",
        "agent": "scripted",
        "transcript_keep_last": "0",
        "register_url": "https://r.example",
        "register_token_file": "/t",
        "claude_path": str(tmp_path / "claude"),
        "push": "off",
        "web_client_url": "(none)",
        "agents.opencode": "(off)",
    }
    unset = {
        name: value
        for name, value, _ in describe(load_settings(flags=flags(tmp_path / "x"), env={"PATH": ""}))
    }
    assert (unset["relays"], unset["key_file"], unset["register_url"]) == (
        "(embedded)",
        "(none)",
        "(none)",
    )
    assert (unset["register_token_file"], unset["claude_path"]) == ("(none)", "(bundled)")


def test_the_table_has_a_row_for_each_layered_field_of_settings() -> None:
    apart = {"home", "agents", "sandbox", "origins"}
    assert [row.name for row in SETTINGS] == [
        item.name for item in fields(Settings) if item.name not in apart
    ]
    assert len({row.env for row in SETTINGS}) == len({row.flag for row in SETTINGS}) == 15


def test_config_show_has_a_line_for_every_row(tmp_path: Path) -> None:
    shown = [name for name, _, _ in describe(load_settings(flags=flags(tmp_path), env={}))]
    assert sorted(shown[1 : len(SETTINGS) + 1]) == sorted(row.name for row in SETTINGS)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("http://codedeck.example.org", "must be an https:// URL"),
        ("ftp://codedeck.example.org", "must be an https:// URL"),
        ("https://", "must be an https:// URL"),
        ("https://codedeck.example.org/app/", "must be the root of its origin"),
        ("https://codedeck.example.org/?x=1", "must be the root of its origin"),
        ("https://codedeck.example.org/#pair", "must be the root of its origin"),
    ],
)
def test_a_web_client_url_that_cannot_host_the_app_is_refused_with_the_fix(
    tmp_path: Path, value: str, says: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(flags=flags(tmp_path), env={"CODEDECK_WEB_CLIENT_URL": value})
    message = str(caught.value)
    assert message.startswith("web_client_url (env CODEDECK_WEB_CLIENT_URL)")
    assert says in message and "deploy/web/" in message
