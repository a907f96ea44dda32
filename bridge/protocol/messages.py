"""Bridge → phone messages (PROTOCOL-v10-wire.md §6).

25 ``type`` strings (the last, ``push-ack``, additive behind the capability ``push``). Their event kind is decided by :func:`bridge.protocol.kinds.kind_for`:
``sessions`` is the 30515 heartbeat, ``output`` / ``usage`` / ``gsd-state`` are live 24515, every
other message is stored 4516. The transport-level ``chunk`` envelope is deliberately not a member of
this union (see :mod:`bridge.protocol.chunking`).

Bridge → phone messages carry no ``v``: the heartbeat's ``protocolVersion`` plays that role.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

from .enums import (
    BridgeHostKind,
    EffortLevel,
    InputFailedReason,
    PairAckReason,
    PermissionMode,
)
from .primitives import (
    Bool,
    NonEmptyStr,
    NonNegativeInt,
    Opt,
    PositiveInt,
    SeqRange,
    Str,
    WireModel,
)
from .shared import (
    AgentDescriptor,
    AuthStatus,
    GsdState,
    ModelEntry,
    OutputEntry,
    ProviderProfileInfo,
    RemoteSessionInfo,
    SyncChunkEntry,
    UsageData,
)

__all__ = [
    "BridgeToPhone",
    "CloseSessionAckMessage",
    "CredentialsAckMessage",
    "DeviceConfigAckMessage",
    "EffortConfirmedMessage",
    "FolderAckMessage",
    "GsdStateMessage",
    "InputAckMessage",
    "InputFailedMessage",
    "ModeConfirmedMessage",
    "ModelConfirmedMessage",
    "ModelsMessage",
    "OutputMessage",
    "PairAckMessage",
    "ProviderProfileAckMessage",
    "ProviderProfilesMessage",
    "PushAckMessage",
    "SessionFailedMessage",
    "SessionPendingMessage",
    "SessionReadyMessage",
    "SessionReplacedMessage",
    "SessionsMessage",
    "SyncBeginMessage",
    "SyncChunkMessage",
    "SyncEndMessage",
    "UsageMessage",
]


class SessionsMessage(WireModel):
    """The heartbeat (30515, ``d`` = machine).

    Absence from ``sessions`` never deletes on the phone (it marks the session stale); only
    ``removedSessions`` tombstones remove. A clean shutdown sends the full list with every session
    ``offline`` and ``machineOffline: true``, never an empty list (the bug-B contract).
    """

    type: Literal["sessions"] = "sessions"
    machine: NonEmptyStr
    host: Opt[BridgeHostKind] = None
    sessions: list[RemoteSessionInfo]
    authStatus: Opt[AuthStatus] = None
    protocolVersion: PositiveInt
    capabilities: Opt[list[Str]] = None
    folders: Opt[list[Str]] = None
    roots: Opt[list[Str]] = None
    removedSessions: Opt[list[Str]] = None
    machineOffline: Opt[Bool] = None
    agents: Opt[list[AgentDescriptor]] = None
    pushKey: Opt[NonEmptyStr] = None
    """Additive: the bridge's VAPID public key (base64url of the 65-byte P-256 point), present
    exactly when the capability ``push`` is advertised."""


class OutputMessage(WireModel):
    """One transcript entry, live (24515), with the seq the transcript store gave it."""

    type: Literal["output"] = "output"
    sessionId: NonEmptyStr
    seq: NonNegativeInt
    entry: OutputEntry


class InputAckMessage(WireModel):
    """An ``input`` with an ``inputId`` was accepted."""

    type: Literal["input-ack"] = "input-ack"
    sessionId: NonEmptyStr
    inputId: NonEmptyStr


class SyncBeginMessage(WireModel):
    """Start of a sync; ``ranges`` is advisory, ``sync-end.deliveredRanges`` is the truth."""

    type: Literal["sync-begin"] = "sync-begin"
    sessionId: NonEmptyStr
    syncId: NonEmptyStr
    seqHigh: NonNegativeInt
    ranges: list[SeqRange]


class SyncChunkMessage(WireModel):
    """Up to 50 seqs of a sync; pruned seqs are absent from ``entries`` but covered by ``range``."""

    type: Literal["sync-chunk"] = "sync-chunk"
    sessionId: NonEmptyStr
    syncId: NonEmptyStr
    range: SeqRange
    entries: list[SyncChunkEntry]


class SyncEndMessage(WireModel):
    """End of a sync: the union of the acked chunk ranges, normalized."""

    type: Literal["sync-end"] = "sync-end"
    sessionId: NonEmptyStr
    syncId: NonEmptyStr
    deliveredRanges: list[SeqRange]


class SessionPendingMessage(WireModel):
    """A session is being created; ``pendingId`` is its future ``sessionId``."""

    type: Literal["session-pending"] = "session-pending"
    pendingId: NonEmptyStr
    machine: Str
    createdAt: Str


class SessionReadyMessage(WireModel):
    """A pending session is ready."""

    type: Literal["session-ready"] = "session-ready"
    pendingId: NonEmptyStr
    session: RemoteSessionInfo


class SessionFailedMessage(WireModel):
    """A pending session could not be created."""

    type: Literal["session-failed"] = "session-failed"
    pendingId: NonEmptyStr
    reason: Str


class InputFailedMessage(WireModel):
    """An input could not be delivered; ``inputId`` is echoed when the input had one."""

    type: Literal["input-failed"] = "input-failed"
    sessionId: NonEmptyStr
    reason: InputFailedReason
    inputId: Opt[Str] = None


class CloseSessionAckMessage(WireModel):
    """Reply to ``close-session``; ``success`` tells whether the session existed."""

    type: Literal["close-session-ack"] = "close-session-ack"
    sessionId: NonEmptyStr
    success: Bool


class SessionReplacedMessage(WireModel):
    """Defined by the schema; the v10 reference bridge never emits it."""

    type: Literal["session-replaced"] = "session-replaced"
    oldSessionId: NonEmptyStr
    newSession: RemoteSessionInfo


class ModeConfirmedMessage(WireModel):
    """A session's permission mode changed."""

    type: Literal["mode-confirmed"] = "mode-confirmed"
    sessionId: NonEmptyStr
    mode: PermissionMode


