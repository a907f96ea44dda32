"""Tasks and the records around them: `TaskInput` (strict) and the result records (tolerant).

`TaskInput` is ``task.create``'s params. Where the seed is silent this module decides, and the
docstrings say so. The limits are there so that one request cannot ask for an unbounded amount of
work or memory: they sit far above any real use and below what would hurt the machine.

The records (`TaskSummary`, `ToolCall`, `ToolResult`, `EditProposal`, `FileMeta`,
`DecisionRecord`, `ModelInfo`, `Usage`) go out in results and ``task.event`` payloads; they are
`WireModel` s, built by the orchestrator and dumped with ``model_dump(mode="json",
exclude_none=True)``.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, TypeAlias

from pydantic import AfterValidator, Field, StringConstraints, model_validator
from pydantic_core import PydanticCustomError

from bridge.desiide.schema.base import (
    DEFAULT_ALLOWED_TOOLS,
    CostTier,
    Locality,
    Preference,
    RequestModel,
    TaskKind,
    TaskState,
    ToolErrorKind,
    ToolName,
    WireModel,
    WorkspacePath,
)
from bridge.protocol.primitives import Bool, Int, NonNegativeInt

__all__ = [
    "DEFAULT_BUDGET",
    "MAX_CONTEXT_FILES",
    "MAX_INSTRUCTION_CHARS",
    "MAX_NOTES_CHARS",
    "Budget",
    "DecisionRecord",
    "EditFile",
    "EditProposal",
    "FileMeta",
    "ModelInfo",
    "Selection",
    "SuccessCriteria",
    "TaskContext",
    "TaskInput",
    "TaskSummary",
    "ToolCall",
    "ToolError",
    "ToolResult",
    "Usage",
]

MAX_INSTRUCTION_CHARS: Final = 100_000
MAX_NOTES_CHARS: Final = 20_000
MAX_CONTEXT_FILES: Final = 500


def _not_blank(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError("blank", "must not be empty or only whitespace")
    return value


Instruction: TypeAlias = Annotated[
    str,
    StringConstraints(strict=True, min_length=1, max_length=MAX_INSTRUCTION_CHARS),
    AfterValidator(_not_blank),
]
Notes: TypeAlias = Annotated[str, StringConstraints(strict=True, max_length=MAX_NOTES_CHARS)]
WorkflowName: TypeAlias = Annotated[
    str, StringConstraints(strict=True, pattern=r"^[A-Za-z0-9_.:@-]{1,64}$")
]
Line: TypeAlias = Annotated[Int, Field(ge=1, le=10_000_000)]


class Selection(RequestModel):
    """The editor's selection: a file and an inclusive, 1-based line range."""

    path: WorkspacePath
    startLine: Line
    endLine: Line

    @model_validator(mode="after")
    def _ordered(self) -> Selection:
        if self.endLine < self.startLine:
            raise PydanticCustomError("line_range", "endLine must not come before startLine")
        return self


class TaskContext(RequestModel):
    """What the user pointed at. Paths only: the agent reads the files itself, through the gate.

    Attributes:
        files: files the user attached (at most `MAX_CONTEXT_FILES`).
        selection: the active selection, if any.
        notes: free text the extension adds (at most `MAX_NOTES_CHARS` characters).
    """

    files: Annotated[list[WorkspacePath], Field(max_length=MAX_CONTEXT_FILES)] | None = None
    selection: Selection | None = None
    notes: Notes | None = None


class SuccessCriteria(RequestModel):
    """Which checks ``verifying`` runs (found from the project: Makefile, package.json, pyproject).

    Asking for one the project has no command for fails the task with ``no_check_command``.
    """

    testsPass: Bool | None = None
    lintClean: Bool | None = None


class Budget(RequestModel):
    """Limits of one task; absent fields take the seed's defaults.

    Upper bounds are ours: a day of wall clock, a thousand tool calls, a hundred verify→fix
    rounds and ten million tokens are beyond any task an editor starts, so a larger value is a
    bug in the caller rather than a wish.

    Attributes:
        maxIterations: verify→fix rounds for a ``fix`` task (default 8, 1–100).
        maxToolCalls: tool calls, blocked ones included (default 40, 1–1000).
        maxTokens: input + output tokens over the whole task (default 200,000, 1–10,000,000).
        wallClockMs: running time, pauses on the user excluded (default 600,000 = 10 min;
            1,000–86,400,000).
    """

    maxIterations: Annotated[Int, Field(ge=1, le=100)] = 8
    maxToolCalls: Annotated[Int, Field(ge=1, le=1_000)] = 40
    maxTokens: Annotated[Int, Field(ge=1, le=10_000_000)] = 200_000
    wallClockMs: Annotated[Int, Field(ge=1_000, le=86_400_000)] = 600_000


DEFAULT_BUDGET: Final = Budget()


def _unique_tools(tools: list[ToolName]) -> list[ToolName]:
    if len(set(tools)) != len(tools):
        raise PydanticCustomError("duplicate_tool", "must not name a tool twice")
    return tools


def _default_tools() -> list[ToolName]:
    return list(DEFAULT_ALLOWED_TOOLS)


