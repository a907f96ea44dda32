"""A mock of the Gemini API (``generativelanguage``) for running the real Gemini CLI offline.

:class:`MockGemini` is the Gemini counterpart of
:class:`tests.support.mock_anthropic.MockAnthropic`: an HTTP server on ``127.0.0.1`` (port 0 by
default) on its own thread, recording every request, answering what Gemini CLI 0.61 calls when
pointed at it with ``GOOGLE_GEMINI_BASE_URL`` and an API key. Measured by recording whole ACP
sessions: nothing at start-up (no Code Assist ``loadCodeAssist``, no ``countTokens``, no model
list in API-key mode); per prompt, first the model router's classifier (``generateContent`` on
``gemini-3.5-flash-lite`` with a JSON schema {complexity_reasoning, complexity_score}), then the
turn itself (``streamGenerateContent`` on the routed model, e.g. ``gemini-3.8-flash`` for a low
score, ``gemini-3.1-pro-preview`` when the classifier fails), one per model call of the turn:

- ``POST /v1beta/models/{model}:streamGenerateContent?alt=sse`` → ``200 text/event-stream``, one
  ``data: <GenerateContentResponse>`` event per part (text, ``thought`` text, ``functionCall``),
  the last one with ``finishReason: "STOP"`` and ``usageMetadata``;
- ``POST …:generateContent`` → the same response as one JSON object; when the request asks for
  JSON (``generationConfig.responseMimeType``), a JSON text satisfying its schema
  (:func:`tests.support.mock_gemini_script.json_answer`);
- ``POST …:countTokens`` → ``{"totalTokens": N}``;
- a scripted failure → ``{status} {"error": {"code", "message", "status"}}``; anything else →
  404 in that shape.

What to answer is the directive script of the Anthropic mock (``[[reply: …]]``, ``[[bash: …]]``,
``[[write: p | c]]``, …, see :mod:`tests.support.mock_gemini_script`), with tool calls named as the
request's ``functionDeclarations`` name them. A slow reply (``[[slow: S]]``) sends the headers at
once and then a newline every 50 ms (the SDK's SSE parser skips leading whitespace), so a
cancelled client is noticed at the next write and a :meth:`MockGemini.stop` ends it at once.

:func:`gemini_env` is the complete environment of an isolated, offline, quiet Gemini CLI.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .agent_env import HasBaseUrl, base_env, base_url_of
from .mock_anthropic import RecordedRequest
from .mock_anthropic_script import Reply
from .mock_gemini_script import json_answer, json_schema, plan_gemini_reply, reply_parts
from .mock_server import MockRequestHandler, MockServer

__all__ = ["GEMINI_API_KEY", "MockGemini", "gemini_env", "gemini_settings"]

GEMINI_API_KEY = "test-key"
_PING_INTERVAL = 0.05
_ROUTE = re.compile(r"^/v1(?:beta|alpha)?/models/(?P<model>[^/:]+):(?P<method>[A-Za-z]+)$")
_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


class MockGemini(MockServer[RecordedRequest]):
    """The mock server (see the module docstring); a context manager like MockAnthropic."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(_Handler, "mock-gemini", host, port)

    def generate_requests(self, method: str = "streamGenerateContent") -> list[RecordedRequest]:
        """The ``POST …/models/{model}:{method}`` requests."""
        return [
            r
            for r in self.requests
            if r.method == "POST" and r.path.endswith(f":{method}") and "/models/" in r.path
        ]


def gemini_settings() -> dict[str, Any]:
    """The user ``settings.json`` of an isolated Gemini CLI: API-key auth, nothing phoning home.

    ``security.auth.selectedType`` spares the interactive auth choice; auto-update, its
    notification, usage statistics (Clearcut) and telemetry are off; the IDE integration and
    checkpointing (a git shadow repo per turn) are off. Folder trust is off too (the env's
    ``GEMINI_CLI_TRUST_WORKSPACE`` says the same): an untrusted workspace would drop to a
    restricted mode and ignore the workspace settings.
    """
    return {
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        "general": {
            "enableAutoUpdate": False,
            "enableAutoUpdateNotification": False,
            "checkpointing": {"enabled": False},
        },
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "ide": {"enabled": False, "hasSeenNudge": True},
    }


