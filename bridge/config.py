"""The daemon's settings: flags > ``CODEDECK_*`` environment > ``<home>/config.toml`` > defaults.

Every value remembers where it came from, so ``config show`` can tell the user which layer to edit,
and every invalid value stops start-up with a message that names the setting, the layer it came
from and the fix. Nothing here reads secrets: the bridge key lives in the store (or in a key file
whose *path* is a setting).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bridge.agent_config import (
    OPENCODE_ID,
    AgentConfig,
    AgentConfigError,
    describe_agents,
    opencode_off_reason,
    parse_agents,
)
from bridge.sandbox.settings import SandboxConfigError, SandboxSettings, parse_sandbox

__all__ = [
    "DEFAULT_EMBEDDED_RELAY",
    "DEFAULT_HOME",
    "ConfigError",
    "Settings",
    "default_home",
    "describe",
    "load_settings",
    "parse_host_port",
    "validate_relay_url",
]

DEFAULT_HOME = "~/.codedeck"
DEFAULT_EMBEDDED_RELAY = "127.0.0.1:7777"
CONFIG_FILE_NAME = "config.toml"

# Keys accepted in config.toml, and the CODEDECK_* variable of each.
_ENV_NAMES = {
    "relays": "CODEDECK_RELAYS",
    "workspaces": "CODEDECK_WORKSPACES",
    "machine_name": "CODEDECK_MACHINE_NAME",
    "embedded_relay": "CODEDECK_EMBEDDED_RELAY",
    "key_file": "CODEDECK_KEY_FILE",
    "agent": "CODEDECK_AGENT",
    "claude_path": "CODEDECK_CLAUDE_PATH",
    "register_url": "CODEDECK_REGISTER_URL",
    "register_token_file": "CODEDECK_REGISTER_TOKEN_FILE",
    "transcript_keep_last": "CODEDECK_TRANSCRIPT_KEEP_LAST",
    "embedded_relay_max_mb": "CODEDECK_EMBEDDED_RELAY_MAX_MB",
}
_FILE_ONLY = frozenset({"agents", "sandbox"})
"""Keys of config.toml with no flag or variable: the ``[agents.<id>]`` and ``[sandbox]`` tables."""
DEFAULT_TRANSCRIPT_KEEP_LAST = 5000
DEFAULT_EMBEDDED_RELAY_MAX_MB = 512
"""The embedded relay's store cap (MiB of event JSON): far above what it keeps in use (replies
expire within the hour, the heartbeat replaces itself), far below a full disk."""
AGENTS = ("claude", "scripted")


_FLAG_NAMES = {"relays": "--relay", "workspaces": "--workspace"}


class ConfigError(ValueError):
    """A setting is invalid; the message names the setting, where it came from, and the fix."""


@dataclass(frozen=True)
class Settings:
    """The effective configuration, with the origin of every value (flag/env/file/default)."""

    home: Path
    relays: tuple[str, ...]
    workspaces: tuple[Path, ...]
    machine_name: str
    embedded_relay: tuple[str, int]
    key_file: Path | None
    agent: str = "claude"
    claude_path: Path | None = None
    register_url: str | None = None
    register_token_file: Path | None = None
    transcript_keep_last: int = DEFAULT_TRANSCRIPT_KEEP_LAST
    embedded_relay_max_mb: int = DEFAULT_EMBEDDED_RELAY_MAX_MB
    agents: tuple[AgentConfig, ...] = ()
    """The ACP agents (OpenCode, any ``[agents.<id>]``): :mod:`bridge.agent_config`."""
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)
    """``[sandbox]``: how agents are confined (:mod:`bridge.sandbox.settings`)."""
    origins: Mapping[str, str] = field(default_factory=dict)

    @property
    def uses_embedded_relay(self) -> bool:
        """With no relay configured the daemon serves and uses its own relay."""
        return not self.relays

    @property
    def config_file(self) -> Path:
        return self.home / CONFIG_FILE_NAME


def default_home(env: Mapping[str, str]) -> Path:
    """``$CODEDECK_HOME`` or ``~/.codedeck``."""
    raw = env.get("CODEDECK_HOME") or DEFAULT_HOME
    return Path(os.path.expanduser(raw)).absolute()


def validate_relay_url(url: str, *, setting: str = "relay") -> str:
    """Accept ``ws://`` and ``wss://`` URLs with a host; return it without a trailing slash."""
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("ws", "wss") or not parts.hostname:
        raise ConfigError(
            f"{setting}: {url!r} is not a relay URL; use ws://host:port or wss://host "
            "(for example wss://relay.example.org)"
        )
    try:
        _ = parts.port
    except ValueError:
        raise ConfigError(f"{setting}: {url!r} has an invalid port") from None
    return url[:-1] if url.endswith("/") and parts.path == "/" else url


