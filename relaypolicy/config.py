"""The policy's tunables, with defaults, read from an optional TOML file (``--config FILE``).

Example (every key optional; these are the defaults)::

    # Longest NIP-40 lifetime a 4515/4516 may ask for, counted from the relay's receivedAt.
    max_command_expiry_seconds = 3600
    clock_skew_seconds = 120
    # Rate-limit buckets kept in memory; the least recently used are forgotten beyond this.
    max_tracked_keys = 65536

    [rate_limits.group_message_per_ip]   # kind 445, per source IP (IPv6: per /64)
    burst = 20
    per_second = 1.0

    [rate_limits.pairing_per_ip]         # 4515 from an unregistered key into a pairing window
    burst = 10
    per_second = 0.2

    [rate_limits.gift_wrap_per_ip]       # kind 1059, whose signers are one-off keys
    burst = 30
    per_second = 0.5

    [rate_limits.writer_per_pubkey]      # every event by a registered author
    burst = 3000
    per_second = 300.0

A limit can be switched off with ``enabled = false``. Unknown keys are an error: a misspelt limit
silently falling back to its default is how a relay ends up unprotected.

Why these defaults: 445, the narrow carve-out (CDX-013), gets a burst of 20 refilling at 1 per
second. A pairing phone sends one ``pair-request`` (and maybe a retry), so 10 per IP is plenty. The
writer limit must let a bridge stream live output (one 24515 per transcript entry, over 1,000 a
second in a busy turn) and let a phone burst legitimately (one ``sync-ack`` per chunk: a
50,000-entry sync is 1,000 commands within seconds), while capping what one leaked phone key can
push: 300/s sustained with a burst of 3,000. (A limit of 25/s with a burst of 300 would refuse a
paired phone's sync acks and a bridge's live output under load.) The daemon's embedded relay runs
without it: only the owner's own bridge and phones write there.

Pure apart from :func:`load_config`, which reads the file.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Final

__all__ = [
    "DEFAULT_CONFIG",
    "ConfigError",
    "PolicyConfig",
    "RateLimit",
    "load_config",
    "parse_config",
]

_HOUR: Final = 3600


class ConfigError(ValueError):
    """The policy configuration is invalid; the message names the key and what is wrong."""


@dataclass(frozen=True, slots=True)
class RateLimit:
    """A token bucket: up to ``burst`` events at once, refilled at ``per_second`` events/second."""

    burst: int
    per_second: float

    def __post_init__(self) -> None:
        if isinstance(self.burst, bool) or not isinstance(self.burst, int) or self.burst < 1:
            raise ConfigError(f"burst must be an integer >= 1, got {self.burst!r}")
        if (
            isinstance(self.per_second, bool)
            or not isinstance(self.per_second, int | float)
            or not math.isfinite(self.per_second)
            or self.per_second < 0
        ):
            raise ConfigError(f"per_second must be a number >= 0, got {self.per_second!r}")


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    """Everything the rules can be tuned by. ``None`` for a limit means "not rate-limited"."""

    max_command_expiry_seconds: int = _HOUR
    clock_skew_seconds: int = 120
    """Slack on top of the expiry cap for a sender whose clock runs ahead of the relay's (the
    cap is counted from the relay's ``receivedAt``; a phone two minutes fast would otherwise
    have every command refused)."""
    max_tracked_keys: int = 65536
    group_message_per_ip: RateLimit | None = field(default_factory=lambda: RateLimit(20, 1.0))
    pairing_per_ip: RateLimit | None = field(default_factory=lambda: RateLimit(10, 0.2))
    gift_wrap_per_ip: RateLimit | None = field(default_factory=lambda: RateLimit(30, 0.5))
    writer_per_pubkey: RateLimit | None = field(default_factory=lambda: RateLimit(3000, 300.0))

    def __post_init__(self) -> None:
        for name in ("max_command_expiry_seconds", "max_tracked_keys"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
        skew = self.clock_skew_seconds
        if isinstance(skew, bool) or not isinstance(skew, int) or not 0 <= skew <= 3600:
            raise ConfigError(f"clock_skew_seconds must be an integer in 0..3600, got {skew!r}")


DEFAULT_CONFIG: Final = PolicyConfig()

_LIMIT_NAMES: Final = tuple(
    f.name for f in fields(PolicyConfig) if f.name.endswith(("_per_ip", "_per_pubkey"))
)
_TOP_LEVEL: Final = frozenset(
    {"max_command_expiry_seconds", "clock_skew_seconds", "max_tracked_keys", "rate_limits"}
)


def _parse_limit(name: str, raw: object, default: RateLimit | None) -> RateLimit | None:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"rate_limits.{name} must be a table")
    unknown = set(raw) - {"burst", "per_second", "enabled"}
    if unknown:
        raise ConfigError(f"rate_limits.{name}: unknown key(s) {', '.join(sorted(unknown))}")
    enabled = raw.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ConfigError(f"rate_limits.{name}.enabled must be true or false")
    if not enabled:
        return None
    base = default or RateLimit(1, 1.0)
    try:
        return RateLimit(
            burst=raw.get("burst", base.burst), per_second=raw.get("per_second", base.per_second)
        )
    except ConfigError as exc:
        raise ConfigError(f"rate_limits.{name}: {exc}") from None


def parse_config(raw: Mapping[str, Any]) -> PolicyConfig:
    """Build a :class:`PolicyConfig` from a decoded TOML document (missing keys keep defaults).

    Raises:
        ConfigError: an unknown key, a wrong type or an out-of-range value.
    """
    unknown = set(raw) - _TOP_LEVEL
    if unknown:
        raise ConfigError(f"unknown key(s) {', '.join(sorted(unknown))}")
    limits_raw = raw.get("rate_limits", {})
    if not isinstance(limits_raw, Mapping):
        raise ConfigError("rate_limits must be a table")
    unknown = set(limits_raw) - set(_LIMIT_NAMES)
    if unknown:
        raise ConfigError(
            f"rate_limits: unknown limit(s) {', '.join(sorted(unknown))} "
            f"(known: {', '.join(_LIMIT_NAMES)})"
        )
    values: dict[str, Any] = {}
    for name in ("max_command_expiry_seconds", "clock_skew_seconds", "max_tracked_keys"):
        if name in raw:
            values[name] = raw[name]
    for name in _LIMIT_NAMES:
        if name in limits_raw:
            values[name] = _parse_limit(name, limits_raw[name], getattr(DEFAULT_CONFIG, name))
    return PolicyConfig(**values)


def load_config(path: str | Path | None) -> PolicyConfig:
    """Read ``path`` (TOML) into a :class:`PolicyConfig`; ``None`` gives the defaults.

    Raises:
        ConfigError: the file cannot be read, is not TOML, or holds an invalid setting. The message
            names the file.
    """
    if path is None:
        return DEFAULT_CONFIG
    try:
        with open(path, "rb") as handle:
            raw = tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    try:
        return parse_config(raw)
    except ConfigError as exc:
        raise ConfigError(f"config file {path}: {exc}") from None
