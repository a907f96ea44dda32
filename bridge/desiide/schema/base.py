"""Foundations of the Desiide schema: the two model bases, the vocabularies, the error message.

Two bases, because the seed treats the two directions differently ("Requests are strict: unknown
params are rejected. Results and events are tolerant: unknown fields are stripped"):

- `RequestModel` — what the extension sends us: unknown keys refused (``extra="forbid"``),
  strings, integers and booleans strict (``"8"`` is not 8 and ``1`` is not true; integral floats
  such as ``8.0`` pass, as ``JSON.parse`` cannot tell them from ``8``). An optional field may be
  absent or ``null``; both mean "not given".
- `WireModel` — what we send (results, events) and read back (``secrets.get``'s result, tests'
  clients): unknown keys ignored. Build them with the model, dump them with
  ``model_dump(mode="json", exclude_none=True)``: ``None`` means absent, except for the fields a
  model lists in ``__keep_null__`` (a ``from: null``, a ``content: null`` that deletes a file),
  which are written as ``null`` even then.

Both are frozen, use the wire's camelCase names, and keep input values out of error texts
(``hide_input_in_errors``): a request may carry a secret, and `validation_message` builds the
``InvalidParams`` text from the error locations and messages only.

The closed vocabularies (task kinds, states, tools, failure reasons, reason labels) live here so
that every other module — and the ``DESIIDE.md`` test — reads them from one place.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, ClassVar, Final, TypeAlias

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    StringConstraints,
    ValidationError,
    model_serializer,
)
from pydantic_core import PydanticCustomError

from bridge.desiide.models.errors import ModelErrorKind
from bridge.desiide.paths import check_relative_path

__all__ = [
    "ALL_FAILURE_REASONS",
    "DEFAULT_ALLOWED_TOOLS",
    "MODEL_ERROR_PREFIX",
    "PROTOCOL_VERSION",
    "TASK_REASON_LABELS",
    "TERMINAL_STATES",
    "ApprovalScope",
    "CostTier",
    "EditStatus",
    "FailureReason",
    "GateOutcome",
    "Identifier",
    "Locality",
    "ModelErrorKind",
    "Preference",
    "RequestModel",
    "TaskKind",
    "TaskState",
    "ToolErrorKind",
    "ToolName",
    "WireModel",
    "WorkspacePath",
    "model_error_reason",
    "validation_message",
]

PROTOCOL_VERSION: Final = "1.0.0"
"""The Desiide protocol version this orchestrator speaks (the seed's ``PROTOCOL_VERSION``)."""

_MAX_ERRORS_SHOWN: Final = 3
_MAX_LOC_PART: Final = 64


class RequestModel(BaseModel):
    """Base of every request's params: strict, unknown keys refused (see the module docstring)."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        hide_input_in_errors=True,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


class WireModel(BaseModel):
    """Base of results, events and anything read back: tolerant, ``__keep_null__`` honoured."""

    model_config = ConfigDict(
        frozen=True,
        extra="ignore",
        hide_input_in_errors=True,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )

    __keep_null__: ClassVar[frozenset[str]] = frozenset()
    """Field names that are "required, nullable" on the wire: dumped as ``null`` when None, even
    under ``exclude_none``."""

    @model_serializer(mode="wrap")
    def _dump_keeping_nulls(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if not self.__keep_null__ or not isinstance(data, dict):
            return data
        # Rebuild in declaration order so that a restored null sits where the schema puts it.
        ordered: dict[str, Any] = {}
        for name, info in type(self).model_fields.items():
            key = info.serialization_alias or info.alias or name
            if key in data:
                ordered[key] = data[key]
            elif name in self.__keep_null__ and getattr(self, name) is None:
                ordered[key] = None
        return ordered


def _loc_text(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            piece = part if len(part) <= _MAX_LOC_PART else part[: _MAX_LOC_PART - 1] + "…"
            text += f".{piece}" if text else piece
    return text


def validation_message(exc: ValidationError) -> str:
    """The ``InvalidParams`` message for a failed validation: which fields, and what is wrong.

    Built from the error locations and pydantic's messages only, never from the input (which may
    hold an API key): ``"invalid params: budget.maxIterations: Input should be less than or equal
    to 100"``. At most three problems are listed, then how many more there are.
    """
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    parts: list[str] = []
    for error in errors[:_MAX_ERRORS_SHOWN]:
        where = _loc_text(tuple(error["loc"])) or "params"
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message = "unknown param"
        elif error["type"] == "missing":
            message = "required"
        parts.append(f"{where}: {message}")
    if len(errors) > _MAX_ERRORS_SHOWN:
        parts.append(f"and {len(errors) - _MAX_ERRORS_SHOWN} more")
    return "invalid params: " + "; ".join(parts or ["not valid"])


def _workspace_path(value: str) -> str:
    try:
        return check_relative_path(value)
    except ValueError as exc:
        raise PydanticCustomError("workspace_path", str(exc)) from None


WorkspacePath: TypeAlias = Annotated[str, AfterValidator(_workspace_path)]
"""A workspace-relative POSIX path (`bridge.desiide.paths.check_relative_path`), normalized.