def parse_host_port(value: str, *, setting: str = "embedded_relay") -> tuple[str, int]:
    """Parse ``HOST:PORT`` (``[v6]:PORT`` for IPv6) into a bindable address."""
    value = value.strip()
    host, sep, port_text = value.rpartition(":")
    if not sep or not host:
        raise ConfigError(f"{setting}: {value!r} must be HOST:PORT, for example 127.0.0.1:7777")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        port = int(port_text)
    except ValueError:
        raise ConfigError(f"{setting}: port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise ConfigError(f"{setting}: port {port} is out of range (0-65535)")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if host != "localhost":
            raise ConfigError(
                f"{setting}: {host!r} must be an IP address to bind "
                "(127.0.0.1 for this machine only, 0.0.0.0 to serve phones on the LAN)"
            ) from None
    return host, port


def _default_machine_name() -> str:
    return socket.gethostname() or "codedeck"


def _read_config_file(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        return {}
    except PermissionError:
        raise ConfigError(f"{path}: cannot read the config file (permission denied)") from None
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot read the config file ({exc.strerror or exc}); is --home a directory?"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix or remove the file") from None
    unknown = sorted(set(data) - set(_ENV_NAMES) - _FILE_ONLY)
    if unknown:
        raise ConfigError(
            f"{path}: unknown setting(s) {', '.join(unknown)}; "
            f"known settings are {', '.join(sorted({*_ENV_NAMES, *_FILE_ONLY}))}"
        )
    return data


def _as_list(value: Any, *, setting: str, origin: str) -> list[str]:
    if isinstance(value, str):
        return [item for item in (part.strip() for part in value.split(",")) if item]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return [item.strip() for item in value if item.strip()]
    raise ConfigError(f"{setting} ({origin}): expected a list of strings")


def _as_str(value: Any, *, setting: str, origin: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{setting} ({origin}): expected a non-empty string")
    return value.strip()


def load_settings(
    *,
    flags: Mapping[str, Any],
    env: Mapping[str, str],
) -> Settings:
    """Resolve every setting from its layers.

    Args:
        flags: values given on the command line; ``None`` or an empty list means "not given".
            Keys: ``home``, ``relays``, ``workspaces``, ``machine_name``, ``embedded_relay``,
            ``key_file``.
        env: the process environment (only ``CODEDECK_*`` is read).

    Raises:
        ConfigError: naming the setting, its origin and the fix.
    """
    origins: dict[str, str] = {}
    if flags.get("home"):
        home = Path(os.path.expanduser(str(flags["home"]))).absolute()
        origins["home"] = "flag --home"
    elif env.get("CODEDECK_HOME"):
        home = default_home(env)
        origins["home"] = "env CODEDECK_HOME"
    else:
        home = default_home({})
        origins["home"] = "default"

    file_values = _read_config_file(home / CONFIG_FILE_NAME)

    def pick(key: str) -> tuple[Any, str] | None:
        flag_value = flags.get(key)
        if flag_value not in (None, [], ()):
            return flag_value, f"flag {_FLAG_NAMES.get(key, '--' + key.replace('_', '-'))}"
        env_name = _ENV_NAMES[key]
        if env.get(env_name):
            return env[env_name], f"env {env_name}"
        if key in file_values:
            return file_values[key], f"file {home / CONFIG_FILE_NAME}"
        return None

    relays: list[str] = []
    if (got := pick("relays")) is not None:
        raw, origins["relays"] = got
        for item in _as_list(raw, setting="relays", origin=origins["relays"]):
            relays.append(validate_relay_url(item, setting=f"relays ({origins['relays']})"))
        relays = list(dict.fromkeys(relays))
    else:
        origins["relays"] = "default (none: use the embedded relay)"

    workspaces: list[Path] = []
    if (got := pick("workspaces")) is not None:
        raw, origins["workspaces"] = got
        if isinstance(raw, str) and os.pathsep in raw and "," not in raw:
            raw = raw.split(os.pathsep)
        for item in _as_list(raw, setting="workspaces", origin=origins["workspaces"]):
            path = Path(os.path.expanduser(item)).absolute()
            if not path.is_dir():
                raise ConfigError(
                    f"workspaces ({origins['workspaces']}): {path} is not a directory; "
                    "create it or fix the path"
                )
            workspaces.append(path)
        workspaces = list(dict.fromkeys(workspaces))
    else:
        workspaces = [Path.home()]
        origins["workspaces"] = "default (your home directory)"

    if (got := pick("machine_name")) is not None:
        raw, origins["machine_name"] = got
        machine_name = _as_str(raw, setting="machine_name", origin=origins["machine_name"])
    else:
        machine_name = _default_machine_name()
        origins["machine_name"] = "default (host name)"

    if (got := pick("embedded_relay")) is not None:
        raw, origins["embedded_relay"] = got
        text = _as_str(raw, setting="embedded_relay", origin=origins["embedded_relay"])
        embedded = parse_host_port(text, setting=f"embedded_relay ({origins['embedded_relay']})")
    else:
        embedded = parse_host_port(DEFAULT_EMBEDDED_RELAY)
        origins["embedded_relay"] = "default"

    key_file: Path | None = None
    if (got := pick("key_file")) is not None:
        raw, origins["key_file"] = got
        key_file = Path(
            os.path.expanduser(_as_str(raw, setting="key_file", origin=origins["key_file"]))
        )
    elif env.get("CREDENTIALS_DIRECTORY"):
        candidate = Path(env["CREDENTIALS_DIRECTORY"]) / "nsec"
        if candidate.exists():
            key_file = candidate
            origins["key_file"] = "systemd credential nsec"
    if key_file is None:
        origins.setdefault("key_file", "default (identity kept in the store)")

    agent = "claude"
    if (got := pick("agent")) is not None:
        raw, origins["agent"] = got
        agent = _as_str(raw, setting="agent", origin=origins["agent"])
        if agent not in AGENTS:
            raise ConfigError(
                f"agent ({origins['agent']}): {agent!r} is not an agent this bridge runs; "
                f"use one of {', '.join(AGENTS)}"
            )
    else:
        origins["agent"] = "default (Claude Code)"

    claude_path: Path | None = None
    if (got := pick("claude_path")) is not None:
        raw, origins["claude_path"] = got
        text = _as_str(raw, setting="claude_path", origin=origins["claude_path"])
        claude_path = Path(os.path.expanduser(text))
        if not claude_path.is_file():
            raise ConfigError(
                f"claude_path ({origins['claude_path']}): {claude_path} is not a file; point it "
                "at the claude executable, or remove the setting to use the bundled CLI"
            )
    else:
        origins["claude_path"] = "default (the CLI bundled with claude-agent-sdk)"

    register_url: str | None = None
    register_token_file: Path | None = None
    if (got := pick("register_url")) is not None:
        raw, origins["register_url"] = got
        register_url = _as_str(raw, setting="register_url", origin=origins["register_url"])
        parts = urlsplit(register_url)
        local = parts.hostname in ("localhost", "127.0.0.1", "::1")
        if not parts.hostname or not (
            parts.scheme == "https" or (parts.scheme == "http" and local)
        ):
            raise ConfigError(
                f"register_url ({origins['register_url']}): {register_url!r} must be an https:// "
                "URL of the relay's admin API (http:// only for localhost)"
            )
        got = pick("register_token_file")
        if got is None:
            raise ConfigError(
                "register_url is set but register_token_file is not: give the file that holds "
                "the relay's admin token (CODEDECK_REGISTER_TOKEN_FILE or register_token_file)"
            )
        raw, origins["register_token_file"] = got
        register_token_file = Path(
            os.path.expanduser(
                _as_str(raw, setting="register_token_file", origin=origins["register_token_file"])
            )
        )
    else:
        origins["register_url"] = "default (no relay registration)"
        origins.setdefault("register_token_file", "default (none)")

    keep_last = DEFAULT_TRANSCRIPT_KEEP_LAST
    if (got := pick("transcript_keep_last")) is not None:
        raw, origins["transcript_keep_last"] = got
        try:
            keep_last = int(raw) if not isinstance(raw, bool) else -1
        except (TypeError, ValueError):
            keep_last = -1
        if keep_last < 0:
            raise ConfigError(
                f"transcript_keep_last ({origins['transcript_keep_last']}): expected a whole number "
                "of transcript lines to keep per session (0 keeps everything)"
            )
    else:
        origins["transcript_keep_last"] = f"default ({DEFAULT_TRANSCRIPT_KEEP_LAST} per session)"

    max_mb = DEFAULT_EMBEDDED_RELAY_MAX_MB
    if (got := pick("embedded_relay_max_mb")) is not None:
        raw, origins["embedded_relay_max_mb"] = got
        try:
            max_mb = int(raw) if not isinstance(raw, bool) else 0
        except (TypeError, ValueError):
            max_mb = 0
        if max_mb < 1:
            raise ConfigError(
                f"embedded_relay_max_mb ({origins['embedded_relay_max_mb']}): expected a whole "
                "number of MiB (at least 1) the embedded relay may keep"
            )
    else:
        origins["embedded_relay_max_mb"] = "default"

    try:
        agents = parse_agents(
            file_values.get("agents"), source=str(home / CONFIG_FILE_NAME), env=env
        )
    except AgentConfigError as exc:
        raise ConfigError(str(exc)) from None
    if not any(agent.agent_id == OPENCODE_ID for agent in agents):
        origins["agents.opencode"] = opencode_off_reason(file_values.get("agents"), env)

    try:
        sandbox = parse_sandbox(file_values.get("sandbox"), source=str(home / CONFIG_FILE_NAME))
    except SandboxConfigError as exc:
        raise ConfigError(str(exc)) from None
    origins["sandbox"] = (
        f"file {home / CONFIG_FILE_NAME}" if "sandbox" in file_values else "default (on)"
    )

    return Settings(
        home=home,
        relays=tuple(relays),
        workspaces=tuple(workspaces),
        machine_name=machine_name,
        embedded_relay=embedded,
        key_file=key_file,
        agent=agent,
        claude_path=claude_path,
        register_url=register_url,
        register_token_file=register_token_file,
        transcript_keep_last=keep_last,
        embedded_relay_max_mb=max_mb,
        agents=agents,
        sandbox=sandbox,
        origins=origins,
    )


def describe(settings: Settings) -> Sequence[tuple[str, str, str]]:
    """Rows of (setting, value, origin) for ``config show``; holds no secrets by construction."""
    return [
        ("home", str(settings.home), settings.origins["home"]),
        ("relays", ", ".join(settings.relays) or "(embedded)", settings.origins["relays"]),
        (
            "workspaces",
            ", ".join(str(p) for p in settings.workspaces),
            settings.origins["workspaces"],
        ),
        ("machine_name", settings.machine_name, settings.origins["machine_name"]),
        (
            "embedded_relay",
            f"{settings.embedded_relay[0]}:{settings.embedded_relay[1]}",
            settings.origins["embedded_relay"],
        ),
        (
            "embedded_relay_max_mb",
            str(settings.embedded_relay_max_mb),
            settings.origins["embedded_relay_max_mb"],
        ),
        (
            "key_file",
            str(settings.key_file) if settings.key_file else "(none)",
            settings.origins["key_file"],
        ),
        ("agent", settings.agent, settings.origins["agent"]),
        (
            "transcript_keep_last",
            str(settings.transcript_keep_last),
            settings.origins["transcript_keep_last"],
        ),
        ("register_url", settings.register_url or "(none)", settings.origins["register_url"]),
        (
            "register_token_file",
            str(settings.register_token_file) if settings.register_token_file else "(none)",
            settings.origins["register_token_file"],
        ),
        (
            "claude_path",
            str(settings.claude_path) if settings.claude_path else "(bundled)",
            settings.origins["claude_path"],
        ),
        *describe_agents(settings.agents, settings.origins),
    ]
