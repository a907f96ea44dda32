"""Phone → bridge commands (PROTOCOL-v10-wire.md §5), all carried on kind 4515.

25 ``type`` strings, 26 models (the last two, ``push-subscribe`` and ``push-unsubscribe``,
additive behind the capability ``push``): ``upload-image`` has a Blossom shape and a chunked shape, tried in
that order (§2.6). Every command may carry the envelope fields ``v`` (the sender's protocol version)
and ``caps`` (the sender's capability strings); the bridge never rejects a command because of ``v``
and records ``caps`` per phone for the ``diff`` gate. They are written last on the wire.

Secrets that ride inbound (credentials, the pairing token, an image's AES key) are kept out of
``repr`` so that logging a decoded command cannot leak them.
"""

from __future__ import annotations

from typing import ClassVar, Literal, TypeAlias

from pydantic import Field

from .enums import (
    EffortLevel,
    KeypressContext,
    PermissionMode,
    PermissionModifier,
    SessionBackend,
)
from .primitives import (
    KEEP,
    Bool,
    NonEmptyStr,
    NonNegativeInt,
    Opt,
    PositiveInt,
    SeqRange,
    Str,
    TriStateStr,
    WireModel,
)
from .push import PushSubscription
from .shared import DeviceConfig, ProviderProfileWrite

__all__ = [
    "CloseSessionCommand",
    "Command",
    "CreateFolderCommand",
    "CreateSessionCommand",
    "EffortCommand",
    "GsdRequestCommand",
    "InputCommand",
    "InterruptCommand",
    "KeypressCommand",
    "ModeCommand",
    "ModelCommand",
    "ModelsRequestCommand",
    "PairRequestCommand",
    "PermissionResCommand",
    "PhoneToBridge",
    "ProviderProfilesRequestCommand",
    "PushSubscribeCommand",
    "PushUnsubscribeCommand",
    "QuestionInputCommand",
    "RefreshSessionsCommand",
    "SetCredentialsCommand",
    "SetDeviceConfigCommand",
    "SetProviderProfileCommand",
    "SyncAckCommand",
    "SyncRequestCommand",
    "UploadImageBlossomCommand",
    "UploadImageChunkedCommand",
    "UsageRequestCommand",
]


class Command(WireModel):
    """Base of every phone → bridge command: the optional ``v`` / ``caps`` envelope (§2.2)."""

    __wire_trailing__: ClassVar[tuple[str, ...]] = ("v", "caps")

    v: Opt[PositiveInt] = None
    caps: Opt[list[Str]] = None


class InputCommand(Command):
    """Text typed into a session. ``inputId`` (echoed verbatim) asks for an ``input-ack``."""

    type: Literal["input"] = "input"
    sessionId: NonEmptyStr
    text: Str
    inputId: Opt[Str] = None


class QuestionInputCommand(Command):
    """A free-text answer to the active AskUserQuestion card."""

    type: Literal["question-input"] = "question-input"
    sessionId: NonEmptyStr
    text: Str
    optionCount: NonNegativeInt


class PermissionResCommand(Command):
    """The answer to a permission card; ``requestId`` is the card's ``tool_use_id``."""

    type: Literal["permission-res"] = "permission-res"
    sessionId: NonEmptyStr
    requestId: NonEmptyStr
    allow: Bool
    modifier: Opt[PermissionModifier] = None


class KeypressCommand(Command):
    """A key on a plan-approval (``1``/``2``/``3``) or question card (a 1-based option)."""

    type: Literal["keypress"] = "keypress"
    sessionId: NonEmptyStr
    key: NonEmptyStr
    context: Opt[KeypressContext] = None


class ModeCommand(Command):
    """Switch a session's permission mode."""

    type: Literal["mode"] = "mode"
    sessionId: NonEmptyStr
    mode: PermissionMode


class EffortCommand(Command):
    """Switch a session's effort level."""

    type: Literal["effort"] = "effort"
    sessionId: NonEmptyStr
    level: EffortLevel


class ModelCommand(Command):
    """Switch a session's model."""

    type: Literal["model"] = "model"
    sessionId: NonEmptyStr
    model: NonEmptyStr


class SyncRequestCommand(Command):
    """Ask for the transcript seqs the phone lacks (``haveRanges`` may be empty)."""

    type: Literal["sync-request"] = "sync-request"
    sessionId: NonEmptyStr
    haveRanges: list[SeqRange]


class SyncAckCommand(Command):
    """Acknowledge one ``sync-chunk``; ``range`` must equal the chunk's range exactly."""

    type: Literal["sync-ack"] = "sync-ack"
    syncId: NonEmptyStr
    range: SeqRange


class CreateSessionCommand(Command):
    """Start a session. ``providerId`` binds it to a provider profile for its whole life.

    ``backend`` (late v10) and ``agent`` (additive, v11's name: an id of the heartbeat's
    ``agents``) choose the agent; absent both, Claude Code.
    """

    type: Literal["create-session"] = "create-session"
    defaultEffort: Opt[EffortLevel] = None
    model: Opt[Str] = None
    testSession: Opt[Bool] = None
    cwd: Opt[Str] = None
    createCwd: Opt[Bool] = None
    providerId: Opt[NonEmptyStr] = None
    backend: Opt[SessionBackend] = None
    agent: Opt[NonEmptyStr] = None