Not ``Strict`` on purpose: a str field in pydantic's lax mode takes only strings from JSON
anyway, and the same type serves tolerant result models."""

Identifier: TypeAlias = Annotated[str, StringConstraints(strict=True, min_length=1, max_length=128)]
"""An id the orchestrator handed out (task, approval, proposal, model): 1–128 characters. Its
format is not checked here: an id that names nothing is ``TaskNotFound``/``ApprovalNotFound``,
which says more than ``InvalidParams``."""


class TaskKind(StrEnum):
    """What a task is for (the seed names the field without its values; the bridge fixes them)."""

    ASK = "ask"
    """Answer a question; read-only (``propose_edit`` and ``run_command`` are not given)."""
    EDIT = "edit"
    """Propose edits; the extension applies what the user accepts."""
    FIX = "fix"
    """Edit until the ``success`` checks (tests, lint) pass, within ``budget.maxIterations``."""


class TaskState(StrEnum):
    """Where a task is in its lifecycle (COR-2)."""

    QUEUED = "queued"
    """Waiting for one of the two run slots (FIFO)."""
    PLANNING = "planning"
    """Holding a slot; the agent session is starting and choosing its approach."""
    RUNNING = "running"
    """The agent works: model turns and tool calls."""
    AWAITING_APPROVAL = "awaiting_approval"
    """Waiting on the user: an ``approval_required`` card or an ``edit_proposed`` review. The
    wall-clock budget is paused."""
    VERIFYING = "verifying"
    """Running the project's test/lint commands that ``success`` asked for."""
    DONE = "done"
    """Finished successfully (terminal)."""
    FAILED = "failed"
    """Finished with a ``failureReason`` (terminal)."""
    CANCELLED = "cancelled"
    """Stopped by ``task.cancel`` or the orchestrator's shutdown (terminal)."""


TERMINAL_STATES: Final = frozenset({TaskState.DONE, TaskState.FAILED, TaskState.CANCELLED})
"""States a task never leaves."""


class ToolName(StrEnum):
    """The five tools a task's agent may be given (the plan's tool contract)."""

    READ_FILE = "read_file"
    LIST_FILES = "list_files"
    SEARCH = "search"
    PROPOSE_EDIT = "propose_edit"
    RUN_COMMAND = "run_command"


DEFAULT_ALLOWED_TOOLS: Final = (
    ToolName.READ_FILE,
    ToolName.LIST_FILES,
    ToolName.SEARCH,
    ToolName.PROPOSE_EDIT,
)
"""``allowedTools`` when absent: the read-only tools plus ``propose_edit`` (the seed's default)."""


class Preference(StrEnum):
    """The user's cost/quality preference (``TaskInput.preference``, JEV ``userPreference``)."""

    CHEAP = "cheap"
    BALANCED = "balanced"
    BEST = "best"


class Locality(StrEnum):
    """Where a model runs: on this machine (Ollama) or at a provider."""

    LOCAL = "local"
    REMOTE = "remote"


class CostTier(StrEnum):
    """A model's price class, coarse on purpose (the seed names ``costTier`` without values).

    Ordered by price per token; a local model is ``low``. The same three values as the settings'
    ``models[].costTier``.
    """

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class ApprovalScope(StrEnum):
    """How far a ``task.approve`` reaches."""

    ONCE = "once"
    """This call only."""
    TASK = "task"
    """This call and every later exact-match call (same tool, same args, key order ignored) of
    the same task: they go from confirm to auto. A block stays a block."""


