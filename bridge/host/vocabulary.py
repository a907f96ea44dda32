"""The few words of the wire a session host needs, without importing the wire's models.

A host must stay lean (no pydantic: importing :mod:`bridge.protocol` builds every model of the wire,
which each host would pay for in memory and start time; the host RSS is in ``docs/BENCHMARKS.md``),
yet its drivers write transcript entries and take option values the phone sent. The values here are
copies of :mod:`bridge.protocol.enums`; a test holds them equal, so the two cannot drift.

:func:`make_entry` builds one ``OutputEntry`` as the JSON object the daemon validates on arrival.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

__all__ = [
    "DIFF_LINE_TYPES",
    "EFFORT_LEVELS",
    "OUTPUT_ENTRY_TYPES",
    "PERMISSION_MODES",
    "iso_timestamp",
    "make_entry",
]

PERMISSION_MODES: Final = ("default", "acceptEdits", "plan")
"""The modes a phone may set (``bypassPermissions`` never reaches the wire)."""
EFFORT_LEVELS: Final = ("low", "medium", "high", "xhigh", "max", "auto")
OUTPUT_ENTRY_TYPES: Final = (
    "text",
    "tool_use",
    "tool_result",
    "system",
    "error",
    "progress",
    "thinking",
    "diff",
)
DIFF_LINE_TYPES: Final = ("add", "del", "context")


def iso_timestamp(unix: float) -> str:
    """`unix` seconds as ISO-8601 UTC with milliseconds and ``Z`` (JavaScript's ``toISOString``)."""
    moment = datetime.fromtimestamp(unix, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def make_entry(
    entry_type: str,
    content: str,
    timestamp: str,
    metadata: Mapping[str, Any] | None = None,
    diff: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One ``OutputEntry`` as JSON (absent fields left out, as the wire's encoder does).

    Raises:
        ValueError: `entry_type` is not an entry type of the wire (a bug in the driver).
    """
    if entry_type not in OUTPUT_ENTRY_TYPES:
        raise ValueError(f"unknown entry type {entry_type!r}")
    entry: dict[str, Any] = {"entryType": entry_type, "content": content, "timestamp": timestamp}
    if metadata is not None:
        entry["metadata"] = dict(metadata)
    if diff is not None:
        entry["diff"] = dict(diff)
    return entry