class EffortConfirmedMessage(WireModel):
    """A session's effort level (the new one, or the previous one if the change was refused)."""

    type: Literal["effort-confirmed"] = "effort-confirmed"
    sessionId: NonEmptyStr
    level: EffortLevel


class ModelConfirmedMessage(WireModel):
    """A session's model (the new one, or the previous one if the change was refused)."""

    type: Literal["model-confirmed"] = "model-confirmed"
    sessionId: NonEmptyStr
    model: NonEmptyStr


class FolderAckMessage(WireModel):
    """Reply to ``create-folder``."""

    type: Literal["folder-ack"] = "folder-ack"
    requestId: NonEmptyStr
    success: Bool
    path: Opt[Str] = None
    error: Opt[Str] = None


class UsageMessage(WireModel):
    """A session's usage figures (24515); never sent for a provider-bound session."""

    type: Literal["usage"] = "usage"
    sessionId: NonEmptyStr
    usage: UsageData


class GsdStateMessage(WireModel):
    """A session's GSD state (24515)."""

    type: Literal["gsd-state"] = "gsd-state"
    sessionId: NonEmptyStr
    gsd: GsdState


class ModelsMessage(WireModel):
    """The models this bridge can run; correlate by the event author (the machine's pubkey).

    ``error`` comes only together with an empty ``models``. ``agent`` (additive) names the
    agent whose models these are, when the request named one.
    """

    type: Literal["models"] = "models"
    models: list[ModelEntry]
    defaultModel: Opt[Str] = None
    error: Opt[Str] = None
    agent: Opt[Str] = None


class CredentialsAckMessage(WireModel):
    """Reply to ``set-credentials``; ``keyValid`` absent means the probe did not run."""

    type: Literal["credentials-ack"] = "credentials-ack"
    machine: Str
    success: Bool
    hasAnthropicKey: Bool
    hasGithubPat: Bool
    keyValid: Opt[Bool] = None
    error: Opt[Str] = None


class DeviceConfigAckMessage(WireModel):
    """Reply to ``set-device-config``."""

    type: Literal["device-config-ack"] = "device-config-ack"
    success: Bool
    reachable: Opt[Bool] = None
    error: Opt[Str] = None


class PairAckMessage(WireModel):
    """Reply to ``pair-request``: ``relays`` + ``host`` on success, only ``reason`` on failure."""

    type: Literal["pair-ack"] = "pair-ack"
    machine: Str
    ok: Bool
    reason: Opt[PairAckReason] = None
    relays: Opt[list[Str]] = None
    host: Opt[BridgeHostKind] = None


class ProviderProfilesMessage(WireModel):
    """The stored provider profiles, redacted (no token, only ``hasToken``)."""

    type: Literal["provider-profiles"] = "provider-profiles"
    machine: Str
    profiles: list[ProviderProfileInfo]


class ProviderProfileAckMessage(WireModel):
    """Reply to ``set-provider-profile``; ``tokenValid`` absent means the probe did not run."""

    type: Literal["provider-profile-ack"] = "provider-profile-ack"
    machine: Str
    profileId: NonEmptyStr
    success: Bool
    tokenValid: Opt[Bool] = None
    error: Opt[Str] = None


class PushAckMessage(WireModel):
    """Additive (capability ``push``): reply to ``push-subscribe`` / ``push-unsubscribe``."""

    type: Literal["push-ack"] = "push-ack"
    endpoint: NonEmptyStr
    success: Bool
    error: Opt[Str] = None


BridgeToPhone: TypeAlias = (
    SessionsMessage
    | OutputMessage
    | InputAckMessage
    | SyncBeginMessage
    | SyncChunkMessage
    | SyncEndMessage
    | SessionPendingMessage
    | SessionReadyMessage
    | SessionFailedMessage
    | InputFailedMessage
    | CloseSessionAckMessage
    | SessionReplacedMessage
    | ModeConfirmedMessage
    | EffortConfirmedMessage
    | ModelConfirmedMessage
    | FolderAckMessage
    | UsageMessage
    | GsdStateMessage
    | ModelsMessage
    | CredentialsAckMessage
    | DeviceConfigAckMessage
    | PairAckMessage
    | ProviderProfilesMessage
    | ProviderProfileAckMessage
    | PushAckMessage
)
"""Every bridge → phone message, in the order of the spec."""
