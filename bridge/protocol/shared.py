"""Shared types of protocol v10 (PROTOCOL-v10-wire.md §4): the records messages are built from.

Field order is the order of the spec tables, which is the schema's declaration order and so the key
order on the wire. Field names are the wire's camelCase names. Conventions the schema does not
enforce (a ``diff`` only on ``entryType:"diff"``, ``slug`` = the first 8 characters of ``id``) are
the sender's job and are documented in PROTOCOL.md, not checked here: the reference schema does not
check them either, and a decoder stricter than the phone's would drop messages the phone accepts.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from .baseurl import BASE_URL_ERROR, base_url_allowed
from .enums import (
    AppUnderTest,
    DeviceRole,
    DiffLineType,
    EffortLevel,
    OutputEntryType,
    PermissionMode,
    SessionBackend,
    SessionState,
)
from .primitives import (
    KEEP,
    Bool,
    Int,
    JsonObject,
    NonEmptyStr,
    NonNegativeInt,
    Number,
    Opt,
    Percentage,
    PositiveInt,
    Str,
    TriStateNonEmptyStr,
    WireModel,
)

__all__ = [
    "AgentDescriptor",
    "AgentSupports",
    "AuthStatus",
    "DeviceConfig",
    "DiffData",
    "DiffLine",
    "GsdAction",
    "GsdExecution",
    "GsdPhase",
    "GsdState",
    "ModelEntry",
    "OutputEntry",
    "ProviderModel",
    "ProviderProfileInfo",
    "ProviderProfileWrite",
    "RemoteSessionInfo",
    "SyncChunkEntry",
    "UsageData",
    "UsageWindow",
]


def _check_base_url(value: str) -> str:
    if not base_url_allowed(value):
        raise PydanticCustomError("base_url", BASE_URL_ERROR)
    return value


class RemoteSessionInfo(WireModel):
    """One session as listed in the heartbeat (``sessions[]``), ``session-ready`` and
    ``session-replaced``."""

    id: NonEmptyStr
    slug: Str
    cwd: Str
    lastActivity: Str
    lineCount: NonNegativeInt
    title: Str | None
    project: Str
    permissionMode: Opt[PermissionMode] = None
    effortLevel: Opt[EffortLevel] = None
    model: Opt[Str] = None
    contextWindow: Opt[PositiveInt] = None
    contextPercentage: Opt[Percentage] = None
    committed: Opt[Bool] = None
    state: Opt[SessionState] = None
    seqHigh: Opt[NonNegativeInt] = None
    providerId: Opt[Str] = None
    providerLabel: Opt[Str] = None
    backend: Opt[SessionBackend] = None
    agent: Opt[Str] = None
    sandboxed: Opt[Bool] = None


class AgentSupports(WireModel):
    """What the bridge does for sessions of one agent (v11's ``AgentDescriptor.supports``)."""

    models: Bool
    usage: Bool
    providers: Bool
    gsd: Bool
    interrupt: Bool


class AgentDescriptor(WireModel):
    """An agent sessions can run, as the heartbeat's additive ``agents`` list names it.

    The shape of v11's ``AgentDescriptor`` (id, label, modes, efforts, supports), carried in a
    v10 heartbeat as an additive field: v10 phones strip it. ``modes`` and ``efforts`` are free
    strings, as in v11; this bridge lists the v10 permission modes it offers for the agent.
    """

    id: NonEmptyStr
    label: NonEmptyStr
    modes: list[Str]
    efforts: list[Str]
    supports: AgentSupports


class DiffLine(WireModel):
    """One line of a diff card."""

    type: DiffLineType
    text: Str


class DiffData(WireModel):
    """The structured diff of an ``entryType:"diff"`` entry (CDX-050)."""

    path: NonEmptyStr
    lines: list[DiffLine]
    truncated: Opt[Bool] = None


class OutputEntry(WireModel):
    """One transcript line. ``metadata`` is a free-form JSON object (see PROTOCOL.md)."""

    entryType: OutputEntryType
    content: Str
    timestamp: Str
    metadata: Opt[JsonObject] = None
    diff: Opt[DiffData] = None


class SyncChunkEntry(WireModel):
    """An item of ``sync-chunk.entries``: an entry with the seq it was stored under."""

    seq: NonNegativeInt
    entry: OutputEntry


class UsageWindow(WireModel):
    """One rate-limit window of the Anthropic subscription."""

    utilization: Number | None
    resetsAt: Str | None


class UsageData(WireModel):
    """The body of a ``usage`` message."""

    available: Bool
    subscriptionType: Str | None
    fiveHour: Opt[UsageWindow] = None
    sevenDay: Opt[UsageWindow] = None
    sevenDayOpus: Opt[UsageWindow] = None
    sevenDaySonnet: Opt[UsageWindow] = None
    sessionCostUsd: Opt[Number] = None
    fetchedAt: Str


class GsdPhase(WireModel):
    """One phase of a GSD plan."""

    number: Str
    name: Str
    diskStatus: Str
    plans: NonNegativeInt
    summaries: NonNegativeInt
    recentlyTouched: Bool
    action: Str | None
    command: Str | None
    planCount: Int | None
    needsYou: Int | None


class GsdAction(WireModel):
    """A GSD action the phone can offer."""

    id: Str
    label: Str
    command: Str
    recommended: Bool


class GsdExecution(WireModel):
    """Progress of the GSD phase being executed."""

    phase: Str
    plansTotal: NonNegativeInt
    plansDone: NonNegativeInt
    currentPlan: Str | None
    tasksDone: NonNegativeInt
    tasksTotal: Int | None
    lastTask: Str | None


class GsdState(WireModel):
    """The body of a ``gsd-state`` message."""

    installed: Bool
    available: Bool
    hasGit: Bool
    situation: Str
    summary: Str
    milestone: Str | None
    currentPhase: Str | None
    totalPhases: Int | None
    percent: Number
    phases: list[GsdPhase]
    actions: list[GsdAction]
    recommended: Str | None
    paused: Bool
    blockers: list[Str]
    verifyFailed: Bool
    execution: GsdExecution | None


class ModelEntry(WireModel):
    """A model a session can run (``models.models[]``, and a provider profile's ``models[]``)."""

    id: NonEmptyStr
    label: Opt[Str] = None


ProviderModel = ModelEntry
"""The spec's name for a model entry inside a provider profile: the same shape."""


class ProviderProfileInfo(WireModel):
    """A stored provider profile as the phone sees it: redacted, ``hasToken`` instead of the token.

    ``baseUrl`` is not checked against the https rule here, so a legacy insecure profile can still
    be listed and fixed.
    """

    id: NonEmptyStr
    label: NonEmptyStr
    baseUrl: NonEmptyStr
    models: Annotated[list[ModelEntry], Field(min_length=1)]
    defaultModel: Opt[Str] = None
    hasToken: Bool


class ProviderProfileWrite(WireModel):
    """The profile of a ``set-provider-profile`` upsert.

    ``authToken`` is tri-state: :data:`~bridge.protocol.primitives.KEEP` (key absent) keeps the
    stored token, ``None`` deletes it, a non-empty string sets it. It is the one place a provider
    token rides the wire, so it is kept out of ``repr``.
    """

    label: NonEmptyStr
    baseUrl: Annotated[NonEmptyStr, AfterValidator(_check_base_url)]
    authToken: TriStateNonEmptyStr = Field(default=KEEP, repr=False)
    models: Annotated[list[ModelEntry], Field(min_length=1)]
    defaultModel: Opt[Str] = None


class AuthStatus(WireModel):
    """Which credentials the bridge holds (optional in the heartbeat; the reference never sends it)."""

    hasAnthropicKey: Bool
    hasGithubPat: Bool
    hasEnvKey: Bool


class DeviceConfig(WireModel):
    """A phone's device-testing configuration (``set-device-config.config``).

    ``meshIp`` and ``meshPubkey`` are transport-only: the bridge strips them before persisting.
    """

    label: Str
    role: Opt[DeviceRole] = None
    serial: Opt[Str] = None
    meshIp: Opt[Str] = None
    meshPubkey: Opt[Str] = None
    appUnderTest: AppUnderTest
    customPackage: Opt[Str] = None
    customBuildCmd: Opt[Str] = None
    projectDir: Opt[Str] = None
