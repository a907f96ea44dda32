"""One task's workspace tools: dispatch by name, the task's allowed set, one failure policy.

:class:`WorkspaceTools` is what a transport (the Claude driver's in-process MCP server) calls. It
runs a tool only after the bridge's gate let the call through (the agent asks permission first);
it checks the task's allowed tools once more all the same, so a call the gate should have refused
(``tool_not_allowed``) cannot run here by mistake.

The failure policy, in one place (:meth:`WorkspaceTools.call`): a :class:`~.results.ToolError` is
the model's to read (an error result); any other exception is a bug here, logged with its trace
and answered with ``internal_error`` and no detail (the text could hold a host path or worse);
cancellation goes through (the tools clean up after themselves). Blocking file work runs in a
thread, so a slow disk never holds up the session host's event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping
from pathlib import Path
from typing import Final

from bridge.sandbox import SandboxPolicy

from .catalog import (
    LIST_FILES,
    PROPOSE_EDIT,
    READ_FILE,
    RUN_COMMAND,
    SEARCH,
    TOOL_NAMES,
    TOOL_SPECS,
    ToolSpec,
)
from .command import run_command
from .files import propose_edit, read_file
from .paths import Workspace
from .results import ToolError, ToolResult
from .ripgrep import list_files, search

__all__ = ["INTERNAL_ERROR", "TOOL_NOT_ALLOWED", "UNKNOWN_TOOL", "WorkspaceTools"]

logger = logging.getLogger(__name__)

TOOL_NOT_ALLOWED: Final = "tool_not_allowed"
UNKNOWN_TOOL: Final = "unknown_tool"
INTERNAL_ERROR: Final = "internal_error"

_Tool = Callable[[Mapping[str, object]], Awaitable[ToolResult]]


class WorkspaceTools:
    """The five tools, rooted at one workspace (see the module docstring).

    Args:
        root: the workspace root (absolute, an existing directory).
        env: the environment of ``run_command`` and ripgrep (its ``PATH`` finds ``rg``).
        allowed: the tools this task may use (None: all five).
        commands_dir: where running commands are recorded, so that a killed host's leftovers
            can be reaped (:mod:`.leftovers`); None: not recorded.
        sandbox: the session's sandbox, in which ``run_command`` runs (None: unconfined).

    Raises:
        ValueError: a bad root, or an unknown tool name in `allowed`.
    """

    def __init__(
        self,
        root: str | Path,
        env: Mapping[str, str],
        allowed: Collection[str] | None = None,
        commands_dir: Path | None = None,
        sandbox: SandboxPolicy | None = None,
    ) -> None:
        self.workspace = Workspace(root)
        self._sandbox = sandbox
        self._commands = commands_dir
        self._env = dict(env)
        names = set(TOOL_NAMES) if allowed is None else set(allowed)
        unknown = sorted(names - set(TOOL_NAMES))
        if unknown:
            raise ValueError(f"unknown workspace tool {unknown[0][:40]!r}")
        self.allowed: frozenset[str] = frozenset(names)
        self._tools: dict[str, _Tool] = {
            READ_FILE: self._read_file,
            LIST_FILES: self._list_files,
            SEARCH: self._search,
            PROPOSE_EDIT: self._propose_edit,
            RUN_COMMAND: self._run_command,
        }

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        """Every tool, as listed to the model (all five, whatever is allowed)."""
        return TOOL_SPECS

    async def call(self, name: str, arguments: Mapping[str, object]) -> ToolResult:
        """Run one tool call; never raises but for cancellation (see the module docstring)."""
        tool = self._tools.get(name)
        if tool is None:
            return ToolError(
                UNKNOWN_TOOL,
                f"there is no tool {name[:60]!r}; the tools are {', '.join(TOOL_NAMES)}",
            ).result()
        if name not in self.allowed:
            return ToolError(TOOL_NOT_ALLOWED, f"{name} is not among this task's tools").result()
        try:
            return await tool(arguments)
        except ToolError as exc:
            return exc.result()
        except Exception:
            logger.exception("x the %s tool failed", name)
            return ToolError(
                INTERNAL_ERROR, f"{name} failed on the bridge's side; nothing more is known"
            ).result()

    async def _read_file(self, arguments: Mapping[str, object]) -> ToolResult:
        return await asyncio.to_thread(read_file, self.workspace, arguments)

    async def _list_files(self, arguments: Mapping[str, object]) -> ToolResult:
        return await list_files(self.workspace, self._env, arguments)

    async def _search(self, arguments: Mapping[str, object]) -> ToolResult:
        return await search(self.workspace, self._env, arguments)

    async def _propose_edit(self, arguments: Mapping[str, object]) -> ToolResult:
        return await asyncio.to_thread(propose_edit, self.workspace, arguments)

    async def _run_command(self, arguments: Mapping[str, object]) -> ToolResult:
        return await run_command(
            self.workspace, self._env, arguments, self._commands, self._sandbox
        )
