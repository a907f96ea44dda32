"""The models Claude Code offers, for ``models-request`` (REFERENCE-BEHAVIOUR.md §1.13).

The CLI lists them in its answer to ``initialize`` (``models``: one object per choice, ``value``
being what ``--model`` / ``set_model`` accept and ``displayName`` its label). A live session has
that answer already (its ``Ready`` carries the list); without one, :func:`fetch_models` starts a
short-lived CLI, reads the answer and stops it (about half a second; no API request is made).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bridge.host.events import ModelChoice
from bridge.tasks import TaskSet

from .cli_process import CliOptions, CliProcess, build_argv, bundled_cli_path, cli_env, spawn_cli
from .cli_protocol import ControlProtocol

__all__ = ["fetch_models", "models_from_initialize"]

logger = logging.getLogger(__name__)


def models_from_initialize(info: Mapping[str, Any] | None) -> tuple[ModelChoice, ...]:
    """The ``models`` of an initialize answer (malformed and repeated items are skipped)."""
    raw = info.get("models") if info is not None else None
    models: list[ModelChoice] = []
    seen: set[str] = set()
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, Mapping):
            continue
        value = item.get("value")
        if not isinstance(value, str) or not value.strip() or value in seen:
            continue
        seen.add(value)
        label = item.get("displayName")
        models.append(ModelChoice(value, label if isinstance(label, str) else None))
    return tuple(models)


async def fetch_models(
    cwd: str | Path,
    *,
    env: Mapping[str, str],
    cli_path: str | Path | None = None,
    timeout: float = 60.0,
) -> list[ModelChoice]:
    """Ask a short-lived Claude Code process which models it offers.

    Args:
        cwd: where to run it (an existing directory; project settings there apply).
        env: the complete environment it must see.
        cli_path: the ``claude`` executable (the SDK's bundled one when None).
        timeout: seconds for start + answer.

    Returns:
        The models, or ``[]`` when the CLI could not be started or did not answer (logged;
        the caller then answers with the "no live session" error of §1.13).
    """
    path = str(cli_path) if cli_path is not None else str(bundled_cli_path() or "claude")
    argv = build_argv(path, CliOptions(mode="plan", permission_prompt=False))
    process: CliProcess | None = None
    tasks = TaskSet("Claude Code models probe", logger=logger)
    try:
        async with asyncio.timeout(timeout):
            process = await spawn_cli(argv, cli_env(env, str(cwd)), str(cwd), label="models")
            protocol = ControlProtocol(
                process.stdin, {}, lambda _: None, lambda *_: None, label="models"
            )
            tasks.spawn(protocol.read(process.stdout), "claude-models-read")
            try:
                info = await protocol.request({"subtype": "initialize", "hooks": None}, timeout)
            finally:
                await protocol.close()
        return list(models_from_initialize(info))
    except Exception as exc:  # missing, not executable, refused to start, hung, died
        logger.warning("! could not ask Claude Code for its models: %s", type(exc).__name__)
        return []
    finally:
        if process is not None:
            await process.stop()
        await tasks.close()
