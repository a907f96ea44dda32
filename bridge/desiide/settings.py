"""The editor's settings snapshot (``config.update``): validated once, held frozen, stored as refs.

``config.update`` carries "a full snapshot of the desiide.* settings" (the seed): each call
replaces the previous one whole. This module turns the request's params into a
:class:`DesiideConfig` and back, and keeps the one rule that matters most here: **an API key is
only ever a ``secret:<name>`` reference**. A raw key is refused (the error says so without
quoting it), the snapshot on disk holds refs only, and a value fetched through ``secrets.get``
lives in a :class:`SecretValue` whose ``repr`` is masked, so logging an object by mistake cannot
leak it.

The params (camelCase, like the seed's; unknown keys are refused, absent ones take defaults)::

    {
      "models": [{                      # at most 100; ids unique
        "id": "fast",                   # [A-Za-z0-9._-]+, not "claude:…", "profile:…", "ollama:…"
        "provider": "anthropic" | "openai" | "ollama",
        "baseUrl": "https://…",         # the API root; with an apiKey: https, or http to loopback
        "model": "claude-haiku-4-5",    # the name the endpoint knows
        "label"?: str, "apiKey"?: "secret:<name>",
        "auth"?: "x-api-key" | "bearer",   # default x-api-key for anthropic, else bearer
        "contextTokens"?: int, "costTier"?: "low" | "medium" | "high",
        "locality"?: "local" | "remote"    # default from the host: loopback → local
      }],
      "roles": {"<role>": "<model id>"},  # role: [a-z][a-z0-9_]*, at most 20
      "jev": null | {"baseUrl", "model", "apiKey"?, "auth"?, "timeoutMs"? (1000–120000,
                     default 15000), "riskGate"? (bool, default false: consult the JEV on calls
                     the rules auto-allow)},
      "gating": {"strict": bool}
    }

A role names a model id of ``models.list`` (a configured model, a provider profile's, the
agent's): only its shape is checked here, because the other sources are not known to this module.

The https rule (:func:`bridge.protocol.base_url_allowed`) applies to every endpoint that gets a
key, as for the phone's provider profiles: a key must never travel in clear over a network. An
endpoint without a key (a LAN Ollama) may be plain http. Credentials inside a URL are refused.

Storage: ``<home>/desiide/config.json``, mode 0600 in a 0700 directory, written atomically.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any, Final, Literal, Protocol
from urllib.parse import urlsplit

from bridge.protocol import base_url_allowed
from bridge.records import record

__all__ = [
    "CONFIG_DIR_NAME",
    "CONFIG_FILE_NAME",
    "MAX_MODELS",
    "MAX_ROLES",
    "RESERVED_PREFIXES",
    "SECRET_PREFIX",
    "STRICT_MODE_LABEL",
    "ApiKind",
    "AuthScheme",
    "CostTier",
    "DesiideConfig",
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

SECRET_PREFIX: Final = "secret:"
CONFIG_DIR_NAME: Final = "desiide"
CONFIG_FILE_NAME: Final = "config.json"
MAX_MODELS: Final = 100
MAX_ROLES: Final = 20
RESERVED_PREFIXES: Final = ("claude:", "profile:", "ollama:")
"""Model-id prefixes of the other catalog sources (:mod:`bridge.desiide.models.listing`)."""

DEFAULT_JEV_TIMEOUT_MS: Final = 15_000
_MAX_STR: Final = 500
_MODEL_ID: Final = re.compile(r"[A-Za-z0-9._-]{1,100}")
_ROLE: Final = re.compile(r"[a-z][a-z0-9_]{0,39}")
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
    """The snapshot is invalid (the orchestrator answers InvalidParams with this message).

    The message names the field (``models[1].apiKey``), never a value that could be a key.
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
    def parse(cls, value: object, where: str) -> SecretRef:
        """Read a ref; anything else is refused without echoing it (it may be a raw key).

        Raises:
            SettingsError: not a string, not ``secret:<name>``, or a bad name.
        """
        if not isinstance(value, str) or not value.startswith(SECRET_PREFIX):
            raise SettingsError(
                f"{where}: API keys are accepted only as secret:<name> references; "
                "a raw key is refused (store it in the editor's secret storage and refer to it)"
            )
        name = value[len(SECRET_PREFIX) :]
        if not name or len(name) > 200 or not all(0x21 <= ord(c) <= 0x7E for c in name):
            raise SettingsError(
                f"{where}: the secret name must be 1–200 printable characters without spaces"
            )
        return cls(name)


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
class DesiideConfig:
    """The whole snapshot. ``roles`` is a tuple of ``(role, model id)`` pairs, sorted by role."""

    models: tuple[ModelSettings, ...] = ()
    roles: tuple[tuple[str, str], ...] = ()
    jev: JevSettings | None = None
    gating: GatingSettings = field(default_factory=GatingSettings)

    @classmethod
    def from_params(cls, params: object) -> DesiideConfig:
        """Validate ``config.update``'s params (see the module docstring).

        Raises:
            SettingsError: with a message naming the first bad field.
        """
        obj = _object(params, "params", {"models", "roles", "jev", "gating"})
        models = _models(obj.get("models", []))
        roles = _roles(obj.get("roles", {}))
        jev_raw = obj.get("jev")
        jev = None if jev_raw is None else _jev(jev_raw)
        gating_obj = _object(obj.get("gating", {}), "gating", {"strict"})
        strict = gating_obj.get("strict", False)
        if not isinstance(strict, bool):
            raise SettingsError("gating.strict: must be true or false")
        return cls(models, roles, jev, GatingSettings(strict))

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


