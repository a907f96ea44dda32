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
  :class:`~bridge.runtime.hosts.host_runner.HostRunner`, for every agent. Which agent is per session
  (its record's ``agent``): Claude Code (or the scripted test agent that replaces it with
  ``agent = "scripted"``), or an ACP agent of ``[agents.<id>]``, run by the host's ``acp``
  driver (options: :func:`acp_driver_options`). The host gets the agent's complete
  environment at each spawn (start, restart, resume): the daemon's own minus systemd's
  variables, plus the session's — a provider profile's for Claude Code, the ``env`` table for
  an ACP agent. A session whose ACP agent is no longer configured fails at its next start or
  restart, saying so. Provider profiles are for Claude Code only.
- **The ACP agents' check.** Once at start, in the background (:mod:`.agent_probe`): the
  engine hears ``AgentsChecked`` and advertises the agents that started.
- **The PreToolUse check.** Claude Code runs a hook before every tool call, also the ones its own
  rules would allow: the verdict is :func:`~bridge.gate.pre_tool_verdict` (pure, one
  failure policy: it never fails open). Telling whether a Write is Claude Code's own plan file
  is I/O (its config directory, symlinks), so it is checked here and passed in.
- **The sandbox.** Every agent spawn is planned a sandbox (:mod:`bridge.sandbox`) from the
  session's folder, the agent's own environment (its ``HOME``, ``CLAUDE_CONFIG_DIR``, ``XDG_*``)
  and ``[sandbox]``; the disk is surveyed in a worker thread. Where bubblewrap cannot run, a
  session runs unconfined with a warning, or fails when ``[sandbox] required`` says so.
- **Models.** Per agent: a live session's list, else a short-lived agent's — Claude Code's
  CLI, or an ACP agent's ``session/new`` in a temporary directory
  (:func:`~bridge.runtime.hosts.agent_probe.list_agent_models`, seconds for OpenCode). That
  leaves an empty session in the agent's own history (OpenCode has no ``session/delete`` over
  ACP), so it runs only when a phone asks and no live session can answer, never at start, and
  its list is kept for :data:`MODELS_KEEP` seconds.

The engine is read only through its queries.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, assert_never

from bridge.agent_config import AgentConfig
from bridge.agents.base import Emit, Runner, RunnerError, RunnerFactory, SessionSpec
from bridge.config import Settings
from bridge.engine.agents import CLAUDE, AgentCheck
from bridge.engine.core import Engine
from bridge.engine.effects import SessionRecord
from bridge.engine.inputs import AgentsChecked, Input, ToolBlocked
from bridge.gate import HookDecision, SessionFacts, pre_tool_verdict
from bridge.host.launch import DEFAULT_ORPHAN_TIMEOUT
from bridge.host.layout import host_paths
from bridge.protocol import ModelEntry
from bridge.runtime.hosts.agent_probe import AgentProbe, list_agent_models, probe_agents
from bridge.runtime.hosts.host_runner import HostRunner, HostStore
from bridge.runtime.hosts.launcher import HostLauncher
from bridge.runtime.hosts.runners import RunnerManager
from bridge.sandbox import (
    PolicyError,
    SandboxPolicy,
    SandboxSettings,
    SandboxSupport,
    agent_home,
    check_sandbox,
    hidden_paths,
    is_hidden,
    make_state_dirs,
    plan_policy,
    state_dirs_to_make,
    survey,
)

__all__ = [
    "ACP_AGENT_KIND",
    "ACP_RECORD_DIR",
    "MODELS_KEEP",
    "SANDBOX_OFF",
    "AgentEnvironment",
    "AgentLoadError",
    "acp_driver_options",
    "base_environment",
    "is_plan_file_write",
    "no_longer_configured",
    "sandbox_support_of",
]

logger = logging.getLogger(__name__)

ACP_AGENT_KIND: Final = "acp"
"""The session host's agent kind of every ACP agent (its driver: ``bridge.agents.acp``)."""
ACP_RECORD_DIR: Final = "acp"
"""The ACP driver's input logs, under the bridge home (as ``scripted`` for the scripted agent)."""
MODELS_KEEP: Final = 600.0
"""Seconds an ACP agent's model list from a short-lived run is kept (see the docstring)."""

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


def acp_driver_options(agent: AgentConfig, home: Path) -> dict[str, Any]:
    """The ``acp`` driver's options for `agent` (JSON values: they travel in the launch spec).

    ``command`` is the argv, its program already resolved; the driver adds the agent's own
    asking-mode variables (``OPENCODE_PERMISSION`` …) to the environment it is given.
    ``record_dir`` (the driver's ``RECORD_DIR_OPTION``) is where it keeps each session's input
    log across hosts: :data:`ACP_RECORD_DIR` in the bridge home.
    """
    return {
        "agent_id": agent.agent_id,
        "label": agent.label,
        "command": list(agent.command),
        "record_dir": str(home / ACP_RECORD_DIR),
    }


