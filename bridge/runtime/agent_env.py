"""What the agents run with: their environment, their runner factory, the gate in front of every
tool call, and the model list.

- **Environment.** A session's agent starts from the daemon's environment minus systemd's own
  variables (``NOTIFY_SOCKET``, ``WATCHDOG_*``, …: they are for the daemon, and an agent that
  answered them would confuse systemd). A provider-bound session runs on its profile (vendor
  variables scrubbed, ``ANTHROPIC_BASE_URL`` / ``ANTHROPIC_AUTH_TOKEN`` set), looked up again at
  every spawn, restart and resume, so a deleted profile fails the session with a readable reason.
  Otherwise a key stored from the phone is used when the environment has none.
- **Runner factory.** The scripted test agent (``agent = "scripted"``), or Claude Code (its SDK
  is imported only then: about 2 s of imports).
- **The PreToolUse check.** Claude Code runs a hook before every tool call, also the ones its own
  rules would allow: the verdict is :func:`~bridge.engine.gate.pre_tool_verdict` (pure, one
  failure policy: it never fails open). Telling whether a Write is Claude Code's own plan file
  is I/O (its config directory, symlinks), so it is checked here and passed in.
- **Models.** A live session's list, else a short-lived CLI's.

The engine is read only through its queries.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, assert_never

from bridge.agents.base import RunnerError, RunnerFactory, SessionSpec
from bridge.agents.scripted import scripted_runner_factory
from bridge.config import Settings
from bridge.engine.core import Engine
from bridge.engine.effects import SessionRecord
from bridge.engine.gate import HookDecision, SessionFacts, pre_tool_verdict
from bridge.engine.inputs import Input, ToolBlocked
from bridge.protocol import ModelEntry
from bridge.runtime.runners import RunnerManager

__all__ = ["AgentEnvironment", "AgentLoadError", "is_plan_file_write"]

logger = logging.getLogger(__name__)

SERVICE_ONLY_ENV = frozenset({"NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"})
"""systemd's variables for the daemon itself, not for the agents it spawns."""


class AgentLoadError(Exception):
    """The agent runner cannot load; the message says how to fix it."""


def is_plan_file_write(tool_name: str, tool_input: Mapping[str, Any]) -> bool:
    """A Write/Edit of a file in Claude Code's own ``plans`` folder (its config directory).

    Never raises: the path comes from the model, and ``~nobody/x`` (no such user), a NUL byte
    or a symlink loop make ``expanduser``/``resolve`` raise RuntimeError or ValueError, which
    would escape the hook. Such a path is not the plan file.
    """
    if tool_name not in ("Write", "Edit", "MultiEdit"):
        return False
    raw = tool_input.get("file_path")
    if not isinstance(raw, str) or not raw:
        return False
    try:
        config = os.environ.get("CLAUDE_CONFIG_DIR") or str(Path.home() / ".claude")
        plans = Path(config).expanduser().resolve() / "plans"
        resolved = Path(raw).expanduser().resolve()
    except (OSError, RuntimeError, ValueError):
        return False
    return resolved.suffix == ".md" and plans in resolved.parents


