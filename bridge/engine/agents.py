"""Which agents sessions can run: Claude Code always, each configured ACP agent once it started.

The bridge runs Claude Code on its own driver, and every other agent (OpenCode, Gemini CLI, …)
through the Agent Client Protocol, one ``[agents.<id>]`` table of ``config.toml`` each. Rules:

- **Advertised = checked.** A configured ACP agent is offered to phones only after the daemon's
  start-up check (:mod:`bridge.runtime.hosts.agent_probe`) saw it answer ACP ``initialize``
  (``AgentsProbed``). Until then it is *checking*; after a failed check it is *unavailable*,
  with the check's reason. Claude Code is always offered (its failures show per session).
- **What the heartbeat says.** Every offered agent is one :class:`~bridge.protocol.AgentDescriptor`
  of the additive ``agents`` list, Claude Code first; the late-v10 ``opencode`` capability is
  advertised exactly while the agent ``opencode`` is offered (v10 phones gate
  ``create-session.backend:"opencode"`` on it).
- **Choosing.** ``create-session`` / ``models-request`` name an agent with the late-v10
  ``backend`` (``claude-code`` | ``opencode``) or the additive ``agent`` (an advertised id);
  absent both, Claude Code. Both present and naming different agents is refused, as is an
  agent that is not offered — with a reason a person can act on.
- **Modes.** Every agent's sessions keep v10's permission modes in the engine (the gate applies
  them to every tool call); the driver maps them onto the agent's own modes. So every
  descriptor lists the same modes; only Claude Code has efforts.

Pure: no I/O; the runtime reports the checks as inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from bridge.protocol import (
    EFFORT_LEVELS,
    OPENCODE,
    PERMISSION_MODES,
    AgentDescriptor,
    AgentSupports,
    SessionBackend,
)
from bridge.records import record

__all__ = [
    "CLAUDE",
    "CLAUDE_LABEL",
    "OPENCODE_AGENT",
    "AgentCatalog",
    "AgentCheck",
    "ConfiguredAgent",
    "Refused",
    "agent_of_backend",
    "backend_of",
]

CLAUDE: Final = "claude"
"""The id of Claude Code (its own driver; never an ``[agents.<id>]`` table)."""
CLAUDE_LABEL: Final = "Claude Code"
OPENCODE_AGENT: Final = "opencode"
"""The id of OpenCode, the agent the late-v10 ``backend:"opencode"`` names."""

_BACKENDS: Final[dict[SessionBackend, str]] = {"claude-code": CLAUDE, "opencode": OPENCODE_AGENT}

_CLAUDE_SUPPORTS: Final = AgentSupports(
    models=True, usage=True, providers=True, gsd=True, interrupt=True
)
_ACP_SUPPORTS: Final = AgentSupports(
    models=True, usage=False, providers=False, gsd=True, interrupt=True
)


@record
class ConfiguredAgent:
    """An ACP agent of the configuration: its id and the label phones show."""

    agent_id: str
    label: str


@record
class AgentCheck:
    """The outcome of one agent's start-up check.

    Attributes:
        agent_id: the configured agent.
        started: it answered ACP ``initialize``.
        reason: why not (user-readable), when it did not.
    """

    agent_id: str
    started: bool
    reason: str | None = None


@record
class Refused:
    """A command named an agent that cannot run: why, for the phone."""

    reason: str


def agent_of_backend(backend: SessionBackend | None) -> str | None:
    """The agent a late-v10 ``backend`` names (None for None)."""
    return _BACKENDS[backend] if backend is not None else None


def backend_of(agent_id: str) -> SessionBackend | None:
    """The late-v10 ``backend`` of an agent's sessions (None: v10 has no word for it).

    Claude Code's sessions carry none either: v10 says an absent ``backend`` means
    ``claude-code``, and a v10 heartbeat stays as it was.
    """
    return "opencode" if agent_id == OPENCODE_AGENT else None


class AgentCatalog:
    """The agents of this bridge and whether each can run now (see the module docstring).

    Args:
        configured: the ACP agents of the configuration, in its order.
    """

    def __init__(self, configured: Sequence[ConfiguredAgent] = ()) -> None:
        self._configured = {agent.agent_id: agent for agent in configured}
        self._started: set[str] = set()
        self._failed: dict[str, str] = {}

    def checked(self, checks: Sequence[AgentCheck]) -> bool:
        """Record start-up checks; True when what the heartbeat shows changed."""
        before = self.offered_ids()
        for check in checks:
            if check.agent_id not in self._configured:
                continue
            if check.started:
                self._started.add(check.agent_id)
                self._failed.pop(check.agent_id, None)
            else:
                self._started.discard(check.agent_id)
                self._failed[check.agent_id] = check.reason or "it did not start"
        return self.offered_ids() != before

    def offered_ids(self) -> tuple[str, ...]:
        """The agents sessions can run now: Claude Code first, then the configuration's order."""
        return (CLAUDE, *(a for a in self._configured if a in self._started))

    def label(self, agent_id: str) -> str:
        """How phones and messages name the agent (its id when it is not configured)."""
        if agent_id == CLAUDE:
            return CLAUDE_LABEL
        configured = self._configured.get(agent_id)
        return configured.label if configured is not None else agent_id

    def capabilities(self, base: Sequence[str]) -> tuple[str, ...]:
        """`base`, plus ``opencode`` while OpenCode is offered."""
        if OPENCODE_AGENT in self._started and OPENCODE not in base:
            return (*base, OPENCODE)
        return tuple(base)

    def descriptors(self) -> list[AgentDescriptor]:
        """The heartbeat's ``agents``: one descriptor per offered agent."""
        modes = list(PERMISSION_MODES)
        out = [
            AgentDescriptor(
                id=CLAUDE,
                label=CLAUDE_LABEL,
                modes=modes,
                efforts=list(EFFORT_LEVELS),
                supports=_CLAUDE_SUPPORTS,
            )
        ]
        for agent_id in self.offered_ids()[1:]:
            out.append(
                AgentDescriptor(
                    id=agent_id,
                    label=self.label(agent_id),
                    modes=modes,
                    efforts=[],
                    supports=_ACP_SUPPORTS,
                )
            )
        return out

    def choose(self, backend: SessionBackend | None, agent: str | None) -> str | Refused:
        """The agent a command names, or ``(reason,)`` when it cannot run it.

        Args:
            backend: the late-v10 ``backend`` field (None: absent).
            agent: the additive ``agent`` field (None: absent).

        Returns:
            The agent id, or why it cannot run.
        """
        by_backend = agent_of_backend(backend)
        if by_backend is not None and agent is not None and by_backend != agent:
            return Refused(
                f'backend "{backend}" and agent "{agent}" name different agents; send one of them'
            )
        wanted = agent if agent is not None else by_backend or CLAUDE
        if wanted == CLAUDE or wanted in self._started:
            return wanted
        return Refused(self.unavailable_reason(wanted))

    def unavailable_reason(self, agent_id: str) -> str:
        """Why `agent_id` cannot run sessions now (for ``session-failed`` and ``models``)."""
        label = self.label(agent_id)
        if agent_id not in self._configured:
            if agent_id == OPENCODE_AGENT:
                return (
                    "OpenCode is not available on this machine: it is not installed (no "
                    "`opencode` on the bridge's PATH) and agents.opencode.command is not set "
                    "in config.toml"
                )
            return f'no agent "{agent_id}" is configured on this machine'
        failed = self._failed.get(agent_id)
        if failed is not None:
            return f"{label} is not available on this machine: {failed}"
        return (
            f"{label} is not available yet: the bridge is still checking that it starts; "
            "try again in a few seconds"
        )
