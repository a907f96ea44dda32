"""ModelErrorKind: why a model call failed, in one closed vocabulary, with a hint for the user.

The seed names ``ModelErrorKind`` in three places (``models.test``'s ``error.kind``, the ``error``
task event and the ``model_error:<kind>`` failure reason) without listing it, so this module
defines it once and everything else imports it. A kind must tell the user what to do next, so
each one answers a different question: fix the key (``auth``), wait (``rate_limit``,
``overloaded``), check the machine or URL (``network``, ``timeout``), fix the model name
(``not_found``), report a bug or a provider mismatch (``bad_request``), or retry later
(``server``).

Classification (one function per input, first match wins):

=====================================  ===============
HTTP status                            kind
=====================================  ===============
401, 403                               auth
429                                    rate_limit
529, 503                               overloaded
404                                    not_found
400, 413, 422                          bad_request
any other 5xx                          server
anything else (other 4xx, 3xx, 1xx)    the provider's error type when it names one, else unknown
=====================================  ===============

Transport failures: a timeout is ``timeout``; a refused or reset connection, a DNS failure, TLS
trouble or a URL that can't be used is ``network``.

Pure: no I/O, no clock, no logging. The HTTP layer (:mod:`bridge.desiide.models.http`) feeds it.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Final, Protocol

from bridge.records import record

__all__ = [
    "HINTS",
    "MAX_MESSAGE_CHARS",
    "ModelError",
    "ModelErrorKind",
    "ProbeResult",
    "WireError",
    "classify_provider_error",
    "classify_status",
    "is_retryable",
    "provider_error_message",
]

MAX_MESSAGE_CHARS: Final = 300
"""A provider's error text is cut to this length: it goes to a settings page, not a log dump."""


class ModelErrorKind(StrEnum):
    """Why a model call failed (``ModelErrorKind`` of the Desiide protocol)."""

    AUTH = "auth"
    """The endpoint refused the credential (HTTP 401/403): missing, wrong, revoked or without
    access to this model."""
    RATE_LIMIT = "rate_limit"
    """Too many requests or tokens for the account right now (HTTP 429). Waiting helps."""
    OVERLOADED = "overloaded"
    """The provider is temporarily over capacity (HTTP 529, or 503). Not the user's fault;
    waiting helps."""
    NETWORK = "network"
    """No HTTP answer: connection refused or reset, DNS or TLS failure, or a base URL that
    can't be used. Usually a wrong URL or a local server (Ollama) that isn't running."""
    TIMEOUT = "timeout"
    """No complete answer within the time limit. The endpoint may be slow or stuck."""
    NOT_FOUND = "not_found"
    """The endpoint or the model does not exist there (HTTP 404): a wrong model name, or a base
    URL with a wrong path."""
    BAD_REQUEST = "bad_request"
    """The endpoint refused the request as malformed (HTTP 400/413/422), or the request could not
    be made as configured. Often a provider that is not compatible with the API it was set up
    as."""
    SERVER = "server"
    """The provider failed on its side (another HTTP 5xx). Retrying later may help."""
    UNKNOWN = "unknown"
    """Anything else: an unexpected status (a redirect, another 4xx) or an answer that can't be
    read."""


HINTS: Final[Mapping[ModelErrorKind, str]] = {
    ModelErrorKind.AUTH: (
        "Check the API key: the secret it refers to must hold a valid key with access to this "
        "model."
    ),
    ModelErrorKind.RATE_LIMIT: "The account's rate limit was reached; wait a minute and retry.",
    ModelErrorKind.OVERLOADED: "The provider is overloaded right now; retry in a moment.",
    ModelErrorKind.NETWORK: (
        "Check the base URL and that the server is reachable (for Ollama: is `ollama serve` "
        "running?)."
    ),
    ModelErrorKind.TIMEOUT: "The endpoint did not answer in time; check it is up, then retry.",
    ModelErrorKind.NOT_FOUND: (
        "Check the model name and the base URL (it should be the API's root, without /v1/messages)."
    ),
    ModelErrorKind.BAD_REQUEST: (
        "The endpoint refused the request; check that its API type (anthropic, openai, ollama) "
        "matches the provider."
    ),
    ModelErrorKind.SERVER: "The provider had an internal error; retry later.",
    ModelErrorKind.UNKNOWN: "Unexpected answer from the endpoint; see the orchestrator log.",
}
"""One sentence per kind telling the user what to do (``error.hint``)."""

_RETRYABLE: Final = frozenset(
    {
        ModelErrorKind.RATE_LIMIT,
        ModelErrorKind.OVERLOADED,
        ModelErrorKind.NETWORK,
        ModelErrorKind.TIMEOUT,
        ModelErrorKind.SERVER,
    }
)

