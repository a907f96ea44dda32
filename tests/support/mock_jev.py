"""A scriptable model API on 127.0.0.1 for the Desiide model and JEV tests.

One server speaks all three APIs the orchestrator calls — Anthropic Messages (``POST
/v1/messages``), OpenAI chat completions (``POST /v1/chat/completions``), Ollama (``POST
/api/chat``, ``GET /api/tags``) — because a test cares about what was sent and what came back,
not about separate processes. Each answer is scripted per path (:meth:`MockModelApi.script`:
a queue, then the path's default), can be any status, JSON or raw bytes, and may be delayed
(the delay ends at once when the server stops, so a timeout test never hangs the teardown).

Every request is recorded (method, path, lower-cased headers, decoded JSON body).
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from .mock_server import MockRequestHandler, MockServer

__all__ = ["MockModelApi", "ModelRequest", "Scripted", "anthropic_text", "error_body"]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One request the mock received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any = field(repr=False)


@dataclass(frozen=True, slots=True)
class Scripted:
    """One answer: a status and a body (a dict is sent as JSON, bytes as they are)."""

    status: int = 200
    body: dict[str, Any] | bytes | None = None
    delay: float = 0.0


def anthropic_text(text: str, model: str = "judge-mock") -> dict[str, Any]:
    """A Messages API answer whose content is one text block."""
    return {
        "id": "msg_mock",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def error_body(error_type: str, message: str) -> dict[str, Any]:
    """An Anthropic-style error answer."""
    return {"type": "error", "error": {"type": error_type, "message": message}}


_DEFAULTS: dict[str, Scripted] = {
    "/v1/messages": Scripted(200, anthropic_text('{"answer": "no", "pYes": 0.1}')),
    "/v1/chat/completions": Scripted(
        200,
        {
            "id": "chatcmpl-mock",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "p"}}],
        },
    ),
    "/api/chat": Scripted(
        200, {"model": "m", "message": {"role": "assistant", "content": "p"}, "done": True}
    ),
    "/api/tags": Scripted(200, {"models": []}),
}


class MockModelApi(MockServer[ModelRequest]):
    """The mock (see the module docstring)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(_Handler, "mock-model-api", host, port)
        self._scripts: dict[str, deque[Scripted]] = {}
        self._defaults = dict(_DEFAULTS)
        self._script_lock = threading.Lock()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def script(self, path: str, *answers: Scripted) -> None:
        """Queue answers for `path` (used once each, in order)."""
        with self._script_lock:
            self._scripts.setdefault(path, deque()).extend(answers)

    def set_default(self, path: str, answer: Scripted) -> None:
        """The answer for `path` once its queue is empty."""
        with self._script_lock:
            self._defaults[path] = answer

    def next_answer(self, path: str) -> Scripted:
        with self._script_lock:
            queue = self._scripts.get(path)
            if queue:
                return queue.popleft()
            return self._defaults.get(path, Scripted(404, error_body("not_found_error", path)))

    def wait_stopping(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True when the server is stopping."""
        return self._stopping.wait(seconds)


class _Handler(MockRequestHandler):
    @property
    def _mock(self) -> MockModelApi:
        mock: MockModelApi = self.server.mock
        return mock

    def _answer(self, body: Any) -> None:
        path = urlsplit(self.path).path.rstrip("/")
        headers = {name.lower(): value for name, value in self.headers.items()}
        self._mock._record(ModelRequest(self.command, path, headers, body))
        answer = self._mock.next_answer(path)
        if answer.delay and self._mock.wait_stopping(answer.delay):
            return
        try:
            if isinstance(answer.body, dict):
                self._send_json(answer.status, answer.body)
                return
            data = answer.body or b""
            self.send_response(answer.status)
            self.send_header("content-type", "text/plain")
            self.send_header("content-length", str(len(data)))
            if 300 <= answer.status < 400:
                self.send_header("location", "http://127.0.0.1:9/elsewhere")
            self.send_header("connection", "close")
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)
        self.close_connection = True

    def do_GET(self) -> None:
        self._answer(None)

    def do_POST(self) -> None:
        self._answer(self._read_body())
