"""A phone's device-testing configuration (``set-device-config``, PROTOCOL-v10-wire.md §4.7).

The bridge keeps one configuration per phone (the event author, never a payload claim) and
answers ``device-config-ack`` to the sender only. ``meshIp`` and ``meshPubkey`` describe how
the phone reached the bridge at that moment: transport-only, so they are stripped before
persisting (a stale address must never be reused later).

Device actions themselves (building and installing the app under test) are not part of this
bridge; the configuration is stored so that a phone's settings survive, and ``reachable`` is
never set (as in the reference). Validation beyond the wire schema is about what a later
consumer could trip on: every text bounded, no control characters, and ``projectDir``
absolute when given.
"""

from __future__ import annotations

from typing import Any, Final

from bridge.protocol import DeviceConfig, DeviceConfigAckMessage

__all__ = [
    "MAX_COMMAND_LENGTH",
    "MAX_FIELD_LENGTH",
    "TRANSPORT_ONLY_FIELDS",
    "config_to_record",
    "device_config_ack",
    "prepare_device_config",
]

TRANSPORT_ONLY_FIELDS: Final = frozenset({"meshIp", "meshPubkey"})
MAX_FIELD_LENGTH: Final = 1024
MAX_COMMAND_LENGTH: Final = 4096
"""``customBuildCmd`` may be a longer shell line than the other fields."""


def _problem(name: str, value: str) -> str | None:
    limit = MAX_COMMAND_LENGTH if name == "customBuildCmd" else MAX_FIELD_LENGTH
    if len(value) > limit:
        return f"{name} is too long (at most {limit} characters)"
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in value):
        return f"{name} must not contain control characters"
    return None


def prepare_device_config(config: DeviceConfig) -> dict[str, Any] | str:
    """Validate a configuration and strip its transport-only fields.

    Args:
        config: the decoded ``set-device-config.config``.

    Returns:
        The record to persist (wire names, absent fields omitted), or the readable reason it
        was refused (for the ack's ``error``).
    """
    record = config_to_record(config)
    for name, value in record.items():
        if isinstance(value, str) and (problem := _problem(name, value)) is not None:
            return problem
    project_dir = record.get("projectDir")
    if isinstance(project_dir, str) and project_dir and not project_dir.startswith("/"):
        return "projectDir must be an absolute path"
    return record


def config_to_record(config: DeviceConfig) -> dict[str, Any]:
    """The persisted shape: the wire fields that are set, minus the transport-only ones."""
    return {
        name: value
        for name, value in config.model_dump(exclude_none=True).items()
        if name not in TRANSPORT_ONLY_FIELDS
    }


def device_config_ack(error: str | None = None) -> DeviceConfigAckMessage:
    """The ack for the sender: success unless `error` is given."""
    return DeviceConfigAckMessage(success=error is None, error=error)
