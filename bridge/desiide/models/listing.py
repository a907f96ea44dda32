"""``models.list`` and ``models.test``: every model the editor can pick, and a one-token check.

Where models come from (each with its own id namespace, so ids never collide):

=============  ==============================  ==========================================
source         id                              what it is
=============  ==============================  ==========================================
``config``     the user's id (``fast``)        a ``models[]`` entry of ``config.update``
``profile``    ``profile:<profileId>/<model>``  a phone-set provider profile's model
``agent``      ``claude:<value>``              a model the Claude Code CLI offers
``discovered`` ``ollama:<name>``               served by a local Ollama (``discover``)
=============  ==============================  ==========================================

The profiles and the agent's models are passed in as data (:class:`ModelSources`): this module
does not reach into the daemon or start a CLI. ``discover`` asks Ollama's ``GET /api/tags`` on
127.0.0.1:11434 with a short timeout; no Ollama there is the normal case on most machines, so it
gives an empty list (logged at INFO), never an error.

``models.test`` sends the smallest request the model's API knows (:func:`~bridge.desiide.
model_http.minimal_request`) and answers ``{ok, latencyMs}`` or ``{ok: false, error{kind,
message, hint}}``. The key of a configured model is fetched through the :class:`~bridge.desiide.
settings.SecretResolver` at that moment (a missing secret raises
:class:`~bridge.desiide.settings.SecretNotSet`: the orchestrator answers SecretMissing); a
profile's token is the one the bridge stores (sent as ``Authorization: Bearer``, as the phone's
probes do). The agent's models are run by the Claude Code CLI under its own sign-in, which a bare
HTTP request cannot borrow: the orchestrator may pass an ``agent_tester``; without one the answer
says so (kind ``unknown``) instead of pretending.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Final, Literal

from bridge.desiide.models.errors import ModelError, ModelErrorKind, ProbeResult
from bridge.desiide.models.http import (
    Endpoint,
    ModelCallFailed,
    auth_headers,
    minimal_request,
    request_json,
)
from bridge.desiide.settings import (
    CostTier,
    DesiideSettings,
    Locality,
    SecretRef,
    SecretResolver,
    SecretValue,
    is_loopback_url,
    resolve_secret,
)
from bridge.engine.phones.providers import ProviderProfile
from bridge.records import record

__all__ = [
    "AGENT_PREFIX",
    "DISCOVER_TIMEOUT",
    "OLLAMA_PREFIX",
    "PROFILE_PREFIX",
    "TEST_TIMEOUT",
    "AgentModel",
    "AgentTester",
    "ModelInfo",
    "ModelProvider",
    "ModelSource",
    "ModelSources",
    "ModelTestResult",
    "OllamaAddress",
    "Target",
    "catalog",
    "discover_ollama",
    "list_models",
    "ollama_models_from_tags",
    "resolve_target",
    "run_model_test",
]

logger = logging.getLogger(__name__)

AGENT_PREFIX: Final = "claude:"
PROFILE_PREFIX: Final = "profile:"
OLLAMA_PREFIX: Final = "ollama:"
DISCOVER_TIMEOUT: Final = 1.5
"""Seconds for the Ollama probe: a loopback answer takes milliseconds; a closed port fails at
once; only a stuck listener waits this long."""
TEST_TIMEOUT: Final = 20.0
"""Seconds for ``models.test``: a cold local model may need a while to load."""

ModelSource = Literal["config", "profile", "agent", "discovered"]
ModelProvider = Literal["anthropic", "openai", "ollama", "claude-code"]


@record
class ModelInfo:
    """One entry of ``models.list`` (``ModelInfo``).

    Attributes:
        id: what ``models.test``, ``roles`` and ``task.create`` use.
        label: a human name.
        provider: the API it speaks (``claude-code`` for the agent's own models).
        source: where the entry comes from (see the module docstring).
        model: the name the endpoint knows.
        locality: ``local`` when served from this machine.
        context_tokens: the context window when known.
        cost_tier: ``low | medium | high`` when known.
    """

    id: str
    label: str
    provider: ModelProvider
    source: ModelSource
    model: str
    locality: Locality
    context_tokens: int | None = None
    cost_tier: CostTier | None = None

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "id": self.id,
            "label": self.label,
            "provider": self.provider,
            "source": self.source,
            "model": self.model,
            "locality": self.locality,
        }
        if self.context_tokens is not None:
            wire["contextTokens"] = self.context_tokens
        if self.cost_tier is not None:
            wire["costTier"] = self.cost_tier
        return wire


@record
class AgentModel:
    """A model the agent offers (``value`` is what ``--model`` accepts)."""

    value: str
    label: str | None = None


@record
class OllamaAddress:
    """Where to look for Ollama (tests point it at their own server)."""

    host: str = "127.0.0.1"
    port: int = 11434

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


@record
class ModelSources:
    """Everything ``models.list``/``models.test`` read, as data."""

    config: DesiideSettings
    profiles: tuple[ProviderProfile, ...] = ()
    agent_models: tuple[AgentModel, ...] = ()


ModelTestResult = ProbeResult
"""``models.test``'s result: ``{ok, latencyMs?, error?}`` (the error a :class:`ModelError`)."""


AgentTester = Callable[[str], Awaitable[ModelTestResult]]
"""Tests an agent model by its ``value`` (the orchestrator's business: e.g. a tiny task)."""


# --- the catalog (pure) ------------------------------------------------------------------------


def _locality_of(url: str) -> Locality:
    return "local" if is_loopback_url(url) else "remote"


def _profile_entries(profile: ProviderProfile) -> Iterable[ModelInfo]:
    for entry in profile.models:
        yield ModelInfo(
            id=f"{PROFILE_PREFIX}{profile.id}/{entry.id}",
            label=f"{profile.label} · {entry.label or entry.id}",
            provider="anthropic",
            source="profile",
            model=entry.id,
            locality=_locality_of(profile.base_url),
        )


def catalog(sources: ModelSources) -> list[ModelInfo]:
    """``models.list``'s ``models``: configured, then profiles (by label), then the agent's.

    Duplicates (a profile listing a model twice, an agent value twice) keep the first entry.
    """
    entries: list[ModelInfo] = [
        ModelInfo(
            id=m.id,
            label=m.label or m.model,
            provider=m.provider,
            source="config",
            model=m.model,
            locality=m.locality,
            context_tokens=m.context_tokens,
            cost_tier=m.cost_tier,
        )
        for m in sources.config.models
    ]
    for profile in sorted(sources.profiles, key=lambda p: (p.label.casefold(), p.id)):
        entries.extend(_profile_entries(profile))
    entries.extend(
        ModelInfo(
            id=AGENT_PREFIX + agent.value,
            label=agent.label or agent.value,
            provider="claude-code",
            source="agent",
            model=agent.value,
            locality="remote",
        )
        for agent in sources.agent_models
    )
    unique: dict[str, ModelInfo] = {}
    for entry in entries:
        unique.setdefault(entry.id, entry)
    return list(unique.values())


def ollama_models_from_tags(body: Any) -> list[ModelInfo]:
    """The models of an Ollama ``/api/tags`` answer; malformed items are skipped."""
    raw = body.get("models") if isinstance(body, Mapping) else None
    found: dict[str, ModelInfo] = {}
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, Mapping):
            continue
        name = item.get("name") or item.get("model")
        if not isinstance(name, str) or not name.strip():
            continue
        details = item.get("details")
        size = details.get("parameter_size") if isinstance(details, Mapping) else None
        label = f"{name} ({size})" if isinstance(size, str) and size else name
        found.setdefault(
            name,
            ModelInfo(
                id=OLLAMA_PREFIX + name,
                label=label,
                provider="ollama",
                source="discovered",
                model=name,
                locality="local",
                cost_tier="low",
            ),
        )
    return list(found.values())


