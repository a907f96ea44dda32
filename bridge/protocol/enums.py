"""Every closed vocabulary of CodeDeck protocol v10, as ``Literal`` aliases.

Why ``Literal`` and not ``enum.Enum``: the wire carries plain strings, and the engine pattern-matches
on them (``case "plan": ...``). A ``Literal`` keeps the decoded value a ``str`` (so it is written back
byte-identical and compares equal to the JSON value) while mypy still checks exhaustiveness.

Each alias has a matching tuple of its values, in the order of PROTOCOL-v10-wire.md §4.1, for code
and tests that need to iterate over a vocabulary. A value outside a vocabulary is rejected on decode
(PROTOCOL-v10-wire.md §2.3): zod's ``z.enum`` does the same in the reference.
"""

from __future__ import annotations

from typing import Literal, TypeAlias, get_args

__all__ = [
    "APP_UNDER_TEST_VALUES",
    "BRIDGE_HOST_KINDS",
    "DEVICE_ROLES",
    "DIFF_LINE_TYPES",
    "EFFORT_LEVELS",
    "INPUT_FAILED_REASONS",
    "KEYPRESS_CONTEXTS",
    "OUTPUT_ENTRY_TYPES",
    "PAIR_ACK_REASONS",
    "PERMISSION_MODES",
    "PERMISSION_MODIFIERS",
    "SESSION_BACKENDS",
    "SESSION_STATES",
    "AppUnderTest",
    "BridgeHostKind",
    "DeviceRole",
    "DiffLineType",
    "EffortLevel",
    "InputFailedReason",
    "KeypressContext",
    "OutputEntryType",
    "PairAckReason",
    "PermissionMode",
    "PermissionModifier",
    "SessionBackend",
    "SessionState",
]

# `bypassPermissions` is deliberately absent: the bridge coerces it to `default` before it can
# reach the wire, and a phone that sends it is rejected.
PermissionMode: TypeAlias = Literal["default", "acceptEdits", "plan"]
EffortLevel: TypeAlias = Literal["low", "medium", "high", "xhigh", "max", "auto"]
# `offline` is what every session carries in the clean-shutdown heartbeat (the bug-B contract).
SessionState: TypeAlias = Literal[
    "idle", "running", "waiting_permission", "waiting_question", "offline"
]
# `diff` is emitted only behind the bridge-side `diff` capability gate (CDX-050).
OutputEntryType: TypeAlias = Literal[
    "text", "tool_use", "tool_result", "system", "error", "progress", "thinking", "diff"
]
DiffLineType: TypeAlias = Literal["add", "del", "context"]
# A UI badge only, never identity: identity is always the event author's pubkey.
BridgeHostKind: TypeAlias = Literal["cli", "vscode", "service"]
DeviceRole: TypeAlias = Literal["controller", "test-target"]
AppUnderTest: TypeAlias = Literal["kubo", "veil", "custom"]
# [late-v10/OpenCode]: absent means `claude-code`.
SessionBackend: TypeAlias = Literal["claude-code", "opencode"]
# `busy` is reserved and `expired` is for a command that aged out before it was processed.
InputFailedReason: TypeAlias = Literal["no-session", "expired", "busy", "error"]
PairAckReason: TypeAlias = Literal["bad-token", "window-closed"]
PermissionModifier: TypeAlias = Literal["always", "never"]
KeypressContext: TypeAlias = Literal["plan-approval", "question"]

PERMISSION_MODES: tuple[PermissionMode, ...] = get_args(PermissionMode)
EFFORT_LEVELS: tuple[EffortLevel, ...] = get_args(EffortLevel)
SESSION_STATES: tuple[SessionState, ...] = get_args(SessionState)
OUTPUT_ENTRY_TYPES: tuple[OutputEntryType, ...] = get_args(OutputEntryType)
DIFF_LINE_TYPES: tuple[DiffLineType, ...] = get_args(DiffLineType)
BRIDGE_HOST_KINDS: tuple[BridgeHostKind, ...] = get_args(BridgeHostKind)
DEVICE_ROLES: tuple[DeviceRole, ...] = get_args(DeviceRole)
APP_UNDER_TEST_VALUES: tuple[AppUnderTest, ...] = get_args(AppUnderTest)
SESSION_BACKENDS: tuple[SessionBackend, ...] = get_args(SessionBackend)
INPUT_FAILED_REASONS: tuple[InputFailedReason, ...] = get_args(InputFailedReason)
PAIR_ACK_REASONS: tuple[PairAckReason, ...] = get_args(PairAckReason)
PERMISSION_MODIFIERS: tuple[PermissionModifier, ...] = get_args(PermissionModifier)
KEYPRESS_CONTEXTS: tuple[KeypressContext, ...] = get_args(KeypressContext)
