"""Logging for the daemon: one line per event, text on a terminal, JSON lines elsewhere, no secrets.

Formats (``codedeck-bridge run --log-format auto|text|json``):

- ``text``, for people at a terminal::

      2025-01-31 12:00:00.123 INFO    bridge.runtime.daemon: input accepted  phone=npub1qy3k… session=s-1 type=input event=5f1c2a9e

- ``json``, one object per line, for journald, log shippers and ``jq``::

      {"time": "2025-01-31T12:00:00.123Z", "level": "INFO", "logger": "bridge.runtime.daemon",
       "message": "input accepted", "phone": "npub1qy3k…", "session": "s-1", "type": "input",
       "event": "5f1c2a9e"}

- ``auto`` (the default) picks ``text`` when stderr is a terminal and ``json`` otherwise, so a
  service's journal holds parseable lines while a developer's terminal stays readable.

Context keys. Anything passed with ``extra={...}`` is rendered after the message; the stable keys
come first, in this order, with the same meaning everywhere (build them with `log_fields`):
``phone`` (npub prefix), ``session`` (session id), ``type`` (protocol message type), ``event``
(event id prefix, 8 hex), ``relay`` (URL). Other extras follow in alphabetical order.

Under systemd, stderr goes to the journal. When ``$JOURNAL_STREAM`` names our stderr, each line
starts with the syslog priority (``<6>`` for INFO), which journald strips and stores as the entry's
priority, so ``journalctl -p warning`` works; the stored message stays plain text or pure JSON.

Secrets. A `RedactionFilter` on the handler rewrites every record before it is formatted: the
message, its arguments, extras and the rendered traceback. It masks anything that looks like an
``nsec1…`` key, an Anthropic key (``sk-ant-…``), a ``Bearer`` token, an ``ANTHROPIC_API_KEY=…``
style assignment, and every exact secret registered with `register_secret` (the daemon registers
its own key once loaded, in hex and nsec form). The patterns are a safety net, not a licence: code
still must not log secrets or decrypted user content above DEBUG. Text lines also escape control
characters, so a phone-chosen label cannot forge a second log line or move the cursor.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
import time
from collections.abc import Iterable, Mapping
from typing import Any, Final, TextIO

from bridge.nostr.keys import NostrKeyError, hex_to_npub, secret_to_nsec
from bridge.redaction import REDACTED, SecretRegistry, SecretsFilter, mask

__all__ = [
    "LOG_FORMATS",
    "REDACTED",
    "STABLE_KEYS",
    "JsonFormatter",
    "RedactionFilter",
    "TextFormatter",
    "clear_registered_secrets",
    "configure_logging",
    "log_fields",
    "redact",
    "register_secret",
    "resolve_format",
]

LOG_FORMATS: Final = ("auto", "text", "json")
STABLE_KEYS: Final = ("phone", "session", "type", "event", "relay")

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_RESERVED: Final = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message",
    "asctime",
    "taskName",
}

_LEVEL_PRIORITY: Final = {
    logging.DEBUG: 7,
    logging.INFO: 6,
    logging.WARNING: 4,
    logging.ERROR: 3,
    logging.CRITICAL: 2,
}


# --- secrets ------------------------------------------------------------------------------------


_REGISTRY = SecretRegistry()


def _forms(secret: str | bytes) -> list[str]:
    """Every spelling of a secret that could end up in a log line."""
    if isinstance(secret, bytes):
        forms = [secret.hex(), secret.hex().upper()]
        if len(secret) == 32:
            with contextlib.suppress(NostrKeyError):  # not a valid key: hex forms only
                forms.append(secret_to_nsec(secret))
        return forms
    forms = [secret]
    if re.fullmatch(r"[0-9a-fA-F]+", secret):
        forms += [secret.lower(), secret.upper()]
    return forms


def register_secret(secret: str | bytes) -> None:
    """Mask `secret` in every log line from now on (all handlers `configure_logging` installed).

    Bytes are registered in hex (both cases) and, for a 32-byte key, as its ``nsec1…``. Values
    shorter than 8 characters are ignored.
    """
    _REGISTRY.add(_forms(secret))


def clear_registered_secrets() -> None:
    """Forget the registered secrets (for tests)."""
    _REGISTRY.clear()


def redact(text: str, secrets: re.Pattern[str] | None = None) -> str:
    """`text` with registered secrets, ``secrets`` and every secret-looking token masked."""
    return mask(text, _REGISTRY.pattern, secrets)


class RedactionFilter(SecretsFilter):
    """Rewrites each record so that no secret reaches a handler's output (see the module doc).

    The rules are :class:`bridge.redaction.SecretsFilter`'s; here the secrets are also the
    process's registered ones (`register_secret`), and a 32-byte key is masked as its
    ``nsec1…`` too.

    Args:
        secrets: exact values to mask for this filter only, besides the registered ones.
    """

    def __init__(self, secrets: Iterable[str | bytes] = ()) -> None:
        super().__init__([f for s in secrets for f in _forms(s)], registry=_REGISTRY)


# --- context keys -------------------------------------------------------------------------------


def log_fields(
    *,
    phone: str | None = None,
    session: str | None = None,
    msg_type: str | None = None,
    event: str | None = None,
    relay: str | None = None,
) -> dict[str, str]:
    """``extra=`` for a log call, with the stable keys in their stable shapes.

    Args:
        phone: the phone's pubkey (hex) or npub; logged as the npub's first 16 characters.
        session: a session id, logged whole.
        msg_type: the protocol message type (logged under ``type``).
        event: an event id; logged as its first 8 characters.
        relay: a relay URL.
    """
    fields: dict[str, str] = {}
    if phone:
        npub = phone
        if re.fullmatch(r"[0-9a-f]{64}", phone):
            npub = hex_to_npub(phone)
        fields["phone"] = npub[:16]
    if session:
        fields["session"] = session
    if msg_type:
        fields["type"] = msg_type
    if event:
        fields["event"] = event[:8]
    if relay:
        fields["relay"] = relay
    return fields


def _extras(record: logging.LogRecord) -> list[tuple[str, Any]]:
    extra = {k: v for k, v in vars(record).items() if k not in _RESERVED and not k.startswith("_")}
    ordered = [(k, extra.pop(k)) for k in STABLE_KEYS if k in extra]
    return ordered + sorted(extra.items())


# --- formatters ---------------------------------------------------------------------------------

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(text: str) -> str:
    """One printable line: newlines and other controls become escapes (no forged lines)."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def _priority_prefix(record: logging.LogRecord) -> str:
    level = max((lvl for lvl in _LEVEL_PRIORITY if lvl <= record.levelno), default=logging.DEBUG)
    return f"<{_LEVEL_PRIORITY[level]}>"


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message  key=value …`` on one line (tracebacks follow, indented).

    Args:
        journal: prefix each line with its syslog priority for journald (see the module doc);
            the timestamp is left out then, since the journal records its own.
    """

    def __init__(self, *, journal: bool = False) -> None:
        super().__init__()
        self._journal = journal

    def format(self, record: logging.LogRecord) -> str:
        parts = [] if self._journal else [self._timestamp(record)]
        parts.append(f"{record.levelname:<7} {record.name}: {_escape(record.getMessage())}")
        line = " ".join(parts)
        extras = _extras(record)
        if extras:
            line += "  " + " ".join(f"{k}={self._value(v)}" for k, v in extras)
        exc_text = record.exc_text or (
            self.formatException(record.exc_info) if record.exc_info else ""
        )
        if exc_text:
            line += "\n" + "\n".join("    " + _escape(row) for row in exc_text.splitlines())
        if record.stack_info:
            line += "\n" + "\n".join(
                "    " + _escape(row) for row in record.stack_info.splitlines()
            )
        if self._journal:
            prefix = _priority_prefix(record)
            line = "\n".join(prefix + row for row in line.split("\n"))
        return line

    @staticmethod
    def _timestamp(record: logging.LogRecord) -> str:
        local = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.created))
        return f"{local}.{int(record.msecs):03d}"

    @staticmethod
    def _value(value: Any) -> str:
        text = _escape(value if isinstance(value, str) else json.dumps(value, default=str))
        if not text or any(ch in text for ch in ' ="'):
            return json.dumps(text)
        return text


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time`` (UTC, ms), ``level``, ``logger``, ``message``, the
    extras (stable keys first), then ``exception`` / ``stack`` when present.

    Args:
        journal: prefix the line with its syslog priority for journald (stripped by journald).
    """

    def __init__(self, *, journal: bool = False) -> None:
        super().__init__()
        self._journal = journal

    def format(self, record: logging.LogRecord) -> str:
        when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        body: dict[str, Any] = {
            "time": f"{when}.{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in _extras(record):
            body.setdefault(key, value)
        exc_text = record.exc_text or (
            self.formatException(record.exc_info) if record.exc_info else ""
        )
        if exc_text:
            body["exception"] = exc_text
        if record.stack_info:
            body["stack"] = record.stack_info
        line = json.dumps(body, ensure_ascii=False, default=str)
        # json.dumps leaves U+2028/2029 raw; escape them so no reader splits the line there.
        line = line.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
        return _priority_prefix(record) + line if self._journal else line


# --- set-up -------------------------------------------------------------------------------------


def resolve_format(fmt: str, stream: TextIO) -> str:
    """``text`` or ``json`` for `fmt` (``auto`` looks at whether `stream` is a terminal).

    Raises:
        ValueError: an unknown format.
    """
    if fmt not in LOG_FORMATS:
        raise ValueError(f"--log-format must be one of {', '.join(LOG_FORMATS)}")
    if fmt != "auto":
        return fmt
    try:
        return "text" if stream.isatty() else "json"
    except (AttributeError, ValueError):
        return "json"


def _is_journal(stream: TextIO, env: Mapping[str, str]) -> bool:
    """True when `stream` is the journald stream systemd gave us (``$JOURNAL_STREAM=dev:ino``)."""
    raw = env.get("JOURNAL_STREAM", "")
    dev, sep, ino = raw.partition(":")
    if not sep or not dev.isdigit() or not ino.isdigit():
        return False
    try:
        info = os.fstat(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return False
    return (info.st_dev, info.st_ino) == (int(dev), int(ino))


_HANDLER_NAME: Final = "codedeck-bridge"


def configure_logging(
    level: str | int = "INFO",
    fmt: str = "auto",
    *,
    stream: TextIO | None = None,
    secrets: Iterable[str | bytes] = (),
    env: Mapping[str, str] | None = None,
) -> logging.Handler:
    """Install the bridge's handler on the root logger (replacing an earlier one of ours).

    Args:
        level: the root level (``"DEBUG"`` … ``"ERROR"`` or a number).
        fmt: ``auto``, ``text`` or ``json``.
        stream: where lines go (default: stderr, which journald collects under systemd).
        secrets: values to mask besides the patterns and `register_secret`'s.
        env: the environment to look for ``JOURNAL_STREAM`` in (default ``os.environ``).

    Returns:
        The installed handler.

    Raises:
        ValueError: an unknown format or level.
    """
    stream = stream if stream is not None else sys.stderr
    resolved = resolve_format(fmt, stream)
    journal = _is_journal(stream, os.environ if env is None else env)
    handler = logging.StreamHandler(stream)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(
        TextFormatter(journal=journal) if resolved == "text" else JsonFormatter(journal=journal)
    )
    handler.addFilter(RedactionFilter(secrets))
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    logging.captureWarnings(True)
    return handler