class EditStatus(StrEnum):
    """What the extension did with one file of a proposal (``edits.report``)."""

    APPLIED = "applied"
    """Written as proposed."""
    REJECTED = "rejected"
    """The user declined it (``reason`` goes to the model)."""
    STALE = "stale"
    """The file changed since the proposal was made; nothing was written."""


class GateOutcome(StrEnum):
    """The seed's verdict vocabulary (the daemon's gate says allow/ask/block for the same)."""

    AUTO = "auto"
    """Runs without asking."""
    CONFIRM = "confirm"
    """Needs the user's approval (``approval_required``)."""
    BLOCK = "block"
    """Refused; the model is told why."""


class ToolErrorKind(StrEnum):
    """Why a tool call produced no result (``ToolResult.error.kind``). The seed leaves it open."""

    BLOCKED = "blocked"
    """Refused before it ran: a deny rule, ``tool_not_allowed``, ``budget:maxToolCalls``. The
    ``reasons`` say which."""
    REJECTED = "rejected"
    """The user said no (``task.reject``, or a phone's deny); the message carries their reason."""
    FAILED = "failed"
    """It ran and failed: a bad path, a missing file, ``ripgrep_missing``, a timeout."""
    CANCELLED = "cancelled"
    """The task ended before the call finished."""


class FailureReason(StrEnum):
    """``TaskSummary.failureReason`` and the ``reason`` of ``state_changed`` to ``failed``.

    Besides these, ``model_error:<kind>`` for each `ModelErrorKind` (see `model_error_reason`).
    """

    BUDGET_MAX_ITERATIONS = "budget:maxIterations"
    """The checks were still failing after the last verify→fix attempt."""
    BUDGET_MAX_TOOL_CALLS = "budget:maxToolCalls"
    """The task made more tool calls than its budget allows."""
    BUDGET_MAX_TOKENS = "budget:maxTokens"
    """The model used more tokens than the budget allows."""
    BUDGET_WALL_CLOCK_MS = "budget:wallClockMs"
    """The task ran longer than its budget (time waiting on the user not counted)."""
    LOOP_DETECTED = "loop_detected"
    """The model made the same call (tool + args, key order ignored) three times in a row."""
    MODEL_UNAVAILABLE = "model_unavailable"
    """No usable model for the task's role; the error message says which setting to fix."""
    VERIFICATION_REJECTED = "verification_rejected"
    """The user rejected a success check's command."""
    VERIFICATION_BLOCKED = "verification_blocked"
    """The gate blocked a success check's command."""
    NO_CHECK_COMMAND = "no_check_command"
    """``success`` asked for tests or lint, but the project has no such command."""
    RIPGREP_MISSING = "ripgrep_missing"
    """``list_files``/``search`` are allowed but no ``rg`` binary was found."""
    NO_WORKSPACE = "no_workspace"
    """No folder is open (``initialize`` gave no workspace root)."""
    INTERNAL_ERROR = "internal_error"
    """A bug; the details are in the orchestrator log only."""


MODEL_ERROR_PREFIX: Final = "model_error:"


def model_error_reason(kind: ModelErrorKind) -> str:
    """The failure reason of a model stream that ended with an error: ``model_error:<kind>``."""
    return MODEL_ERROR_PREFIX + kind.value


ALL_FAILURE_REASONS: Final[tuple[str, ...]] = (
    *(reason.value for reason in FailureReason),
    *(model_error_reason(kind) for kind in ModelErrorKind),
)
"""Every ``failureReason`` value the orchestrator can report."""

TASK_REASON_LABELS: Final[tuple[str, ...]] = (
    "tool_not_allowed",
    "gate_error",
    "budget:maxToolCalls",
    "policy_override:strict_mode",
)
"""Reason labels the orchestrator adds to the daemon gate's (``deny_list:<rule>``, the floors,
``loop_detected``): a tool outside ``allowedTools``, a gate that threw (the call falls back to
confirm), the call past ``maxToolCalls``, and ``gating.strict`` raising an auto call to
confirm."""
