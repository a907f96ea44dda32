"""The agent's first prompt for a task, and the follow-up after failing checks.

The prompt is the only place the model learns what an editor task is: it runs with the five
Desiide tools and none of its own, it cannot write files (the user reviews a ``propose_edit`` and
applies it, ADR-004), and a refused call is an answer, not a glitch to retry. Each kind adds its
job: ``ask`` answers and changes nothing, ``edit`` proposes the change, ``fix`` proposes edits
until the project's checks pass, which the orchestrator runs after each turn.

The editor's ``context`` (``TaskContext``: ``files``, ``selection``, ``notes``) is written out
under its own heading, so the model can tell it from the instruction; paths only — the agent
reads the files itself, through the gate. Anything else the extension sends there is shown as
JSON.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from typing import Final

from bridge.desiide.lifecycle.types import TaskKind

__all__ = ["CHECK_OUTPUT_TAIL", "checks_failed_text", "task_prompt"]

CHECK_OUTPUT_TAIL: Final = 6000
"""Characters of the checks' output handed back to the model (the tail: errors come last)."""

_TOOL_HELP: Final = {
    "read_file": "read_file{path, startLine?, endLine?}: a file's text",
    "list_files": "list_files{path?, glob?}: the files under a directory",
    "search": "search{query, path?, glob?, regex?}: matching lines, as path:line:text",
    "propose_edit": (
        "propose_edit{summary, files: [{path, content}]}: propose new full contents "
        "(content null deletes the file); the user reviews and applies them"
    ),
    "run_command": "run_command{command, timeoutMs?}: run a shell command in the workspace",
}

_RULES: Final = (
    "Use only the tools listed above; you have no other way to read or change the workspace.",
    "Paths are relative to the workspace root, with forward slashes (src/app.py). Absolute "
    "paths and .. are refused.",
    "Some calls need the user's approval. A call that comes back blocked or rejected was "
    "refused on purpose: read the reason, do not repeat the same call, take another way or "
    "explain.",
)
_EDIT_RULE: Final = (
    "You cannot write files yourself. A propose_edit is reviewed by the user, who applies each "
    "file or rejects it; its result tells you, per file, whether it was applied, rejected (with "
    "the reason) or stale (the file changed meanwhile: read it again before proposing it again)."
)

_JOBS: Final = {
    TaskKind.ASK: (
        "Answer the user's question. This task is read-only: read and search as much as you "
        "need, but do not change anything and do not propose edits. End with the answer."
    ),
    TaskKind.EDIT: (
        "Make the change the user asks for by proposing edits with propose_edit (one proposal "
        "may hold several files). Read the files first; keep the change focused. End with a "
        "short summary of what you proposed and what the user should check."
    ),
    TaskKind.FIX: (
        "Fix the problem by proposing edits with propose_edit until the project's checks pass. "
        "When you end your turn the orchestrator runs the checks; if they fail you get their "
        "output and continue. End your turn when you believe they pass."
    ),
}


def _command_text(commands: Sequence[Sequence[str]]) -> str:
    return ", ".join(shlex.join(command) for command in commands)


def _context_text(context: object) -> str:
    """``TaskContext`` as lines (its known fields), anything else as JSON; "" when empty."""
    if context is None or context == "" or context == {} or context == []:
        return ""
    if isinstance(context, str):
        return context.strip()
    if not isinstance(context, Mapping) or not set(context) <= {"files", "selection", "notes"}:
        return json.dumps(context, ensure_ascii=False, indent=2, default=str)
    lines: list[str] = []
    files = context.get("files")
    if isinstance(files, list) and files:
        lines.append("Files the user points at: " + ", ".join(str(f) for f in files))
    selection = context.get("selection")
    if isinstance(selection, Mapping) and selection.get("path"):
        start, end = selection.get("startLine"), selection.get("endLine")
        lines.append(f"The user's selection: {selection['path']}, lines {start}-{end}")
    notes = context.get("notes")
    if isinstance(notes, str) and notes.strip():
        lines.append(f"Notes: {notes.strip()}")
    return "\n".join(lines)


def task_prompt(
    kind: TaskKind,
    instruction: str,
    context: object,
    allowed_tools: Sequence[str],
    max_tool_calls: int,
    check_commands: Sequence[Sequence[str]] = (),
) -> str:
    """The first prompt of a task's session.

    Args:
        kind: the task's kind.
        instruction: the user's words, as they wrote them.
        context: the editor's ``TaskInput.context`` (None when absent).
        allowed_tools: the tools the task may call (the others are refused as
            ``tool_not_allowed``).
        max_tool_calls: the tool-call budget.
        check_commands: the success checks the orchestrator runs after each turn.
    """
    parts = [
        "You are working on a task from the user's code editor, in the workspace that is your "
        "current directory.",
        f"Your job: {_JOBS[kind]}",
    ]
    if check_commands:
        parts.append(f"The checks: {_command_text(check_commands)}.")
    parts.append(f"The user's instruction:\n{instruction.strip()}")
    if context_text := _context_text(context):
        parts.append(f"Context from the editor:\n{context_text}")
    tools = "\n".join(f"- {_TOOL_HELP.get(tool, tool)}" for tool in allowed_tools)
    parts.append(f"Your tools:\n{tools}" if tools else "You have no tools for this task.")
    rules = [*_RULES, *([_EDIT_RULE] if "propose_edit" in allowed_tools else [])]
    rules.append(f"You have at most {max_tool_calls} tool calls for this task.")
    parts.append("Rules:\n" + "\n".join(f"- {rule}" for rule in rules))
    return "\n\n".join(parts)


def checks_failed_text(commands: Sequence[Sequence[str]], output: str) -> str:
    """The follow-up turn after failing checks: which ones, and the tail of their output."""
    tail = output[-CHECK_OUTPUT_TAIL:]
    cut = "(output cut: this is its end)\n" if len(output) > CHECK_OUTPUT_TAIL else ""
    return (
        f"The checks failed ({_command_text(commands)}):\n\n{cut}{tail.rstrip()}\n\n"
        "Find the cause, propose the fix with propose_edit, and end your turn when you believe "
        "the checks pass."
    )
