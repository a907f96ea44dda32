"""The editor's settings snapshot (``config.update``): held frozen, stored as refs.

``config.update`` carries "a full snapshot of the desiide.* settings" (the seed): each call
replaces the previous one whole. What a valid snapshot is is said once, by the params model
`bridge.desiide.schema.config.DesiideConfig`: the connection validates ``config.update`` with it
(the editor sees its ``InvalidParams`` message), and `DesiideSettings.from_params` reads a stored
file through the same model, so both refuse the same values with the same words. This module
turns a validated model into the frozen `DesiideSettings` the orchestrator uses (defaults
resolved, snake_case names) and back, and keeps the one rule that matters most here: **an API
key is only ever a ``secret:<name>`` reference**. The snapshot on disk holds refs only, and a
value fetched through ``secrets.get`` lives in a :class:`SecretValue` whose ``repr`` is masked,
so logging an object by mistake cannot leak it.

Defaults resolved here: ``auth`` is ``x-api-key`` for an anthropic endpoint and the judge, else
``bearer``; ``locality`` is ``local`` for a loopback URL, else ``remote``; the judge's timeout
is 15 s. Roles are kept sorted by role name.

Storage: ``<home>/desiide/config.json``, mode 0600 in a 0700 directory, written atomically.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import field
from pathlib import Path
from typing import Any, Final, Literal, Protocol
from urllib.parse import urlsplit

from pydantic import ValidationError

from bridge.desiide.schema.base import validation_message
from bridge.desiide.schema.config import SECRET_PREFIX, DesiideConfig, JevConfig, ModelConfig
from bridge.records import record

__all__ = [
    "CONFIG_DIR_NAME",
    "CONFIG_FILE_NAME",
    "STRICT_MODE_LABEL",
    "ApiKind",
    "AuthScheme",
    "CostTier",
    "DesiideSettings",
    "GatingSettings",
    "JevSettings",
    "Locality",
    "ModelSettings",
    "RiskOutcome",
    "SecretNotSet",
    "SecretRef",
    "SecretResolver",
    "SecretValue",
    "SettingsError",
    "apply_strict",
    "config_path",
    "is_loopback_url",
    "load_config",
    "resolve_secret",
    "save_config",
]

CONFIG_DIR_NAME: Final = "desiide"
CONFIG_FILE_NAME: Final = "config.json"

DEFAULT_JEV_TIMEOUT_MS: Final = 15_000
_LOOPBACK: Final = frozenset({"localhost", "127.0.0.1", "::1"})

ApiKind = Literal["anthropic", "openai", "ollama"]
AuthScheme = Literal["x-api-key", "bearer"]
CostTier = Literal["low", "medium", "high"]
Locality = Literal["local", "remote"]

_API_KINDS: Final[tuple[ApiKind, ...]] = ("anthropic", "openai", "ollama")
_AUTH_SCHEMES: Final[tuple[AuthScheme, ...]] = ("x-api-key", "bearer")
_COST_TIERS: Final[tuple[CostTier, ...]] = ("low", "medium", "high")
_LOCALITIES: Final[tuple[Locality, ...]] = ("local", "remote")


RiskOutcome = Literal["auto", "confirm", "block"]
"""The risk gate's outcome in the Desiide protocol's words (the daemon's gate says
``allow | ask | block``; the orchestrator maps at its edge)."""

STRICT_MODE_LABEL: Final = "policy_override:strict_mode"
"""Added when strict mode turned an ``auto`` into ``confirm`` (a seed label)."""


def apply_strict(
    outcome: RiskOutcome, reasons: Sequence[str], strict: bool
) -> tuple[RiskOutcome, tuple[str, ...]]:
    """Apply ``gating.strict`` to a gate result: only ``auto`` → ``confirm`` is possible.

    ``confirm`` and ``block`` are left as they are, without the label: it names an override
    that changed the outcome, and adding it where it changed nothing would only push the real
    reasons down the card. (:mod:`bridge.desiide.jev.risk` holds the other one-way raise, the
    JEV's; the two commute.)

    Args:
        outcome: the rules' outcome.
        reasons: the rules' reason labels (kept, in order).
        strict: ``gating.strict`` of the current settings.

    Returns:
        ``("confirm", (*reasons, "policy_override:strict_mode"))`` for an ``auto`` under strict
        mode; the input unchanged otherwise.
    """
    if strict and outcome == "auto":
        labels = tuple(reasons)
        return "confirm", labels if STRICT_MODE_LABEL in labels else (*labels, STRICT_MODE_LABEL)
    return outcome, tuple(reasons)


class SettingsError(ValueError):
    """A stored snapshot is unreadable or invalid (the orchestrator logs it and starts from the
    defaults).

    The message is the params model's ``InvalidParams`` text: it names the field
    (``models[1].apiKey``), never a value that could be a key.
    """


class SecretNotSet(LookupError):
    """``secrets.get`` answered null for a ref (the orchestrator answers SecretMissing, -32006).

    Attributes:
        ref: the ``secret:<name>`` ref (a name, not a value: safe to show).
    """

    def __init__(self, ref: str) -> None:
        super().__init__(f"the secret {ref} is not set in the editor's secret storage")
        self.ref = ref


@record
class SecretRef:
    """A ``secret:<name>`` reference: the key's name in the editor's SecretStorage."""

    name: str

    @property
    def ref(self) -> str:
        return SECRET_PREFIX + self.name

    @classmethod
    def of(cls, ref: str | None) -> SecretRef | None:
        """The ref of a validated ``secret:<name>`` string (None for none)."""
        return None if ref is None else cls(ref.removeprefix(SECRET_PREFIX))


class SecretValue:
    """A resolved secret. ``repr``/``str`` are masked; :meth:`reveal` is the one way out.

    Not a dataclass on purpose: no generated ``repr``, ``eq`` or ``hash`` that could expose or
    compare the value by accident.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The value, for an HTTP header. Never log what this returns."""
        return self._value

    def scrub(self, text: str) -> str:
        """`text` with every occurrence of the value masked (a provider may echo a key)."""
        return text.replace(self._value, "***") if self._value else text

    def __repr__(self) -> str:
        return "SecretValue(***)"

    __str__ = __repr__


class SecretResolver(Protocol):
    """Resolves a ``secret:<name>`` ref; the orchestrator implements it with ``secrets.get``."""

    async def get(self, ref: str) -> str | None:
        """The value, or None when the secret is not set."""
        ...


async def resolve_secret(resolver: SecretResolver, ref: SecretRef) -> SecretValue:
    """Fetch a secret through `resolver`.

    Raises:
        SecretNotSet: the resolver answered None (or an empty value).
    """
    value = await resolver.get(ref.ref)
    if not value:
        raise SecretNotSet(ref.ref)
    return SecretValue(value)


@record
class ModelSettings:
    """One configured model endpoint (``models[]``)."""

    id: str
    provider: ApiKind
    base_url: str
    model: str
    label: str | None = None
    api_key: SecretRef | None = None
    auth: AuthScheme = "x-api-key"
    context_tokens: int | None = None
    cost_tier: CostTier | None = None
    locality: Locality = "remote"

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "id": self.id,
            "provider": self.provider,
            "baseUrl": self.base_url,
            "model": self.model,
            "auth": self.auth,
            "locality": self.locality,
        }
        if self.label is not None:
            wire["label"] = self.label
        if self.api_key is not None:
            wire["apiKey"] = self.api_key.ref
        if self.context_tokens is not None:
            wire["contextTokens"] = self.context_tokens
        if self.cost_tier is not None:
            wire["costTier"] = self.cost_tier
        return wire


@record
class JevSettings:
    """The JEV judge: an Anthropic-compatible Messages endpoint."""

    base_url: str
    model: str
    api_key: SecretRef | None = None
    auth: AuthScheme = "x-api-key"
    timeout_ms: int = DEFAULT_JEV_TIMEOUT_MS
    risk_gate: bool = False

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "baseUrl": self.base_url,
            "model": self.model,
            "auth": self.auth,
            "timeoutMs": self.timeout_ms,
            "riskGate": self.risk_gate,
        }
        if self.api_key is not None:
            wire["apiKey"] = self.api_key.ref
        return wire


@record
class GatingSettings:
    """``gating``: strict mode turns every ``auto`` into ``confirm``."""

    strict: bool = False


@record
class DesiideSettings:
    """The whole snapshot. ``roles`` is a tuple of ``(role, model id)`` pairs, sorted by role."""

    models: tuple[ModelSettings, ...] = ()
    roles: tuple[tuple[str, str], ...] = ()
    jev: JevSettings | None = None
    gating: GatingSettings = field(default_factory=GatingSettings)

    @classmethod
    def from_config(cls, config: DesiideConfig) -> DesiideSettings:
        """The snapshot of ``config.update``'s params, validated already (by the connection)."""
        return cls(
            models=tuple(_model(model) for model in config.models),
            roles=tuple(sorted(config.roles.items())),
            jev=None if config.jev is None else _jev(config.jev),
            gating=GatingSettings(config.gating.strict),
        )

    @classmethod
    def from_params(cls, params: object) -> DesiideSettings:
        """Read params from elsewhere than the wire (the stored file) through the params model.

        Raises:
            SettingsError: the model's ``InvalidParams`` message, as the editor would get it.
        """
        if not isinstance(params, dict):
            raise SettingsError("invalid params: params must be an object")
        try:
            config = DesiideConfig.model_validate(params)
        except ValidationError as exc:
            raise SettingsError(validation_message(exc)) from None
        return cls.from_config(config)

    def to_wire(self) -> dict[str, Any]:
        """The snapshot as params again (refs only: there is nothing else to write)."""
        return {
            "models": [m.to_wire() for m in self.models],
            "roles": dict(self.roles),
            "jev": self.jev.to_wire() if self.jev is not None else None,
            "gating": {"strict": self.gating.strict},
        }

    def model(self, model_id: str) -> ModelSettings | None:
        return next((m for m in self.models if m.id == model_id), None)

    def role(self, role: str) -> str | None:
        """The model id assigned to `role`, or None."""
        return dict(self.roles).get(role)

    def secret_refs(self) -> tuple[str, ...]:
        """Every ``secret:<name>`` the snapshot refers to (for a settings check)."""
        refs = [m.api_key.ref for m in self.models if m.api_key is not None]
        if self.jev is not None and self.jev.api_key is not None:
            refs.append(self.jev.api_key.ref)
        return tuple(dict.fromkeys(refs))


# --- from the params model ---------------------------------------------------------------------


def is_loopback_url(url: str) -> bool:
    """Whether `url`'s host is this machine (``localhost``, ``127.0.0.1``, ``::1``)."""
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return False
    return host is not None and host.lower() in _LOOPBACK


def _model(config: ModelConfig) -> ModelSettings:
    provider = next(k for k in _API_KINDS if k == config.provider.value)
    auth = config.auth.value if config.auth is not None else None
    locality = config.locality.value if config.locality is not None else None
    cost_tier = config.costTier.value if config.costTier is not None else None
    return ModelSettings(
        id=config.id,
        provider=provider,
        base_url=config.baseUrl,
        model=config.model,
        label=config.label,
        api_key=SecretRef.of(config.apiKey),
        auth=_auth(auth) if auth else ("x-api-key" if provider == "anthropic" else "bearer"),
        context_tokens=config.contextTokens,
        cost_tier=next((k for k in _COST_TIERS if k == cost_tier), None),
        locality=next((k for k in _LOCALITIES if k == locality), _default_locality(config.baseUrl)),
    )


def _jev(config: JevConfig) -> JevSettings:
    return JevSettings(
        base_url=config.baseUrl,
        model=config.model,
        api_key=SecretRef.of(config.apiKey),
        auth=_auth(config.auth.value) if config.auth is not None else "x-api-key",
        timeout_ms=config.timeoutMs,
        risk_gate=config.riskGate,
    )


def _auth(value: str) -> AuthScheme:
    return next(k for k in _AUTH_SCHEMES if k == value)


def _default_locality(base_url: str) -> Locality:
    return "local" if is_loopback_url(base_url) else "remote"


# --- storage -----------------------------------------------------------------------------------


def config_path(home: Path) -> Path:
    """``<home>/desiide/config.json``."""
    return home / CONFIG_DIR_NAME / CONFIG_FILE_NAME


def save_config(home: Path, config: DesiideSettings) -> Path:
    """Write the snapshot atomically (0600 file in a 0700 directory); returns its path.

    The snapshot holds only refs, so nothing secret reaches the disk. A directory that exists
    with wider permissions is narrowed to 0700.

    Raises:
        OSError: the file could not be written.
    """
    directory = home / CONFIG_DIR_NAME
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    target = directory / CONFIG_FILE_NAME
    temporary = directory / f".{CONFIG_FILE_NAME}.{os.getpid()}.tmp"
    data = json.dumps(config.to_wire(), indent=2, sort_keys=True).encode() + b"\n"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, target)
    return target


def load_config(home: Path) -> DesiideSettings | None:
    """The stored snapshot, or None when there is none yet.

    Raises:
        SettingsError: the file exists but is not a valid snapshot (the caller logs it and
            starts from the defaults; the next ``config.update`` overwrites it). An invalid one
            is refused by the params model, as ``config.update`` would be.
    """
    path = config_path(home)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SettingsError(f"{path}: cannot be read ({type(exc).__name__})") from None
    try:
        params = json.loads(text)
    except ValueError:
        raise SettingsError(f"{path}: not valid JSON") from None
    try:
        return DesiideSettings.from_params(params)
    except SettingsError as exc:
        raise SettingsError(f"{path}: {exc}") from None