class AgentEnvironment:
    """The agents' side of the settings and of the engine (see the module docstring).

    Args:
        settings: the daemon's settings.
        engine: read through its queries only.
        feed: puts an input on the engine's queue (a blocked tool call is recorded).
    """

    def __init__(self, settings: Settings, engine: Engine, feed: Callable[[Input], None]) -> None:
        self._settings = settings
        self._engine = engine
        self._feed = feed

    # --- environments ---------------------------------------------------------------------

    def session_env(self, record: SessionRecord) -> dict[str, str] | str:
        """Variables a session's agent gets on top of the daemon's environment, or why it
        cannot start (checked at every spawn, restart and resume)."""
        if record.provider_id is not None:
            resolved = self._engine.resolve_provider(record.provider_id, record.model)
            return resolved if isinstance(resolved, str) else {}
        key = self._engine.stored_api_key()
        if key and not os.environ.get("ANTHROPIC_API_KEY"):
            return {"ANTHROPIC_API_KEY": key}
        return {}

    async def claude_env(self, spec: SessionSpec, env: Mapping[str, str]) -> Mapping[str, str]:
        """The Claude runner's environment hook: a provider-bound session runs on its profile."""
        if spec.provider_id is None:
            return env
        from bridge.agents.claude import provider_env  # the SDK loads only when Claude runs

        resolved = self._engine.resolve_provider(spec.provider_id, spec.model)
        if isinstance(resolved, str):
            raise RunnerError(resolved)
        return provider_env(env, resolved.base_url, resolved.token, resolved.model)

    # --- runners --------------------------------------------------------------------------

    def runner_factory(self) -> RunnerFactory:
        """The runner of the configured agent.

        Raises:
            AgentLoadError: Claude Code's runner cannot be imported.
        """
        if self._settings.agent == "scripted":
            logger.warning(
                "sessions run the scripted test agent (agent = scripted), not Claude Code"
            )
            return scripted_runner_factory(self._settings.home / "scripted")
        try:  # ~2 s of imports: only when Claude Code runs the sessions
            from bridge.agents.claude import claude_runner_factory
        except ImportError as exc:
            raise AgentLoadError(
                f"the Claude Code runner cannot load ({exc}); reinstall the project "
                '(pip install -e .) or set agent = "scripted" to run without Claude Code'
            ) from None
        base_env = {
            name: value
            for name, value in os.environ.items()
            if name not in SERVICE_ONLY_ENV and not name.startswith("WATCHDOG_")
        }
        return claude_runner_factory(
            cli_path=self._settings.claude_path,
            base_env=base_env,
            env_hook=self.claude_env,
            diff_allowed=self._engine.diff_allowed,
            tool_check=self.tool_check,
        )

    def tool_check(
        self, session_id: str, tool_name: str, tool_input: dict[str, Any]
    ) -> tuple[str, str] | None:
        """The gate in front of every tool call (Claude Code's PreToolUse hook).

        Returns:
            ``("deny", reason)``, ``("ask", reason)``, or None for no opinion.
        """
        record = self._engine.session(session_id)
        session = (
            SessionFacts(mode=record.permission_mode or "default", cwd=record.cwd)
            if record is not None
            else None
        )
        config = self._engine.config
        verdict = pre_tool_verdict(
            tool_name,
            tool_input,
            session,
            roots=tuple(config.roots),
            home=config.home,
            plan_file_write=is_plan_file_write(tool_name, tool_input),
        )
        if verdict.problem is not None:
            logger.warning(
                "! gate failed closed for session %s, tool %s: %s",
                session_id[:8],
                tool_name,
                verdict.problem,
            )
        if verdict.blocked is not None:
            self._feed(ToolBlocked(session_id, tool_name, verdict.blocked.reasons, verdict.reason))
        match verdict.decision:
            case HookDecision.DENY:
                return ("deny", verdict.reason)
            case HookDecision.ASK:
                return ("ask", verdict.reason)
            case HookDecision.NO_OPINION:
                return None
            case _:
                assert_never(verdict.decision)

    # --- models ---------------------------------------------------------------------------

    async def list_models(self, runners: RunnerManager) -> list[ModelEntry]:
        """The models for ``models-request``: a live session's, else a short-lived CLI's."""
        if self._settings.agent == "scripted":
            return [ModelEntry(id="scripted", label="Scripted test agent")]
        models = runners.models()
        if models or not self._settings.workspaces:
            return models
        from bridge.agents.claude import fetch_models

        try:
            return list(
                await fetch_models(
                    self._settings.workspaces[0], cli_path=self._settings.claude_path
                )
            )
        except Exception:
            logger.exception("! listing the Claude Code models failed")
            return []
