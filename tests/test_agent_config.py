"""The ``[agents.<id>]`` tables of config.toml: ids, commands, the built-in OpenCode, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.agent_config import AgentConfig, parse_agents
from bridge.config import ConfigError, Settings, describe, load_settings

from .test_config import flags


def executable(directory: Path, name: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def settings_with(tmp_path: Path, toml: str, *, path: Path | None = None, **env: str) -> Settings:
    (tmp_path / "config.toml").write_text(toml)
    environ = {"PATH": str(path or tmp_path / "empty-bin"), **env}
    return load_settings(flags=flags(tmp_path), env=environ)


def test_opencode_on_path_is_configured_without_a_table(tmp_path: Path) -> None:
    binary = executable(tmp_path / "bin", "opencode")
    settings = settings_with(tmp_path, "", path=tmp_path / "bin")
    (agent,) = settings.agents
    assert (agent.agent_id, agent.label, agent.command) == (
        "opencode",
        "OpenCode",
        (str(binary), "acp"),
    )
    assert agent.origin == f"built-in (opencode found on PATH: {binary})"
    rows = {name: (value, origin) for name, value, origin in describe(settings)}
    assert rows["agents.opencode"] == (f"OpenCode: {binary} acp", agent.origin)


def test_without_opencode_on_path_there_is_no_agent_and_config_show_says_why(
    tmp_path: Path,
) -> None:
    settings = settings_with(tmp_path, "")
    assert settings.agents == ()
    rows = {name: (value, origin) for name, value, origin in describe(settings)}
    value, origin = rows["agents.opencode"]
    assert value == "(off)"
    assert "`opencode` is not on PATH" in origin and "agents.opencode.command" in origin


def test_an_opencode_table_with_a_command_replaces_the_built_in(tmp_path: Path) -> None:
    executable(tmp_path / "bin", "opencode")
    settings = settings_with(
        tmp_path,
        '[agents.opencode]\ncommand = "/opt/oc/bin/opencode acp --print-logs"\n',
        path=tmp_path / "bin",
    )
    (agent,) = settings.agents
    assert agent.command == ("/opt/oc/bin/opencode", "acp", "--print-logs")
    assert agent.label == "OpenCode"
    assert agent.origin == f"file {tmp_path / 'config.toml'} [agents.opencode]"


def test_an_opencode_table_without_a_command_keeps_the_binary_on_path(tmp_path: Path) -> None:
    binary = executable(tmp_path / "bin", "opencode")
    toml = '[agents.opencode]\nlabel = "OpenCode (work)"\nenv = { OPENCODE_CONFIG = "/x.json" }\n'
    (agent,) = settings_with(tmp_path, toml, path=tmp_path / "bin").agents
    assert agent.command == (str(binary), "acp")
    assert (agent.label, dict(agent.env)) == ("OpenCode (work)", {"OPENCODE_CONFIG": "/x.json"})
    assert settings_with(tmp_path, toml).agents == ()  # not on PATH: still nothing to run


def test_enabled_false_turns_an_agent_off(tmp_path: Path) -> None:
    executable(tmp_path / "bin", "opencode")
    toml = '[agents.opencode]\nenabled = false\n[agents.gemini]\ncommand = "gemini --acp"\nenabled = false\n'
    settings = settings_with(tmp_path, toml, path=tmp_path / "bin")
    assert settings.agents == ()
    assert settings.origins["agents.opencode"] == "enabled = false in [agents.opencode]"


def test_custom_agents_string_and_list_commands_resolved_on_path(tmp_path: Path) -> None:
    gemini = executable(tmp_path / "bin", "gemini")
    toml = (
        '[agents.gemini]\nlabel = "Gemini CLI"\ncommand = "gemini --acp"\n'
        '[agents.codex-acp]\ncommand = ["npx", "--yes", "@agentclientprotocol/codex-acp"]\n'
        'env = { CODEX_HOME = "/home/me/.codex", TOKEN = "s3cret" }\n'
        '[agents.local]\ncommand = "~/bin/my agent \\"with quotes\\""\n'
    )
    settings = settings_with(tmp_path, toml, path=tmp_path / "bin", HOME=str(tmp_path))
    by_id = {agent.agent_id: agent for agent in settings.agents}
    assert list(by_id) == ["gemini", "codex-acp", "local"]
    assert by_id["gemini"] == AgentConfig(
        "gemini",
        "Gemini CLI",
        (str(gemini), "--acp"),
        origin=f"file {tmp_path / 'config.toml'} [agents.gemini]",
    )
    # Not on PATH: kept as written; the start-up check says it was not found.
    assert by_id["codex-acp"].command == ("npx", "--yes", "@agentclientprotocol/codex-acp")
    assert by_id["codex-acp"].label == "codex-acp"
    assert by_id["local"].command[1:] == ("agent", "with quotes")
    assert Path(by_id["local"].command[0]).is_absolute()
    rows = {name: value for name, value, _ in describe(settings)}
    assert rows["agents.codex-acp"] == (
        "codex-acp: npx --yes @agentclientprotocol/codex-acp (env: CODEX_HOME, TOKEN)"
    )
    assert "s3cret" not in repr(settings) and "s3cret" not in repr(describe(settings))


def test_the_scripted_switch_still_replaces_claude_code_only(tmp_path: Path) -> None:
    toml = 'agent = "scripted"\n[agents.gemini]\ncommand = "/usr/bin/gemini --acp"\n'
    settings = settings_with(tmp_path, toml)
    assert settings.agent == "scripted"
    assert [agent.agent_id for agent in settings.agents] == ["gemini"]


ERRORS = [
    ("bad-id", '[agents.Gemini]\ncommand = "g"\n', ["agents.Gemini", "lower-case"]),
    ("too-long", f'[agents.{"a" * 33}]\ncommand = "g"\n', ["is not an agent id"]),
    ("dash-first", '[agents."-x"]\ncommand = "g"\n', ["is not an agent id"]),
    (
        "reserved",
        '[agents.claude]\ncommand = "claude-agent-acp"\n',
        ["agents.claude", "claude-acp"],
    ),
    ("not-a-table", 'agents = "opencode"\n', ["agents (", "[agents.<id>]"]),
    ("agent-not-a-table", "[agents]\ngemini = 1\n", ["agents.gemini", "expected a table"]),
    ("unknown-key", '[agents.g]\ncommand = "g"\nargs = []\n', ["agents.g", "args", "known keys"]),
    ("no-command", '[agents.g]\nlabel = "G"\n', ["agents.g", "no command", 'command = "g --acp"']),
    ("empty-command", '[agents.g]\ncommand = ""\n', ["agents.g.command", "empty"]),
    ("empty-list", "[agents.g]\ncommand = []\n", ["agents.g.command", "empty"]),
    ("number", "[agents.g]\ncommand = 1\n", ["agents.g.command", "list of strings"]),
    ("quoting", '[agents.g]\ncommand = "g \'open"\n', ["agents.g.command", "quoting"]),
    ("relative", '[agents.g]\ncommand = "bin/g --acp"\n', ["agents.g.command", "absolute path"]),
    ("label", '[agents.g]\ncommand = "g"\nlabel = " "\n', ["agents.g.label"]),
    ("env", '[agents.g]\ncommand = "g"\nenv = { A = 1 }\n', ["agents.g.env", "table of strings"]),
    (
        "enabled",
        '[agents.g]\ncommand = "g"\nenabled = "no"\n',
        ["agents.g.enabled", "true or false"],
    ),
]


@pytest.mark.parametrize(("toml", "words"), [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_errors_name_the_key_and_the_fix(tmp_path: Path, toml: str, words: list[str]) -> None:
    with pytest.raises(ConfigError) as caught:
        settings_with(tmp_path, toml)
    for word in words:
        assert word in str(caught.value)
    assert str(tmp_path / "config.toml") in str(caught.value)


def test_parse_agents_alone_needs_no_file() -> None:
    assert parse_agents(None, source="-", env={"PATH": "/nonexistent"}) == ()
