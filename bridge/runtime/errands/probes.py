"""Token and key checks: one tiny Messages API call, read only for its status code.

REFERENCE-BEHAVIOUR §1.13: a provider profile's token is checked with
``POST {baseUrl without trailing /}/v1/messages`` (``Authorization: Bearer``), an Anthropic API key
with ``POST https://api.anthropic.com/v1/messages`` (``x-api-key``, model
``claude-haiku-4-5-20251001``), both with ``max_tokens: 1``. The verdict is
``status not in {401, 403}``: any other answer (even a 400 for an unknown model, or a 500) means
the credential was accepted or at least not refused. When no answer came (network error, TLS
failure, timeout) the result is None, which the acks send as an absent ``tokenValid`` /
``keyValid``.

Safety: the credential is never logged (log lines carry the host and the status only) and never
sent to an insecure URL (the https rule is checked again here); redirects are not followed, so
the credential cannot be forwarded to another host. Cancel-safe: cancelling a probe closes its
connection.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final
from urllib.parse import urlsplit

from bridge.engine.phones.providers import ProbeRequest
from bridge.protocol import base_url_allowed

__all__ = [
    "ANTHROPIC_API_URL",
    "ANTHROPIC_VERSION",
    "KEY_PROBE_MODEL",
    "PROBE_TIMEOUT",
    "probe_anthropic_key",
    "probe_provider",
]

logger = logging.getLogger(__name__)

ANTHROPIC_API_URL: Final = "https://api.anthropic.com"
ANTHROPIC_VERSION: Final = "2023-06-01"
KEY_PROBE_MODEL: Final = "claude-haiku-4-5-20251001"
PROBE_TIMEOUT: Final = 10.0
REFUSED_STATUSES: Final = frozenset({401, 403})
_MAX_BODY_READ: Final = 64 * 1024


def _messages_url(base_url: str) -> str:
    return base_url.strip().rstrip("/") + "/v1/messages"


def _host(url: str) -> str:
    try:
        return urlsplit(url).hostname or "?"
    except ValueError:
        return "?"


async def _post(url: str, headers: dict[str, str], model: str, timeout: float) -> bool | None:
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": 1,
        "messages": [{"role": "user", "content": "ping"}],
    }
    host = _host(url)
    import aiohttp  # only when a key is probed: its import is slow, kept off every daemon start

    try:
        async with (
            asyncio.timeout(timeout),
            aiohttp.ClientSession(trust_env=False) as session,
            session.post(url, json=body, headers=headers, allow_redirects=False) as response,
        ):
            status = response.status
            await response.content.read(_MAX_BODY_READ)
    except TimeoutError:
        logger.info("- probe of %s timed out after %g s; validity unknown", host, timeout)
        return None
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        # The exception text names the host or the OS error, never the request headers.
        logger.info("! probe of %s failed (%s); validity unknown", host, type(exc).__name__)
        return None
    valid = status not in REFUSED_STATUSES
    logger.info(
        "probe of %s answered %d: credential %s", host, status, "accepted" if valid else "refused"
    )
    return valid


async def probe_provider(request: ProbeRequest, *, timeout: float = PROBE_TIMEOUT) -> bool | None:
    """Check a provider profile's token.

    Args:
        request: the profile's base URL, token and model (from the engine).
        timeout: seconds for the whole call.

    Returns:
        False when the provider answered 401 or 403, True for any other answer, None when the
        probe could not run (insecure URL, network error, timeout).
    """
    if not base_url_allowed(request.base_url):
        logger.warning(
            "! provider probe refused: %s is not a secure base URL", _host(request.base_url)
        )
        return None
    headers = {
        "Authorization": f"Bearer {request.token}",
        "anthropic-version": ANTHROPIC_VERSION,
        "content-type": "application/json",
    }
    return await _post(_messages_url(request.base_url), headers, request.model, timeout)


async def probe_anthropic_key(
    key: str, *, base_url: str = ANTHROPIC_API_URL, timeout: float = PROBE_TIMEOUT
) -> bool | None:
    """Check an Anthropic API key (``x-api-key``) with the smallest model.

    Args:
        key: the API key (the effective one: environment first, else stored).
        base_url: the API origin; tests point it at a local server.
        timeout: seconds for the whole call.

    Returns:
        False for 401/403, True for any other answer, None when no answer came.
    """
    if not base_url_allowed(base_url):
        logger.warning("! key probe refused: %s is not a secure base URL", _host(base_url))
        return None
    headers = {
        "x-api-key": key,
        "anthropic-version": ANTHROPIC_VERSION,
        "content-type": "application/json",
    }
    return await _post(_messages_url(base_url), headers, KEY_PROBE_MODEL, timeout)
