"""Capability strings and what each one gates (PROTOCOL-v10-wire.md §9).

The bridge advertises ``protocolVersion`` and ``capabilities[]`` on every heartbeat; phones stamp
commands with ``v`` and ``caps``. Features are gated on these strings, never on version
comparisons. Not every string is a runtime gate; each has one of three tiers:

- **hard gate**: behaviour changes when the string is absent (``images``, ``custom-providers`` are
  gated by the phone on the heartbeat; ``diff`` is gated by the bridge on the phones' ``caps``);
- **presence marker**: the feature is unconditional at v10 and real detection is on payload data,
  or it simply always runs;
- **transport beacon**: ``chunked``, advertised by both sides and gated by neither.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

__all__ = [
    "ALL_BRIDGE_CAPABILITIES",
    "ALL_PHONE_CAPABILITIES",
    "CAPABILITIES",
    "CAPABILITY_BY_NAME",
    "CHUNKED",
    "CUSTOM_PROVIDERS",
    "DEVICE_ACTIONS",
    "DIFF",
    "FOLDERS",
    "GSD",
    "IMAGES",
    "MODELS",
    "OPENCODE",
    "PROTOCOL_VERSION",
    "PUSH",
    "SYNC_V1",
    "USAGE",
    "Capability",
    "Tier",
    "diff_allowed",
]

PROTOCOL_VERSION: Final = 10
"""The ``protocolVersion`` of the heartbeat and the ``v`` a v10 phone stamps on commands."""

SYNC_V1: Final = "sync/1"
FOLDERS: Final = "folders"
GSD: Final = "gsd"
IMAGES: Final = "images"
DEVICE_ACTIONS: Final = "device-actions"
USAGE: Final = "usage"
MODELS: Final = "models"
DIFF: Final = "diff"
CUSTOM_PROVIDERS: Final = "custom-providers"
CHUNKED: Final = "chunked"
OPENCODE: Final = "opencode"
PUSH: Final = "push"


class Tier(enum.Enum):
    """How much a capability string actually gates."""

    HARD_GATE = "hard gate"
    PRESENCE_MARKER = "presence marker"
    TRANSPORT_BEACON = "transport beacon"


@dataclass(frozen=True, slots=True)
class Capability:
    """One capability string with its tier and what it means."""

    name: str
    tier: Tier
    note: str
    late_v10: bool = False


CAPABILITIES: Final = (
    Capability(SYNC_V1, Tier.PRESENCE_MARKER, "Transcript sync always runs."),
    Capability(
        FOLDERS,
        Tier.PRESENCE_MARKER,
        "The phone gates on folders[] / roots[] being present, not on the string.",
    ),
    Capability(GSD, Tier.PRESENCE_MARKER, "The UI gates on gsd.available."),
    Capability(
        IMAGES,
        Tier.HARD_GATE,
        "Phone side: the attach control is shown only if the heartbeat carries it.",
    ),
    Capability(
        DEVICE_ACTIONS,
        Tier.PRESENCE_MARKER,
        "create-session.testSession is implemented, but no phone UI sends it.",
    ),
    Capability(USAGE, Tier.PRESENCE_MARKER, "The phone requests usage unconditionally."),
    Capability(MODELS, Tier.PRESENCE_MARKER, "The phone requests models unconditionally."),
    Capability(
        DIFF,
        Tier.HARD_GATE,
        "Bridge side: diff entries only when at least one phone sent a command this boot and "
        "every phone heard from this boot had diff in its caps.",
    ),
    Capability(
        CUSTOM_PROVIDERS,
        Tier.HARD_GATE,
        "Phone side: all provider UI and every providerId send; an old bridge would strip "
        "providerId and bill Anthropic.",
    ),
    Capability(CHUNKED, Tier.TRANSPORT_BEACON, "Advertised by both sides; gated by neither."),
    Capability(
        OPENCODE,
        Tier.HARD_GATE,
        "Late v10 (OpenCode build), phone side: send create-session.backend 'opencode' only "
        "when the bridge advertises it. This bridge advertises it only while OpenCode is "
        "configured and its start-up check passed.",
        late_v10=True,
    ),
    Capability(
        PUSH,
        Tier.HARD_GATE,
        "Additive (CodeDeck Web), phone side: send push-subscribe only when the bridge "
        "advertises it; the heartbeat's pushKey is the VAPID key to subscribe with. Advertised "
        "unless the bridge's push setting is off.",
        late_v10=True,
    ),
)
"""Every known capability: the ten of v10 in advertising order, then the late-v10 ``opencode``
and the additive ``push``."""

CAPABILITY_BY_NAME: Final = {capability.name: capability for capability in CAPABILITIES}

ALL_BRIDGE_CAPABILITIES: Final = tuple(c.name for c in CAPABILITIES if not c.late_v10)
"""The ten strings a v10 bridge advertises, in the reference order."""

ALL_PHONE_CAPABILITIES: Final = (DIFF, CHUNKED)
"""What the reference phone stamps in ``caps``."""


def diff_allowed(caps_by_phone: Mapping[str, Iterable[str]]) -> bool:
    """The bridge-side ``diff`` gate.

    Args:
        caps_by_phone: For every phone heard from this boot, the ``caps`` of its latest valid
            command (``[]`` when it sent none).

    Returns:
        True when at least one phone was heard and every one of them listed ``diff``.
    """
    return bool(caps_by_phone) and all(DIFF in caps for caps in caps_by_phone.values())