def no_longer_configured(agent_id: str) -> str:
    """Why a session of an agent that left the configuration cannot start."""
    return (
        f'the agent "{agent_id}" of this session is no longer configured on this machine; '
        f"add [agents.{agent_id}] to config.toml again (and restart the bridge) to resume it"
    )


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


SANDBOX_OFF = SandboxSupport(available=False, reason="[sandbox] enabled = false")
"""What the start says of the sandbox when it is turned off: nothing is tried."""


async def sandbox_support_of(settings: SandboxSettings) -> SandboxSupport:
    """Whether bubblewrap runs here, tried once at the start in a worker thread (the trial
    starts a process, which must not hold the event loop)."""
    if not settings.enabled:
        return SANDBOX_OFF
    return await asyncio.to_thread(check_sandbox, settings.bwrap, os.environ.get("PATH"))


class AgentEnvironment:
    """The agents' side of the settings and of the engine (see the module docstring).

    Args:
        settings: the daemon's settings.
        engine: read through its queries only.
        feed: puts an input on the engine's queue (a blocked tool call is recorded).
    """

    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        feed: Callable[[Input], None],
        *,
        sandbox: SandboxSupport,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._sandbox = sandbox
        self._engine = engine
        self._feed = feed
        self._monotonic = monotonic
        self._acp = {agent.agent_id: agent for agent in settings.agents}
        self._models_kept: dict[str, tuple[float, list[ModelEntry]]] = {}
        self.probes: dict[str, AgentProbe] = {}
        """The last check of each ACP agent (empty until it finished)."""
        self._say_sandbox()

    # --- environments ---------------------------------------------------------------------

    def session_env(self, record: SessionRecord) -> dict[str, str] | str:
        """Variables a session's agent gets on top of the daemon's environment, or why it
        cannot start (checked at every spawn, restart and resume)."""
        if record.agent != CLAUDE:
            agent = self._acp.get(record.agent)
            if agent is None:
                return no_longer_configured(record.agent)
            return dict(agent.env)
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
        claude = record is None or record.agent == CLAUDE
        if spec.provider_id is None or self._settings.agent != "claude" or not claude:
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

    # --- the sandbox ------------------------------------------------------------------------

    def sandbox_support(self) -> SandboxSupport:
        """Whether bubblewrap runs here, as :func:`sandbox_support_of` found at the start."""
        return self._sandbox

    def sandbox_summary(self) -> str:
        """One line for ``status``: whether sessions are sandboxed, and if not why."""
        settings = self._settings.sandbox
        if not settings.enabled:
            return "off ([sandbox] enabled = false): agents run unconfined"
        support = self.sandbox_support()
        if support.available:
            return f"on (bubblewrap {support.bwrap})"
        if settings.required:
            return f"required but unavailable: sessions fail ({support.reason}; {support.fix})"
        return f"unavailable: agents run unconfined ({support.reason}; {support.fix})"

    def _say_sandbox(self) -> None:
        """The start-up warning when agents will not be sandboxed."""
        settings = self._settings.sandbox
        if not settings.enabled:
            logger.warning(
                "! the sandbox is off ([sandbox] enabled = false): agents run unconfined"
            )
        elif not self.sandbox_support().available:
            logger.warning("! sandbox %s", self.sandbox_summary())

    def sandbox_for(self, spec: SessionSpec, env: Mapping[str, str]) -> SandboxPolicy | str | None:
        """The sandbox of one agent spawn, None to run it unconfined, or why it cannot start.

        Blocking (it surveys the disk): the runner calls it in a worker thread.
        """
        settings = self._settings.sandbox
        if not settings.enabled:
            return None
        support = self.sandbox_support()
        if not support.available or support.bwrap is None:
            if settings.required:
                return (
                    "the sandbox is required ([sandbox] required = true) but cannot run here: "
                    f"{support.reason}; {support.fix}"
                )
            logger.warning(
                "! session %s runs unconfined: %s (%s)",
                spec.session_id[:8],
                support.reason,
                support.fix,
            )
            return None
        home = str(Path.home())
        hidden = list(self._engine.config.secrets)
        home_of_agent = agent_home(env, home)
        if home_of_agent != home:  # the agent's own ~/.ssh and the rest, too
            hidden += hidden_paths(
                home_of_agent,
                str(self._settings.home),
                extra=settings.hide,
                unhidden=settings.unhide,
            )
        cwd = os.path.realpath(spec.cwd)
        record = self._engine.session(spec.session_id)
        kind = "claude" if record is None or record.agent == CLAUDE else "acp"
        state = state_dirs_to_make(env, home_of_agent, kind)
        make_state_dirs(path for path in state if not is_hidden(path, hidden))
        try:
            return plan_policy(
                bwrap=support.bwrap,
                cwd=cwd,
                env=env,
                home=home,
                hidden=tuple(dict.fromkeys(hidden)),
                facts=survey(hidden, cwd),
                extra_writable=settings.writable,
            )
        except PolicyError as exc:
            return str(exc)

    # --- runners --------------------------------------------------------------------------

    def runner_factory(
        self, launcher: HostLauncher, store: HostStore, *, log_level: str = "INFO"
    ) -> RunnerFactory:
        """Runners of each session's agent, each running its session in a session host.

        The agent is looked up when the runner is made (the session's record): Claude Code's
        kind for ``claude``, :data:`ACP_AGENT_KIND` for an ACP agent.

        Raises:
            AgentLoadError: Claude Code's driver cannot be imported (checked here, at start-up,
                rather than in every host).
        """
        agent = self._settings.agent
        options: dict[str, Any]
        if self._acp and importlib.util.find_spec("bridge.agents.acp") is None:
            logger.warning(
                "! ACP agents are configured (%s) but the ACP driver (bridge.agents.acp) is "
                "missing: their sessions cannot start; reinstall the project",
                ", ".join(self._acp),
            )
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
            record = self._engine.session(session_id)
            kind, named, driver_options = agent, label, options
            if record is not None and record.agent != CLAUDE:
                acp_agent = self._acp.get(record.agent)
                if acp_agent is None:
                    raise RunnerError(no_longer_configured(record.agent))
                kind, named = ACP_AGENT_KIND, acp_agent.label
                driver_options = acp_driver_options(acp_agent, self._settings.home)
            elif record is not None and record.task is not None:
                # A Desiide task: the editor's tools, served in the host, rooted at the task's
                # workspace (DESIIDE.md, "Tools").
                editor_tools = {
                    "root": record.cwd,
                    "allowed": list(record.task.allowed_tools),
                    "state_dir": str(host_paths(self._settings.home, session_id).root),
                }
                driver_options = {**options, "editor_tools": editor_tools}
            return HostRunner(
                session_id,
                emit,
                launcher=launcher,
                agent=kind,
                label=named,
                env_for=self.agent_env,
                spec_for=self.current_spec,
                driver_options=driver_options,
                tool_check=self.tool_check,
                diff_allowed=self._engine.diff_allowed,
                store=store,
                orphan_timeout=DEFAULT_ORPHAN_TIMEOUT,
                log_level=log_level,
                # The scripted test agent runs inside its host: no process to confine.
                sandbox_for=self.sandbox_for if kind != "scripted" else None,
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
        # Claude Code's own plan file is Claude Code's: another agent writing there is not
        # writing a plan.
        claude = record is not None and record.agent == CLAUDE
        # A Desiide task's workspace is the editor's root, its only one (as in its cards).
        roots = (record.cwd,) if record is not None and record.task is not None else config.roots
        verdict = pre_tool_verdict(
            tool_name,
            tool_input,
            session,
            roots=tuple(roots),
            home=config.home,
            secrets=config.secrets,
            plan_file_write=claude and is_plan_file_write(tool_name, tool_input),
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

    async def list_models(
        self, runners: RunnerManager, agent_id: str | None = None
    ) -> list[ModelEntry]:
        """The models for ``models-request`` of `agent_id` (None: Claude Code's): a live
        session's, else a short-lived agent's (see the module docstring)."""
        if agent_id is not None and agent_id != CLAUDE:
            return await self._acp_models(runners, agent_id)
        if self._settings.agent == "scripted":
            return [ModelEntry(id="scripted", label="Scripted test agent")]
        models = runners.models(CLAUDE)
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

    async def _acp_models(self, runners: RunnerManager, agent_id: str) -> list[ModelEntry]:
        agent = self._acp.get(agent_id)
        if agent is None:
            return []
        live = runners.models(agent_id)
        if live:
            return live
        kept = self._models_kept.get(agent_id)
        if kept is not None and kept[0] > self._monotonic():
            return list(kept[1])
        listed = await list_agent_models(agent, base_environment(os.environ))
        if listed.reason is not None:
            logger.warning("! listing the models of %s failed: %s", agent_id, listed.reason)
        models = list(listed.models)
        if models:
            self._models_kept[agent_id] = (self._monotonic() + MODELS_KEEP, models)
        logger.info(
            "agent %s: %d model(s) from a short-lived run (%.1f s)",
            agent_id,
            len(models),
            listed.seconds,
        )
        return models

    # --- the ACP agents' check ---------------------------------------------------------------

    async def check_agents(self) -> None:
        """Check every configured ACP agent once; the engine hears ``AgentsChecked``.

        Run in the background at start: the daemon is ready and its first heartbeat is out
        before the agents answered (OpenCode takes seconds); the engine republishes the heartbeat
        when the agents that started join it.
        """
        agents = list(self._acp.values())
        if not agents:
            return
        probes = await probe_agents(agents, base_environment(os.environ))
        self.probes = {probe.agent_id: probe for probe in probes}
        checks = tuple(AgentCheck(p.agent_id, p.started, p.reason) for p in probes)
        self._feed(AgentsChecked(checks))
