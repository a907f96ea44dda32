"""The models Claude Code offers, for ``models-request`` (REFERENCE-BEHAVIOUR.md §1.13).

The CLI lists them in its answer to the SDK's ``initialize`` control request (``models``: one
object per choice, ``value`` being what ``--model`` / ``set_model`` accept and ``displayName`` its
label). A live session has that answer already (``ClaudeRunner.models()``); without one,
:func:`fetch_models` starts a short-lived CLI, reads the answer and stops it (about 0.4 s; no API
request is made).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient

from bridge.protocol import ModelEntry

from .environment import sdk_env

__all__ = ["fetch_models", "models_from_server_info"]

logger = logging.getLogger(__name__)


def models_from_server_info(info: Mapping[str, Any] | None) -> list[ModelEntry]:
    """The ``models`` of an initialize response as wire entries (malformed items are skipped)."""
    raw = info.get("models") if info is not None else None
    entries: list[ModelEntry] = []
    seen: set[str] = set()
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, dict):
            continue
        value = item.get("value")
        if not isinstance(value, str) or not value.strip() or value in seen:
            continue
        seen.add(value)
        label = item.get("displayName")
        entries.append(ModelEntry(id=value, label=label if isinstance(label, str) else None))
    return entries


async def fetch_models(
    cwd: Path,
    *,
    env: Mapping[str, str] | None = None,
    cli_path: str | Path | None = None,
    timeout: float = 60.0,
) -> list[ModelEntry]:
    """Ask a short-lived Claude Code process which models it offers.

    Args:
        cwd: where to run it (any existing directory; project settings there apply).
        env: the complete environment it must see (``os.environ`` when None).
        cli_path: the ``claude`` executable (the SDK's bundled one when None).
        timeout: seconds for start + answer + stop.

    Returns:
        The models, or ``[]`` when the CLI could not be started or did not answer (logged;
        the caller then answers with the "no live session" error of §1.13).
    """
    options = ClaudeAgentOptions(
        cwd=cwd,
        cli_path=cli_path,
        env=sdk_env(env) if env is not None else {},
        permission_mode="plan",
        system_prompt={"type": "preset", "preset": "claude_code"},
        setting_sources=["user", "project"],
        stderr=lambda line: logger.debug("models probe stderr: %s", line[:500]),
    )
    client = ClaudeSDKClient(options)
    try:
        async with asyncio.timeout(timeout):
            try:
                await client.connect()
                return models_from_server_info(await client.get_server_info())
            finally:
                await client.disconnect()
    except Exception as exc:  # the CLI is missing, refused to start, or hung
        logger.warning("! could not ask Claude Code for its models: %s", type(exc).__name__)
        return []
