"""The complete environment of an isolated, offline OpenCode that talks to the mock Anthropic API.

OpenCode reads its configuration from many places (``~/.config/opencode/``, ``/etc/opencode``,
the project's ``opencode.json``, ``.claude/`` skills, plugins it installs from npm, the models.dev
catalogue it fetches hourly). A test must see none of them: the user's or CI's own config would
change what the agent does, and any fetch would leave the machine. :func:`opencode_env` therefore
returns the *whole* environment (not a delta to merge into ``os.environ``: the ACP SDK would only
pass HOME/PATH/… otherwise, and the caller's ANTHROPIC_* or OPENCODE_* must not leak in):

- the provider, model and permissions in ``OPENCODE_CONFIG_CONTENT``: a provider ``mock`` built
  on the ``@ai-sdk/anthropic`` adapter bundled in the binary, pointed at ``<mock>/v1`` with a
  dummy key, one model ``mock/mock-model`` (also ``small_model``, so title generation hits the
  mock too), ``enabled_providers: ["mock"]`` so no other provider is even tried, ``autoupdate:
  false`` and ``share: "disabled"``;
- ``HOME`` and ``XDG_{CONFIG,DATA,CACHE,STATE}_HOME`` under the caller's tmp dir: sessions
  (``$XDG_DATA_HOME/opencode/opencode.db``), logs and caches stay per test, and a second agent
  process with the same dirs sees the same sessions (what ``session/load`` needs);
- ``OPENCODE_TEST_MANAGED_CONFIG_DIR`` under it too, so a machine's ``/etc/opencode`` is ignored;
- the off switches found in the 1.18.33 binary (``strings``; each parsed as "1"/"true"):
  ``OPENCODE_DISABLE_MODELS_FETCH`` (no models.dev fetch, no hourly refresh; the bundled
  snapshot is used), ``_AUTOUPDATE``, ``_DEFAULT_PLUGINS``, ``OPENCODE_PURE`` (no external
  plugins), ``_LSP_DOWNLOAD``, ``_SHARE``, ``_CLAUDE_CODE`` (no ``~/.claude`` prompt or skills),
  ``_EXTERNAL_SKILLS``, ``_PROJECT_CONFIG`` (a workspace ``opencode.json`` can't override the
  test), ``_EMBEDDED_WEB_UI`` and ``OPENCODE_EXPERIMENTAL_DISABLE_FILEWATCHER`` (less work on
  a 2-core machine).

Permissions come in two layers, and tests need both: ``permission`` is the block of OpenCode's own
config (a test sets ``{"bash": "allow"}`` to play a user whose OpenCode never asks), while
``env_permission`` becomes ``OPENCODE_PERMISSION``, which OpenCode merges over the config (measured:
``{"*": "ask"}`` there makes a config-allowed bash call send ``session/request_permission``). That
is how a bridge makes every tool call reach its own gate whatever the user configured.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .agent_env import HasBaseUrl, base_env, base_url_of

__all__ = [
    "ASK_EVERYTHING",
    "MOCK_MODEL",
    "MOCK_PROVIDER",
    "opencode_config",
    "opencode_env",
]

MOCK_PROVIDER = "mock"
MOCK_MODEL = "mock-model"
ASK_EVERYTHING: Mapping[str, str] = {"*": "ask"}
"""The ``OPENCODE_PERMISSION`` ruleset that sends every tool call to the ACP client's gate."""

_OFF_SWITCHES = (
    "OPENCODE_DISABLE_MODELS_FETCH",
    "OPENCODE_DISABLE_AUTOUPDATE",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS",
    "OPENCODE_PURE",
    "OPENCODE_DISABLE_LSP_DOWNLOAD",
    "OPENCODE_DISABLE_SHARE",
    "OPENCODE_DISABLE_CLAUDE_CODE",
    "OPENCODE_DISABLE_EXTERNAL_SKILLS",
    "OPENCODE_DISABLE_PROJECT_CONFIG",
    "OPENCODE_DISABLE_EMBEDDED_WEB_UI",
    "OPENCODE_EXPERIMENTAL_DISABLE_FILEWATCHER",
)


def opencode_config(
    base_url: str | HasBaseUrl,
    *,
    permission: Mapping[str, Any] | None = None,
    api_key: str = "test-key",
) -> dict[str, Any]:
    """OpenCode's config (the ``OPENCODE_CONFIG_CONTENT`` JSON) for a mock at `base_url`.

    Args:
        base_url: the mock's root URL, e.g. ``http://127.0.0.1:41234`` (``/v1`` is appended, as
            ``@ai-sdk/anthropic`` posts to ``{baseURL}/messages``).
        permission: OpenCode's own ``permission`` block (``{"bash": "allow"}``,
            ``{"*": "ask"}``, …); omitted when None, so OpenCode's defaults apply.
        api_key: sent as ``x-api-key``; the mock accepts anything.
    """
    config: dict[str, Any] = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            MOCK_PROVIDER: {
                "npm": "@ai-sdk/anthropic",
                "name": "Mock Anthropic",
                "options": {
                    "baseURL": base_url_of(base_url).rstrip("/") + "/v1",
                    "apiKey": api_key,
                },
                "models": {
                    MOCK_MODEL: {
                        "name": "Mock Model",
                        "tool_call": True,
                        "reasoning": False,
                        "limit": {"context": 200_000, "output": 8192},
                    }
                },
            }
        },
        "model": f"{MOCK_PROVIDER}/{MOCK_MODEL}",
        "small_model": f"{MOCK_PROVIDER}/{MOCK_MODEL}",
        "enabled_providers": [MOCK_PROVIDER],
        "autoupdate": False,
        "share": "disabled",
    }
    if permission is not None:
        config["permission"] = dict(permission)
    return config


def opencode_env(
    mock: str | HasBaseUrl,
    root: Path,
    *,
    permission: Mapping[str, Any] | None = None,
    env_permission: Mapping[str, Any] | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The full environment for ``opencode acp`` against a mock Anthropic API at `base_url`.

    Args:
        mock: the mock Anthropic API (or its root URL, :attr:`MockAnthropic.base_url`).
        root: a private directory (a test's ``tmp_path / "opencode"``); HOME and the XDG dirs are
            created under it. Reuse the same `root` for a second process that must see the
            first one's sessions.
        permission: the ``permission`` block of OpenCode's config (see :func:`opencode_config`).
        env_permission: the ``OPENCODE_PERMISSION`` ruleset, merged by OpenCode over the config
            (:data:`ASK_EVERYTHING` makes every tool call ask); not set when None.
        extra: more variables, applied last (e.g. ``OPENCODE_LOG_LEVEL``).

    Returns:
        Every variable the process gets; pass it as is to ``spawn_agent_process(env=…)``.
    """
    dirs = {
        "HOME": root / "home",
        "XDG_CONFIG_HOME": root / "xdg" / "config",
        "XDG_DATA_HOME": root / "xdg" / "data",
        "XDG_CACHE_HOME": root / "xdg" / "cache",
        "XDG_STATE_HOME": root / "xdg" / "state",
        "OPENCODE_TEST_MANAGED_CONFIG_DIR": root / "managed",
    }
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    env = base_env()
    env.update({name: str(path) for name, path in dirs.items()})
    env.update(dict.fromkeys(_OFF_SWITCHES, "1"))
    env["OPENCODE_CONFIG_CONTENT"] = json.dumps(
        opencode_config(base_url_of(mock), permission=permission)
    )
    if env_permission is not None:
        env["OPENCODE_PERMISSION"] = json.dumps(dict(env_permission))
    env.update(extra or {})
    return env
