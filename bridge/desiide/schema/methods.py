"""The Desiide protocol's schema: every request's params and result, the method tables.

This module is the one import for the schema: it defines the per-method models and re-exports
the building blocks of `schema_base` (bases, vocabularies, `validation_message`), `schema_task`
(`TaskInput` and the records), `schema_events` (``task.event`` and ``log``), `schema_jev` (packs)
and `schema_config` (``config.update``). The split is by subject only, to keep each module
readable.

Conventions (see `schema_base` for the why): params models are `RequestModel` s (strict, unknown
keys refused); results are `WireModel` s, dumped with ``model_dump(mode="json",
exclude_none=True)``. `METHODS` maps each request the extension may send to its params model
(the connection validates with it, the handler gets the instance); `RESULTS` maps it to its result
model; `REVERSE_METHODS` holds our one request to the extension, ``secrets.get``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Final, Literal, TypeAlias

from pydantic import AfterValidator, BaseModel, Field, SecretStr, StringConstraints
from pydantic_core import PydanticCustomError

from bridge.desiide.paths import normalize_workspace_root
from bridge.desiide.schema.base import (
    ALL_FAILURE_REASONS,
    DEFAULT_ALLOWED_TOOLS,
    MODEL_ERROR_PREFIX,
    PROTOCOL_VERSION,
    TASK_REASON_LABELS,
    TERMINAL_STATES,
    ApprovalScope,
    CostTier,
    EditStatus,
    FailureReason,
    GateOutcome,
    Identifier,
    Locality,
    ModelErrorKind,
    Preference,
    RequestModel,
    TaskKind,
    TaskState,
    ToolErrorKind,
    ToolName,
    WireModel,
    WorkspacePath,
    model_error_reason,
    validation_message,
)
from bridge.desiide.schema.config import (
    MAX_MODELS,
    MAX_ROLES,
    SECRET_PREFIX,
    AuthScheme,
    DesiideConfig,
    GatingConfig,
    JevConfig,
    ModelConfig,
    ModelProvider,
    SecretRef,
)
from bridge.desiide.schema.events import (
    NOTIFICATION_METHODS,
    TASK_EVENT_ADAPTER,
    TASK_EVENT_TYPES,
    ApprovalRequiredEvent,
    DecisionMadeEvent,
    EditProposedEvent,
    ErrorEvent,
    LogLevel,
    LogParams,
    StateChangedEvent,
    TaskEvent,
    TaskEventBase,
    TextDeltaEvent,
    ToolCallFinishedEvent,
    ToolCallStartedEvent,
    UnknownTaskEvent,
    UsageEvent,
    parse_task_event,
)
from bridge.desiide.schema.jev import (
    MAX_COMMAND_CHARS,
    MAX_FILES_TOUCHED,
    PACK_STATES,
    AvailableModel,
    ChoiceResult,
    CostRouteState,
    EngineRun,
    JevPackState,
    JevResult,
    KnownPack,
    LastRunStatus,
    NoulResult,
    RiskGateContext,
    RiskGateState,
    ScoreResult,
    TouchedFile,
    WorkflowSelectState,
)
from bridge.desiide.schema.task import (
    DEFAULT_BUDGET,
    MAX_CONTEXT_FILES,
    MAX_INSTRUCTION_CHARS,
    MAX_NOTES_CHARS,
    Budget,
    DecisionRecord,
    EditFile,
    EditProposal,
    FileMeta,
    ModelInfo,
    Selection,
    SuccessCriteria,
    TaskContext,
    TaskInput,
    TaskSummary,
    ToolCall,
    ToolError,
    ToolResult,
    Usage,
)
from bridge.protocol.primitives import Bool, Int, NonNegativeInt, PositiveInt

__all__ = [
    "ALL_FAILURE_REASONS",
    "DEFAULT_ALLOWED_TOOLS",
    "DEFAULT_BUDGET",
    "MAX_COMMAND_CHARS",
    "MAX_CONTEXT_FILES",
    "MAX_DECISIONS_LIMIT",
    "MAX_FILES_TOUCHED",
    "MAX_INSTRUCTION_CHARS",
    "MAX_MODELS",
    "MAX_NOTES_CHARS",
    "MAX_REASON_CHARS",
    "MAX_REPORT_FILES",
    "MAX_ROLES",
    "MAX_WORKSPACE_ROOTS",
    "METHODS",
    "MODEL_ERROR_PREFIX",
    "NOTIFICATION_METHODS",
    "PACK_STATES",
    "PROTOCOL_VERSION",
    "RESULTS",
    "REVERSE_METHODS",
    "SECRET_PREFIX",
    "TASK_EVENT_ADAPTER",
    "TASK_EVENT_TYPES",
    "TASK_REASON_LABELS",
    "TERMINAL_STATES",
    "ApprovalRequiredEvent",
    "ApprovalScope",
    "AuthScheme",
    "AvailableModel",
    "Budget",
    "ChoiceResult",
    "ClientInfo",
    "ConfigUpdateParams",
    "CostRouteState",
    "CostTier",
    "DecisionMadeEvent",
    "DecisionRecord",
    "DecisionsListParams",
    "DecisionsListResult",
    "DecisionsReplayParams",
    "DecisionsReplayResult",
    "DesiideConfig",
    "EditFile",
    "EditProposal",
    "EditProposedEvent",
    "EditStatus",
    "EditsReportParams",
    "EngineRun",
    "ErrorEvent",
    "FailureReason",
    "FileMeta",
    "FileReport",
    "GateOutcome",
    "GatingConfig",
    "HealthPingParams",
    "HealthPingResult",
    "Identifier",
    "InitializeParams",
    "InitializeResult",
    "JevConfig",
    "JevPackState",
    "JevPreviewParams",
    "JevPreviewResult",
    "JevResult",
    "JevTestError",
    "JevTestParams",
    "JevTestResult",
    "KnownPack",
    "LastRunStatus",
    "Locality",
    "LogLevel",
    "LogParams",
    "ModelConfig",
    "ModelErrorKind",
    "ModelInfo",
    "ModelProvider",
    "ModelTestError",
    "ModelsListParams",
    "ModelsListResult",
    "ModelsTestParams",
    "ModelsTestResult",
    "NoulResult",
    "OkResult",
    "Preference",
    "RequestModel",
    "RiskGateContext",
    "RiskGateState",
    "ScoreResult",
    "SecretRef",
    "SecretsGetParams",
    "SecretsGetResult",
    "Selection",
    "ServerInfo",
    "StateChangedEvent",
    "SuccessCriteria",
    "TaskApproveParams",
    "TaskCancelParams",
    "TaskCancelResult",
    "TaskContext",
    "TaskCreateParams",
    "TaskCreateResult",
    "TaskEvent",
    "TaskEventBase",
    "TaskInput",
    "TaskKind",
    "TaskListParams",
    "TaskListResult",
    "TaskRejectParams",
    "TaskState",
    "TaskSummary",
    "TextDeltaEvent",
    "ToolCall",
    "ToolCallFinishedEvent",
    "ToolCallStartedEvent",
    "ToolError",
    "ToolErrorKind",
    "ToolName",
    "ToolResult",
    "TouchedFile",
    "UnknownTaskEvent",
    "Usage",
    "UsageEvent",
    "WireModel",
    "WorkflowSelectState",
    "WorkspacePath",
    "model_error_reason",
    "parse_task_event",
    "validation_message",
]

MAX_WORKSPACE_ROOTS: Final = 64
MAX_REASON_CHARS: Final = 2_000
MAX_REPORT_FILES: Final = 500
MAX_DECISIONS_LIMIT: Final = 500

ShortText: TypeAlias = Annotated[str, StringConstraints(strict=True, min_length=1, max_length=100)]
Reason: TypeAlias = Annotated[str, StringConstraints(strict=True, max_length=MAX_REASON_CHARS)]


def _workspace_root(value: str) -> str:
    try:
        return normalize_workspace_root(value)
    except ValueError as exc:
        raise PydanticCustomError("workspace_root", str(exc)) from None


WorkspaceRoot: TypeAlias = Annotated[
    str, StringConstraints(strict=True), AfterValidator(_workspace_root)
]


# --- initialize ---------------------------------------------------------------------------------


class ClientInfo(RequestModel):
    """The extension's name and version (for logs)."""

    name: ShortText
    version: ShortText


