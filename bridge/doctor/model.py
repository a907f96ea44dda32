"""What a doctor check reports: a status, one line of what was found, and the fix for a failure."""

from __future__ import annotations

import enum
from dataclasses import field
from typing import Any

from bridge.records import record

__all__ = ["Check", "Status"]


class Status(enum.Enum):
    """The outcome of one check. Only `FAIL` makes ``doctor`` exit non-zero."""

    PASS = "pass"
    WARN = "warn"
    """Works, but something is likely to bite (e.g. the daemon is not running)."""
    FAIL = "fail"
    SKIP = "skip"
    """Could not or need not be checked here; the summary says why."""


@record
class Check:
    """One line of the report.

    Attributes:
        name: a stable short name (``home``, ``relay``, ``clock``, …), for ``--skip`` and scripts.
        status: the outcome.
        summary: what was found, one line, no secrets.
        fix: what to do, for `Status.FAIL` and `Status.WARN` (None when nothing is to be done).
        details: machine-readable facts for ``--json`` (paths, versions, milliseconds).
    """

    name: str
    status: Status
    summary: str
    fix: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status.value,
            "summary": self.summary,
            "fix": self.fix,
            "details": self.details,
        }
