"""The daemon's settings: flags > ``CODEDECK_*`` environment > ``<home>/config.toml`` > defaults.

Every value remembers where it came from, so ``config show`` can tell the user which layer to edit,
and every invalid value stops start-up with a message that names the setting, the layer it came
from and the fix. Nothing here reads secrets: the bridge key lives in the store (or in a key file
whose *path* is a setting).

The settings with a flag, a variable and a file key are rows of :data:`SETTINGS`, walked by one
function, so the layers are read the same way for each and a new setting is a new row (and a
:class:`Settings` field). ``home`` stands apart because it says where the file layer is; the
``[agents.<id>]`` and ``[sandbox]`` tables stand apart because they exist only in the file.
"""

from __future__ import annotations

import os
import socket
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from bridge.agent_config import (
    OPENCODE_ID,
    AgentConfig,
    AgentConfigError,
    describe_agents,
    opencode_off_reason,
    parse_agents,
)
from bridge.config_values import (
    ConfigError,
    admin_api_url,
    as_list,
    as_path,
    as_str,
    check_tls,
    on_off,
    parse_host_port,
    pem_file,
    validate_relay_url,
    web_page_url,
    whole_number,
)
from bridge.records import record
from bridge.sandbox.settings import SandboxConfigError, SandboxSettings, parse_sandbox