class InitializeParams(RequestModel):
    """``initialize``: the version handshake; must be the first request.

    Attributes:
        protocolVersion: ``MAJOR.MINOR.PATCH``; another major than ours is ``ProtocolMismatch``.
        client: the extension.
        workspaceRoots: the editor's open folders, as absolute paths or ``file://`` URIs,
            normalized to absolute POSIX paths (at most 64; empty when no folder is open, and a
            task then fails with ``no_workspace``). Tasks run in the first one.
    """

    protocolVersion: Annotated[
        str,
        StringConstraints(strict=True, pattern=r"^(0|[1-9][0-9]{0,8})(\.(0|[1-9][0-9]{0,8})){2}$"),
    ]
    client: ClientInfo
    workspaceRoots: Annotated[list[WorkspaceRoot], Field(max_length=MAX_WORKSPACE_ROOTS)]


class ServerInfo(WireModel):
    name: str
    version: str


class InitializeResult(WireModel):
    """The orchestrator's protocol version and name/version."""

    protocolVersion: str
    server: ServerInfo


# --- tasks --------------------------------------------------------------------------------------

TaskCreateParams: TypeAlias = TaskInput
"""``task.create``'s params are a `TaskInput`."""


class TaskCreateResult(WireModel):
    task: TaskSummary


