"""What the agents run with: their environment, their runner factory, the gate in front of every
tool call, and the model list.

- **Environment.** A session's agent starts from the daemon's environment minus systemd's own
  variables (``NOTIFY_SOCKET``, ``WATCHDOG_*``, …: they are for the daemon, and an agent that
  answered them would confuse systemd). A provider-bound session runs on its profile (vendor
  variables scrubbed, ``ANTHROPIC_BASE_URL`` / ``ANTHROPIC_AUTH_TOKEN`` set), looked up again at
  every spawn, restart and resume, so a deleted profile fails the session with a readable reason.
  Otherwise a key stored from the phone is used when the environment has none.
- **Runner factory.** Every session runs in a session host (:mod:`bridge.host`), a process of
  its own that outlives the daemon; the daemon's runner of it is
  :class:`~bridge.runtime.host_runner.HostRunner`, for Claude Code and the scripted test agent
  (``agent = "scripted"``) alike. The host gets the agent's complete environment at each spawn
  (start, restart, resume): the daemon's own minus systemd's variables, plus the session's.
- **The PreToolUse check.** Claude Code runs a hook before every tool call, also the ones its own
  rules would allow: the verdict is :func:`~bridge.engine.gate.pre_tool_verdict` (pure, one
  failure policy: it never fails open). Telling whether a Write is Claude Code's own plan file
  is I/O (its config directory, symlinks), so it is checked here and passed in.
- **Models.** A live session's list, else a short-lived CLI's.

The engine is read only through its queries.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, assert_never

from bridge.agents.base import Emit, Runner, RunnerFactory, SessionSpec
from bridge.config import Settings
from bridge.engine.core import Engine
from bridge.engine.effects import SessionRecord
from bridge.engine.gate import HookDecision, SessionFacts, pre_tool_verdict
from bridge.engine.inputs import Input, ToolBlocked
from bridge.host.launch import DEFAULT_ORPHAN_TIMEOUT
from bridge.protocol import ModelEntry
from bridge.runtime.host_launcher import HostLauncher
from bridge.runtime.host_runner import HostRunner, HostStore
from bridge.runtime.runners import RunnerManager

__all__ = ["AgentEnvironment", "AgentLoadError", "base_environment", "is_plan_file_write"]

logger = logging.getLogger(__name__)

SERVICE_ONLY_ENV = frozenset({"NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"})
"""systemd's variables for the daemon itself, not for the agents it spawns."""


def base_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The daemon's environment minus what is for the daemon alone (systemd's variables)."""
    return {
        name: value
        for name, value in environ.items()
        if name not in SERVICE_ONLY_ENV and not name.startswith("WATCHDOG_")
    }


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

    def agent_env(self, spec: SessionSpec) -> dict[str, str] | str:
        """The complete environment of a session's agent for one spawn, or why it cannot run.

        Looked up again at every spawn, so a deleted provider profile fails the session with a
        readable reason, and a changed one applies at the next restart.
        """
        env = base_environment(os.environ)
        record = self._engine.session(spec.session_id)
        extra = self.session_env(record) if record is not None else dict(spec.env)
        if isinstance(extra, str):
            return extra
        env.update(extra)
        if spec.provider_id is None or self._settings.agent != "claude":
            return env
        from bridge.agents.claude import provider_env

        resolved = self._engine.resolve_provider(spec.provider_id, spec.model)
        if isinstance(resolved, str):
            return resolved
        return dict(provider_env(env, resolved.base_url, resolved.token, resolved.model))

    def current_spec(self, spec: SessionSpec) -> SessionSpec:
        """`spec` with the options now in force (a new host must not start on stale ones).

        A runner keeps the spec it was started with; the phone may have changed the mode,
        effort or model since, and a host started again after a crash must take those.
        """
        record = self._engine.session(spec.session_id)
        if record is None:
            return spec
        return dataclasses.replace(
            spec,
            permission_mode=record.permission_mode or spec.permission_mode,
            model=record.model,
            effort_level=record.effort_level,
            provider_id=record.provider_id,
        )

    # --- runners --------------------------------------------------------------------------

    def runner_factory(
        self, launcher: HostLauncher, store: HostStore, *, log_level: str = "INFO"
    ) -> RunnerFactory:
        """Runners of the configured agent, each running its session in a session host.

        Raises:
            AgentLoadError: the agent's driver cannot be imported (checked here, at start-up,
                rather than in every host).
        """
        agent = self._settings.agent
        options: dict[str, Any]
        if agent == "scripted":
            logger.warning(
                "sessions run the scripted test agent (agent = scripted), not Claude Code"
            )
            options = {"log_dir": str(self._settings.home / "scripted")}
            label = "The scripted agent"
        else:
            try:
                import bridge.agents.claude  # noqa: F401 - the hosts will import it
            except ImportError as exc:
                raise AgentLoadError(
                    f"the Claude Code driver cannot load ({exc}); reinstall the project "
                    '(pip install -e .) or set agent = "scripted" to run without Claude Code'
                ) from None
            claude_path = self._settings.claude_path
            options = {
                "cli_path": str(claude_path) if claude_path is not None else None,
                "check_tools": True,
            }
            label = "Claude Code"

        def make(session_id: str, emit: Emit) -> Runner:
            return HostRunner(
                session_id,
                emit,
                launcher=launcher,
                agent=agent,
                label=label,
                env_for=self.agent_env,
                spec_for=self.current_spec,
                driver_options=options,
                tool_check=self.tool_check,
                diff_allowed=self._engine.diff_allowed,
                store=store,
                orphan_timeout=DEFAULT_ORPHAN_TIMEOUT,
                log_level=log_level,
            )

        return make

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
            choices = await fetch_models(
                self._settings.workspaces[0],
                env=base_environment(os.environ),
                cli_path=self._settings.claude_path,
            )
        except Exception:
            logger.exception("! listing the Claude Code models failed")
            return []
        return [ModelEntry(id=c.id, label=c.label) for c in choices]