# --- validation --------------------------------------------------------------------------------


def _object(value: object, where: str, allowed: set[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise SettingsError(f"{where}: must be an object")
    unknown = sorted(str(k) for k in value if k not in allowed)
    if unknown:
        raise SettingsError(f"{where}: unknown field(s) {', '.join(unknown)}")
    return value


def _text(obj: Mapping[str, Any], key: str, where: str, *, required: bool) -> str | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise SettingsError(f"{where}.{key}: required")
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > _MAX_STR:
        raise SettingsError(f"{where}.{key}: must be a non-empty string of at most {_MAX_STR}")
    return value


def _choice(obj: Mapping[str, Any], key: str, where: str, options: tuple[str, ...]) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if value not in options:
        raise SettingsError(f"{where}.{key}: must be one of {', '.join(options)}")
    return str(value)


def is_loopback_url(url: str) -> bool:
    """Whether `url`'s host is this machine (``localhost``, ``127.0.0.1``, ``::1``)."""
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return False
    return host is not None and host.lower() in _LOOPBACK


def _base_url(value: str, where: str, *, keyed: bool) -> str:
    try:
        parts = urlsplit(value.strip())
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        raise SettingsError(f"{where}: not a valid URL") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise SettingsError(f"{where}: must be an http(s) URL")
    if parts.username is not None or parts.password is not None:
        raise SettingsError(f"{where}: credentials inside the URL are refused; use apiKey")
    if parts.query or parts.fragment:
        raise SettingsError(f"{where}: must not have a query or fragment")
    if keyed and not base_url_allowed(value):
        raise SettingsError(
            f"{where}: an endpoint that gets an API key must be https:// "
            "(http:// only for localhost, 127.0.0.1 or [::1])"
        )
    return value.strip().rstrip("/")


def _int(obj: Mapping[str, Any], key: str, where: str, low: int, high: int) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise SettingsError(f"{where}.{key}: must be an integer from {low} to {high}")
    return value


def _model(raw: object, where: str) -> ModelSettings:
    obj = _object(
        raw,
        where,
        {"id", "provider", "baseUrl", "model", "label", "apiKey", "auth", "contextTokens",
         "costTier", "locality"},
    )  # fmt: skip
    model_id = _text(obj, "id", where, required=True)
    assert model_id is not None
    if not _MODEL_ID.fullmatch(model_id) or model_id.startswith(RESERVED_PREFIXES):
        raise SettingsError(
            f"{where}.id: must be 1–100 of A-Z a-z 0-9 . _ - (the prefixes claude:, profile:, "
            "ollama: are taken by other model sources)"
        )
    provider = _choice(obj, "provider", where, _API_KINDS)
    if provider is None:
        raise SettingsError(f"{where}.provider: required")
    api_key = (
        None if obj.get("apiKey") is None else SecretRef.parse(obj["apiKey"], where + ".apiKey")
    )
    base_text = _text(obj, "baseUrl", where, required=True)
    assert base_text is not None
    base_url = _base_url(base_text, where + ".baseUrl", keyed=api_key is not None)
    model = _text(obj, "model", where, required=True)
    assert model is not None
    auth = _choice(obj, "auth", where, _AUTH_SCHEMES)
    locality = _choice(obj, "locality", where, _LOCALITIES)
    return ModelSettings(
        id=model_id,
        provider=_api_kind(provider),
        base_url=base_url,
        model=model,
        label=_text(obj, "label", where, required=False),
        api_key=api_key,
        auth=_auth(auth) if auth else ("x-api-key" if provider == "anthropic" else "bearer"),
        context_tokens=_int(obj, "contextTokens", where, 1, 100_000_000),
        cost_tier=_cost_tier(_choice(obj, "costTier", where, _COST_TIERS)),
        locality=_locality(locality) if locality else _default_locality(base_url),
    )


def _api_kind(value: str) -> ApiKind:
    return next(k for k in _API_KINDS if k == value)


def _auth(value: str) -> AuthScheme:
    return next(k for k in _AUTH_SCHEMES if k == value)


def _cost_tier(value: str | None) -> CostTier | None:
    return next((k for k in _COST_TIERS if k == value), None)


def _locality(value: str) -> Locality:
    return next(k for k in _LOCALITIES if k == value)


def _default_locality(base_url: str) -> Locality:
    return "local" if is_loopback_url(base_url) else "remote"


def _models(raw: object) -> tuple[ModelSettings, ...]:
    if not isinstance(raw, list):
        raise SettingsError("models: must be an array")
    if len(raw) > MAX_MODELS:
        raise SettingsError(f"models: at most {MAX_MODELS} entries")
    models = tuple(_model(item, f"models[{index}]") for index, item in enumerate(raw))
    seen: set[str] = set()
    for index, model in enumerate(models):
        if model.id in seen:
            raise SettingsError(f"models[{index}].id: duplicate id {model.id!r}")
        seen.add(model.id)
    return models


def _roles(raw: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(raw, Mapping):
        raise SettingsError("roles: must be an object")
    if len(raw) > MAX_ROLES:
        raise SettingsError(f"roles: at most {MAX_ROLES} roles")
    pairs: list[tuple[str, str]] = []
    for role, model_id in raw.items():
        if not isinstance(role, str) or not _ROLE.fullmatch(role):
            raise SettingsError("roles: a role name must match [a-z][a-z0-9_]* (at most 40)")
        if not isinstance(model_id, str) or not model_id.strip() or len(model_id) > _MAX_STR:
            raise SettingsError(f"roles.{role}: must be a model id")
        pairs.append((role, model_id))
    return tuple(sorted(pairs))


def _jev(raw: object) -> JevSettings:
    where = "jev"
    obj = _object(raw, where, {"baseUrl", "model", "apiKey", "auth", "timeoutMs", "riskGate"})
    api_key = None if obj.get("apiKey") is None else SecretRef.parse(obj["apiKey"], "jev.apiKey")
    base_text = _text(obj, "baseUrl", where, required=True)
    assert base_text is not None
    model = _text(obj, "model", where, required=True)
    assert model is not None
    auth = _choice(obj, "auth", where, _AUTH_SCHEMES)
    risk_gate = obj.get("riskGate", False)
    if not isinstance(risk_gate, bool):
        raise SettingsError("jev.riskGate: must be true or false")
    timeout = _int(obj, "timeoutMs", where, 1_000, 120_000)
    return JevSettings(
        base_url=_base_url(base_text, "jev.baseUrl", keyed=api_key is not None),
        model=model,
        api_key=api_key,
        auth=_auth(auth) if auth else "x-api-key",
        timeout_ms=timeout if timeout is not None else DEFAULT_JEV_TIMEOUT_MS,
        risk_gate=risk_gate,
    )


# --- storage -----------------------------------------------------------------------------------


def config_path(home: Path) -> Path:
    """``<home>/desiide/config.json``."""
    return home / CONFIG_DIR_NAME / CONFIG_FILE_NAME


def save_config(home: Path, config: DesiideConfig) -> Path:
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


def load_config(home: Path) -> DesiideConfig | None:
    """The stored snapshot, or None when there is none yet.

    Raises:
        SettingsError: the file exists but is not a valid snapshot (the caller logs it and
            starts from the defaults; the next ``config.update`` overwrites it).
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
    return DesiideConfig.from_params(params)