__all__ = [
    "DEFAULT_EMBEDDED_RELAY",
    "DEFAULT_HOME",
    "SETTINGS",
    "ConfigError",
    "Setting",
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
_FILE_ONLY = frozenset({"agents", "sandbox"})
"""Keys of config.toml with no flag or variable: the ``[agents.<id>]`` and ``[sandbox]`` tables."""
DEFAULT_TRANSCRIPT_KEEP_LAST = 5000
DEFAULT_EMBEDDED_RELAY_MAX_MB = 512
"""The embedded relay's store cap (MiB of event JSON): far above what it keeps in use (replies
expire within the hour, the heartbeat replaces itself), far below a full disk."""
AGENTS = ("claude", "scripted")

T = TypeVar("T")


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
    embedded_relay_cert: Path | None = None
    """A PEM certificate (chain) for the embedded relay: with it the relay speaks TLS."""
    embedded_relay_key: Path | None = None
    """The certificate's private key (PEM, unencrypted, not readable by every user)."""
    push: bool = True
    """Wake phones that are away by Web Push (capability ``push``); ``false`` turns it off."""
    web_client_url: str | None = None
    """Where the user hosts CodeDeck Web (``deploy/web/``): ``pair``'s web link opens that page
    instead of the one the embedded relay serves (the only page there is with public relays)."""
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


@dataclass(frozen=True, kw_only=True)
class Setting(Generic[T]):
    """One row of the settings table: a :class:`Settings` field and how each layer gives it.

    Each row of the table states its field's type as the type parameter, so mypy checks the
    row's parser, default, fallback and display against it; that ``name`` is a field of that
    type, the table cannot say: tests/test_config.py checks it.

    Attributes:
        name: the :class:`Settings` field, the ``config.toml`` key and the key of ``flags``.
        flag: the command-line flag, as origins and messages name it.
        env: the ``CODEDECK_*`` variable.
        parse: turns a given value (a flag's, a variable's string, a TOML value) into the field's
            value; its second argument is ``"<name> (<origin>)"``, which every message starts
            with, and it raises :class:`ConfigError` saying what is wrong and the fix.
        default: the value when no layer gives one (called only then: it may ask the system).
        default_origin: the origin shown for the default.
        fallback: a layer below the file that reads the environment and gives an already parsed
            value and its origin, or None (the systemd credential of the key file).
        needs: another row, earlier in the table; when it has no value this row is not read (it
            keeps its default), and when it has one this row must be given.
        needs_hint: for the message when ``needs`` is set and this row is not given: what to give.
        show: how ``config show`` prints the value.
    """

    name: str
    flag: str
    env: str
    parse: Callable[[Any, str], T]
    default: Callable[[], T]
    default_origin: str
    fallback: Callable[[Mapping[str, str]], tuple[T, str] | None] | None = None
    needs: str | None = None
    needs_hint: str = ""
    show: Callable[[T], str] = str


def default_home(env: Mapping[str, str]) -> Path:
    """``$CODEDECK_HOME`` or ``~/.codedeck``."""
    raw = env.get("CODEDECK_HOME") or DEFAULT_HOME
    return Path(os.path.expanduser(raw)).absolute()


# Parsers of the table's rows: (given value, "<name> (<origin>)") -> the field's value.


def _relays(value: Any, where: str) -> tuple[str, ...]:
    urls = [validate_relay_url(item, setting=where) for item in as_list(value, where)]
    return tuple(dict.fromkeys(urls))


def _workspaces(value: Any, where: str) -> tuple[Path, ...]:
    """Directories, from a list or a string split on commas or, with no comma, on ``os.pathsep``."""
    if isinstance(value, str) and os.pathsep in value and "," not in value:
        value = value.split(os.pathsep)
    paths: list[Path] = []
    for item in as_list(value, where):
        path = Path(os.path.expanduser(item)).absolute()
        if not path.is_dir():
            raise ConfigError(f"{where}: {path} is not a directory; create it or fix the path")
        paths.append(path)
    return tuple(dict.fromkeys(paths))


def _address(value: Any, where: str) -> tuple[str, int]:
    return parse_host_port(as_str(value, where), setting=where)


def _agent(value: Any, where: str) -> str:
    agent = as_str(value, where)
    if agent not in AGENTS:
        raise ConfigError(
            f"{where}: {agent!r} is not an agent this bridge runs; use one of {', '.join(AGENTS)}"
        )
    return agent


def _claude_path(value: Any, where: str) -> Path:
    path = as_path(value, where)
    if not path.is_file():
        raise ConfigError(
            f"{where}: {path} is not a file; point it at the claude executable, or remove the "
            "setting to use the bundled CLI"
        )
    return path


def _systemd_credential(env: Mapping[str, str]) -> tuple[Path, str] | None:
    """The key file systemd passes as credential ``nsec`` (``LoadCredential=nsec:...``)."""
    if env.get("CREDENTIALS_DIRECTORY"):
        candidate = Path(env["CREDENTIALS_DIRECTORY"]) / "nsec"
        if candidate.exists():
            return candidate, "systemd credential nsec"
    return None


def _or(empty: str) -> Callable[[Any], str]:
    """Show a value with ``str``, or ``empty`` when it is unset."""
    return lambda value: str(value) if value else empty


def _joined(values: Sequence[object]) -> str:
    return ", ".join(str(value) for value in values)


SETTINGS: tuple[Setting[Any], ...] = (
    Setting[tuple[str, ...]](
        name="relays",
        flag="--relay",
        env="CODEDECK_RELAYS",
        parse=_relays,
        default=tuple,
        default_origin="default (none: use the embedded relay)",
        show=lambda relays: _joined(relays) or "(embedded)",
    ),
    Setting[tuple[Path, ...]](
        name="workspaces",
        flag="--workspace",
        env="CODEDECK_WORKSPACES",
        parse=_workspaces,
        default=lambda: (Path.home(),),
        default_origin="default (your home directory)",
        show=_joined,
    ),
    Setting[str](
        name="machine_name",
        flag="--machine-name",
        env="CODEDECK_MACHINE_NAME",
        parse=as_str,
        default=lambda: socket.gethostname() or "codedeck",
        default_origin="default (host name)",
    ),
    Setting[tuple[str, int]](
        name="embedded_relay",
        flag="--embedded-relay",
        env="CODEDECK_EMBEDDED_RELAY",
        parse=_address,
        default=lambda: parse_host_port(DEFAULT_EMBEDDED_RELAY),
        default_origin="default",
        show=lambda address: f"{address[0]}:{address[1]}",
    ),
    Setting[Path | None](
        name="key_file",
        flag="--key-file",
        env="CODEDECK_KEY_FILE",
        parse=as_path,
        fallback=_systemd_credential,
        default=lambda: None,
        default_origin="default (identity kept in the store)",
        show=_or("(none)"),
    ),
    Setting[str](
        name="agent",
        flag="--agent",
        env="CODEDECK_AGENT",
        parse=_agent,
        default=lambda: "claude",
        default_origin="default (Claude Code)",
    ),
    Setting[Path | None](
        name="claude_path",
        flag="--claude-path",
        env="CODEDECK_CLAUDE_PATH",
        parse=_claude_path,
        default=lambda: None,
        default_origin="default (the CLI bundled with claude-agent-sdk)",
        show=_or("(bundled)"),
    ),
    Setting[str | None](
        name="register_url",
        flag="--register-url",
        env="CODEDECK_REGISTER_URL",
        parse=admin_api_url,
        default=lambda: None,
        default_origin="default (no relay registration)",
        show=_or("(none)"),
    ),
    Setting[Path | None](
        name="register_token_file",
        flag="--register-token-file",
        env="CODEDECK_REGISTER_TOKEN_FILE",
        parse=as_path,
        needs="register_url",
        needs_hint="give the file that holds the relay's admin token",
        default=lambda: None,
        default_origin="default (none)",
        show=_or("(none)"),
    ),
    Setting[int](
        name="transcript_keep_last",
        flag="--transcript-keep-last",
        env="CODEDECK_TRANSCRIPT_KEEP_LAST",
        parse=whole_number(
            minimum=0, of_what="of transcript lines to keep per session (0 keeps everything)"
        ),
        default=lambda: DEFAULT_TRANSCRIPT_KEEP_LAST,
        default_origin=f"default ({DEFAULT_TRANSCRIPT_KEEP_LAST} per session)",
    ),
    Setting[int](
        name="embedded_relay_max_mb",
        flag="--embedded-relay-max-mb",
        env="CODEDECK_EMBEDDED_RELAY_MAX_MB",
        parse=whole_number(minimum=1, of_what="of MiB (at least 1) the embedded relay may keep"),
        default=lambda: DEFAULT_EMBEDDED_RELAY_MAX_MB,
        default_origin="default",
    ),
    Setting[Path | None](
        name="embedded_relay_cert",
        flag="--embedded-relay-cert",
        env="CODEDECK_EMBEDDED_RELAY_CERT",
        parse=pem_file("certificate"),
        default=lambda: None,
        default_origin="default (none: plain ws:// and http://)",
        show=_or("(none)"),
    ),
    Setting[Path | None](
        name="embedded_relay_key",
        flag="--embedded-relay-key",
        env="CODEDECK_EMBEDDED_RELAY_KEY",
        parse=pem_file("certificate's private key"),
        default=lambda: None,
        default_origin="default (none)",
        show=_or("(none)"),
    ),
    Setting[bool](
        name="push",
        flag="--push",
        env="CODEDECK_PUSH",
        parse=on_off,
        default=lambda: True,
        default_origin="default (on)",
        show=lambda on: "on" if on else "off",
    ),
    Setting[str | None](
        name="web_client_url",
        flag="--web-client-url",
        env="CODEDECK_WEB_CLIENT_URL",
        parse=web_page_url,
        default=lambda: None,
        default_origin="default (the page the embedded relay serves, if it runs)",
        show=_or("(none)"),
    ),
)
"""The settings read from a flag, a variable or the file, in the order they are resolved (so
the first invalid one in this order is the one reported, and a ``needs`` row follows its need)."""

_SHOWN = (
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
)
"""The order of :data:`SETTINGS` rows in ``config show``: related settings side by side."""


@record
class _Layers:
    """What the user gave, layer by layer: flags, then variables, then the config file."""

    flags: Mapping[str, Any]
    env: Mapping[str, str]
    file: Path
    file_values: Mapping[str, Any]

    def given(self, row: Setting[Any]) -> tuple[Any, str] | None:
        """The value of the highest layer that gives one, and its origin; None if none does.

        A flag counts unless it is None or an empty list; a variable unless it is empty; a file
        key whatever its value.
        """
        flag_value = self.flags.get(row.name)
        if flag_value not in (None, [], ()):
            return flag_value, f"flag {row.flag}"
        if self.env.get(row.env):
            return self.env[row.env], f"env {row.env}"
        if row.name in self.file_values:
            return self.file_values[row.name], f"file {self.file}"
        return None

    def resolve(self, row: Setting[T], resolved: Mapping[str, Any]) -> tuple[T, str]:
        """The row's value and origin, given the values of the rows before it."""
        if row.needs is not None and resolved[row.needs] is None:
            return row.default(), row.default_origin
        given = self.given(row)
        if given is not None:
            raw, origin = given
            return row.parse(raw, f"{row.name} ({origin})"), origin
        if row.needs is not None:
            raise ConfigError(
                f"{row.needs} is set but {row.name} is not: {row.needs_hint} "
                f"({row.env} or {row.name})"
            )
        if row.fallback is not None and (found := row.fallback(self.env)) is not None:
            return found
        return row.default(), row.default_origin


def _home(flags: Mapping[str, Any], env: Mapping[str, str]) -> tuple[Path, str]:
    """Where the bridge keeps its store and config file, and the origin of that choice."""
    if flags.get("home"):
        return Path(os.path.expanduser(str(flags["home"]))).absolute(), "flag --home"
    if env.get("CODEDECK_HOME"):
        return default_home(env), "env CODEDECK_HOME"
    return default_home({}), "default"


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
    known = {row.name for row in SETTINGS} | _FILE_ONLY
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(
            f"{path}: unknown setting(s) {', '.join(unknown)}; "
            f"known settings are {', '.join(sorted(known))}"
        )
    return data


def load_settings(
    *,
    flags: Mapping[str, Any],
    env: Mapping[str, str],
) -> Settings:
    """Resolve every setting from its layers.

    Args:
        flags: values given on the command line, keyed by setting name (``home`` or a row of
            :data:`SETTINGS`); ``None`` or an empty list means "not given".
        env: the process environment (only ``CODEDECK_*`` is read).

    Raises:
        ConfigError: naming the setting, its origin and the fix.
    """
    home, home_origin = _home(flags, env)
    origins: dict[str, str] = {"home": home_origin}
    file = home / CONFIG_FILE_NAME
    layers = _Layers(flags=flags, env=env, file=file, file_values=_read_config_file(file))
    values: dict[str, Any] = {}
    for row in SETTINGS:
        values[row.name], origins[row.name] = layers.resolve(row, values)
    check_tls(values, origins)

    raw_agents = layers.file_values.get("agents")
    try:
        agents = parse_agents(raw_agents, source=str(file), env=env)
    except AgentConfigError as exc:
        raise ConfigError(str(exc)) from None
    if not any(agent.agent_id == OPENCODE_ID for agent in agents):
        origins["agents.opencode"] = opencode_off_reason(raw_agents, env)

    try:
        sandbox = parse_sandbox(layers.file_values.get("sandbox"), source=str(file))
    except SandboxConfigError as exc:
        raise ConfigError(str(exc)) from None
    origins["sandbox"] = f"file {file}" if "sandbox" in layers.file_values else "default (on)"

    return Settings(home=home, agents=agents, sandbox=sandbox, origins=origins, **values)


def describe(settings: Settings) -> Sequence[tuple[str, str, str]]:
    """Rows of (setting, value, origin) for ``config show``; holds no secrets by construction."""
    rows = {row.name: row for row in SETTINGS}
    return [
        ("home", str(settings.home), settings.origins["home"]),
        *(
            (name, rows[name].show(getattr(settings, name)), settings.origins[name])
            for name in _SHOWN
        ),
        *describe_agents(settings.agents, settings.origins),
    ]