class TaskCancelParams(RequestModel):
    """Cancel a queued or running task (a finished one answers ``cancelled: false``)."""

    taskId: Identifier


class TaskCancelResult(WireModel):
    """``cancelled``: true when this call cancelled the task."""

    cancelled: bool


class TaskListParams(RequestModel):
    """No params: every task of this orchestrator's lifetime."""


class TaskListResult(WireModel):
    tasks: list[TaskSummary]


class TaskApproveParams(RequestModel):
    """Approve a pending ``approval_required``; ``scope`` defaults to ``once``."""

    taskId: Identifier
    approvalId: Identifier
    scope: ApprovalScope = ApprovalScope.ONCE


class TaskRejectParams(RequestModel):
    """Reject a pending ``approval_required``; ``reason`` goes to the model."""

    taskId: Identifier
    approvalId: Identifier
    reason: Reason | None = None


class OkResult(WireModel):
    """``{ok: true}``: the request was done."""

    ok: Literal[True] = True


class FileReport(RequestModel):
    """What happened to one file of a proposal; ``reason`` goes to the model."""

    path: WorkspacePath
    status: EditStatus
    reason: Reason | None = None


def _unique_paths(files: list[FileReport]) -> list[FileReport]:
    paths = [report.path for report in files]
    if len(set(paths)) != len(paths):
        raise PydanticCustomError("duplicate_path", "must not report a path twice")
    return files


class EditsReportParams(RequestModel):
    """Per-file outcome of an ``edit_proposed`` proposal; may come in several calls, each file
    once. A path outside the proposal, or one already reported, is an error."""

    taskId: Identifier
    proposalId: Identifier
    files: Annotated[
        list[FileReport],
        Field(min_length=1, max_length=MAX_REPORT_FILES),
        AfterValidator(_unique_paths),
    ]


# --- models and the judge -----------------------------------------------------------------------


class ModelsListParams(RequestModel):
    """``discover``: also probe a local Ollama on 127.0.0.1:11434."""

    discover: Bool = False


class ModelsListResult(WireModel):
    """The usable models, and what discovery found (empty without ``discover``)."""

    models: list[ModelInfo]
    discovered: list[ModelInfo]


class ModelsTestParams(RequestModel):
    modelId: Identifier


class ModelTestError(WireModel):
    """Why a model test failed; ``hint`` says what to do."""

    kind: ModelErrorKind
    message: str
    hint: str | None = None


class ModelsTestResult(WireModel):
    """A minimal request's outcome: ``ok`` with ``latencyMs``, or an ``error``."""

    ok: bool
    latencyMs: NonNegativeInt | None = None
    error: ModelTestError | None = None


class JevTestParams(RequestModel):
    """No params: test the configured judge."""


class JevTestError(WireModel):
    """Why the judge test failed: ``kind`` is a `ModelErrorKind` value, ``not_configured`` when
    ``config.update`` set no judge, or ``malformed_result`` when it answered outside the
    format."""

    kind: str
    message: str
    hint: str | None = None


class JevTestResult(WireModel):
    ok: bool
    latencyMs: NonNegativeInt | None = None
    error: JevTestError | None = None


class JevPreviewParams(RequestModel):
    pack: KnownPack


