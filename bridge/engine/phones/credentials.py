"""Credentials the phone stores on the bridge: an Anthropic API key and a GitHub token.

Rules (PROTOCOL-v10-wire.md §5 row 19, §6 row 20; REFERENCE-BEHAVIOUR §1.13):

- ``set-credentials`` carries ``anthropicApiKey`` and ``githubPat``, each tri-state:
  :data:`~bridge.protocol.KEEP` (key absent) keeps the stored value, ``None`` clears it, a string
  sets it. This bridge also treats an empty (or all-blank) string as "clear", and strips blanks
  around a value: a key pasted with a trailing newline is the same key.
- A value must be printable ASCII without spaces (it goes into an HTTP header and a child's
  environment) and bounded; a bad value refuses the whole command (neither field changes), and the
  error never quotes it.
- The effective Anthropic key, the one sessions and the probe use, is the environment's
  ``ANTHROPIC_API_KEY`` when set, else the stored key (the runtime passes the environment's
  value in; the engine never reads the environment).
- ``credentials-ack`` goes to the sender only: ``hasAnthropicKey`` / ``hasGithubPat`` describe
  what is *stored*; ``keyValid`` is the probe's verdict on the effective key, absent when no
  probe ran (no key, or the network failed).

Store names: :data:`ANTHROPIC_KEY_NAME` and :data:`GITHUB_PAT_NAME`, one row each in the
``credentials`` table; a cleared value is a deleted row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Final

from bridge.protocol import KEEP, CredentialsAckMessage, Keep, SetCredentialsCommand
from bridge.records import record

__all__ = [
    "ANTHROPIC_KEY_NAME",
    "CREDENTIAL_NAMES",
    "GITHUB_PAT_NAME",
    "MAX_CREDENTIAL_LENGTH",
    "CredentialChange",
    "Credentials",
    "CredentialsOutcome",
    "apply_set_credentials",
    "credentials_ack",
    "effective_anthropic_key",
]

ANTHROPIC_KEY_NAME: Final = "anthropicApiKey"
GITHUB_PAT_NAME: Final = "githubPat"
CREDENTIAL_NAMES: Final = (ANTHROPIC_KEY_NAME, GITHUB_PAT_NAME)
MAX_CREDENTIAL_LENGTH: Final = 8192


@record
class Credentials:
    """The stored credentials; values never appear in ``repr``."""

    anthropic_api_key: str | None = field(default=None, repr=False)
    github_pat: str | None = field(default=None, repr=False)

    @property
    def has_anthropic_key(self) -> bool:
        return bool(self.anthropic_api_key)

    @property
    def has_github_pat(self) -> bool:
        return bool(self.github_pat)

    @classmethod
    def from_store(cls, rows: Mapping[str, str]) -> Credentials:
        """Build from the store's ``{name: value}`` rows (unknown names are ignored)."""
        return cls(
            anthropic_api_key=rows.get(ANTHROPIC_KEY_NAME) or None,
            github_pat=rows.get(GITHUB_PAT_NAME) or None,
        )


@record
class CredentialChange:
    """One store write: set `name` to `value`, or delete it when `value` is None."""

    name: str
    value: str | None = field(repr=False)


@record
class CredentialsOutcome:
    """What one ``set-credentials`` did.

    Attributes:
        credentials: the credentials now in force (unchanged when refused).
        changes: the store writes, in field order (empty when refused or all KEEP).
        error: why the command was refused, or None on success.
    """

    credentials: Credentials
    changes: tuple[CredentialChange, ...] = ()
    error: str | None = None

    @property
    def success(self) -> bool:
        return self.error is None


class _Refused(ValueError):
    """A credential value that cannot be stored (the text never quotes the value)."""


def _normalize(name: str, value: str | Keep | None) -> str | Keep | None:
    """The value to store: KEEP, None (clear) or the cleaned string.

    Raises:
        _Refused: the value is too long or not printable ASCII.
    """
    if value is KEEP or value is None:
        return value
    cleaned = value.strip()
    if not cleaned:
        return None
    if len(cleaned) > MAX_CREDENTIAL_LENGTH:
        raise _Refused(f"{name} is too long (at most {MAX_CREDENTIAL_LENGTH} characters)")
    if not all(0x21 <= ord(char) <= 0x7E for char in cleaned):
        raise _Refused(f"{name} must be printable ASCII without spaces")
    return cleaned


def apply_set_credentials(
    stored: Credentials, command: SetCredentialsCommand
) -> CredentialsOutcome:
    """Merge one ``set-credentials`` into the stored credentials (all fields, or none).

    Args:
        stored: the credentials held now.
        command: the decoded command.

    Returns:
        The outcome; on success ``credentials`` is the merged state to keep.
    """
    try:
        anthropic = _normalize(ANTHROPIC_KEY_NAME, command.anthropicApiKey)
        github = _normalize(GITHUB_PAT_NAME, command.githubPat)
    except _Refused as refused:
        return CredentialsOutcome(stored, error=str(refused))
    changes: list[CredentialChange] = []
    key, pat = stored.anthropic_api_key, stored.github_pat
    if anthropic is not KEEP:
        key = anthropic
        changes.append(CredentialChange(ANTHROPIC_KEY_NAME, key))
    if github is not KEEP:
        pat = github
        changes.append(CredentialChange(GITHUB_PAT_NAME, pat))
    return CredentialsOutcome(Credentials(key, pat), tuple(changes))


def effective_anthropic_key(env_key: str | None, stored: Credentials) -> str | None:
    """The key sessions use: the environment's ``ANTHROPIC_API_KEY`` first, else the stored one.

    Args:
        env_key: the daemon environment's ``ANTHROPIC_API_KEY`` (None or blank when unset).
        stored: the stored credentials.
    """
    if env_key is not None and env_key.strip():
        return env_key.strip()
    return stored.anthropic_api_key or None


def credentials_ack(
    machine: str,
    credentials: Credentials,
    *,
    success: bool = True,
    key_valid: bool | None = None,
    error: str | None = None,
) -> CredentialsAckMessage:
    """The ``credentials-ack`` for the sender; ``keyValid`` absent when no probe ran."""
    return CredentialsAckMessage(
        machine=machine,
        success=success,
        hasAnthropicKey=credentials.has_anthropic_key,
        hasGithubPat=credentials.has_github_pat,
        keyValid=key_valid,
        error=error,
    )
