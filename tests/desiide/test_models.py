"""models.list and models.test against a real HTTP server on 127.0.0.1 (tests/support/mock_jev)."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from bridge.desiide.models.errors import (
    HINTS,
    ModelError,
    ModelErrorKind,
    classify_provider_error,
    classify_status,
    is_retryable,
    provider_error_message,
)
from bridge.desiide.models.http import api_url
from bridge.desiide.models.listing import (
    AgentModel,
    ModelSources,
    ModelTestResult,
    OllamaAddress,
    catalog,
    discover_ollama,
    list_models,
    ollama_models_from_tags,
    run_model_test,
)
from bridge.desiide.settings import DesiideSettings, SecretNotSet
from bridge.engine.phones.providers import ProviderProfile
from bridge.protocol import ModelEntry
from tests.support.mock_jev import MockModelApi, Scripted, error_body

KEY = "sk-test-SECRET-VALUE-123"


@pytest.fixture
def api() -> Iterator[MockModelApi]:
    with MockModelApi() as server:
        yield server


class FakeSecrets:
    def __init__(self, values: dict[str, str | None] | None = None) -> None:
        self.values = values if values is not None else {"secret:key": KEY}

    async def get(self, ref: str) -> str | None:
        return self.values.get(ref)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def config_with(*models: dict[str, Any]) -> DesiideSettings:
    return DesiideSettings.from_params({"models": list(models)})


def model(base_url: str, **overrides: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": "m1",
        "provider": "anthropic",
        "baseUrl": base_url,
        "model": "claude-haiku-4-5",
        "apiKey": "secret:key",
    }
    entry.update(overrides)
    return {k: v for k, v in entry.items() if v is not None}


def profile(
    profile_id: str = "p1", base_url: str = "https://gw.example.com", token: str | None = "tok"
) -> ProviderProfile:
    return ProviderProfile(
        id=profile_id,
        label="Gateway",
        base_url=base_url,
        models=(ModelEntry(id="gw-large", label="Large"), ModelEntry(id="gw-small")),
        auth_token=token,
    )


# --- the catalog -------------------------------------------------------------------------------


def test_catalog_lists_config_then_profiles_then_the_agent() -> None:
    sources = ModelSources(
        config=config_with(
            model("https://api.example.com", label="Fast", costTier="low", contextTokens=200000)
        ),
        profiles=(profile(),),
        agent_models=(AgentModel("sonnet", "Sonnet"), AgentModel("opus"), AgentModel("opus")),
    )
    wire = [m.to_wire() for m in catalog(sources)]
    assert wire == [
        {
            "id": "m1",
            "label": "Fast",
            "provider": "anthropic",
            "source": "config",
            "model": "claude-haiku-4-5",
            "locality": "remote",
            "contextTokens": 200000,
            "costTier": "low",
        },
        {
            "id": "profile:p1/gw-large",
            "label": "Gateway · Large",
            "provider": "anthropic",
            "source": "profile",
            "model": "gw-large",
            "locality": "remote",
        },
        {
            "id": "profile:p1/gw-small",
            "label": "Gateway · gw-small",
            "provider": "anthropic",
            "source": "profile",
            "model": "gw-small",
            "locality": "remote",
        },
        {
            "id": "claude:sonnet",
            "label": "Sonnet",
            "provider": "claude-code",
            "source": "agent",
            "model": "sonnet",
            "locality": "remote",
        },
        {
            "id": "claude:opus",
            "label": "opus",
            "provider": "claude-code",
            "source": "agent",
            "model": "opus",
            "locality": "remote",
        },
    ]


def test_ollama_tags_are_read_and_malformed_items_skipped() -> None:
    body = {
        "models": [
            {"name": "llama3.2:3b", "details": {"parameter_size": "3.2B"}},
            {"model": "qwen2.5-coder:7b"},
            {"name": ""},
            "junk",
            {"name": "llama3.2:3b"},
        ]
    }
    assert [(m.id, m.label, m.locality, m.cost_tier) for m in ollama_models_from_tags(body)] == [
        ("ollama:llama3.2:3b", "llama3.2:3b (3.2B)", "local", "low"),
        ("ollama:qwen2.5-coder:7b", "qwen2.5-coder:7b", "local", "low"),
    ]
    assert ollama_models_from_tags({"models": "x"}) == []
    assert ollama_models_from_tags(None) == []


# --- discover ----------------------------------------------------------------------------------


async def test_discover_lists_what_a_local_ollama_serves(api: MockModelApi) -> None:
    api.set_default("/api/tags", Scripted(200, {"models": [{"name": "phi4:14b"}]}))
    found = await discover_ollama(OllamaAddress("127.0.0.1", api.port))
    assert [m.id for m in found] == ["ollama:phi4:14b"]
    assert [(r.method, r.path) for r in api.requests] == [("GET", "/api/tags")]


async def test_discover_without_ollama_is_an_empty_list_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="bridge.desiide")
    started = time.monotonic()
    assert await discover_ollama(OllamaAddress("127.0.0.1", closed_port())) == []
    assert time.monotonic() - started < 1.5
    assert any("no Ollama at" in r.getMessage() for r in caplog.records)


async def test_discover_of_something_else_is_an_empty_list(api: MockModelApi) -> None:
    api.set_default("/api/tags", Scripted(200, b"<html>not ollama</html>"))
    assert await discover_ollama(OllamaAddress("127.0.0.1", api.port)) == []


async def test_discover_gives_up_on_a_stuck_listener(api: MockModelApi) -> None:
    api.set_default("/api/tags", Scripted(200, {"models": []}, delay=5))
    started = time.monotonic()
    assert await discover_ollama(OllamaAddress("127.0.0.1", api.port), timeout=0.3) == []
    assert time.monotonic() - started < 2


async def test_models_list_discovers_only_when_asked(api: MockModelApi) -> None:
    api.set_default("/api/tags", Scripted(200, {"models": [{"name": "phi4:14b"}]}))
    sources = ModelSources(config=DesiideSettings(), agent_models=(AgentModel("sonnet"),))
    address = OllamaAddress("127.0.0.1", api.port)
    plain = await list_models(sources, ollama=address)
    assert plain["discovered"] == []
    assert [m["id"] for m in plain["models"]] == ["claude:sonnet"]
    assert api.requests == []
    found = await list_models(sources, discover=True, ollama=address)
    assert [m["id"] for m in found["discovered"]] == ["ollama:phi4:14b"]


# --- models.test: requests ---------------------------------------------------------------------


async def test_anthropic_test_sends_one_token_with_the_key(api: MockModelApi) -> None:
    sources = ModelSources(config=config_with(model(api.base_url)))
    result = await run_model_test("m1", sources, FakeSecrets())
    assert result.ok is True and result.error is None
    assert isinstance(result.latency_ms, int) and 0 <= result.latency_ms < 5000
    assert result.to_wire() == {"ok": True, "latencyMs": result.latency_ms}
    (request,) = api.requests
    assert (request.method, request.path) == ("POST", "/v1/messages")
    assert request.body == {
        "model": "claude-haiku-4-5",
        "max_tokens": 1,
        "messages": [{"role": "user", "content": "ping"}],
    }
    assert request.headers["x-api-key"] == KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in request.headers


async def test_openai_test_uses_chat_completions_with_bearer(api: MockModelApi) -> None:
    sources = ModelSources(
        config=config_with(model(api.base_url + "/v1", provider="openai", model="gpt-mini"))
    )
    result = await run_model_test("m1", sources, FakeSecrets())
    assert result.ok is True
    (request,) = api.requests
    assert request.path == "/v1/chat/completions"
    assert request.body["max_tokens"] == 1 and request.body["model"] == "gpt-mini"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert "x-api-key" not in request.headers


async def test_ollama_test_uses_api_chat_without_a_key(api: MockModelApi) -> None:
    sources = ModelSources(config=DesiideSettings())
    result = await run_model_test(
        "ollama:phi4:14b", sources, FakeSecrets({}), ollama=OllamaAddress("127.0.0.1", api.port)
    )
    assert result.ok is True
    (request,) = api.requests
    assert request.path == "/api/chat"
    assert request.body == {
        "model": "phi4:14b",
        "messages": [{"role": "user", "content": "ping"}],
        "stream": False,
        "options": {"num_predict": 1},
    }
    assert "authorization" not in request.headers and "x-api-key" not in request.headers


async def test_a_profile_model_is_tested_with_its_stored_token_as_bearer(
    api: MockModelApi,
) -> None:
    sources = ModelSources(config=DesiideSettings(), profiles=(profile(base_url=api.base_url),))
    result = await run_model_test("profile:p1/gw-small", sources, FakeSecrets({}))
    assert result.ok is True
    (request,) = api.requests
    assert request.body["model"] == "gw-small"
    assert request.headers["authorization"] == "Bearer tok"


async def test_a_profile_without_token_fails_as_auth_without_a_request(api: MockModelApi) -> None:
    sources = ModelSources(
        config=DesiideSettings(), profiles=(profile(base_url=api.base_url, token=None),)
    )
    result = await run_model_test("profile:p1/gw-large", sources, FakeSecrets({}))
    assert result.error is not None and result.error.kind is ModelErrorKind.AUTH
    assert "has no auth token" in result.error.message
    assert api.requests == []


async def test_a_key_is_never_sent_to_an_insecure_url() -> None:
    # A legacy profile stored before the https rule: listed, but its token never travels.
    sources = ModelSources(
        config=DesiideSettings(), profiles=(profile(base_url="http://gw.example.com"),)
    )
    result = await run_model_test("profile:p1/gw-large", sources, FakeSecrets({}))
    assert result.error is not None and result.error.kind is ModelErrorKind.BAD_REQUEST
    assert "insecure URL" in result.error.message


async def test_unknown_ids_and_agent_models() -> None:
    sources = ModelSources(config=DesiideSettings(), agent_models=(AgentModel("sonnet"),))
    unknown = await run_model_test("nope", sources, FakeSecrets())
    assert unknown.to_wire() == {
        "ok": False,
        "error": {
            "kind": "not_found",
            "message": "no model with id 'nope' (see models.list)",
            "hint": "Pick a model from the list, or add it in the Desiide settings.",
        },
    }
    agent = await run_model_test("claude:sonnet", sources, FakeSecrets())
    assert agent.error is not None and agent.error.kind is ModelErrorKind.UNKNOWN
    assert "Claude Code CLI" in agent.error.message

    tested: list[str] = []

    async def tester(value: str) -> ModelTestResult:
        tested.append(value)
        return ModelTestResult(ok=True, latency_ms=7)

    via = await run_model_test("claude:sonnet", sources, FakeSecrets(), agent_tester=tester)
    assert (via, tested) == (ModelTestResult(ok=True, latency_ms=7), ["sonnet"])
    assert (await run_model_test("claude:haiku", sources, FakeSecrets())).error is not None


async def test_a_missing_secret_raises_secret_not_set(api: MockModelApi) -> None:
    sources = ModelSources(config=config_with(model(api.base_url)))
    with pytest.raises(SecretNotSet) as caught:
        await run_model_test("m1", sources, FakeSecrets({}))
    assert caught.value.ref == "secret:key"
    assert api.requests == []


# --- models.test: failures ---------------------------------------------------------------------

STATUS_CASES: list[tuple[int, ModelErrorKind]] = [
    (401, ModelErrorKind.AUTH),
    (403, ModelErrorKind.AUTH),
    (429, ModelErrorKind.RATE_LIMIT),
    (529, ModelErrorKind.OVERLOADED),
    (503, ModelErrorKind.OVERLOADED),
    (404, ModelErrorKind.NOT_FOUND),
    (400, ModelErrorKind.BAD_REQUEST),
    (422, ModelErrorKind.BAD_REQUEST),
    (500, ModelErrorKind.SERVER),
    (502, ModelErrorKind.SERVER),
    (418, ModelErrorKind.UNKNOWN),
]


@pytest.mark.parametrize(("status", "kind"), STATUS_CASES, ids=[str(c[0]) for c in STATUS_CASES])
async def test_http_failures_are_classified(
    api: MockModelApi, status: int, kind: ModelErrorKind
) -> None:
    api.script("/v1/messages", Scripted(status, error_body("whatever_error", "it went wrong")))
    sources = ModelSources(config=config_with(model(api.base_url)))
    result = await run_model_test("m1", sources, FakeSecrets())
    assert result.to_wire() == {
        "ok": False,
        "error": {
            "kind": kind.value,
            "message": f"HTTP {status}: it went wrong",
            "hint": HINTS[kind],
        },
    }


async def test_a_redirect_is_not_followed(api: MockModelApi) -> None:
    api.script("/v1/messages", Scripted(307, b""))
    sources = ModelSources(config=config_with(model(api.base_url)))
    result = await run_model_test("m1", sources, FakeSecrets())
    assert result.error is not None and result.error.kind is ModelErrorKind.UNKNOWN
    assert result.error.message.startswith("HTTP 307 (a redirect")
    assert len(api.requests) == 1


async def test_an_error_in_a_200_body_is_classified_by_its_type(api: MockModelApi) -> None:
    api.script("/v1/messages", Scripted(200, error_body("overloaded_error", "busy")))
    sources = ModelSources(config=config_with(model(api.base_url)))
    result = await run_model_test("m1", sources, FakeSecrets())
    assert result.error == ModelError.of(ModelErrorKind.OVERLOADED, "HTTP 200: busy", status=200)


async def test_a_200_that_is_not_json_is_unknown(api: MockModelApi) -> None:
    api.script("/v1/messages", Scripted(200, b"<html>hello</html>"))
    sources = ModelSources(config=config_with(model(api.base_url)))
    result = await run_model_test("m1", sources, FakeSecrets())
    assert result.error is not None and result.error.kind is ModelErrorKind.UNKNOWN
    assert "not JSON" in result.error.message


async def test_a_provider_echoing_the_key_is_scrubbed_and_logs_never_hold_it(
    api: MockModelApi, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    api.script(
        "/v1/messages",
        Scripted(401, error_body("authentication_error", f"invalid x-api-key {KEY}")),
    )
    sources = ModelSources(config=config_with(model(api.base_url)))
    result = await run_model_test("m1", sources, FakeSecrets())
    assert result.error is not None
    assert result.error.message == "HTTP 401: invalid x-api-key ***"
    assert KEY not in repr(result)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "/v1/messages answered 401" in logged
    assert KEY not in logged


async def test_a_slow_endpoint_times_out(api: MockModelApi) -> None:
    api.script("/v1/messages", Scripted(200, {"content": []}, delay=5))
    sources = ModelSources(config=config_with(model(api.base_url)))
    started = time.monotonic()
    result = await run_model_test("m1", sources, FakeSecrets(), timeout=0.3)
    assert time.monotonic() - started < 2
    assert result.error == ModelError.of(ModelErrorKind.TIMEOUT, "no answer within 0.3 s")


async def test_nothing_listening_is_a_network_error() -> None:
    port = closed_port()
    sources = ModelSources(config=config_with(model(f"http://127.0.0.1:{port}")))
    result = await run_model_test("m1", sources, FakeSecrets())
    assert result.error is not None and result.error.kind is ModelErrorKind.NETWORK
    assert result.error.message == "could not reach 127.0.0.1 (ClientConnectorError)"
    assert result.error.retryable is True


# --- the pure parts ----------------------------------------------------------------------------


def test_classification_tables() -> None:
    assert classify_status(200) is None and classify_status(204) is None
    assert classify_status(302) is None and classify_status(418) is None
    assert classify_status(599) is ModelErrorKind.SERVER
    assert classify_provider_error({"error": {"type": "rate_limit_error"}}) is (
        ModelErrorKind.RATE_LIMIT
    )
    assert classify_provider_error({"error": {"code": "model_not_found"}}) is (
        ModelErrorKind.NOT_FOUND
    )
    assert classify_provider_error({"error": "ollama text"}) is None
    assert provider_error_message({"error": "model 'x' not found"}) == "model 'x' not found"
    assert provider_error_message({"error": {"message": "  a\n b "}}) == "a b"
    long = provider_error_message({"error": {"message": "x" * 1000}})
    assert long is not None and len(long) == 300 and long.endswith("…")
    assert provider_error_message({"error": {}}) is None
    retryable = {k for k in ModelErrorKind if is_retryable(k)}
    assert retryable == {
        ModelErrorKind.RATE_LIMIT,
        ModelErrorKind.OVERLOADED,
        ModelErrorKind.NETWORK,
        ModelErrorKind.TIMEOUT,
        ModelErrorKind.SERVER,
    }
    assert set(HINTS) == set(ModelErrorKind)
    assert [k.value for k in ModelErrorKind] == [
        "auth",
        "rate_limit",
        "overloaded",
        "network",
        "timeout",
        "not_found",
        "bad_request",
        "server",
        "unknown",
    ]


@pytest.mark.parametrize(
    ("base", "path", "url"),
    [
        ("https://x", "/v1/messages", "https://x/v1/messages"),
        ("https://x/", "/v1/messages", "https://x/v1/messages"),
        ("https://x/v1", "/v1/messages", "https://x/v1/messages"),
        ("https://x/proxy/v1/", "/v1/chat/completions", "https://x/proxy/v1/chat/completions"),
        ("http://127.0.0.1:11434", "/api/chat", "http://127.0.0.1:11434/api/chat"),
    ],
)
def test_api_url(base: str, path: str, url: str) -> None:
    assert api_url(base, path) == url
