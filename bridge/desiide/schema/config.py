"""``config.update``'s params: the extension's ``desiide.*`` settings, one full snapshot per call.

This model is the one definition of a valid snapshot: the connection validates ``config.update``
with it, and `bridge.desiide.settings` reads its stored file through it and turns what passed
into the frozen snapshot the orchestrator uses (it has no rules of its own). The rule that
matters most: **an API key is only
ever a** ``secret:<name>`` **reference**, resolved through the reverse request ``secrets.get``
when a model is used. A raw key is refused with ``InvalidParams``, and the message names the
field without quoting the value (the model bases hide input from errors, and
`validation_message` never shows it).

Endpoints: ``http(s)`` only, no credentials, query or fragment in the URL. An endpoint that gets
a key must be ``https`` (``http`` only for ``localhost``, ``127.0.0.1``, ``[::1]``): the phone's
provider-profile rule (`bridge.protocol.baseurl`), since a key must not cross a network in clear.
A keyless endpoint (a LAN Ollama) may be plain ``http``.

Roles map a role name to a model id of ``models.list``; only the shape is checked here, since a
role may name an agent's or a provider profile's model that this snapshot does not list. A role
whose model cannot be used fails its task with ``model_unavailable``.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Final, TypeAlias
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, StringConstraints, model_validator
from pydantic_core import PydanticCustomError

from bridge.desiide.schema.base import CostTier, Locality, RequestModel
from bridge.protocol.baseurl import base_url_allowed
from bridge.protocol.primitives import Bool, Int

__all__ = [
    "MAX_MODELS",
    "MAX_ROLES",
    "SECRET_PREFIX",
    "AuthScheme",
    "DesiideConfig",
    "GatingConfig",
    "JevConfig",
    "ModelConfig",
    "ModelProvider",
    "SecretRef",
]

SECRET_PREFIX: Final = "secret:"
MAX_MODELS: Final = 100
MAX_ROLES: Final = 20
_RESERVED_PREFIXES: Final = ("claude:", "profile:", "ollama:")


def _secret_ref(value: str) -> str:
    name = value[len(SECRET_PREFIX) :] if value.startswith(SECRET_PREFIX) else None
    if name is None:
        raise PydanticCustomError(
            "secret_ref",
            "API keys are accepted only as secret:<name> references; a raw key is refused "
            "(store it in the editor's secret storage and refer to it)",
        )
    if not 1 <= len(name) <= 200 or not all(0x21 <= ord(char) <= 0x7E for char in name):
        raise PydanticCustomError(
            "secret_ref", "the secret name must be 1-200 printable characters without spaces"
        )
    return value


SecretRef: TypeAlias = Annotated[str, StringConstraints(strict=True), AfterValidator(_secret_ref)]
"""``secret:<name>``: the key ``<name>`` in the extension's SecretStorage."""


def _url(value: str) -> str:
    try:
        parts = urlsplit(value.strip())
        parts.port  # noqa: B018 - raises ValueError for a port outside 0-65535
    except ValueError:
        raise PydanticCustomError("url", "not a valid URL") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise PydanticCustomError("url", "must be an http(s) URL")
    if parts.username is not None or parts.password is not None:
        raise PydanticCustomError("url", "credentials inside the URL are refused; use apiKey")
    if parts.query or parts.fragment:
        raise PydanticCustomError("url", "must not have a query or fragment")
    return value.strip().rstrip("/")


BaseUrl: TypeAlias = Annotated[
    str, StringConstraints(strict=True, min_length=1, max_length=500), AfterValidator(_url)
]
Text: TypeAlias = Annotated[
    str, StringConstraints(strict=True, min_length=1, max_length=500, pattern=r"\S")
]


def _check_keyed_url(base_url: str, api_key: str | None) -> None:
    if api_key is not None and not base_url_allowed(base_url):
        raise PydanticCustomError(
            "insecure_url",
            "baseUrl: an endpoint that gets an API key must be https:// "
            "(http:// only for localhost, 127.0.0.1 or [::1])",
        )


class ModelProvider(StrEnum):
    """The API a configured endpoint speaks."""

    ANTHROPIC = "anthropic"
    """The Anthropic Messages API (or a compatible gateway)."""
    OPENAI = "openai"
    """OpenAI chat completions (or a compatible server)."""
    OLLAMA = "ollama"
    """Ollama's native API."""


