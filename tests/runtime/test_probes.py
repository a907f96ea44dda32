"""Token and key probes against a local HTTP server on 127.0.0.1 (200, 401, 403, 500, never)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from bridge.engine.phones.providers import ProbeRequest
from bridge.runtime.errands.probes import (
    ANTHROPIC_VERSION,
    KEY_PROBE_MODEL,
    probe_anthropic_key,
    probe_provider,
)

TOKEN = "sk-provider-SECRET-0123"
KEY = "sk-ant-api03-SECRET-KEY"


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class StubApi:
    """A tiny HTTP/1.1 server: answers every request with `status`, or never when None."""

    status: int | None = 200
    requests: list[Request] = field(default_factory=list)
    server: asyncio.Server | None = None
    writers: set[asyncio.StreamWriter] = field(default_factory=set)

    @property
    def url(self) -> str:
        assert self.server is not None
        host, port = self.server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.add(writer)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    name, value = line.split(":", 1)
                    headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            self.requests.append(Request(method, path, headers, body))
            if self.status is None:
                await asyncio.Event().wait()  # never answer
            payload = b'{"type":"error"}'
            writer.write(
                f"HTTP/1.1 {self.status} X\r\ncontent-type: application/json\r\n"
                f"content-length: {len(payload)}\r\nconnection: close\r\n\r\n".encode()
                + payload
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            self.writers.discard(writer)


@pytest.fixture
async def api() -> AsyncIterator[StubApi]:
    stub = StubApi()
    stub.server = await asyncio.start_server(stub.handle, "127.0.0.1", 0)
    try:
        yield stub
    finally:
        stub.server.close()
        for writer in list(stub.writers):
            writer.close()
        await stub.server.wait_closed()


def request(api: StubApi, *, suffix: str = "") -> ProbeRequest:
    return ProbeRequest(base_url=api.url + suffix, token=TOKEN, model="kimi-k3")


@pytest.mark.parametrize(
    ("status", "expected"),
    [(200, True), (400, True), (404, True), (500, True), (401, False), (403, False)],
)
async def test_provider_probe_verdict(api: StubApi, status: int, expected: bool) -> None:
    api.status = status
    assert await probe_provider(request(api), timeout=5) is expected


async def test_provider_probe_request_shape(api: StubApi) -> None:
    assert await probe_provider(request(api, suffix="/anthropic///"), timeout=5) is True
    [sent] = api.requests
    assert (sent.method, sent.path) == ("POST", "/anthropic/v1/messages")
    assert sent.headers["authorization"] == f"Bearer {TOKEN}"
    assert sent.headers["anthropic-version"] == ANTHROPIC_VERSION
    assert "x-api-key" not in sent.headers
    body = json.loads(sent.body)
    assert body["model"] == "kimi-k3" and body["max_tokens"] == 1
    assert body["messages"][0]["role"] == "user"


async def test_key_probe_request_shape_and_verdicts(api: StubApi) -> None:
    assert await probe_anthropic_key(KEY, base_url=api.url, timeout=5) is True
    [sent] = api.requests
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == KEY and "authorization" not in sent.headers
    assert json.loads(sent.body)["model"] == KEY_PROBE_MODEL == "claude-haiku-4-5-20251001"
    api.status = 401
    assert await probe_anthropic_key(KEY, base_url=api.url, timeout=5) is False


async def test_no_answer_means_unknown(api: StubApi) -> None:
    api.status = None
    assert await probe_provider(request(api), timeout=0.3) is None
    assert await probe_anthropic_key(KEY, base_url=api.url, timeout=0.3) is None
    assert len(api.requests) == 2


async def test_connection_refused_means_unknown() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    probe = ProbeRequest(base_url=f"http://127.0.0.1:{port}", token=TOKEN, model="m")
    assert await probe_provider(probe, timeout=5) is None


async def test_insecure_urls_are_never_sent_the_token(api: StubApi) -> None:
    insecure = ProbeRequest(base_url="http://0.0.0.0:1", token=TOKEN, model="m")
    assert await probe_provider(insecure, timeout=5) is None
    assert await probe_anthropic_key(KEY, base_url="http://example.invalid", timeout=5) is None
    assert api.requests == []


async def test_redirects_are_not_followed(api: StubApi) -> None:
    api.status = 307  # no Location needed: the probe must not follow it anyway
    assert await probe_provider(request(api), timeout=5) is True
    assert len(api.requests) == 1


async def test_secrets_never_reach_a_log_line(
    api: StubApi, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for status in (200, 401, None):
        api.status = status
        await probe_provider(request(api), timeout=0.3)
        await probe_anthropic_key(KEY, base_url=api.url, timeout=0.3)
    await probe_provider(ProbeRequest("http://0.0.0.0", TOKEN, "m"))
    assert caplog.records, "the probes log their outcome"
    for record in caplog.records:
        text = record.getMessage() + repr(record.args)
        assert TOKEN not in text and KEY not in text, text
