"""The HTTP side of model calls: one JSON request, timed, its failure classified.

Shared by ``models.test``, the Ollama probe and the JEV client so that they agree on what a
failure is (:mod:`bridge.desiide.models.errors`) and on the safety rules for credentials, which
are the ones of the phone's provider probes (:mod:`bridge.runtime.errands.probes`):

* a key is sent only to an https URL, or http to loopback (:func:`bridge.protocol.base_url_allowed`);
  otherwise the request is not made at all;
* redirects are not followed, so a key cannot be forwarded to another host;
* the key never reaches a log line or an exception: log lines carry the host, the path, the
  status and the latency; provider error texts are scrubbed of the key before they are kept
  (some providers echo part of a bad key back).

aiohttp (already a dependency) is imported on first use, as in :mod:`bridge.runtime.errands.probes`:
its import is slow, and most orchestrator runs never test a model.

Cancel-safe: cancelling a call closes its connection.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from bridge.desiide.models.errors import (
    ModelError,
    ModelErrorKind,
    classify_provider_error,
    classify_status,
    provider_error_message,
)
from bridge.desiide.settings import ApiKind, AuthScheme, SecretValue
from bridge.protocol import base_url_allowed
from bridge.records import record

__all__ = [
    "ANTHROPIC_VERSION",
    "MAX_BODY_BYTES",
    "Endpoint",
    "HttpReply",
    "ModelCallFailed",
    "api_url",
    "auth_headers",
    "minimal_request",
    "request_json",
]

logger = logging.getLogger(__name__)

ANTHROPIC_VERSION: Final = "2023-06-01"
MAX_BODY_BYTES: Final = 256 * 1024
"""An answer is read up to this size; a minimal request's answer is a few hundred bytes."""

_PING: Final = "ping"


@record
class Endpoint:
    """Where a model is served and how it is spoken to (no credential: that comes separately)."""

    api: ApiKind
    base_url: str
    model: str
    auth: AuthScheme = "x-api-key"


@record
class HttpReply:
    """A 2xx answer: its status, decoded JSON body and the measured latency."""

    status: int
    body: Any
    latency_ms: int


class ModelCallFailed(Exception):
    """A model call failed; ``error`` is the classified failure (safe to show the user)."""

    def __init__(self, error: ModelError) -> None:
        super().__init__(f"{error.kind.value}: {error.message}")
        self.error = error


def api_url(base_url: str, path: str) -> str:
    """Join the API root and an endpoint path, not doubling a ``/v1`` the user included.

    ``api_url("https://x/v1", "/v1/messages")`` → ``https://x/v1/messages``.
    """
    base = base_url.strip().rstrip("/")
    if path.startswith("/v1/") and base.endswith("/v1"):
        base = base[: -len("/v1")]
    return base + path


def auth_headers(endpoint: Endpoint, key: SecretValue | None) -> dict[str, str]:
    """The request headers for `endpoint` (the key in the header its auth scheme names)."""
    headers = {"content-type": "application/json", "accept": "application/json"}
    if endpoint.api == "anthropic":
        headers["anthropic-version"] = ANTHROPIC_VERSION
    if key is not None:
        if endpoint.auth == "x-api-key":
            headers["x-api-key"] = key.reveal()
        else:
            headers["authorization"] = "Bearer " + key.reveal()
    return headers


def minimal_request(endpoint: Endpoint) -> tuple[str, dict[str, Any]]:
    """The smallest request that proves the endpoint serves the model: ``(url, json body)``.

    anthropic: ``POST /v1/messages`` with ``max_tokens: 1``; openai: ``POST
    /v1/chat/completions`` with ``max_tokens: 1``; ollama: ``POST /api/chat`` with
    ``num_predict: 1`` and no streaming.
    """
    messages = [{"role": "user", "content": _PING}]
    if endpoint.api == "anthropic":
        body = {"model": endpoint.model, "max_tokens": 1, "messages": messages}
        return api_url(endpoint.base_url, "/v1/messages"), body
    if endpoint.api == "openai":
        body = {"model": endpoint.model, "max_tokens": 1, "messages": messages}
        return api_url(endpoint.base_url, "/v1/chat/completions"), body
    body = {
        "model": endpoint.model,
        "messages": messages,
        "stream": False,
        "options": {"num_predict": 1},
    }
    return api_url(endpoint.base_url, "/api/chat"), body


