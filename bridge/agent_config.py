"""The ``[agents.<id>]`` tables of ``config.toml``: the ACP agents sessions can run.

Claude Code runs on its own driver and is always there; every other agent is spoken to over the
Agent Client Protocol (JSON-RPC on the agent's stdio), one table per agent::

    [agents.gemini]
    label = "Gemini CLI"
    command = "gemini --acp"          # a string (split like a shell would) or a list
    env = { GEMINI_API_KEY_FILE = "~/.config/gemini/key" }   # added to its environment

Rules, each failure a :class:`~bridge.config.ConfigError` naming the key and the fix:

- **Ids** are ``[a-z0-9][a-z0-9-]{0,31}`` (phones show them, and they are stored with each
  session); ``claude`` is reserved for Claude Code.
- **Keys** are ``label`` (a non-empty string; default: the id), ``command`` (a non-empty string
  or list of strings), ``env`` (a table of strings) and ``enabled`` (a boolean, default true;
  false leaves the agent out, e.g. the built-in OpenCode). Others are refused.
- **The command** is an argv: a string is split with :func:`shlex.split`. Its program is either
  a bare name, looked up on the daemon's ``PATH`` when the settings load (stored as the absolute
  path when found; a name not found stays as written and the agent's start-up check says so), or
  an absolute path (``~`` expanded). A relative path with a slash is refused: the daemon's
  working directory is no place to resolve it against.
- **Built-in OpenCode**: ``opencode`` is configured without a table when ``opencode`` is on
  ``PATH`` (command ``[<its absolute path>, "acp"]``, label ``OpenCode``); a table
  ``[agents.opencode]`` with a ``command`` replaces that, one without keeps it and may change the
  label or add ``env``; ``enabled = false`` turns it off.

Nothing here starts an agent: whether it starts is :mod:`bridge.runtime.hosts.agent_probe`'s job.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any, Final

from bridge.records import record

__all__ = [
    "AGENT_ID_PATTERN",
    "OPENCODE_ID",
    "RESERVED_AGENT_IDS",
    "AgentConfig",
    "AgentConfigError",
    "describe_agents",
    "opencode_off_reason",
    "parse_agents",
]

AGENT_ID_PATTERN: Final = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")
RESERVED_AGENT_IDS: Final = frozenset({"claude"})
OPENCODE_ID: Final = "opencode"
OPENCODE_LABEL: Final = "OpenCode"
_KEYS: Final = ("label", "command", "env", "enabled")


class AgentConfigError(ValueError):
    """An ``[agents.<id>]`` table is invalid; the message names the key and the fix."""


@record
class AgentConfig:
    """One ACP agent of the configuration.

    Attributes:
        agent_id: the table's name (``opencode``, ``gemini``).
        label: how phones and messages name it.
        command: the argv that starts it speaking ACP on its stdio (program resolved).
        env: variables added to the daemon's environment for it (values may be secrets: never
            shown, never logged).
        origin: where it came from, for ``config show``.
    """

    agent_id: str
    label: str
    command: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    origin: str = ""

    @property
    def program(self) -> str:
        return self.command[0]


def parse_agents(raw: Any, *, source: str, env: Mapping[str, str]) -> tuple[AgentConfig, ...]:
    """The agents of the ``agents`` table of a config file, plus the built-in OpenCode.

    Args:
        raw: the value of the file's ``agents`` key (None when absent).
        source: the file, for origins and errors.
        env: the daemon's environment (its ``PATH`` resolves programs).

    Raises:
        AgentConfigError: naming the key and the fix.
    """
    tables: Mapping[str, Any] = {}
    if raw is not None:
        if not isinstance(raw, dict):
            raise AgentConfigError(
                f"agents ({source}): expected tables [agents.<id>] with a command each, "
                'for example [agents.gemini] command = "gemini --acp"'
            )
        tables = raw
    agents: list[AgentConfig] = []
    if OPENCODE_ID not in tables:
        builtin = _builtin_opencode(env, label=OPENCODE_LABEL, extra={}, origin=None)
        if builtin is not None:
            agents.append(builtin)
    for agent_id, table in tables.items():
        agent = _parse_one(agent_id, table, source=source, env=env)
        if agent is not None:
            agents.append(agent)
    return tuple(agents)


def describe_agents(
    agents: Sequence[AgentConfig], origins: Mapping[str, str]
) -> list[tuple[str, str, str]]:
    """Rows of (setting, value, origin) for ``config show``: the command, never ``env`` values.

    OpenCode, when it is off, gets a row saying why (``origins["agents.opencode"]``).
    """
    rows = []
    for agent in agents:
        value = f"{agent.label}: {shlex.join(agent.command)}"
        if agent.env:
            value += f" (env: {', '.join(sorted(agent.env))})"
        rows.append((f"agents.{agent.agent_id}", value, agent.origin))
    if not any(agent.agent_id == OPENCODE_ID for agent in agents):
        rows.append(("agents.opencode", "(off)", origins.get("agents.opencode", "default")))
    return rows


def opencode_off_reason(raw: Any, env: Mapping[str, str]) -> str:
    """Why the built-in OpenCode is not configured (for ``config show``)."""
    table = raw.get(OPENCODE_ID) if isinstance(raw, dict) else None
    if isinstance(table, dict) and table.get("enabled") is False:
        return "enabled = false in [agents.opencode]"
    if _which(OPENCODE_ID, env) is None:
        return (
            "default: `opencode` is not on PATH (install OpenCode, or set agents.opencode.command)"
        )
    return "default"


def _parse_one(
    agent_id: Any, table: Any, *, source: str, env: Mapping[str, str]
) -> AgentConfig | None:
    key = f"agents.{agent_id}"
    if not isinstance(agent_id, str) or not AGENT_ID_PATTERN.fullmatch(agent_id):
        raise AgentConfigError(
            f"{key} ({source}): {agent_id!r} is not an agent id; use 1 to 32 lower-case "
            "letters, digits and dashes, starting with a letter or digit (e.g. gemini, codex-acp)"
        )
    if agent_id in RESERVED_AGENT_IDS:
        raise AgentConfigError(
            f"{key} ({source}): the id {agent_id!r} is reserved for Claude Code, which runs on "
            "its own driver; give this agent another id (e.g. claude-acp)"
        )
    if not isinstance(table, dict):
        raise AgentConfigError(
            f"{key} ({source}): expected a table with a command, for example "
            f'[{key}] command = "{agent_id} --acp"'
        )
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise AgentConfigError(
            f"{key} ({source}): unknown key(s) {', '.join(unknown)}; known keys are "
            f"{', '.join(_KEYS)}"
        )
    enabled = table.get("enabled", True)
    if not isinstance(enabled, bool):
        raise AgentConfigError(f"{key}.enabled ({source}): expected true or false")
    label = table.get("label", agent_id if agent_id != OPENCODE_ID else OPENCODE_LABEL)
    if not isinstance(label, str) or not label.strip():
        raise AgentConfigError(
            f'{key}.label ({source}): expected a non-empty string, e.g. label = "Gemini CLI"'
        )
    extra = _env_table(table.get("env", {}), key=f"{key}.env", source=source)
    if not enabled:
        return None
    origin = f"file {source} [{key}]"
    if "command" not in table:
        if agent_id == OPENCODE_ID:
            return _builtin_opencode(env, label=label.strip(), extra=extra, origin=origin)
        raise AgentConfigError(
            f"{key} ({source}): no command; give the command that starts the agent in ACP "
            f'mode, e.g. command = "{agent_id} --acp" (or enabled = false to leave it out)'
        )
    command = _command(table["command"], key=f"{key}.command", source=source, env=env)
    return AgentConfig(agent_id, label.strip(), command, extra, origin)


def _builtin_opencode(
    env: Mapping[str, str], *, label: str, extra: Mapping[str, str], origin: str | None
) -> AgentConfig | None:
    found = _which(OPENCODE_ID, env)
    if found is None:
        return None
    where = f"built-in (opencode found on PATH: {found})"
    return AgentConfig(
        OPENCODE_ID,
        label,
        (found, "acp"),
        dict(extra),
        f"{origin}, {where}" if origin else where,
    )


def _command(raw: Any, *, key: str, source: str, env: Mapping[str, str]) -> tuple[str, ...]:
    if isinstance(raw, str):
        try:
            argv = shlex.split(raw)
        except ValueError as exc:
            raise AgentConfigError(
                f"{key} ({source}): cannot split {raw!r} into words ({exc}); fix the quoting, "
                'or give a list such as ["gemini", "--acp"]'
            ) from None
    elif isinstance(raw, list) and all(isinstance(word, str) for word in raw):
        argv = list(raw)
    else:
        raise AgentConfigError(
            f'{key} ({source}): expected a string ("gemini --acp") or a list of strings '
            '(["gemini", "--acp"])'
        )
    if not argv or not argv[0].strip():
        raise AgentConfigError(
            f"{key} ({source}): the command is empty; give the program that starts the agent "
            'in ACP mode, e.g. "gemini --acp"'
        )
    program = os.path.expanduser(argv[0])
    if "/" in program:
        if not os.path.isabs(program):
            raise AgentConfigError(
                f"{key} ({source}): {argv[0]!r} is a relative path; use an absolute path "
                "(~ is expanded) or a program name found on PATH"
            )
        resolved = program
    else:
        resolved = _which(program, env) or program
    return (resolved, *argv[1:])


def _env_table(raw: Any, *, key: str, source: str) -> dict[str, str]:
    if not isinstance(raw, dict) or not all(
        isinstance(name, str) and name and isinstance(value, str) for name, value in raw.items()
    ):
        raise AgentConfigError(
            f'{key} ({source}): expected a table of strings, e.g. env = {{ NAME = "value" }}'
        )
    return {name: value for name, value in raw.items()}


def _which(program: str, env: Mapping[str, str]) -> str | None:
    found = shutil.which(program, path=env.get("PATH", os.defpath))
    return str(Path(found).absolute()) if found is not None else None