# Anthropic's ``error.type`` values and OpenAI/Ollama look-alikes; used only when the status
# alone doesn't decide (a gateway answering 200/4xx with an error body).
_PROVIDER_TYPES: Final[Mapping[str, ModelErrorKind]] = {
    "authentication_error": ModelErrorKind.AUTH,
    "permission_error": ModelErrorKind.AUTH,
    "invalid_api_key": ModelErrorKind.AUTH,
    "rate_limit_error": ModelErrorKind.RATE_LIMIT,
    "rate_limit_exceeded": ModelErrorKind.RATE_LIMIT,
    "overloaded_error": ModelErrorKind.OVERLOADED,
    "not_found_error": ModelErrorKind.NOT_FOUND,
    "model_not_found": ModelErrorKind.NOT_FOUND,
    "invalid_request_error": ModelErrorKind.BAD_REQUEST,
    "request_too_large": ModelErrorKind.BAD_REQUEST,
    "api_error": ModelErrorKind.SERVER,
    "server_error": ModelErrorKind.SERVER,
}


@record
class ModelError:
    """A classified failure, as the wire's ``error{kind, message, hint?}``.

    Attributes:
        kind: the classification.
        message: what happened, for the user; never contains a credential (the HTTP layer
            scrubs provider texts before building one).
        hint: what to do next; :data:`HINTS` for the kind unless a caller knows better.
        status: the HTTP status when there was one (logs only, not on the wire).
    """

    kind: ModelErrorKind
    message: str
    hint: str | None = None
    status: int | None = None

    @classmethod
    def of(cls, kind: ModelErrorKind, message: str, *, status: int | None = None) -> ModelError:
        """A failure with the kind's standard hint."""
        return cls(kind, message, HINTS[kind], status)

    @property
    def retryable(self) -> bool:
        return is_retryable(self.kind)

    def to_wire(self) -> dict[str, Any]:
        """``{kind, message, hint?}``."""
        wire: dict[str, Any] = {"kind": self.kind.value, "message": self.message}
        if self.hint is not None:
            wire["hint"] = self.hint
        return wire


def is_retryable(kind: ModelErrorKind) -> bool:
    """Whether retrying the same request later can succeed (the ``error`` event's ``retryable``)."""
    return kind in _RETRYABLE


def classify_status(status: int) -> ModelErrorKind | None:
    """The kind an HTTP status decides by itself, or None (2xx, or a status that doesn't tell).

    Args:
        status: the HTTP status code.
    """
    if 200 <= status < 300:
        return None
    if status in (401, 403):
        return ModelErrorKind.AUTH
    if status == 429:
        return ModelErrorKind.RATE_LIMIT
    if status in (529, 503):
        return ModelErrorKind.OVERLOADED
    if status == 404:
        return ModelErrorKind.NOT_FOUND
    if status in (400, 413, 422):
        return ModelErrorKind.BAD_REQUEST
    if 500 <= status < 600:
        return ModelErrorKind.SERVER
    return None


def _error_object(body: Any) -> Mapping[str, Any] | None:
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping):
            return error
    return None


def classify_provider_error(body: Any) -> ModelErrorKind | None:
    """The kind an error body names (Anthropic ``{"error": {"type"}}``, OpenAI ``code``), or None."""
    error = _error_object(body)
    if error is None:
        return None
    for key in ("type", "code"):
        value = error.get(key)
        if isinstance(value, str) and value in _PROVIDER_TYPES:
            return _PROVIDER_TYPES[value]
    return None


def provider_error_message(body: Any) -> str | None:
    """The provider's own error text, cut to :data:`MAX_MESSAGE_CHARS`, or None.

    Understands Anthropic/OpenAI (``{"error": {"message"}}``) and Ollama (``{"error": "…"}``).
    """
    text: object = None
    error = _error_object(body)
    if error is not None:
        text = error.get("message")
    elif isinstance(body, Mapping):
        text = body.get("error")
    if not isinstance(text, str) or not text.strip():
        return None
    text = " ".join(text.split())
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[: MAX_MESSAGE_CHARS - 1] + "…"
    return text


class WireError(Protocol):
    """An error a test result carries (:class:`ModelError`, the judge's ``JevError``)."""

    def to_wire(self) -> dict[str, Any]: ...


@record
class ProbeResult:
    """The result of ``models.test`` and ``jev.test``: ``{ok, latencyMs?, error?}``."""

    ok: bool
    latency_ms: int | None = None
    error: WireError | None = None

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"ok": self.ok}
        if self.latency_ms is not None:
            wire["latencyMs"] = self.latency_ms
        if self.error is not None:
            wire["error"] = self.error.to_wire()
        return wire