# --- models.list -------------------------------------------------------------------------------


async def discover_ollama(
    address: OllamaAddress = OllamaAddress(), *, timeout: float = DISCOVER_TIMEOUT
) -> list[ModelInfo]:
    """What a local Ollama serves; ``[]`` when none answers (logged, not an error).

    Cancel-safe.
    """
    url = address.base_url + "/api/tags"
    try:
        reply = await request_json(
            "GET", url, headers={"accept": "application/json"}, payload=None, timeout=timeout
        )
    except ModelCallFailed as exc:
        logger.info("no Ollama at %s (%s)", address.base_url, exc.error.kind.value)
        return []
    models = ollama_models_from_tags(reply.body)
    logger.info("Ollama at %s serves %d model(s)", address.base_url, len(models))
    return models


async def list_models(
    sources: ModelSources,
    *,
    discover: bool = False,
    ollama: OllamaAddress = OllamaAddress(),
    discover_timeout: float = DISCOVER_TIMEOUT,
) -> dict[str, Any]:
    """``models.list {discover?}`` → ``{models: [ModelInfo], discovered: [ModelInfo]}``."""
    discovered = await discover_ollama(ollama, timeout=discover_timeout) if discover else []
    return {
        "models": [m.to_wire() for m in catalog(sources)],
        "discovered": [m.to_wire() for m in discovered],
    }