def _where(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return "?"
    return f"{parts.hostname or '?'}{parts.path}"


def _decode(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


def _failure(status: int, body: Any, key: SecretValue | None) -> ModelError:
    kind = classify_status(status) or classify_provider_error(body) or ModelErrorKind.UNKNOWN
    text = provider_error_message(body)
    if text is not None and key is not None:
        text = key.scrub(text)
    message = f"HTTP {status}" + (f": {text}" if text else "")
    if 300 <= status < 400:
        message += " (a redirect: set the base URL to the address it points to)"
    return ModelError.of(kind, message, status=status)


async def request_json(
    method: str,
    url: str,
    *,
    headers: Mapping[str, str],
    payload: Mapping[str, Any] | None,
    timeout: float,
    key: SecretValue | None = None,
) -> HttpReply:
    """Send one request and return its 2xx JSON answer.

    Args:
        method: ``GET`` or ``POST``.
        url: the full URL.
        headers: the headers (may hold the key; never logged).
        payload: the JSON body, or None.
        timeout: seconds for the whole exchange.
        key: the credential in `headers`, if any: enforces the https rule and scrubs error texts.

    Returns:
        The answer when the status is 2xx and the body is JSON without an ``error`` object.

    Raises:
        ModelCallFailed: any other outcome, classified.
    """
    where = _where(url)
    if key is not None and not base_url_allowed(url):
        raise ModelCallFailed(
            ModelError.of(
                ModelErrorKind.BAD_REQUEST,
                "refused to send an API key to an insecure URL: the base URL must be https:// "
                "(http:// only for localhost, 127.0.0.1 or [::1])",
            )
        )
    import aiohttp  # first use only (see the module docstring)

    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        async with (
            asyncio.timeout(timeout),
            aiohttp.ClientSession(trust_env=False) as session,
            session.request(
                method, url, json=payload, headers=dict(headers), allow_redirects=False
            ) as response,
        ):
            status = response.status
            raw = await response.content.read(MAX_BODY_BYTES)
    except TimeoutError:
        logger.info("- %s %s: no answer within %g s", method, where, timeout)
        raise ModelCallFailed(
            ModelError.of(ModelErrorKind.TIMEOUT, f"no answer within {timeout:g} s")
        ) from None
    except (aiohttp.InvalidURL, ValueError) as exc:
        logger.info("! %s %s: unusable URL (%s)", method, where, type(exc).__name__)
        raise ModelCallFailed(
            ModelError.of(ModelErrorKind.NETWORK, "the base URL cannot be used")
        ) from None
    except (aiohttp.ClientError, OSError) as exc:
        # The exception's name only: its text may quote a URL, never headers, but keep it short.
        logger.info("! %s %s failed: %s", method, where, type(exc).__name__)
        raise ModelCallFailed(
            ModelError.of(
                ModelErrorKind.NETWORK,
                f"could not reach {where.split('/')[0]} ({type(exc).__name__})",
            )
        ) from None
    latency_ms = max(0, round((loop.time() - started) * 1000))
    body = _decode(raw)
    logger.info("%s %s answered %d in %d ms", method, where, status, latency_ms)
    if not 200 <= status < 300:
        raise ModelCallFailed(_failure(status, body, key))
    if body is None:
        raise ModelCallFailed(
            ModelError.of(
                ModelErrorKind.UNKNOWN,
                f"HTTP {status} but the answer is not JSON (is the API type right?)",
                status=status,
            )
        )
    if classify_provider_error(body) is not None or (
        isinstance(body, Mapping) and isinstance(body.get("error"), Mapping | str)
    ):
        raise ModelCallFailed(_failure(status, body, key))
    return HttpReply(status, body, latency_ms)