class JevPreviewResult(WireModel):
    """The state the pack would send now, built from the real workspace (metadata only).

    ``pack`` repeats the request's, since the states carry no tag of their own.
    """

    pack: KnownPack
    state: JevPackState


# --- decisions ----------------------------------------------------------------------------------


class DecisionsListParams(RequestModel):
    """Filters (all optional) and paging: newest first, ``limit`` 1–500 (default 50),
    ``cursor`` the previous page's ``nextCursor``."""

    taskId: Identifier | None = None
    pack: KnownPack | None = None
    outcome: Annotated[str, StringConstraints(strict=True, min_length=1, max_length=32)] | None = (
        None
    )
    limit: Annotated[Int, Field(ge=1, le=MAX_DECISIONS_LIMIT)] = 50
    cursor: Annotated[str, StringConstraints(strict=True, min_length=1, max_length=200)] | None = (
        None
    )


class DecisionsListResult(WireModel):
    """A page; ``nextCursor`` is absent on the last one."""

    decisions: list[DecisionRecord]
    nextCursor: str | None = None


class DecisionsReplayParams(RequestModel):
    id: PositiveInt


class DecisionsReplayResult(WireModel):
    """Today's gate (and judge, when configured) on a recorded call.

    Attributes:
        record: the recorded decision.
        rules: the rules' verdict today.
        jev: the judge's, when one is configured and the pack applies.
        jevError: why the judge could not run, when it could not.
        differs: today's outcome differs from the recorded one.
    """

    record: DecisionRecord
    rules: EngineRun
    jev: EngineRun | None = None
    jevError: str | None = None
    differs: bool


# --- settings and health ------------------------------------------------------------------------

ConfigUpdateParams: TypeAlias = DesiideConfig
"""``config.update``'s params are a `DesiideConfig`."""


class HealthPingParams(RequestModel):
    """No params."""


class HealthPingResult(WireModel):
    ok: Literal[True] = True
    uptimeMs: NonNegativeInt


# --- the reverse request ------------------------------------------------------------------------


class SecretsGetParams(WireModel):
    """``secrets.get`` (orchestrator → extension): look a ref up in SecretStorage."""

    ref: SecretRef


class SecretsGetResult(WireModel):
    """The extension's answer: the value, or ``null`` when the secret is not set.

    The value is a `SecretStr`: masked in ``repr`` and logs; ``get_secret_value()`` is the one
    way out.
    """

    __keep_null__ = frozenset({"value"})

    value: SecretStr | None


# --- the tables ---------------------------------------------------------------------------------

METHODS: Final[Mapping[str, type[BaseModel]]] = MappingProxyType(
    {
        "initialize": InitializeParams,
        "task.create": TaskInput,
        "task.cancel": TaskCancelParams,
        "task.list": TaskListParams,
        "task.approve": TaskApproveParams,
        "task.reject": TaskRejectParams,
        "edits.report": EditsReportParams,
        "models.list": ModelsListParams,
        "models.test": ModelsTestParams,
        "jev.test": JevTestParams,
        "jev.preview": JevPreviewParams,
        "decisions.list": DecisionsListParams,
        "decisions.replay": DecisionsReplayParams,
        "config.update": DesiideConfig,
        "health.ping": HealthPingParams,
    }
)
"""Every request the extension may send → its params model."""

RESULTS: Final[Mapping[str, type[BaseModel]]] = MappingProxyType(
    {
        "initialize": InitializeResult,
        "task.create": TaskCreateResult,
        "task.cancel": TaskCancelResult,
        "task.list": TaskListResult,
        "task.approve": OkResult,
        "task.reject": OkResult,
        "edits.report": OkResult,
        "models.list": ModelsListResult,
        "models.test": ModelsTestResult,
        "jev.test": JevTestResult,
        "jev.preview": JevPreviewResult,
        "decisions.list": DecisionsListResult,
        "decisions.replay": DecisionsReplayResult,
        "config.update": OkResult,
        "health.ping": HealthPingResult,
    }
)
"""Every request → its result model."""

REVERSE_METHODS: Final[Mapping[str, tuple[type[BaseModel], type[BaseModel]]]] = MappingProxyType(
    {"secrets.get": (SecretsGetParams, SecretsGetResult)}
)
"""Our requests to the extension → (params model, result model)."""