# --- models.test -------------------------------------------------------------------------------


@record
class Target:
    """What ``models.test`` must call for a model id.

    Attributes:
        endpoint: the API, base URL and model name.
        secret_ref: a configured model's key (fetched through ``secrets.get``), or None.
        token: a provider profile's stored token (never in ``repr``), or None.
    """

    endpoint: Endpoint
    secret_ref: SecretRef | None = None
    token: SecretValue | None = None


def resolve_target(
    model_id: str, sources: ModelSources, ollama: OllamaAddress = OllamaAddress()
) -> Target | ModelError | AgentModel:
    """Find what to call for `model_id`.

    Returns:
        A :class:`Target`; the :class:`AgentModel` when the id is one of the agent's; or a
        :class:`ModelError` (``not_found`` for an unknown id, ``auth`` for a profile without a
        token).
    """
    configured = sources.config.model(model_id)
    if configured is not None:
        return Target(
            Endpoint(configured.provider, configured.base_url, configured.model, configured.auth),
            secret_ref=configured.api_key,
        )
    if model_id.startswith(OLLAMA_PREFIX) and len(model_id) > len(OLLAMA_PREFIX):
        name = model_id[len(OLLAMA_PREFIX) :]
        return Target(Endpoint("ollama", ollama.base_url, name, "bearer"))
    if model_id.startswith(AGENT_PREFIX):
        value = model_id[len(AGENT_PREFIX) :]
        for agent in sources.agent_models:
            if agent.value == value:
                return agent
    if model_id.startswith(PROFILE_PREFIX):
        for profile in sources.profiles:
            for entry in _profile_entries(profile):
                if entry.id != model_id:
                    continue
                if not profile.auth_token:
                    return ModelError.of(
                        ModelErrorKind.AUTH,
                        f'provider profile "{profile.label}" has no auth token; set one in the '
                        "app's provider settings",
                    )
                return Target(
                    Endpoint("anthropic", profile.base_url, entry.model, "bearer"),
                    token=SecretValue(profile.auth_token),
                )
    return ModelError(
        ModelErrorKind.NOT_FOUND,
        f"no model with id {model_id!r} (see models.list)",
        "Pick a model from the list, or add it in the Desiide settings.",
    )


async def run_model_test(
    model_id: str,
    sources: ModelSources,
    secrets: SecretResolver,
    *,
    ollama: OllamaAddress = OllamaAddress(),
    timeout: float = TEST_TIMEOUT,
    agent_tester: AgentTester | None = None,
) -> ModelTestResult:
    """``models.test {modelId}``: one minimal request, timed and classified.

    Raises:
        SecretNotSet: the configured model's ``secret:<name>`` is not set in the editor.
    """
    target = resolve_target(model_id, sources, ollama)
    if isinstance(target, ModelError):
        return ModelTestResult(ok=False, error=target)
    if isinstance(target, AgentModel):
        if agent_tester is not None:
            return await agent_tester(target.value)
        return ModelTestResult(
            ok=False,
            error=ModelError(
                ModelErrorKind.UNKNOWN,
                "this model is run by the Claude Code CLI under its own sign-in; it cannot be "
                "tested with a bare API request",
                "Start a small task with it to check it works.",
            ),
        )
    key = target.token
    if target.secret_ref is not None:
        key = await resolve_secret(secrets, target.secret_ref)
    url, payload = minimal_request(target.endpoint)
    try:
        reply = await request_json(
            "POST",
            url,
            headers=auth_headers(target.endpoint, key),
            payload=payload,
            timeout=timeout,
            key=key,
        )
    except ModelCallFailed as exc:
        return ModelTestResult(ok=False, error=exc.error)
    return ModelTestResult(ok=True, latency_ms=reply.latency_ms)
