"""The JEV client: puts a pack's state to the judge model and reads its verdict, strictly.

The judge is the model ``config.update`` set in ``jev``: an Anthropic-compatible Messages
endpoint (``POST {baseUrl}/v1/messages``), its key a ``secret:<name>`` ref fetched through
``secrets.get`` for each call (the orchestrator keeps no key in memory between calls; a missing
secret raises :class:`~bridge.desiide.settings.SecretNotSet`, answered SecretMissing).

One request per judgement: a system prompt that says what the judge is for and that the reply
must be one JSON object; a user message with the pack's question, the exact result format, and
the state (metadata only, built by :mod:`.packs`). ``temperature: 0``: the same state should get
the same verdict. The reply is parsed by :mod:`.results`, which refuses anything that does not
fit: a judgement steers what the orchestrator does, so a malformed reply is an error
(``malformed_result``), never a guess. Nothing is retried here: the caller decides (a risk-gate
judgement that fails leaves the rules' outcome alone, see :mod:`.risk`).

Without a ``jev`` in the settings, every call fails with ``jev_not_configured`` — a clear
error, never a made-up result. ``jev.test`` sends a small real judgement (a ``noul`` about a
harmless ``git status``), so "ok" means the endpoint answered *and* the model follows the
format.

Errors are :class:`JevError` with a ``kind``: a :class:`~bridge.desiide.models.errors.ModelErrorKind`
value for transport/HTTP failures, or ``jev_not_configured`` / ``malformed_result``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

from bridge.desiide.jev.packs import PACK_FORMATS, PackName, build_risk_gate
from bridge.desiide.jev.results import JevResult, MalformedResult, parse_result
from bridge.desiide.models.errors import ModelError, ProbeResult
from bridge.desiide.models.http import (
    Endpoint,
    ModelCallFailed,
    api_url,
    auth_headers,
    request_json,
)
from bridge.desiide.settings import JevSettings, SecretResolver, SecretValue, resolve_secret
from bridge.records import record

__all__ = [
    "DEFAULT_WORKFLOWS",
    "JEV_MAX_TOKENS",
    "JEV_NOT_CONFIGURED",
    "MALFORMED_RESULT",
    "SYSTEM_PROMPT",
    "JevClient",
    "JevError",
    "JevTestResult",
    "Judgement",
    "build_prompt",
]

logger = logging.getLogger(__name__)

JEV_NOT_CONFIGURED: Final = "jev_not_configured"
MALFORMED_RESULT: Final = "malformed_result"
JEV_MAX_TOKENS: Final = 256
"""Room for the JSON verdict; a reply cut at this limit fails to parse (malformed_result)."""

DEFAULT_WORKFLOWS: Final = ("single_pass", "plan_then_edit", "iterate_with_checks")
"""The ``workflow_select@1`` options when the caller gives none: answer in one pass; plan, then
edit; edit and run the checks in a loop. The orchestrator decides what each one runs."""

SYSTEM_PROMPT: Final = (
    "You are a judge inside a coding assistant's orchestrator. You receive metadata about a "
    "task or a tool call (never file contents) and answer one question about it. Reply with "
    "exactly one JSON object in the requested format: no prose, no explanation, no code fence."
)

_QUESTIONS: Final[Mapping[str, str]] = {
    "workflow_select@1": (
        "Which workflow should this coding task use? Pick one of the options and give a "
        "probability for each option (they must sum to 1)."
    ),
    "risk_gate@1": (
        "Should the user confirm this action before it runs? Consider destructive or "
        "irreversible effects, sensitive files, the branch, and pending migrations. Answer "
        '"yes", "no" or "unknown", with pYes, the probability that confirmation is needed.'
    ),
    "cost_route@1": (
        "How capable (and costly) a model does this task need, from 0 (the cheapest or a local "
        "model is enough) to 4 (the strongest model)? Give probs, the probability of each score "
        "from 0 to 4 (five numbers summing to 1)."
    ),
}


class JevError(Exception):
    """A judgement (or ``jev.test``) failed.

    Attributes:
        kind: a ``ModelErrorKind`` value, ``jev_not_configured`` or ``malformed_result``.
        message: for the user; never a key, never the judge's raw reply.
        hint: what to do next, when there is something.
        retryable: whether the same call may succeed later.
    """

    def __init__(
        self, kind: str, message: str, hint: str | None = None, *, retryable: bool = False
    ):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.hint = hint
        self.retryable = retryable

    @classmethod
    def from_model_error(cls, error: ModelError) -> JevError:
        return cls(error.kind.value, error.message, error.hint, retryable=error.retryable)

    def to_wire(self) -> dict[str, Any]:
        """``{kind, message, hint?}``."""
        wire: dict[str, Any] = {"kind": self.kind, "message": self.message}
        if self.hint is not None:
            wire["hint"] = self.hint
        return wire


@record
class Judgement:
    """A parsed verdict and how long the judge took."""

    pack: PackName
    result: JevResult
    latency_ms: int


JevTestResult = ProbeResult
"""``jev.test``'s result: ``{ok, latencyMs?, error?}`` (the error a :class:`JevError`)."""


