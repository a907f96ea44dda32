"""Timestamps as the wire writes them (JavaScript's ``Date.prototype.toISOString``)."""

from __future__ import annotations

import datetime as _dt

__all__ = ["iso"]


def iso(now: float) -> str:
    """ISO-8601 UTC with milliseconds, e.g. ``2026-11-29T20:00:00.123Z``."""
    moment = _dt.datetime.fromtimestamp(now, tz=_dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