class RefreshSessionsCommand(Command):
    """Ask for a fresh heartbeat."""

    type: Literal["refresh-sessions"] = "refresh-sessions"


class CloseSessionCommand(Command):
    """Close a session; the bridge tombstones it in the heartbeat."""

    type: Literal["close-session"] = "close-session"
    sessionId: NonEmptyStr


class InterruptCommand(Command):
    """Stop the current turn and deny pending cards."""

    type: Literal["interrupt"] = "interrupt"
    sessionId: NonEmptyStr


class CreateFolderCommand(Command):
    """Create a project folder under a workspace root."""

    type: Literal["create-folder"] = "create-folder"
    path: NonEmptyStr
    root: Opt[Str] = None
    requestId: NonEmptyStr


class UploadImageBlossomCommand(Command):
    """An image stored encrypted on a Blossom server (tried before the chunked shape)."""

    type: Literal["upload-image"] = "upload-image"
    sessionId: NonEmptyStr
    hash: NonEmptyStr
    url: NonEmptyStr
    key: NonEmptyStr = Field(repr=False)
    iv: NonEmptyStr
    filename: Str
    mimeType: Str
    text: Str
    sizeBytes: NonNegativeInt


class UploadImageChunkedCommand(Command):
    """One base64 chunk of an image sent inline."""

    type: Literal["upload-image"] = "upload-image"
    sessionId: NonEmptyStr
    uploadId: NonEmptyStr
    filename: Str
    mimeType: Str
    base64Data: Str = Field(repr=False)
    text: Str
    chunkIndex: NonNegativeInt
    totalChunks: PositiveInt


class UsageRequestCommand(Command):
    """Ask for a session's usage figures."""

    type: Literal["usage-request"] = "usage-request"
    sessionId: NonEmptyStr


class GsdRequestCommand(Command):
    """Ask for a session's GSD state."""

    type: Literal["gsd-request"] = "gsd-request"
    sessionId: NonEmptyStr


class ModelsRequestCommand(Command):
    """Ask for the models the bridge can run: Claude Code's, or (additive) those of the agent
    ``backend`` or ``agent`` names."""

    type: Literal["models-request"] = "models-request"
    backend: Opt[SessionBackend] = None
    agent: Opt[NonEmptyStr] = None


class SetCredentialsCommand(Command):
    """Store or clear credentials. Each field is tri-state: :data:`KEEP` (absent) keeps the stored
    value, ``None`` clears it, a string sets it."""

    type: Literal["set-credentials"] = "set-credentials"
    anthropicApiKey: TriStateStr = Field(default=KEEP, repr=False)
    githubPat: TriStateStr = Field(default=KEEP, repr=False)


class SetDeviceConfigCommand(Command):
    """Store the sending phone's device configuration."""

    type: Literal["set-device-config"] = "set-device-config"
    config: DeviceConfig


class PairRequestCommand(Command):
    """Pair with the bridge. Identity is the event author; ``npub``/``pubkeyHex`` are display only."""

    type: Literal["pair-request"] = "pair-request"
    npub: NonEmptyStr
    pubkeyHex: NonEmptyStr
    label: Str
    token: NonEmptyStr = Field(repr=False)


class SetProviderProfileCommand(Command):
    """Upsert a provider profile, or delete it with ``profile: null``."""

    type: Literal["set-provider-profile"] = "set-provider-profile"
    profileId: NonEmptyStr
    profile: ProviderProfileWrite | None


class ProviderProfilesRequestCommand(Command):
    """Ask for the stored (redacted) provider profiles."""

    type: Literal["provider-profiles-request"] = "provider-profiles-request"


class PushSubscribeCommand(Command):
    """Additive (capability ``push``): wake the sending phone by Web Push when it is away."""

    type: Literal["push-subscribe"] = "push-subscribe"
    subscription: PushSubscription


class PushUnsubscribeCommand(Command):
    """Additive (capability ``push``): forget one of the sending phone's push subscriptions."""

    type: Literal["push-unsubscribe"] = "push-unsubscribe"
    endpoint: NonEmptyStr


PhoneToBridge: TypeAlias = (
    InputCommand
    | QuestionInputCommand
    | PermissionResCommand
    | KeypressCommand
    | ModeCommand
    | EffortCommand
    | ModelCommand
    | SyncRequestCommand
    | SyncAckCommand
    | CreateSessionCommand
    | RefreshSessionsCommand
    | CloseSessionCommand
    | InterruptCommand
    | CreateFolderCommand
    | UploadImageBlossomCommand
    | UploadImageChunkedCommand
    | UsageRequestCommand
    | GsdRequestCommand
    | ModelsRequestCommand
    | SetCredentialsCommand
    | SetDeviceConfigCommand
    | PairRequestCommand
    | SetProviderProfileCommand
    | ProviderProfilesRequestCommand
    | PushSubscribeCommand
    | PushUnsubscribeCommand
)
"""Every phone → bridge command, in the order of the spec (and of union resolution)."""
