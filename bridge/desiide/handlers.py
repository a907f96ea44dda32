"""The orchestrator's method table: each Desiide request → the module that does it.

The connection has validated the params into the method's model
(:data:`bridge.desiide.schema.methods.METHODS`); a handler returns the result as a JSON object (the
schema's result models describe them, ``DESIIDE.md`` documents them) or raises
:class:`~bridge.desiide.errors.DesiideError` (or the task book's
:class:`~bridge.desiide.lifecycle.types.LifecycleError`, mapped by the server).

=====================  ===================================================================
method                 done by
=====================  ===================================================================
``task.*``, ``edits``  :class:`~bridge.desiide.orchestrator.Orchestrator` (tasks as sessions)
``decisions.*``        :mod:`bridge.desiide.decision_log` (the store, read-only)
``models.*``           :mod:`bridge.desiide.models.listing` (configured, profiles', Claude's, Ollama)
``jev.*``              :mod:`bridge.desiide.jev` (the packs' states; the configured judge)
``config.update``      :mod:`bridge.desiide.settings` (kept in ``<home>/desiide``, refs only)
``health.ping``        here
=====================  ===================================================================
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, Final, TypeVar

from pydantic import BaseModel

from bridge.desiide.decision_log import list_decisions, replay_decision
from bridge.desiide.errors import INVALID_PARAMS, NOT_IMPLEMENTED, SECRET_MISSING, DesiideError
from bridge.desiide.jev import (
    JevClient,
    JevError,
    NoulResult,
    available_models,
    build_risk_gate,
    combine_with_reasons,
    current_branch,
    detect_env,
    has_pending_migrations,
    preview_state,
)
from bridge.desiide.lifecycle.entries import call_paths
from bridge.desiide.lifecycle.types import FileReport
from bridge.desiide.models.listing import (
    AGENT_PREFIX,
    AgentModel,
    ModelSources,
    catalog,
    list_models,
    run_model_test,
)
from bridge.desiide.orchestrator import Orchestrator
from bridge.desiide.schema.config import DesiideConfig
from bridge.desiide.settings import (
    DesiideSettings,
    SecretNotSet,
    SecretResolver,
    SettingsError,
    load_config,
    save_config,
)
from bridge.engine.phones.providers import ProviderProfile, profile_from_record
from bridge.gate.editor_calls import editor_tool
from store.errors import StoreError
from store.readonly import open_readonly

__all__ = ["CLAUDE_CODE_MODELS", "PREFERENCE_MODELS", "Handlers", "read_profiles", "task_model"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


def _load_config(home: Path) -> DesiideSettings:
    """The last settings the editor sent (kept across restarts), or the defaults."""
    try:
        return load_config(home) or DesiideSettings()
    except SettingsError as exc:
        logger.warning("! the stored Desiide settings are unusable (%s); using the defaults", exc)
        return DesiideSettings()


class Handlers:
    """Dispatch of validated requests (see the module docstring)."""

    def __init__(
        self, home: Path, orchestrator: Orchestrator, secrets: SecretResolver, started: float
    ) -> None:
        self._home = home
        self._tasks = orchestrator
        self._secrets = secrets
        self._started = started
        self.config = _load_config(home)
        self._apply(self.config)

    async def handle(self, method: str, params: BaseModel) -> dict[str, Any]:
        p: Any = params
        tasks = self._tasks
        match method:
            case "task.create":
                model, unavailable = task_model(self.config, str(p.kind), p.preference)
                return await tasks.create(p, model=model, unavailable=unavailable)
            case "task.cancel":
                return await tasks.cancel(p.taskId)
            case "task.list":
                return tasks.summaries()
            case "task.approve":
                return await tasks.approve(p.taskId, p.approvalId, str(p.scope))
            case "task.reject":
                return await tasks.reject(p.taskId, p.approvalId, p.reason)
            case "edits.report":
                files = [FileReport(f.path, str(f.status), f.reason) for f in p.files]
                return await tasks.report(p.taskId, p.proposalId, files)
            case "decisions.list":
                return await asyncio.to_thread(
                    list_decisions,
                    self._home,
                    task_id=p.taskId,
                    pack=str(p.pack) if p.pack is not None else None,
                    outcome=p.outcome,
                    limit=p.limit,
                    cursor=p.cursor,
                )
            case "decisions.replay":
                workspace = str(tasks.workspace) if tasks.workspace is not None else None
                replayed = await asyncio.to_thread(
                    replay_decision, self._home, p.id, workspace, str(Path.home())
                )
                return await self._replay_judge(replayed)
            case "health.ping":
                return {"ok": True, "uptimeMs": int((time.monotonic() - self._started) * 1000)}
            case "config.update":
                return await self._config_update(p)
            case "models.list":
                return await list_models(await self._sources(), discover=p.discover)
            case "models.test":
                sources = await self._sources()
                tested = await _with_secrets(run_model_test(p.modelId, sources, self._secrets))
                return tested.to_wire()
            case "jev.test":
                client = JevClient(self.config.jev, self._secrets)
                return (await _with_secrets(client.test())).to_wire()
            case "jev.preview":
                root = tasks.workspace
                if root is None:
                    raise DesiideError(INVALID_PARAMS, "no folder is open: open one first")
                models = available_models(catalog(await self._sources()))
                state = await preview_state(str(p.pack), root, models=models)  # type: ignore[arg-type]
                return {"pack": str(p.pack), "state": state}
            case _:
                raise DesiideError(NOT_IMPLEMENTED, f"{method} is not implemented")

    async def _config_update(self, params: DesiideConfig) -> dict[str, Any]:
        """``config.update``: a full snapshot of the editor's settings, validated by the
        connection (the one validation); refs only, kept 0600."""
        config = DesiideSettings.from_config(params)
        await asyncio.to_thread(save_config, self._home, config)
        self.config = config
        self._apply(config)
        logger.info(
            "settings updated: %d models, judge %s, strict %s",
            len(config.models),
            "on" if config.jev is not None else "off",
            config.gating.strict,
        )
        return {"ok": True}

    def _apply(self, config: DesiideSettings) -> None:
        """What the settings change for tasks started from now on (strict mode, the judge)."""
        self._tasks.strict = config.gating.strict
        judged = config.jev is not None and config.jev.risk_gate
        self._tasks.judge = self._judge_risk if judged else None

    async def _judge_risk(self, tool: str, args: dict[str, Any]) -> tuple[bool, tuple[str, ...]]:
        """The judge (``risk_gate@1``) on a call the rules allow: (raise it?, its labels).

        The state is metadata only (the pack's rules): the tool, the command line, the paths
        and whether they are sensitive, the branch. Raises :class:`JevError` (or
        :class:`SecretNotSet`) when the judge cannot answer; the orchestrator then keeps the call
        for the user.
        """
        root = self._tasks.workspace
        paths = call_paths(tool, args)
        command = args.get("command") if tool == "run_command" else None
        files = args.get("files") if tool == "propose_edit" else None
        state = build_risk_gate(
            action_type=tool,
            paths=paths,
            branch=await current_branch(root) if root is not None else "unknown",
            env=detect_env(os.environ),
            has_pending_migrations=has_pending_migrations(paths),
            command=command if isinstance(command, str) else None,
            edit_file_count=len(files) if isinstance(files, list) else None,
        )
        judgement = await JevClient(self.config.jev, self._secrets).judge("risk_gate@1", state)
        verdict = judgement.result if isinstance(judgement.result, NoulResult) else None
        outcome, reasons = combine_with_reasons("auto", (), verdict)
        return outcome == "confirm", reasons

    async def _replay_judge(self, replayed: dict[str, Any]) -> dict[str, Any]:
        """``decisions.replay``'s judge part: the judge's verdict today on the recorded call of
        an editor tool (``jev``), or why there is none (``jevError``)."""
        call = replayed.pop("call", None)
        if self.config.jev is None:
            return {**replayed, "jevError": "no judge is configured (desiide.jev)"}
        tool = editor_tool(str(call.get("tool", ""))) if isinstance(call, dict) else None
        args = call.get("input") if isinstance(call, dict) else None
        if tool is None or not isinstance(args, dict):
            return {**replayed, "jevError": "the judge only judges the editor's tools"}
        started = time.monotonic()
        try:
            raised, reasons = await _with_secrets(self._judge_risk(tool, args))
        except JevError as exc:
            return {**replayed, "jevError": f"{exc.kind}: {exc.message}"}
        run = {
            "outcome": "confirm" if raised else "auto",
            "reasons": list(reasons),
            "latencyMs": int((time.monotonic() - started) * 1000),
        }
        return {**replayed, "jev": run}

    async def _sources(self) -> ModelSources:
        profiles = await asyncio.to_thread(read_profiles, self._home)
        return ModelSources(self.config, profiles, CLAUDE_CODE_MODELS)


PREFERENCE_MODELS: Final = {"cheap": "haiku", "best": "opus"}
"""Claude Code's model for a task's ``preference`` when no role names one (``balanced`` and none:
Claude Code's own default)."""


def task_model(
    config: DesiideSettings, kind: str, preference: object
) -> tuple[str | None, str | None]:
    """The model a task runs with: (the ``--model`` value or None, why none serves it or None).

    The role of the task's kind (``roles.ask`` / ``roles.edit`` / ``roles.fix``), else
    ``roles.default``, names a model of ``models.list``. Claude Code runs every task, so the
    model must be one of its own (``claude:<alias>``); a role naming another model (an Ollama
    or OpenAI-compatible one) cannot serve a task: ``model_unavailable``, with the settings hint.
    Without a role, the ``preference`` picks (:data:`PREFERENCE_MODELS`).
    """
    chosen = config.role(kind) or config.role("default")
    if chosen is None:
        wanted = str(preference.value) if hasattr(preference, "value") else preference
        return PREFERENCE_MODELS.get(str(wanted)) if wanted is not None else None, None
    if chosen.startswith(AGENT_PREFIX):
        return chosen.removeprefix(AGENT_PREFIX), None
    return None, (
        f"The role for {kind} tasks names the model {chosen!r}, which Claude Code cannot run: "
        "set desiide.roles to a claude:* model (see models.list) or clear the role."
    )


CLAUDE_CODE_MODELS: Final = (
    AgentModel("sonnet", "Claude Sonnet (Claude Code)"),
    AgentModel("opus", "Claude Opus (Claude Code)"),
    AgentModel("haiku", "Claude Haiku (Claude Code)"),
)
"""The model aliases Claude Code's ``--model`` accepts (it maps them to the current models)."""


async def _with_secrets(call: Awaitable[T]) -> T:
    """`call`, with a secret the editor has not set answered as ``SecretMissing``."""
    try:
        return await call
    except SecretNotSet as exc:
        raise DesiideError(
            SECRET_MISSING,
            f"{exc.ref} is not set in the editor: set it in the Desiide settings",
        ) from None


def read_profiles(home: Path) -> tuple[ProviderProfile, ...]:
    """The bridge's provider profiles (read-only), as the models catalog lists them."""
    if not (home / "bridge.db").exists():
        return ()
    try:
        with open_readonly(home) as db:
            if not db.has_table("provider_profiles"):
                return ()
            rows = db.fetchall("SELECT id, record FROM provider_profiles ORDER BY id")
    except StoreError:
        logger.warning("! the provider profiles could not be read", exc_info=True)
        return ()
    profiles: list[ProviderProfile] = []
    for profile_id, text in rows:
        try:
            record = json.loads(text)
        except ValueError:
            continue
        profile = profile_from_record(str(profile_id), record) if isinstance(record, dict) else None
        if profile is not None:
            profiles.append(profile)
    return tuple(profiles)
