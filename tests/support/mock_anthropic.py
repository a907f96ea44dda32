"""A mock of the Anthropic Messages API for running the real Claude Code CLI offline.

:class:`MockAnthropic` is a small HTTP server on ``127.0.0.1`` (port 0 by default) that answers
``POST /v1/messages`` (with or without ``?beta=true``) the way the CLI needs, as measured in
``shared/notes/claude-code-offline.md``:

- ``"stream": true`` → ``200 text/event-stream``: ``message_start`` (with ``usage``), each content
  block as ``content_block_start`` / ``content_block_delta`` (``text_delta``,
  ``input_json_delta``, ``thinking_delta`` + ``signature_delta``) / ``content_block_stop``, then
  ``message_delta`` (``stop_reason`` + ``usage``) and ``message_stop``;
- no ``stream`` (the ``set_model`` probe) → an ordinary JSON ``Message``;
- a scripted failure → ``{status} {"type":"error","error":{"type","message"}}``;
- ``POST /v1/messages/count_tokens`` → ``{"input_tokens": N}``; anything else → 404 JSON.

What to answer is scripted by directives in the prompt (:mod:`tests.support.mock_anthropic_script`).
Every request is recorded (method, path, headers with lower-case names, decoded body) so tests can
check, e.g., the ``authorization: Bearer <token>`` of a provider-bound session.

It runs on its own thread (stdlib ``ThreadingHTTPServer``), so one instance can serve every test
of a module whatever their event loops, and answers within a millisecond or two. Responses use
``Connection: close`` framing, which the CLI accepts. A slow reply (``[[slow: S]]``) sends
``message_start`` at once and ``ping`` events every 50 ms until S seconds have passed, so it
notices an interrupted client at the next ping and a :meth:`MockAnthropic.stop` at once.

Use it as a context manager or with :meth:`start` / :meth:`stop`; :meth:`cli_env` gives the
environment that points the bundled CLI at it without touching the internet.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .mock_anthropic_script import Block, Reply, last_user_prompt, plan_reply
from .mock_server import MockRequestHandler, MockServer

__all__ = ["MockAnthropic", "RecordedRequest", "offline_cli_env"]

_PING_INTERVAL = 0.05


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request the mock received."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: Any

    @property
    def prompt(self) -> str:
        """The last text block of the last user message ('' for non-message requests)."""
        return last_user_prompt(self.body) if isinstance(self.body, dict) else ""

    @property
    def streaming(self) -> bool:
        return isinstance(self.body, dict) and self.body.get("stream") is True


def offline_cli_env(base_url: str, config_dir: Path) -> dict[str, str]:
    """The environment that runs the CLI against `base_url` with nothing leaving the machine.

    No nonessential traffic (no DNS lookups of api.anthropic.com), no autoupdater, no retries
    (an error would otherwise retry with backoff for minutes), and a private config directory
    (sessions, settings and ``.claude.json`` stay in `config_dir`).
    """
    return {
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "dummy",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_MAX_RETRIES": "0",
        "CLAUDE_CONFIG_DIR": str(config_dir),
    }


class MockAnthropic(MockServer[RecordedRequest]):
    """The mock server (see the module docstring)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(_Handler, "mock-anthropic", host, port)

    def cli_env(self, config_dir: Path) -> dict[str, str]:
        """:func:`offline_cli_env` for this server."""
        return offline_cli_env(self.base_url, config_dir)

    def message_requests(self, *, session_id: str | None = None) -> list[RecordedRequest]:
        """The ``POST /v1/messages`` requests, optionally of one CLI session (its header)."""
        return [
            r
            for r in self.requests
            if r.method == "POST"
            and r.path.rstrip("/") == "/v1/messages"
            and (session_id is None or r.headers.get("x-claude-code-session-id") == session_id)
        ]


