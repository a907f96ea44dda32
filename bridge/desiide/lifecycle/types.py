"""The vocabulary of the task lifecycle: states, kinds, failure reasons, inputs, actions, errors.

:class:`~bridge.desiide.lifecycle.machine.TaskBook` takes plain data in (the daemon's transcript entries,
:class:`CardView` s, the editor's answers) and gives :data:`Action` s out, which the runtime
dispatches over with ``assert_never``: a closed union, so a new action is a type error in every
dispatcher that forgot it. Actions are named as orders (``StartSession``, ``AnswerCard``); the
one that carries a ``task.event`` is :class:`Emit`, whose ``event`` is the notification's full
params (``taskId``, ``seq``, ``ts``, ``type`` and the payload fields), as plain JSON: the wire
models are validated at the edge, not here.

Errors carry the JSON-RPC code they answer with (``TaskNotFound`` -32004, ``ApprovalNotFound``
-32005 in the seed's table; a report that does not fit its proposal is ``InvalidParams``
-32602), so that the edge maps them without a table of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from enum import StrEnum
from typing import Any, Final, Literal

from bridge.records import record

__all__ = [
    "ACTIVE_STATES",
    "CARD_KINDS",
    "FAILURE_REASONS",
    "MODEL_ERROR_KINDS",
    "REPORT_STATUSES",
    "TERMINAL_STATES",
    "Action",
    "AnswerCard",
    "ApprovalNotFound",
    "CardView",
    "Emit",
    "FileReport",
    "InvalidReport",
    "Judge",
    "LifecycleError",
    "Log",
    "LogLevel",
    "RunChecks",
    "SendInput",
    "StartSession",
    "StopSession",
    "Success",
    "TaskKind",
    "TaskNotFound",
    "TaskState",
    "model_error_reason",
]


class TaskKind(StrEnum):
    """What the editor asks for (the seed does not list kinds; the bridge's are these three)."""

    ASK = "ask"
    """Answer a question; read-only, no edits."""
    EDIT = "edit"
    """Propose edits with ``propose_edit``."""
    FIX = "fix"
    """Edit until the success checks pass."""


class TaskState(StrEnum):
    """COR-2: ``queued → planning → running ⇄ awaiting_approval → verifying → done | failed |
    cancelled``."""

    QUEUED = "queued"
    PLANNING = "planning"
    RUNNING = "running"
    AWAITING_APPROVAL = "awaiting_approval"
    VERIFYING = "verifying"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


ACTIVE_STATES: Final = frozenset(
    {TaskState.PLANNING, TaskState.RUNNING, TaskState.AWAITING_APPROVAL, TaskState.VERIFYING}
)
"""States that hold one of the running slots (a session exists)."""
TERMINAL_STATES: Final = frozenset({TaskState.DONE, TaskState.FAILED, TaskState.CANCELLED})

MODEL_ERROR_KINDS: Final = (
    "auth",
    "rate_limit",
    "overloaded",
    "network",
    "timeout",
    "not_found",
    "bad_request",
    "server",
    "unknown",
)
"""The ``ModelErrorKind`` values (see :func:`~bridge.desiide.lifecycle.entries.model_error_kind`
for what maps onto each)."""

FAILURE_REASONS: Final = (
    "budget:maxIterations",
    "budget:maxToolCalls",
    "budget:maxTokens",
    "budget:wallClockMs",
    "loop_detected",
    *(f"model_error:{kind}" for kind in MODEL_ERROR_KINDS),
    "model_unavailable",
    "verification_rejected",
    "verification_blocked",
    "no_check_command",
    "ripgrep_missing",
    "no_workspace",
    "internal_error",
)
"""Every ``failureReason`` the seed lists (``model_error:<kind>`` spelled out per kind)."""


def model_error_reason(kind: str) -> str:
    """``model_error:<kind>``; an unknown kind becomes ``model_error:unknown``."""
    return f"model_error:{kind if kind in MODEL_ERROR_KINDS else 'unknown'}"


CARD_KINDS: Final = ("permission", "review", "question", "plan")
REPORT_STATUSES: Final = ("applied", "rejected", "stale")

LogLevel = Literal["debug", "info", "warn", "error"]


# --- inputs ----------------------------------------------------------------------------------


@record
class Success:
    """``TaskInput.success``: which checks must pass before a task is done."""

    tests_pass: bool = False
    lint_clean: bool = False

    @property
    def any(self) -> bool:
        return self.tests_pass or self.lint_clean

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Success:
        """From the wire's ``{testsPass?, lintClean?}`` (other fields are not checks: ignored)."""
        if not data:
            return cls()
        return cls(bool(data.get("testsPass", False)), bool(data.get("lintClean", False)))


@record
class CardView:
    """A pending card of a task's session, as ``tasks.watch`` reports it.

    Attributes:
        id: the card's id — the tool call's ``tool_use_id`` for permission and review cards; it
            is the editor's ``approvalId`` (or ``proposalId``).
        kind: ``permission`` (the gate asks), ``review`` (a ``propose_edit``), ``question`` or
            ``plan`` (the agent's own ``AskUserQuestion`` / ``ExitPlanMode``; not expected with
            the agent's own tools off).
        tool: the tool as the CLI named it (``mcp__desiide__run_command``).
        input: the call's arguments.
        reasons: the gate's reason labels.
        reason_text: the gate's explanation, when it gave one.
        decision_id: the ``decisions`` row of the card, when the daemon reports it.
    """

    id: str
    kind: str
    tool: str
    input: Mapping[str, Any]
    reasons: tuple[str, ...] = ()
    reason_text: str | None = None
    decision_id: int | None = None

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> CardView:
        """From the ``tasks.watch`` JSON (``{id, kind, tool, input, reasons, reason_text?,
        decision_id?}``).

        Raises:
            ValueError: ``id``, ``kind`` or ``tool`` is not a string.
        """
        card_id, kind, tool = data.get("id"), data.get("kind"), data.get("tool")
        if not isinstance(card_id, str) or not isinstance(kind, str) or not isinstance(tool, str):
            raise ValueError("a card needs string id, kind and tool")
        raw_input = data.get("input")
        raw_reasons = data.get("reasons")
        reasons = (
            tuple(r for r in raw_reasons if isinstance(r, str))
            if isinstance(raw_reasons, list)
            else ()
        )
        reason_text = data.get("reason_text")
        decision_id = data.get("decision_id")
        return cls(
            id=card_id,
            kind=kind,
            tool=tool,
            input=dict(raw_input) if isinstance(raw_input, Mapping) else {},
            reasons=reasons,
            reason_text=reason_text if isinstance(reason_text, str) else None,
            decision_id=(
                decision_id
                if isinstance(decision_id, int) and not isinstance(decision_id, bool)
                else None
            ),
        )


@record
class FileReport:
    """One file of an ``edits.report``: ``applied``, ``rejected`` (with the user's reason) or
    ``stale`` (the file changed since the proposal)."""

    path: str
    status: str
    reason: str | None = None

    def as_json(self) -> dict[str, str]:
        out = {"path": self.path, "status": self.status}
        if self.reason is not None:
            out["reason"] = self.reason
        return out


# --- actions ---------------------------------------------------------------------------------


@record
class Emit:
    """Send the ``task.event`` notification whose params are `event`."""

    task_id: str
    event: dict[str, Any]


@record
class StartSession:
    """Start the task's session (``tasks.start``; the session id is the task id)."""

    task_id: str
    prompt: str
    allowed_tools: tuple[str, ...]
    max_tool_calls: int


@record
class AnswerCard:
    """Answer a pending card (``tasks.answer``). `report` is set for a ``propose_edit`` review:
    the per-file outcome the tool hands to the model."""

    task_id: str
    card_id: str
    allow: bool
    message: str | None = None
    report: tuple[dict[str, str], ...] | None = None


@record
class SendInput:
    """Start another turn of the task's session with `text` (``tasks.input``)."""

    task_id: str
    text: str


@record
class StopSession:
    """End the task's session (``tasks.stop``); the daemon denies its pending cards."""

    task_id: str


@record
class RunChecks:
    """Run the success checks in the workspace, in order, and report with
    :meth:`~bridge.desiide.lifecycle.machine.TaskBook.on_checks`."""

    task_id: str
    commands: tuple[tuple[str, ...], ...]


@record
class Log:
    """Write a log line (and the ``log`` notification). Details that must not reach the editor
    (an ``internal_error``'s cause) travel only here."""

    level: LogLevel
    message: str
    fields: dict[str, Any] = field(default_factory=dict)


@record
class Judge:
    """Ask the editor's judge (JEV ``risk_gate@1``) about a call the rules would allow (its card
    is labelled ``jev:pending``), and report with
    :meth:`~bridge.desiide.lifecycle.machine.TaskBook.on_judgement`."""

    task_id: str
    card_id: str
    tool: str
    args: dict[str, Any]


Action = Emit | StartSession | AnswerCard | SendInput | StopSession | RunChecks | Log | Judge


# --- errors ----------------------------------------------------------------------------------


class LifecycleError(Exception):
    """An editor request the task book refuses; `code` is the JSON-RPC error code to answer."""

    code: int = -32603


class TaskNotFound(LifecycleError):
    """No task has this id (seed: -32004)."""

    code = -32004


class ApprovalNotFound(LifecycleError):
    """No pending approval or proposal has this id in the task (seed: -32005): unknown, already
    answered (from here or from a phone), or already reported."""

    code = -32005


class InvalidReport(LifecycleError):
    """An ``edits.report`` that does not fit its proposal (InvalidParams, -32602): a path that is
    not in it, a file reported twice, an unknown status."""

    code = -32602