def gemini_env(
    mock: str | HasBaseUrl, root: Path, *, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The full environment for ``gemini --acp`` against a mock Gemini API at `base_url`.

    Args:
        mock: the mock Gemini API (or its root URL, :attr:`MockGemini.base_url`).
        root: a private directory; ``HOME`` (with ``.gemini/settings.json``, see
            :func:`gemini_settings`) and an empty system settings file are made under it, so
            neither the user's ``~/.gemini`` nor ``/etc/gemini-cli`` is read. Reuse it for a
            process that must see an earlier one's sessions.
        extra: more variables, applied last.

    Returns:
        Every variable the process gets; pass it as is to ``spawn_agent_process(env=…)``.
        ``GEMINI_CLI_NO_RELAUNCH`` keeps Gemini CLI from re-spawning itself under a second node
        (with a bigger heap), which would double the processes and the start-up time.
        Gemini CLI ignores a system settings file under a group/world-writable directory such as
        ``/tmp`` (its stderr logs a "Security Warning"); harmless, the system layer is empty
        either way, and the machine's ``/etc/gemini-cli`` is still not read.
    """
    home = root / "home"
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(gemini_settings(), indent=2))
    system = root / "system"
    system.mkdir(parents=True, exist_ok=True)
    (system / "settings.json").write_text("{}")
    (system / "defaults.json").write_text("{}")
    env = base_env()
    env.update(
        {
            "HOME": str(home),
            "GOOGLE_GEMINI_BASE_URL": base_url_of(mock).rstrip("/"),
            "GEMINI_API_KEY": GEMINI_API_KEY,
            "GEMINI_CLI_NO_RELAUNCH": "true",
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
            "GEMINI_CLI_SYSTEM_SETTINGS_PATH": str(system / "settings.json"),
            "GEMINI_CLI_SYSTEM_DEFAULTS_PATH": str(system / "defaults.json"),
            "GEMINI_TELEMETRY_ENABLED": "false",
            "NO_BROWSER": "1",
        }
    )
    env.update(extra or {})
    return env


class _Handler(MockRequestHandler):
    json_content_type = "application/json; charset=UTF-8"

    def _record(self, body: Any) -> str:
        parts = urlsplit(self.path)
        headers = {name.lower(): value for name, value in self.headers.items()}
        self.server.mock._record(
            RecordedRequest(self.command, parts.path, parts.query, headers, body)
        )
        return parts.path.rstrip("/")

    def do_GET(self) -> None:
        self._record(None)
        self._send_error(404, f"no route {self.path}")

    def do_POST(self) -> None:
        body = self._read_body()
        route = _ROUTE.match(self._record(body))
        if route is None or not isinstance(body, dict):
            self._send_error(404, f"no route {self.path}")
            return
        model, method = route.group("model"), route.group("method")
        if method == "countTokens":
            self._send_json(200, {"totalTokens": _tokens(body)})
            return
        if method not in ("generateContent", "streamGenerateContent"):
            self._send_error(404, f"no method {method}")
            return
        schema = json_schema(body) if method == "generateContent" else None
        if schema is not None:
            text = json.dumps(json_answer(schema))
            self._send_json(200, _response([{"text": text}], model, body, final=True))
            return
        reply = plan_gemini_reply(body)
        if reply.status != 200:
            self._send_error(reply.status, reply.error_message)
        elif method == "streamGenerateContent":
            self._stream(reply, model, body)
        else:
            self._send_json(200, _response(reply_parts(reply), model, body, final=True))

    def _send_error(self, status: int, message: str) -> None:
        name = _STATUS_NAMES.get(status, "UNKNOWN")
        self._send_json(status, {"error": {"code": status, "message": message, "status": name}})

    def _stream(self, reply: Reply, model: str, body: dict[str, Any]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        parts = reply_parts(reply)
        try:
            if reply.delay and not self._wait(reply.delay):
                return
            for index, part in enumerate(parts):
                final = index == len(parts) - 1
                chunk = _response([part], model, body, final=final, reply=reply)
                self.wfile.write(f"data: {json.dumps(chunk)}\r\n\r\n".encode())
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (a cancel): nothing to answer

    def _wait(self, seconds: float) -> bool:
        """Send keep-alive newlines until `seconds` passed; False if the mock stops meanwhile."""
        deadline = time.monotonic() + seconds
        self.wfile.flush()
        while (left := deadline - time.monotonic()) > 0:
            if self.server.mock._stopping.wait(min(_PING_INTERVAL, left)):
                return False
            self.wfile.write(b"\n")
            self.wfile.flush()
        return True


def _tokens(body: Any) -> int:
    """A deterministic, plausible token count: a quarter of the JSON size."""
    return max(1, len(json.dumps(body)) // 4)


def _response(
    parts: list[dict[str, Any]],
    model: str,
    body: dict[str, Any],
    *,
    final: bool,
    reply: Reply | None = None,
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    chunk: dict[str, Any] = {"candidates": [candidate], "modelVersion": model}
    if final:
        candidate["finishReason"] = "STOP"
        prompt = _tokens(body.get("contents"))
        output = max(1, len(json.dumps(reply_parts(reply) if reply else parts)) // 4)
        chunk["usageMetadata"] = {
            "promptTokenCount": prompt,
            "candidatesTokenCount": output,
            "totalTokenCount": prompt + output,
        }
    return chunk
