"""Masking secrets in log lines: the patterns, a registry of exact values, a logging filter.

A leaf module (``re``, ``threading``, ``logging`` only) so that both the daemon's logging
(:mod:`bridge.logs`, which adds ``nsec1…`` forms of keys) and a session host — which must not
load the daemon's stack — mask the same things the same way.

What is masked: every exact value registered (longest first; values under
:data:`MIN_SECRET_LENGTH` characters are ignored, they would mask ordinary words), and anything
that looks like an ``nsec1…`` key, an Anthropic key (``sk-ant-…``), a ``Bearer`` token, or an
``ANTHROPIC_API_KEY=…`` style assignment. The patterns are a safety net, not a licence: code
still must not log secrets.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable
from typing import Any, Final

__all__ = [
    "MIN_SECRET_LENGTH",
    "PATTERNS",
    "REDACTED",
    "SecretRegistry",
    "SecretsFilter",
    "mask",
]

REDACTED: Final = "[REDACTED]"
MIN_SECRET_LENGTH: Final = 8
"""Shorter "secrets" would mask ordinary words."""

PATTERNS: Final = (
    # NIP-19 secret keys (bech32 alphabet); the whole token goes.
    (re.compile(r"nsec1[qpzry9x8gf2tvdw0s3jn54khce6mua7l]{6,}", re.IGNORECASE), f"nsec1{REDACTED}"),
    # Anthropic API keys and OAuth tokens (sk-ant-api03-…, sk-ant-oat01-…).
    (re.compile(r"sk-ant-[A-Za-z0-9_\-]{4,}"), f"sk-ant-{REDACTED}"),
    # HTTP bearer tokens (the relay admin token, provider tokens).
    (re.compile(r"(?i)\b(bearer)(\s+)[A-Za-z0-9._~+/=\-]{4,}"), rf"\1\2{REDACTED}"),
    # NAME=value / NAME: value for the credential variables the bridge knows of.
    (
        re.compile(
            r"(?i)\b((?:ANTHROPIC_API_KEY|ANTHROPIC_AUTH_TOKEN|CLAUDE_CODE_OAUTH_TOKEN)"
            r"[\"']?\s*[=:]\s*[\"']?)[^\s\"',;]+"
        ),
        rf"\1{REDACTED}",
    ),
)

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_RESERVED: Final = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message",
    "asctime",
    "taskName",
}


def _alternation(values: Iterable[str]) -> re.Pattern[str] | None:
    longest_first = sorted(
        {v for v in values if len(v) >= MIN_SECRET_LENGTH}, key=len, reverse=True
    )
    return re.compile("|".join(map(re.escape, longest_first))) if longest_first else None


class SecretRegistry:
    """Known secrets, as one compiled alternation (rebuilt when one is added); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None

    def add(self, values: Iterable[str]) -> None:
        with self._lock:
            before = len(self._values)
            self._values.update(v for v in values if len(v) >= MIN_SECRET_LENGTH)
            if len(self._values) != before:
                self._pattern = _alternation(self._values)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
            self._pattern = None

    @property
    def pattern(self) -> re.Pattern[str] | None:
        return self._pattern


def mask(text: str, *exact: re.Pattern[str] | None) -> str:
    """`text` with the `exact` alternations and every secret-looking token masked."""
    for pattern in exact:
        if pattern is not None:
            text = pattern.sub(REDACTED, text)
    for pattern, replacement in PATTERNS:
        text = pattern.sub(replacement, text)
    return text


class SecretsFilter(logging.Filter):
    """Rewrites each record so that no secret reaches a handler's output.

    The message is rendered (``msg % args``) and masked, ``args`` cleared, string extras masked
    and the traceback rendered and masked into ``exc_text``, which formatters print instead of
    formatting the exception again. Rewriting is idempotent, so a record passing through several
    handlers is safe.

    Args:
        secrets: exact values to mask (besides the `registry`'s and the patterns).
        registry: values added later (a key loaded after logging was set up).
    """

    def __init__(
        self, secrets: Iterable[str] = (), *, registry: SecretRegistry | None = None
    ) -> None:
        super().__init__()
        self._secrets = _alternation(secrets)
        self._registry = registry

    def _mask(self, text: str) -> str:
        registered = self._registry.pattern if self._registry is not None else None
        return mask(text, registered, self._secrets)

    def _mask_value(self, value: Any) -> Any:
        if isinstance(value, bool | int | float) or value is None:
            return value
        return self._mask(value if isinstance(value, str) else str(value))

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string must not lose the record (or raise from here)
            message = f"{record.msg!r} (unformattable arguments)"
        record.msg = self._mask(message)
        record.args = None
        for key, value in list(vars(record).items()):
            if key not in _RESERVED:
                setattr(record, key, self._mask_value(value))
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._mask(record.exc_text)
        if record.stack_info:
            record.stack_info = self._mask(record.stack_info)
        return True
