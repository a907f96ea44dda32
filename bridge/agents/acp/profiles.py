"""What differs between ACP agents: how each is made to ask, signed in, and put in a mode.

ACP is one protocol, but three things are the agent's own (``../shared/notes/agents-acp.md``
§3.4): the environment that makes it *ask* before every tool call (the bridge's gate must see
every call, whatever the user's own agent configuration allows), the sign-in method, and its mode
names. A profile holds those; an agent without one gets :data:`GENERIC`, which works for any agent
that asks by default and needs no sign-in.

Modes. A session keeps v10's permission mode (``default`` / ``acceptEdits`` / ``plan``), which the
bridge's gate applies to every call. The agent's own mode is set only so that it plans when the
phone asks for a plan: ``plan`` → the agent's plan mode where it has one, every other mode → the
agent's asking mode (the one it starts in, unless the profile names it). An agent's ``yolo`` /
auto-accept mode is never chosen: it would stop asking, and its calls would skip the gate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Final

from bridge.records import record

__all__ = ["GENERIC", "PROFILES", "AgentProfile", "agent_mode", "profile_for"]


@record
class AgentProfile:
    """One agent's particulars.

    Attributes:
        ask_env: variables that make the agent ask before every tool call (they override the
            user's own configuration).
        auth_methods: ``(method id, variable)``: sign in with the method when the agent offers
            it and the variable is set in its environment.
        asking_mode: the agent mode for every v10 mode but ``plan`` (None: the mode it starts in).
        plan_mode: the agent mode for ``plan`` (None: an offered mode whose id is ``plan``).
    """

    ask_env: Mapping[str, str] = field(default_factory=dict)
    auth_methods: Sequence[tuple[str, str]] = ()
    asking_mode: str | None = None
    plan_mode: str | None = None


GENERIC: Final = AgentProfile()
PROFILES: Final[Mapping[str, AgentProfile]] = {
    # Measured: OPENCODE_PERMISSION overrides a config that allows everything (agents-acp.md §6).
    "opencode": AgentProfile(
        ask_env={"OPENCODE_PERMISSION": '{"*":"ask"}'}, asking_mode="build", plan_mode="plan"
    ),
    "gemini": AgentProfile(
        auth_methods=(("gemini-api-key", "GEMINI_API_KEY"), ("vertex-ai", "GOOGLE_API_KEY")),
        asking_mode="default",
        plan_mode="plan",
    ),
}


def profile_for(agent_id: str) -> AgentProfile:
    """The profile of `agent_id` (``gemini-cli`` finds ``gemini``), else :data:`GENERIC`."""
    if agent_id in PROFILES:
        return PROFILES[agent_id]
    head = agent_id.split("-", 1)[0]
    return PROFILES.get(head, GENERIC)


def agent_mode(
    profile: AgentProfile, v10_mode: str, offered: Sequence[str], initial: str | None
) -> str | None:
    """The agent mode for `v10_mode`, among the `offered` mode ids; None to leave it as it is."""
    if not offered:
        return None
    if v10_mode == "plan":
        wanted = profile.plan_mode or "plan"
        return wanted if wanted in offered else None
    if profile.asking_mode is not None and profile.asking_mode in offered:
        return profile.asking_mode
    return initial if initial in offered else None
