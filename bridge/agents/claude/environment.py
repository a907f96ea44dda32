"""The environment a Claude Code process runs with, and where it keeps its files.

Ordinary sessions get the daemon's environment (so ``ANTHROPIC_BASE_URL``, ``ANTHROPIC_API_KEY``
and friends reach the CLI) with the session's own variables on top. Provider-bound sessions get
:func:`provider_env`: the vendor namespaces scrubbed, then the profile's endpoint, token and
model.

Why the scrub: a provider profile says "send this session to that endpoint with that token".
Anything left over from the daemon's environment could route it elsewhere (``CLAUDE_CODE_USE_
BEDROCK``, ``ANTHROPIC_VERTEX_PROJECT_ID``, …) or hand the endpoint a credential that is not its
(``ANTHROPIC_API_KEY``, ``CLAUDE_CODE_OAUTH_TOKEN``, ``AWS_SECRET_ACCESS_KEY``). Kept from the
``CLAUDE_*`` namespace, because Claude Code needs them to run the way the daemon set it up and
none of them selects a provider or carries a secret (:data:`KEPT_CLAUDE_VARIABLES`):

- ``CLAUDE_CONFIG_DIR``: where the session transcripts live; ``resume`` finds nothing without it;
- ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC``: no telemetry or update checks (privacy);
- ``CLAUDE_CODE_MAX_RETRIES``: the retry policy the operator chose;
- ``CLAUDE_CODE_STREAM_CLOSE_TIMEOUT``: the SDK's initialize timeout;
- ``CLAUDE_CODE_TMPDIR``: where the CLI may write temporary files;
- ``CLAUDE_CODE_GIT_BASH_PATH``: the shell on Windows.

The driver gives the CLI exactly the environment the daemon computed (``DriverSpec.env``), nothing
of the host's own: no masking of inherited variables is needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Final

__all__ = [
    "KEPT_CLAUDE_VARIABLES",
    "MODEL_VARIABLES",
    "SCRUBBED_PREFIXES",
    "SDK_MANAGED_VARIABLES",
    "claude_config_dir",
    "provider_env",
    "scrub_vendor_env",
]

SCRUBBED_PREFIXES: Final = (
    "ANTHROPIC_",
    "CLAUDE_",
    "AWS_",
    "AZURE_",
    "BEDROCK_",
    "CLOUDSDK_",
    "GCLOUD_",
    "GOOGLE_",
    "VERTEX_",
)
_SCRUBBED_NAMES: Final = frozenset({"CLOUD_ML_REGION"})
KEPT_CLAUDE_VARIABLES: Final = frozenset(
    {
        "CLAUDE_CONFIG_DIR",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
        "CLAUDE_CODE_MAX_RETRIES",
        "CLAUDE_CODE_STREAM_CLOSE_TIMEOUT",
        "CLAUDE_CODE_TMPDIR",
        "CLAUDE_CODE_GIT_BASH_PATH",
    }
)
MODEL_VARIABLES: Final = (
    "ANTHROPIC_MODEL",
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL",
    "ANTHROPIC_SMALL_FAST_MODEL",
    "CLAUDE_CODE_SUBAGENT_MODEL",
)
"""Set to a provider profile's default model, so that no alias reaches a model it lacks."""
SDK_MANAGED_VARIABLES: Final = frozenset(
    {
        "CLAUDECODE",
        "CLAUDE_CODE_ENTRYPOINT",
        "CLAUDE_AGENT_SDK_VERSION",
        "CLAUDE_CODE_SDK_READS_SESSION_STATE",
    }
)
"""Variables the driver sets (or drops) itself when it spawns the CLI, as the SDK does: never
taken from the daemon's environment."""


def _scrubbed(name: str) -> bool:
    if name in KEPT_CLAUDE_VARIABLES:
        return False
    return name in _SCRUBBED_NAMES or name.startswith(SCRUBBED_PREFIXES)


def scrub_vendor_env(base_env: Mapping[str, str]) -> dict[str, str]:
    """`base_env` without the vendor namespaces (see the module docstring)."""
    return {name: value for name, value in base_env.items() if not _scrubbed(name)}


def provider_env(
    base_env: Mapping[str, str], base_url: str, token: str, default_model: str | None
) -> dict[str, str]:
    """The full environment of a session bound to a provider profile.

    Args:
        base_env: the environment it starts from (the daemon's, usually ``os.environ``).
        base_url: the profile's base URL (already validated by the protocol's base-URL rule).
        token: the profile's token; sent as ``Authorization: Bearer``.
        default_model: the profile's default model; sets every default-model variable
            (:data:`MODEL_VARIABLES`) when given.

    Raises:
        ValueError: `base_url` or `token` is empty (the message never contains the token).
    """
    if not base_url.strip():
        raise ValueError("the provider profile has no base URL")
    if not token:
        raise ValueError("the provider profile has no token")
    env = scrub_vendor_env(base_env)
    env["ANTHROPIC_BASE_URL"] = base_url.strip().rstrip("/")
    env["ANTHROPIC_AUTH_TOKEN"] = token
    if default_model:
        env.update(dict.fromkeys(MODEL_VARIABLES, default_model))
    return env


def claude_config_dir(env: Mapping[str, str]) -> Path:
    """Where a CLI running with `env` keeps sessions and settings (``CLAUDE_CONFIG_DIR``)."""
    configured = env.get("CLAUDE_CONFIG_DIR")
    if configured:
        return Path(configured).expanduser()
    home = env.get("HOME")
    return (Path(home) if home else Path.home()) / ".claude"
