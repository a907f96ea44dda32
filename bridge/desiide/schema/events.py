"""The orchestrator's notifications: ``task.event`` (one model per event type) and ``log``.

Every task event carries ``taskId``, ``seq`` (per task, from 0, +1 each: the extension can spot
a gap) and ``ts`` (ISO 8601), then ``type`` and the type's payload, flat in one object. The
orchestrator's lifecycle builds them; the connection only frames them.

Reading events back (tests' clients, a future replay) follows the seed's rule: "unknown event
types are ignored (parseTaskEvent returns status: 'unknown')". `parse_task_event` returns an
`UnknownTaskEvent` for a type it does not know, and raises only for a known type whose payload is
wrong.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Final, Literal, TypeAlias, get_args

from pydantic import Field, TypeAdapter

from bridge.desiide.schema.base import GateOutcome, TaskState, WireModel
from bridge.desiide.schema.task import (
    DecisionRecord,
    EditProposal,
    FileMeta,
    ToolCall,
    ToolResult,
    Usage,
)
from bridge.protocol.primitives import NonNegativeInt

__all__ = [
    "NOTIFICATION_METHODS",
    "TASK_EVENT_ADAPTER",
    "TASK_EVENT_TYPES",
    "ApprovalRequiredEvent",
    "DecisionMadeEvent",
    "EditProposedEvent",
    "ErrorEvent",
    "LogLevel",
    "LogParams",
    "StateChangedEvent",
    "TaskEvent",
    "TaskEventBase",
    "TextDeltaEvent",
    "ToolCallFinishedEvent",
    "ToolCallStartedEvent",
    "UnknownTaskEvent",
    "UsageEvent",
    "parse_task_event",
]


class TaskEventBase(WireModel):
    """The fields every task event carries."""

    taskId: str
    seq: NonNegativeInt
    ts: str


class StateChangedEvent(TaskEventBase):
    """The task moved to another state. ``from`` is ``null`` for the first event (to ``queued``).

    ``reason`` is the ``failureReason`` on a move to ``failed``, and otherwise a short label
    of why (``cancelled``, ``approval``, ``edit_review``), when there is one.
    """

    __keep_null__ = frozenset({"from_"})

    type: Literal["state_changed"] = "state_changed"
    from_: TaskState | None = Field(alias="from")
    to: TaskState
    reason: str | None = None


class TextDeltaEvent(TaskEventBase):
    """Text the model wrote, in pieces; the pieces of one message share ``messageId``."""

    type: Literal["text_delta"] = "text_delta"
    messageId: str
    delta: str


class ToolCallStartedEvent(TaskEventBase):
    """The agent made a call (before the gate's verdict)."""

    type: Literal["tool_call_started"] = "tool_call_started"
    call: ToolCall


class ToolCallFinishedEvent(TaskEventBase):
    """A call ended; a blocked or rejected one has ``error.kind`` and the reasons."""

    type: Literal["tool_call_finished"] = "tool_call_finished"
    result: ToolResult


class EditProposedEvent(TaskEventBase):
    """A ``propose_edit`` awaits review; answer with ``edits.report``."""

    type: Literal["edit_proposed"] = "edit_proposed"
    proposal: EditProposal
    files: list[FileMeta]


class ApprovalRequiredEvent(TaskEventBase):
    """A call needs the user's approval; answer with ``task.approve``/``task.reject`` (or a
    paired phone answers its card: the first answer wins).

    Attributes:
        approvalId: what ``task.approve``/``task.reject`` name.
        call: the call waiting.
        outcome: always ``confirm`` (a block never asks).
        reasons: the gate's reason labels (empty when the permission mode alone asks).
        decisionId: the audit-log row of this verdict.
        paths: the workspace-relative paths the call touches, as far as they can be told.
    """

    type: Literal["approval_required"] = "approval_required"
    approvalId: str
    call: ToolCall
    outcome: Literal[GateOutcome.CONFIRM] = GateOutcome.CONFIRM
    reasons: list[str]
    decisionId: int | None = None
    paths: list[str]


class DecisionMadeEvent(TaskEventBase):
    """The gate (or the user, or a JEV judgement) decided something; the audit-log row."""

    type: Literal["decision_made"] = "decision_made"
    decision: DecisionRecord


class UsageEvent(TaskEventBase):
    """Tokens (and cost) of a model turn."""

    type: Literal["usage"] = "usage"
    modelId: str
    usage: Usage


class ErrorEvent(TaskEventBase):
    """Something went wrong. Sent before ``state_changed`` to ``failed``, and alone for a
    recoverable error (a retried model call).

    Attributes:
        kind: a `ModelErrorKind` value for a model error, else a failure-reason label
            (``budget:maxTokens``, ``internal_error``, …).
        message: for the user; never a secret, never a stack trace.
        retryable: retrying later may succeed.
        retryAfterMs: how long to wait, when the provider said.
    """

    type: Literal["error"] = "error"
    kind: str
    message: str
    retryable: bool
    retryAfterMs: NonNegativeInt | None = None


TaskEvent: TypeAlias = Annotated[
    StateChangedEvent
    | TextDeltaEvent
    | ToolCallStartedEvent
    | ToolCallFinishedEvent
    | EditProposedEvent
    | ApprovalRequiredEvent
    | DecisionMadeEvent
    | UsageEvent
    | ErrorEvent,
    Field(discriminator="type"),
]
"""Any task event; ``type`` tells which."""

TASK_EVENT_ADAPTER: Final[TypeAdapter[TaskEvent]] = TypeAdapter(TaskEvent)

TASK_EVENT_TYPES: Final[tuple[str, ...]] = tuple(
    member.model_fields["type"].default for member in get_args(get_args(TaskEvent)[0])
)
"""Every ``type`` of `TaskEvent`, in the seed's order."""


class UnknownTaskEvent(TaskEventBase):
    """An event of a type this version does not know (read side only; never sent)."""

    type: str


def parse_task_event(data: Any) -> TaskEvent | UnknownTaskEvent:
    """Read a ``task.event``'s params, tolerantly.

    Returns:
        The event's model; an `UnknownTaskEvent` for a type this version does not know.

    Raises:
        pydantic.ValidationError: not an object with the common fields, or a known type with a
            bad payload.
    """
    if isinstance(data, dict) and data.get("type") not in TASK_EVENT_TYPES:
        return UnknownTaskEvent.model_validate(data)
    return TASK_EVENT_ADAPTER.validate_python(data)


class LogLevel(StrEnum):
    """The ``log`` notification's levels (pino's names: ``warn``, not ``warning``)."""

    DEBUG = "debug"
    INFO = "info"
    WARN = "warn"
    ERROR = "error"


class LogParams(WireModel):
    """The ``log`` notification: a line for the extension's output channel.

    ``fields`` holds structured context (ids, counts, durations); never secrets or file contents.
    """

    level: LogLevel
    message: str
    ts: str
    fields: dict[str, Any] | None = None


NOTIFICATION_METHODS: Final[tuple[str, ...]] = ("task.event", "log")
"""The notifications the orchestrator sends."""
