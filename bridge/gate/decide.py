"""The gate's entry point: labels for a tool call, then the outcome the mode allows.

See the package docstring for the decision table.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass

from bridge.gate.context import BACKGROUND, SECRET, UNPARSABLE, read_label, write_label
from bridge.gate.history import LOOP_THRESHOLD
from bridge.gate.labels import DENY_PREFIX, LOOP_LABEL, GateDecision, Outcome, order_labels
from bridge.gate.paths import Target, Workspace, normalise, reaches_hidden
from bridge.gate.shell.check import check_shell

__all__ = [
    "ACCEPT_EDITS_TOOLS",
    "AUTO_ALLOW_MODES",
    "FILE_READ_TOOLS",
    "FILE_WRITE_TOOLS",
    "PLAN_SAFE_TOOLS",
    "GateContext",
    "evaluate",
]

FILE_WRITE_TOOLS: Mapping[str, str] = {
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}
"""File-modifying tools and the input key naming their file."""

FILE_READ_TOOLS: Mapping[str, tuple[str, ...]] = {
    "Read": ("file_path",),
    "NotebookRead": ("notebook_path",),
    "LS": ("path",),
    "Glob": ("path", "pattern"),
    "Grep": ("path",),
}
"""Reading tools and the input keys naming what they read (a missing key means the cwd)."""

PLAN_SAFE_TOOLS = frozenset(
    {"Read", "NotebookRead", "LS", "Glob", "Grep", "WebFetch", "WebSearch", "TodoWrite",
     "TodoRead", "ToolSearch", "ListAgents", "BashOutput", "TaskOutput", "Task", "Agent",
     "AskUserQuestion", "EnterPlanMode", "ExitPlanMode"}
)  # fmt: skip
"""Tools that change nothing on disk themselves; the only ones plan mode auto-allows.
(A sub-agent's own tool calls come through the gate one by one.)"""

AUTO_ALLOW_MODES = frozenset({"default", "bypassPermissions"})
"""Modes that auto-allow every call without labels, as the reference bridge does in ``default``
(``bypassPermissions`` is coerced to ``default`` by the bridge; treated the same here in case it
slips through)."""

ACCEPT_EDITS_TOOLS = PLAN_SAFE_TOOLS | frozenset(FILE_WRITE_TOOLS)
"""The tools ``acceptEdits`` auto-allows without labels: the reads plan mode allows, and the file
edits (without a label, an edit is inside the workspace). A command (Bash) or any other tool that
can change something (MCP tools, …) is asked: approving a plan with key 1 switches to
``acceptEdits``, and that must not make every command run without a card."""

_GLOB_CHARS = "*?[{"

_REQUIRED_READ_KEYS = frozenset({"file_path", "notebook_path"})
"""Read keys with no default: a call without one names nothing the gate can check."""


@dataclass(frozen=True, slots=True)
class GateContext:
    """The session facts a decision depends on.

    Attributes:
        mode: the permission mode: ``default``, ``acceptEdits`` or ``plan`` (any other value
            but ``bypassPermissions`` is treated as the strictest: every call is at least
            ``ask``).
        cwd: the session's folder, the directory it was created in (absolute): writes are
            judged against it, reads against the roots.
        roots: the workspace roots (absolute); the session's files live under them.
        home: the user's home directory (absolute).
        secrets: the hidden paths (absolute): denied to every tool in every mode, and never
            workspace whatever the roots (``bridge.sandbox.hidden`` makes the list).

    Raises:
        ValueError: a path is not absolute, or there are no roots.
    """

    mode: str
    cwd: str
    roots: tuple[str, ...]
    home: str
    secrets: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        roots = tuple(self.roots)
        secrets = tuple(self.secrets)
        if not roots:
            raise ValueError("GateContext needs at least one workspace root")
        for what, path in (
            ("cwd", self.cwd),
            ("home", self.home),
            *(("root", r) for r in roots),
            *(("secret", p) for p in secrets),
        ):
            if not isinstance(path, str) or not path.startswith("/") or "\x00" in path:
                raise ValueError(f"GateContext {what} must be an absolute path")
        object.__setattr__(self, "cwd", normalise(self.cwd))
        object.__setattr__(self, "home", normalise(self.home))
        object.__setattr__(self, "roots", tuple(normalise(root) for root in roots))
        object.__setattr__(self, "secrets", tuple(normalise(secret) for secret in secrets))

    @property
    def workspace(self) -> Workspace:
        """The roots, the session's folder, the home and the hidden paths for the path checks."""
        return Workspace(self.roots, self.home, folder=self.cwd, secrets=self.secrets)


def evaluate(
    tool_name: str,
    tool_input: Mapping[str, object],
    context: GateContext,
    *,
    repeat_count: int = 1,
) -> GateDecision:
    """Decide on one ``can_use_tool`` call. Pure; never raises for any tool input.

    Args:
        tool_name: the tool (``Bash``, ``Write``, ``mcp__x__y``, …).
        tool_input: the tool's input as the CLI sent it.
        context: the session's mode, cwd, workspace roots and home.
        repeat_count: how many times in a row this exact call has been seen, this one included
            (:meth:`CallHistory.record`); from :data:`LOOP_THRESHOLD` on it is ``loop_detected``.

    Returns:
        ``block`` if a deny rule hit (in every mode); ``ask`` if a floor or the loop check hit,
        or the mode does not auto-allow the tool (``plan``: only reads; ``acceptEdits``: reads
        and workspace edits; ``default``: everything); ``allow`` otherwise.
    """
    fields: Mapping[str, object] = tool_input if isinstance(tool_input, Mapping) else {}
    labels = set(_labels(tool_name, fields, context))
    if repeat_count >= LOOP_THRESHOLD:
        labels.add(LOOP_LABEL)
    reasons = order_labels(labels)
    if any(label.startswith(DENY_PREFIX) for label in reasons):
        return GateDecision(Outcome.BLOCK, reasons)
    if reasons:
        return GateDecision(Outcome.ASK, reasons)
    if _mode_allows(context.mode, tool_name):
        return GateDecision(Outcome.ALLOW, ())
    return GateDecision(Outcome.ASK, ())


def _mode_allows(mode: str, tool_name: str) -> bool:
    """The last rows of the decision table: does the mode auto-allow a call without labels?"""
    if mode in AUTO_ALLOW_MODES:
        return True
    if mode == "acceptEdits":
        return tool_name in ACCEPT_EDITS_TOOLS
    if mode == "plan":
        return tool_name in PLAN_SAFE_TOOLS
    return False  # any other mode: the strictest


def _labels(tool_name: str, fields: Mapping[str, object], context: GateContext) -> set[str]:
    workspace = context.workspace
    if tool_name == "Bash":
        command = fields.get("command")
        labels = (
            set(check_shell(command, context.cwd, workspace))
            if isinstance(command, str)
            else {UNPARSABLE}
        )
        if fields.get("run_in_background") is True:
            labels.add(BACKGROUND)
        return labels
    if tool_name in FILE_WRITE_TOOLS:
        path = fields.get(FILE_WRITE_TOOLS[tool_name])
        target = _tool_target(path, context.home, context.cwd, pattern=False)
        label = write_label(target, workspace)
        return {label} if label is not None else set()
    if tool_name in FILE_READ_TOOLS:
        labels = set()
        base: str | None = context.cwd
        for key in FILE_READ_TOOLS[tool_name]:
            if key not in fields:
                if key in _REQUIRED_READ_KEYS:
                    labels.add(UNPARSABLE)  # what it reads cannot be told: never an allow
                continue  # the tool's default: the cwd
            value = fields[key]
            if key == "pattern" and _pattern_hidden(value, context.home, base, workspace):
                labels.add(SECRET)
            target = _tool_target(value, context.home, base, pattern=key == "pattern")
            if key == "path":
                base = target.path if target is not None else None  # Glob's pattern is below it
            label = read_label(target, workspace)
            if label is not None:
                labels.add(label)
        return labels
    return set()


def _tool_target(value: object, home: str, base: str | None, *, pattern: bool) -> Target | None:
    """Where a file tool's path points (relative to ``base``); None when it cannot be told."""
    if not isinstance(value, str) or not value or "\x00" in value:
        return None
    if value == "~" or value.startswith("~/"):
        value = home + value[1:]
    elif value.startswith("~"):
        return None  # ~user
    subtree = False
    if pattern:
        cut = min((value.find(c) for c in _GLOB_CHARS if c in value), default=-1)
        if cut >= 0:
            value = value[: value.rfind("/", 0, cut) + 1]
            subtree = True
    if not value.startswith("/"):
        if base is None:
            return None
        value = posixpath.join(base, value) if value else base
    return Target(normalise(value), subtree)


def _pattern_hidden(value: object, home: str, base: str | None, workspace: Workspace) -> bool:
    """A Glob pattern that can match a hidden path (``~/.ss*/*``); ``**`` alone is an ancestor."""
    if not isinstance(value, str) or "\x00" in value:
        return False
    if value == "~" or value.startswith("~/"):
        value = home + value[1:]
    pieces = [("glob" if char in _GLOB_CHARS else "lit", char) for char in value]
    return reaches_hidden(pieces, base, workspace.secrets)
