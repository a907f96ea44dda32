"""What the engine knows of its host: the settings it runs with, and what it implements.

The runtime builds one :class:`EngineConfig` from the settings at start; nothing in it changes
while the daemon runs.
"""

from __future__ import annotations

from dataclasses import field

from bridge.engine.agents import ConfiguredAgent
from bridge.protocol import (
    CHUNKED,
    CUSTOM_PROVIDERS,
    DIFF,
    FOLDERS,
    GSD,
    IMAGES,
    MODELS,
    SYNC_V1,
    USAGE,
)
from bridge.records import record

__all__ = ["BRIDGE_CAPABILITIES", "HEARTBEAT_DEBOUNCE", "HEARTBEAT_INTERVAL", "EngineConfig"]

BRIDGE_CAPABILITIES: tuple[str, ...] = (
    SYNC_V1,
    FOLDERS,
    GSD,
    IMAGES,
    USAGE,
    MODELS,
    DIFF,
    CUSTOM_PROVIDERS,
    CHUNKED,
)
"""What this bridge really implements today (a heartbeat never advertises more); ``opencode``
joins while OpenCode is offered (:class:`~bridge.engine.agents.AgentCatalog`), ``push`` while push
is on (:attr:`EngineConfig.push_key`)."""

HEARTBEAT_INTERVAL = 60.0
HEARTBEAT_DEBOUNCE = 1.0
"""Changes within a second share one heartbeat (keeps its strictly increasing clock real)."""


@record
class EngineConfig:
    """What the engine knows of its host (from the settings)."""

    bridge_pubkey: str
    machine: str
    host: str = "cli"
    relays: tuple[str, ...] = ()
    roots: tuple[str, ...] = ()
    capabilities: tuple[str, ...] = BRIDGE_CAPABILITIES
    heartbeat_interval: float = HEARTBEAT_INTERVAL
    heartbeat_debounce: float = HEARTBEAT_DEBOUNCE
    home: str = "/"
    """The user's home directory (the risk gate guards it)."""
    secrets: tuple[str, ...] = ()
    """The paths an agent must never see (``bridge.sandbox.hidden``): the risk gate denies every
    call that names one, in every mode."""
    env_api_key: str | None = field(default=None, repr=False)
    """The daemon environment's ``ANTHROPIC_API_KEY`` (it wins over a stored key)."""
    agents: tuple[ConfiguredAgent, ...] = ()
    """The ACP agents of the configuration (offered once their start-up check passed)."""
    push_key: str | None = None
    """The bridge's VAPID public key (base64url), or None when push is off: with it the
    heartbeat advertises ``push`` and carries it as ``pushKey``."""