class AuthScheme(StrEnum):
    """How the key is sent: ``x-api-key`` (Anthropic's default) or ``Authorization: Bearer``."""

    X_API_KEY = "x-api-key"
    BEARER = "bearer"


_MODEL_ID: Final = re.compile(r"[A-Za-z0-9._-]{1,100}")


def _model_id(value: str) -> str:
    # The prefix check comes first: "claude:x" also breaks the pattern, but the prefix is what
    # the user needs to hear about.
    if value.startswith(_RESERVED_PREFIXES):
        raise PydanticCustomError(
            "model_id", "the prefixes claude:, profile:, ollama: are taken by other model sources"
        )
    if not _MODEL_ID.fullmatch(value):
        raise PydanticCustomError("model_id", "must be 1-100 of A-Z a-z 0-9 . _ -")
    return value


ModelId: TypeAlias = Annotated[str, StringConstraints(strict=True), AfterValidator(_model_id)]


class ModelConfig(RequestModel):
    """One configured model endpoint (``models[]``).

    Attributes:
        id: the id roles refer to (``[A-Za-z0-9._-]``, 1–100; not ``claude:``/``profile:``/
            ``ollama:``, the other sources' prefixes).
        provider: the API it speaks.
        baseUrl: the API root (without ``/v1/messages``).
        model: the model name the endpoint knows.
        label: a display name.
        apiKey: a ``secret:<name>`` ref.
        auth: how the key is sent (default: ``x-api-key`` for anthropic, else ``bearer``).
        contextTokens: the context window (1–100,000,000).
        costTier: low, medium or high.
        locality: local or remote (default: local for a loopback URL).
    """

    id: ModelId
    provider: ModelProvider
    baseUrl: BaseUrl
    model: Text
    label: Text | None = None
    apiKey: SecretRef | None = None
    auth: AuthScheme | None = None
    contextTokens: Annotated[Int, Field(ge=1, le=100_000_000)] | None = None
    costTier: CostTier | None = None
    locality: Locality | None = None

    @model_validator(mode="after")
    def _keyed_https(self) -> ModelConfig:
        _check_keyed_url(self.baseUrl, self.apiKey)
        return self


class JevConfig(RequestModel):
    """The JEV judge: an Anthropic-compatible Messages endpoint (absent or ``null``: no judge,
    and ``jev.test``/judgements answer that none is configured).

    Attributes:
        baseUrl, model, apiKey, auth: as for `ModelConfig`.
        timeoutMs: per judgement (1,000–120,000; default 15,000).
        riskGate: also consult the judge on calls the rules auto-allow (default false). It can
            only raise a call to confirm, never lower a block.
    """

    baseUrl: BaseUrl
    model: Text
    apiKey: SecretRef | None = None
    auth: AuthScheme | None = None
    timeoutMs: Annotated[Int, Field(ge=1_000, le=120_000)] = 15_000
    riskGate: Bool = False

    @model_validator(mode="after")
    def _keyed_https(self) -> JevConfig:
        _check_keyed_url(self.baseUrl, self.apiKey)
        return self


class GatingConfig(RequestModel):
    """``gating.strict``: every call the rules would auto-allow needs confirmation instead
    (reason ``policy_override:strict_mode``)."""

    strict: Bool = False


RoleName: TypeAlias = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,39}$")]


def _unique_model_ids(models: list[ModelConfig]) -> list[ModelConfig]:
    ids = [model.id for model in models]
    if len(set(ids)) != len(ids):
        raise PydanticCustomError("duplicate_id", "model ids must be unique")
    return models


class DesiideConfig(RequestModel):
    """``config.update``'s params: the whole ``desiide.*`` snapshot; absent sections take
    their defaults (no models, no roles, no judge, gating not strict).

    Attributes:
        models: at most 100, ids unique.
        roles: role name (``[a-z][a-z0-9_]*``, at most 40 characters) → model id; at most 20.
        jev: the judge, or ``None``.
        gating: strict mode.
    """

    models: Annotated[
        list[ModelConfig], Field(max_length=MAX_MODELS), AfterValidator(_unique_model_ids)
    ] = Field(default_factory=list)
    roles: Annotated[dict[RoleName, Text], Field(max_length=MAX_ROLES)] = Field(
        default_factory=dict
    )
    jev: JevConfig | None = None
    gating: GatingConfig = GatingConfig()
