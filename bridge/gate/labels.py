"""The gate's vocabulary: outcomes, reason labels and the human text for each label.

The labels are the Desiide risk gate's (``spec/seeds/desiide-protocol.md``, "Reason labels JEV-2
adds"): ``deny_list:<rule>`` for its twelve deny rules and our ``secret_path``, the six floors,
plus ``loop_detected``. They ride on the phone card's ``metadata.reasons`` and in the tool-result text of a block, so they
are part of the wire vocabulary: never rename one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "ALL_LABELS",
    "DENY_PREFIX",
    "DENY_RULES",
    "FLOOR_LABELS",
    "LOOP_LABEL",
    "TASK_LABELS",
    "GateDecision",
    "Outcome",
    "deny_label",
    "describe_decision",
    "describe_reason",
    "order_labels",
]

DENY_PREFIX = "deny_list:"

DENY_RULES: tuple[str, ...] = (
    "rm_rf",
    "mkfs",
    "dd_device",
    "fork_bomb",
    "curl_pipe_sh",
    "force_push_protected",
    "chmod_system",
    "chown_system",
    "chgrp_system",
    "find_delete_system",
    "system_write",
    "shutdown",
    "secret_path",
)
"""Rules whose hit blocks the call in every permission mode."""

FLOOR_LABELS: tuple[str, ...] = (
    "outside_workspace",
    "command_substitution",
    "privileged",
    "background_process",
    "unparsable_command",
    "inline_code",
)
"""Labels that force a phone card even where the mode would auto-allow."""

LOOP_LABEL = "loop_detected"


def deny_label(rule: str) -> str:
    """The reason label of a deny rule, e.g. ``deny_list:rm_rf``.

    Raises:
        ValueError: ``rule`` is not one of :data:`DENY_RULES`.
    """
    if rule not in DENY_RULES:
        raise ValueError(f"unknown deny rule: {rule!r}")
    return DENY_PREFIX + rule


TASK_LABELS: tuple[str, ...] = (
    "tool_not_allowed",
    "budget:maxToolCalls",
    "gate_error",
    "policy_override:strict_mode",
    "jev:pending",
)
"""Labels of a Desiide task's calls (:mod:`bridge.engine.editor.task_gate`): its policy, strict mode,
and a call held for the editor's judge."""

ALL_LABELS: tuple[str, ...] = (
    *(DENY_PREFIX + rule for rule in DENY_RULES),
    *FLOOR_LABELS,
    LOOP_LABEL,
    *TASK_LABELS,
)
"""Every label the gate can emit, in the canonical order of :func:`order_labels`."""

_RANK = {label: index for index, label in enumerate(ALL_LABELS)}

_TEXTS: dict[str, str] = {
    "deny_list:rm_rf": (
        "Recursive delete of /, the home directory, a workspace root, the session's folder or a "
        "path outside the workspace."
    ),
    "deny_list:mkfs": "Creates or wipes a filesystem (mkfs, mkswap, wipefs, …).",
    "deny_list:dd_device": "Writes raw data to a device under /dev.",
    "deny_list:fork_bomb": "A fork bomb: a function that spawns copies of itself.",
    "deny_list:curl_pipe_sh": "Runs code downloaded from the network in a shell or interpreter.",
    "deny_list:force_push_protected": (
        "Force push to (or deletion of) a protected branch: main, master, release*, production, "
        "or a branch that cannot be told."
    ),
    "deny_list:chmod_system": "Changes permissions of system paths (or recursively of / or ~).",
    "deny_list:chown_system": "Changes the owner of system paths (or recursively of / or ~).",
    "deny_list:chgrp_system": "Changes the group of system paths (or recursively of / or ~).",
    "deny_list:find_delete_system": "find deletes files under /, a system directory or ~.",
    "deny_list:system_write": (
        "Writes into a system directory (/etc, /usr, /boot, /bin, /sbin, /lib*, /var, …) outside "
        "the workspace."
    ),
    "deny_list:shutdown": "Shuts down, reboots or suspends the machine.",
    "deny_list:secret_path": (
        "Names a path the agent must never see: the bridge's own home and key files, ~/.ssh, "
        "~/.gnupg, cloud and forge credentials, password stores or browser profiles."
    ),
    "outside_workspace": (
        "Reads outside the workspace, writes outside the session's folder, or touches a path "
        "that can't be told."
    ),
    "command_substitution": "Runs a command substitution ($(…), `…`, <(…)) whose result can't be seen.",
    "privileged": "Runs with elevated privileges (sudo, su, doas, pkexec).",
    "background_process": "Starts a process that keeps running in the background.",
    "unparsable_command": "The command can't be parsed safely, so it can't be checked.",
    "inline_code": "Runs inline code (python -c, node -e, bash -c, eval, a script on stdin, …).",
    "loop_detected": "The same call was made three times in a row.",
    "tool_not_allowed": "The editor's task does not allow this tool.",
    "budget:maxToolCalls": "The editor's task has used up its tool calls.",
    "gate_error": "The gate could not judge this call, so it asks.",
    "policy_override:strict_mode": "The editor's strict mode asks about every call.",
    "jev:pending": "The editor's judge is looking at this call.",
}


def describe_reason(label: str) -> str:
    """One sentence a phone user can read for a reason label.

    Raises:
        ValueError: ``label`` is not one the gate emits.
    """
    try:
        return _TEXTS[label]
    except KeyError:
        raise ValueError(f"unknown gate reason label: {label!r}") from None


def order_labels(labels: Iterable[str]) -> tuple[str, ...]:
    """Deduplicate and sort labels: deny rules first, then floors, then ``loop_detected``.

    A fixed order keeps cards, logs and test expectations stable whatever order the checks ran in.

    Raises:
        ValueError: one of ``labels`` is not one the gate emits.
    """
    unique = set(labels)
    unknown = unique - _RANK.keys()
    if unknown:
        raise ValueError(f"unknown gate reason labels: {sorted(unknown)!r}")
    return tuple(sorted(unique, key=_RANK.__getitem__))


class Outcome(StrEnum):
    """What the bridge does with a tool call."""

    BLOCK = "block"
    """Denied at once; the phone and the model are told why."""
    ASK = "ask"
    """A phone card; never auto-allowed."""
    ALLOW = "allow"
    """Auto-allowed by the permission mode."""


@dataclass(frozen=True, slots=True)
class GateDecision:
    """The gate's verdict on one tool call.

    Attributes:
        outcome: block, ask or allow.
        reasons: the labels that led there, in :func:`order_labels` order; empty when the mode
            alone decided (allow, or ask for a write in plan mode).
    """

    outcome: Outcome
    reasons: tuple[str, ...] = ()

    @property
    def blocked(self) -> bool:
        """True when a deny rule hit."""
        return self.outcome is Outcome.BLOCK


def describe_decision(decision: GateDecision) -> str:
    """The text for the tool result of a block, or the explanation on a card.

    Example: ``"Blocked by the bridge's risk gate: deny_list:rm_rf — Recursive delete …"``.
    """
    if decision.outcome is Outcome.BLOCK:
        head = "Blocked by the bridge's risk gate"
    elif decision.outcome is Outcome.ASK:
        head = "Needs approval on the phone"
    else:
        head = "Allowed by the permission mode"
    if not decision.reasons:
        return head + "."
    details = "; ".join(f"{label} — {describe_reason(label)}" for label in decision.reasons)
    return f"{head}: {details}"