class _Handler(MockRequestHandler):
    @property
    def _mock(self) -> MockAnthropic:
        mock: MockAnthropic = self.server.mock
        return mock

    def _record(self, body: Any) -> str:
        parts = urlsplit(self.path)
        headers = {name.lower(): value for name, value in self.headers.items()}
        self._mock._record(RecordedRequest(self.command, parts.path, parts.query, headers, body))
        return parts.path.rstrip("/")

    def do_HEAD(self) -> None:
        self._record(None)
        self.send_response(404)
        self.send_header("content-length", "0")
        self.send_header("connection", "close")
        self.end_headers()

    def do_GET(self) -> None:
        self._record(None)
        self._send_json(404, _error_body("not_found_error", f"no route {self.path}"))

    def do_POST(self) -> None:
        body = self._read_body()
        path = self._record(body)
        if path == "/v1/messages/count_tokens":
            self._send_json(200, {"input_tokens": _input_tokens(body)})
            return
        if path != "/v1/messages" or not isinstance(body, dict):
            self._send_json(404, _error_body("not_found_error", f"no route {self.path}"))
            return
        reply = plan_reply(body)
        if reply.status != 200:
            self._send_json(reply.status, _error_body(reply.error_type, reply.error_message))
            return
        model = str(body.get("model") or "claude-mock")
        message_id = f"msg_{uuid.uuid4().hex[:24]}"
        if body.get("stream") is True:
            self._stream(reply, model, message_id, _input_tokens(body))
        else:
            self._send_json(200, _message_json(reply, model, message_id, _input_tokens(body)))

    # -- answers ------------------------------------------------------------------------------

    def _stream(self, reply: Reply, model: str, message_id: str, input_tokens: int) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        start = {
            "type": "message_start",
            "message": {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": input_tokens, "output_tokens": 1},
            },
        }
        try:
            self.wfile.write(_sse("message_start", start))
            self.wfile.flush()
            if reply.delay and not self._wait(reply.delay):
                return
            self.wfile.write(b"".join(_events(reply)))
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (an interrupt): nothing to answer

    def _wait(self, seconds: float) -> bool:
        """Ping until `seconds` passed; False if the mock stops meanwhile."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if self._mock._stopping.wait(min(_PING_INTERVAL, left)):
                return False
            self.wfile.write(_sse("ping", {"type": "ping"}))
            self.wfile.flush()
        return True


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _error_body(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}


def _input_tokens(body: Any) -> int:
    """A deterministic, plausible input token count: a quarter of the body's JSON size."""
    return max(1, len(json.dumps(body)) // 4) if body is not None else 1


def _output_tokens(reply: Reply) -> int:
    size = sum(len(b.text) + len(json.dumps(b.input)) for b in reply.blocks)
    return max(1, size // 4)


def _block_start(block: Block) -> dict[str, Any]:
    if block.type == "text":
        return {"type": "text", "text": ""}
    if block.type == "thinking":
        return {"type": "thinking", "thinking": "", "signature": ""}
    return {"type": "tool_use", "id": block.id, "name": block.name, "input": {}}


def _deltas(block: Block) -> Iterator[dict[str, Any]]:
    if block.type == "text":
        yield {"type": "text_delta", "text": block.text}
    elif block.type == "thinking":
        if block.text:
            yield {"type": "thinking_delta", "thinking": block.text}
        yield {"type": "signature_delta", "signature": f"sig_{uuid.uuid4().hex[:16]}"}
    else:
        yield {"type": "input_json_delta", "partial_json": json.dumps(block.input)}


def _events(reply: Reply) -> Iterator[bytes]:
    for index, block in enumerate(reply.blocks):
        yield _sse(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": _block_start(block)},
        )
        for delta in _deltas(block):
            yield _sse(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
    yield _sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": reply.stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": _output_tokens(reply)},
        },
    )
    yield _sse("message_stop", {"type": "message_stop"})


def _message_json(reply: Reply, model: str, message_id: str, input_tokens: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for block in reply.blocks:
        if block.type == "text":
            content.append({"type": "text", "text": block.text})
        elif block.type == "thinking":
            content.append({"type": "thinking", "thinking": block.text, "signature": "sig_mock"})
        else:
            content.append(
                {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
            )
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": reply.stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": _output_tokens(reply)},
    }
