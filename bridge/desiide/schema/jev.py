"""JEV packs on the wire: the pack names, the state each pack is judged on, the judge's results.

A JEV pack is a question put to a small judge model: which workflow (``workflow_select@1``),
how risky is this call (``risk_gate@1``), how much model does this task need (``cost_route@1``).
The judge sees **metadata only** (ADR-005): names, sizes, counts, a branch, a command line —
never file contents. The caps keep a state small and bounded whatever the workspace: at most
`MAX_FILES_TOUCHED` files (the rest counted in ``truncatedCount``) and a command of at most
`MAX_COMMAND_CHARS` characters. They are validated here, so a builder that forgot to cut fails
loudly instead of sending an oversized state.

``jev.preview`` answers with the state it would send (a sample for the settings page);
``decisions.replay`` reports each engine's run as an `EngineRun`.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Annotated, Final, Literal, TypeAlias

from pydantic import Field

from bridge.desiide.schema.base import (
    CostTier,
    GateOutcome,
    Locality,
    Preference,
    TaskKind,
    ToolName,
    WireModel,
    WorkspacePath,
)
from bridge.desiide.schema.task import FileMeta
from bridge.protocol.primitives import NonNegativeInt

__all__ = [
    "MAX_COMMAND_CHARS",
    "MAX_FILES_TOUCHED",
    "PACK_STATES",
    "AvailableModel",
    "ChoiceResult",
    "CostRouteState",
    "EngineRun",
    "JevPackState",
    "JevResult",
    "KnownPack",
    "LastRunStatus",
    "NoulResult",
    "RiskGateContext",
    "RiskGateState",
    "ScoreResult",
    "TouchedFile",
    "WorkflowSelectState",
]

MAX_FILES_TOUCHED: Final = 50
"""At most this many files in a state's ``filesTouched``; the rest are counted."""

MAX_COMMAND_CHARS: Final = 500
"""A ``risk_gate@1`` command is cut to this many characters."""

Probability: TypeAlias = Annotated[float, Field(ge=0, le=1)]


class KnownPack(StrEnum):
    """The JEV packs this orchestrator knows (``name@version``)."""

    WORKFLOW_SELECT = "workflow_select@1"
    """Which workflow a task gets (a ``choice``)."""
    RISK_GATE = "risk_gate@1"
    """Whether a call the rules auto-allow should be confirmed (a ``noul``)."""
    COST_ROUTE = "cost_route@1"
    """How capable (and costly) a model the task needs (a ``score`` 0–4)."""


class LastRunStatus(StrEnum):
    """How the workspace's previous task ended (``none`` when there was none)."""

    NONE = "none"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class AvailableModel(WireModel):
    """A model the workflow may use, as the judge sees it.

    ``contextTokens`` and ``latencyMs`` are ``null`` when unknown (a model never measured):
    the seed requires the keys, and a made-up number would mislead the judge.
    """

    __keep_null__ = frozenset({"contextTokens", "latencyMs"})

    id: str
    contextTokens: NonNegativeInt | None
    latencyMs: NonNegativeInt | None
    costTier: CostTier
    locality: Locality | None = None


class WorkflowSelectState(WireModel):
    """``workflow_select@1``: what the judge needs to pick a workflow.

    Attributes:
        taskType: the task's kind.
        filesTouched: the files in play (context files, then the diff's), at most 50.
        truncatedCount: how many more there were.
        estimatedDiffSize: changed lines in the working tree (``git diff --numstat``).
        lastRunStatus: how the previous task in this workspace ended.
        userPreference: the task's ``preference`` (``balanced`` when absent).
        availableModels: the models the workflows can use.
    """

    taskType: TaskKind
    filesTouched: Annotated[list[FileMeta], Field(max_length=MAX_FILES_TOUCHED)]
    truncatedCount: NonNegativeInt | None = None
    estimatedDiffSize: NonNegativeInt
    lastRunStatus: LastRunStatus
    userPreference: Preference
    availableModels: list[AvailableModel]


class RiskGateContext(WireModel):
    """Where a call runs: the git branch (``null`` outside git or detached), the environment
    (``local`` for a developer machine, ``ci`` when a CI variable is set), and whether the
    project has migrations not yet applied (as far as files can tell)."""

    __keep_null__ = frozenset({"branch"})

    branch: str | None
    env: str
    hasPendingMigrations: bool


class TouchedFile(WireModel):
    """A file as ``risk_gate@1`` sees it: its path and whether it is sensitive."""

    path: WorkspacePath
    sensitive: bool


class RiskGateState(WireModel):
    """``risk_gate@1``: one call, as metadata.

    Attributes:
        actionType: the Desiide tool called.
        command: ``run_command``'s command line, cut to 500 characters.
        editFileCount: ``propose_edit``'s number of files.
        context: branch, environment, pending migrations.
        filesTouched: the paths the call touches, at most 50.
        truncatedCount: how many more there were.
    """

    actionType: ToolName
    command: Annotated[str, Field(max_length=MAX_COMMAND_CHARS)] | None = None
    editFileCount: NonNegativeInt | None = None
    context: RiskGateContext
    filesTouched: Annotated[list[TouchedFile], Field(max_length=MAX_FILES_TOUCHED)]
    truncatedCount: NonNegativeInt | None = None


class CostRouteState(WireModel):
    """``cost_route@1``: the size of the job and the user's bias.

    Attributes:
        taskType: the task's kind.
        filesTouchedCount: files in play (not capped: a count is small).
        projectSizeLines: lines of tracked source (an estimate is fine).
        userCostBias: the task's ``preference`` (``balanced`` when absent).
        recentFailures: failed tasks in this workspace in the last day.
    """

    taskType: TaskKind
    filesTouchedCount: NonNegativeInt
    projectSizeLines: NonNegativeInt
    userCostBias: Preference
    recentFailures: NonNegativeInt


JevPackState: TypeAlias = WorkflowSelectState | RiskGateState | CostRouteState
"""A pack's state. No tag on the wire (the seed has none); ``jev.preview`` also says ``pack``."""

PACK_STATES: Final[Mapping[KnownPack, type[WireModel]]] = MappingProxyType(
    {
        KnownPack.WORKFLOW_SELECT: WorkflowSelectState,
        KnownPack.RISK_GATE: RiskGateState,
        KnownPack.COST_ROUTE: CostRouteState,
    }
)
"""The state model of each pack."""


class ChoiceResult(WireModel):
    """``choice``: the option picked and a probability per offered option."""

    selected: str
    probs: dict[str, Probability]


class ScoreResult(WireModel):
    """``score``: 0–4; ``probs[i]`` is the probability of score ``i`` (five entries)."""

    score: Annotated[int, Field(ge=0, le=4)]
    probs: Annotated[list[Probability], Field(min_length=5, max_length=5)] | None = None


class NoulResult(WireModel):
    """``noul``: yes, no or unknown, with the probability of yes."""

    answer: Literal["yes", "no", "unknown"]
    pYes: Probability


JevResult: TypeAlias = ChoiceResult | ScoreResult | NoulResult
"""A judgement; the fields tell the format apart."""


class EngineRun(WireModel):
    """One engine's verdict on a recorded call (``decisions.replay``).

    Attributes:
        outcome: auto, confirm or block.
        reasons: the reason labels behind it.
        result: the judge's raw result (the JEV run only).
        latencyMs: how long the run took (the JEV run only).
    """

    outcome: GateOutcome
    reasons: list[str]
    result: JevResult | None = None
    latencyMs: NonNegativeInt | None = None