class TaskInput(RequestModel):
    """``task.create``'s params: what the user asks for.

    Attributes:
        kind: ask, edit or fix (`TaskKind`).
        instruction: the request in the user's words (1–100,000 characters, not blank).
        context: files and selection the user pointed at.
        allowedTools: the tools the agent may use; default ``read_file, list_files, search,
            propose_edit``. All five are shown to the model; a call to another one is blocked
            with ``tool_not_allowed``. An empty list is allowed (the agent can only answer).
        success: the checks a ``fix`` task must pass.
        budget: the task's limits (absent fields take the defaults).
        preference: cheap, balanced or best: steers which model the task gets.
        workflowOverride: a workflow name that replaces the JEV's ``workflow_select`` choice
            (``[A-Za-z0-9_.:@-]``, at most 64).
    """

    kind: TaskKind
    instruction: Instruction
    context: TaskContext | None = None
    allowedTools: Annotated[list[ToolName], AfterValidator(_unique_tools)] = Field(
        default_factory=_default_tools
    )
    success: SuccessCriteria | None = None
    budget: Budget = DEFAULT_BUDGET
    preference: Preference | None = None
    workflowOverride: WorkflowName | None = None


class TaskSummary(WireModel):
    """A task as ``task.create`` and ``task.list`` return it.

    Attributes:
        id: ``task-<32 hex>``; the same id names the daemon session phones see.
        kind, state: see `TaskKind`, `TaskState`.
        createdAt, updatedAt: ISO 8601 UTC.
        instruction: the instruction, possibly shortened for the list.
        failureReason: set when ``state`` is ``failed``; one of ``ALL_FAILURE_REASONS``.
    """

    id: str
    kind: TaskKind
    state: TaskState
    createdAt: str
    updatedAt: str | None = None
    instruction: str | None = None
    failureReason: str | None = None


class ToolCall(WireModel):
    """A call the agent made, in the Desiide tools' words (``read_file``, not
    ``mcp__desiide__read_file``).

    Attributes:
        id: the call's id (unique within the task); `ToolResult.callId` refers to it.
        tool: the tool's name: one of `ToolName` for the agent's calls.
        args: the arguments as the model gave them (camelCase, see the tool contract).
    """

    id: str
    tool: str
    args: dict[str, Any]


class ToolError(WireModel):
    """Why a call has no result: `ToolErrorKind`, a message, and the gate's reason labels."""

    kind: ToolErrorKind
    message: str
    reasons: list[str] | None = None


class ToolResult(WireModel):
    """How a call ended: ``ok`` with the ``output`` the model read, or an ``error``."""

    callId: str
    ok: bool
    output: str | None = None
    error: ToolError | None = None


class EditFile(WireModel):
    """One file of a proposal: the full new text, or ``content: null`` to delete the file."""

    __keep_null__ = frozenset({"content"})

    path: WorkspacePath
    content: str | None


class EditProposal(WireModel):
    """A ``propose_edit`` call as the extension reviews it (ADR-004: the extension applies it).

    Attributes:
        id: the proposal's id; ``edits.report``'s ``proposalId``.
        taskId: the task that proposed it.
        summary: the model's one-line description.
        files: the files, each at most once.
    """

    id: str
    taskId: str
    summary: str
    files: list[EditFile]


class FileMeta(WireModel):
    """What the review card shows about a file besides its content: metadata only.

    Attributes:
        path: workspace-relative.
        sensitive: matches a sensitive pattern (``.env``, keys, credentials, lockfiles, CI).
        bytesBefore: the current size (absent for a new file).
        bytesAfter: the proposed size (absent for a deletion).
        created: the file does not exist yet.
        deleted: the proposal deletes it.
    """

    path: WorkspacePath
    sensitive: bool
    bytesBefore: NonNegativeInt | None = None
    bytesAfter: NonNegativeInt | None = None
    created: bool | None = None
    deleted: bool | None = None


class DecisionRecord(WireModel):
    """One row of the gate's audit log (the ``decisions`` table phones' cards write too).

    Attributes:
        id: the row id (an integer: the store's).
        at: ISO 8601 UTC.
        taskId: the task (session) it belongs to; absent for a decision outside any task.
        tool: the tool as the log names it.
        outcome: the recorded outcome, as the log holds it (the gate's ``allow``/``ask``/
            ``block``, an answer such as ``approved``/``rejected``, or ``withdrawn``); kept as
            text so that rows of a newer gate still list.
        reasons: the reason labels.
        detail: a short text (never the tool's input).
        pack: the JEV pack that judged, for a JEV decision.
    """

    id: int
    at: str
    taskId: str | None = None
    tool: str
    outcome: str
    reasons: list[str]
    detail: str | None = None
    pack: str | None = None


class ModelInfo(WireModel):
    """A model the orchestrator can use or found (``models.list``).

    Attributes:
        id: the id roles and ``models.test`` use (``claude:…``, ``profile:…``, ``ollama:…``, or a
            configured model's id).
        label: a display name.
        provider: where it comes from (``anthropic``, ``openai``, ``ollama``, or an agent such
            as ``claude``); text, since the sources may grow.
        contextTokens: its context window, when known.
        locality: local or remote.
        costTier: low, medium or high, when known.
    """

    id: str
    label: str | None = None
    provider: str
    contextTokens: int | None = None
    locality: Locality | None = None
    costTier: CostTier | None = None


class Usage(WireModel):
    """Tokens one model turn used, and its cost when the provider says."""

    inputTokens: NonNegativeInt
    outputTokens: NonNegativeInt
    costUsd: Annotated[float, Field(ge=0)] | None = None