def _format_text(pack: PackName, options: Sequence[str]) -> str:
    fmt = PACK_FORMATS[pack]
    if fmt == "choice":
        listed = ", ".join(json.dumps(o) for o in options)
        return (
            f"Options: {listed}.\n"
            'Format: {"selected": "<one option>", "probs": {"<option>": <0..1>, ...}}'
        )
    if fmt == "score":
        return 'Format: {"score": <integer 0..4>, "probs": [<p0>, <p1>, <p2>, <p3>, <p4>]}'
    return 'Format: {"answer": "yes" | "no" | "unknown", "pYes": <0..1>}'


def build_prompt(pack: PackName, state: Mapping[str, Any], options: Sequence[str] = ()) -> str:
    """The user message for a judgement: the question, the format, then the state as JSON."""
    state_json = json.dumps(state, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return (
        f"Pack: {pack}\n{_QUESTIONS[pack]}\n{_format_text(pack, options)}\n\nState:\n{state_json}"
    )


def _reply_text(body: Any) -> str:
    """The text blocks of a Messages API answer, joined."""
    content = body.get("content") if isinstance(body, Mapping) else None
    if not isinstance(content, list):
        raise MalformedResult("the answer has no content (is this a Messages API endpoint?)")
    texts = [
        block["text"]
        for block in content
        if isinstance(block, Mapping)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    ]
    if not texts:
        raise MalformedResult("the answer has no text")
    return "".join(texts)


class JevClient:
    """Judgements against the configured judge.

    Args:
        settings: ``jev`` of the current settings snapshot (None: not configured).
        secrets: resolves the key's ``secret:<name>`` ref (``secrets.get``).
    """

    def __init__(self, settings: JevSettings | None, secrets: SecretResolver) -> None:
        self._settings = settings
        self._secrets = secrets

    @property
    def configured(self) -> bool:
        return self._settings is not None

    def _require(self) -> JevSettings:
        if self._settings is None:
            raise JevError(
                JEV_NOT_CONFIGURED,
                "no JEV model is configured",
                "Set desiide.jev (base URL, model, API key) in the settings.",
            )
        return self._settings

    async def judge(
        self, pack: PackName, state: Mapping[str, Any], *, options: Sequence[str] = ()
    ) -> Judgement:
        """Ask the judge about `state` and parse its verdict.

        Args:
            pack: which pack (its result format follows).
            state: the pack's state (from :mod:`.packs`).
            options: the ``workflow_select@1`` options (:data:`DEFAULT_WORKFLOWS` when empty).

        Raises:
            JevError: not configured, the call failed (kind: a ModelErrorKind), or the reply
                does not fit the format (``malformed_result``).
            SecretNotSet: the key's secret is not set in the editor.
        """
        settings = self._require()
        if PACK_FORMATS[pack] == "choice" and not options:
            options = DEFAULT_WORKFLOWS
        key = await resolve_secret(self._secrets, settings.api_key) if settings.api_key else None
        body = await self._call(settings, key, build_prompt(pack, state, options))
        try:
            result = parse_result(PACK_FORMATS[pack], _reply_text(body[0]), options)
        except MalformedResult as exc:
            logger.info("! JEV %s: malformed reply (%s)", pack, exc)
            raise JevError(
                MALFORMED_RESULT,
                f"the judge's reply does not fit the {PACK_FORMATS[pack]} format: {exc}",
                "Use a model that follows JSON instructions, or raise its max tokens.",
            ) from None
        return Judgement(pack, result, body[1])

    async def _call(
        self, settings: JevSettings, key: SecretValue | None, prompt: str
    ) -> tuple[Any, int]:
        endpoint = Endpoint("anthropic", settings.base_url, settings.model, settings.auth)
        payload = {
            "model": settings.model,
            "max_tokens": JEV_MAX_TOKENS,
            "temperature": 0,
            "system": SYSTEM_PROMPT,
            "messages": [{"role": "user", "content": prompt}],
        }
        try:
            reply = await request_json(
                "POST",
                api_url(settings.base_url, "/v1/messages"),
                headers=auth_headers(endpoint, key),
                payload=payload,
                timeout=settings.timeout_ms / 1000,
                key=key,
            )
        except ModelCallFailed as exc:
            raise JevError.from_model_error(exc.error) from None
        return reply.body, reply.latency_ms

    async def test(self) -> JevTestResult:
        """``jev.test {}``: one small real judgement; ok when it parses.

        Raises:
            SecretNotSet: the key's secret is not set in the editor.
        """
        state = build_risk_gate(
            action_type="run_command",
            command="git status",
            paths=[],
            branch="feature/example",
            env="local",
            has_pending_migrations=False,
        )
        try:
            judgement = await self.judge("risk_gate@1", state)
        except JevError as exc:
            return JevTestResult(ok=False, error=exc)
        return JevTestResult(ok=True, latency_ms=judgement.latency_ms)
