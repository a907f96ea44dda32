"""The daemon's admin API client: pure request/answer/backoff rules, then real HTTP on loopback."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from bridge.nostr.keys import Keypair
from relaypolicy.admin import AdminServer, AdminToken, start_admin
from relaypolicy.client import (
    AdminApiError,
    AdminClient,
    AdminRequest,
    Outcome,
    Retry,
    backoff_delays,
    build_request,
    check_endpoint,
    interpret_response,
)

TOKEN = "client-test-token-0123456789"
BRIDGE = Keypair.generate()
PHONE = Keypair.generate()


# --- pure -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "https://relay.example.com",
        "https://relay.example.com/",
        "http://127.0.0.1:8089",
        "http://[::1]:8089",
        "http://localhost:8089",
    ],
)
def test_accepted_endpoints(url: str) -> None:
    assert check_endpoint(url) == url.rstrip("/")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://relay.example.com", "must use https"),
        ("http://10.0.0.5:8089", "must use https"),
        ("ftp://relay.example.com", "must look like"),
        ("relay.example.com", "must look like"),
        ("https://", "must look like"),
    ],
)
def test_refused_endpoints(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_endpoint(url)


def test_build_requests() -> None:
    assert build_request("register", BRIDGE.npub) == AdminRequest(
        "register", "/api/register-agent", {"pubkey": BRIDGE.public_hex}
    )
    assert build_request("register", BRIDGE.public_hex, label="phone").body == {
        "pubkey": BRIDGE.public_hex,
        "label": "phone",
    }
    assert build_request("unregister", BRIDGE.public_hex.upper()).path == "/api/unregister-agent"
    assert build_request("pairing-window", BRIDGE.public_hex, until=5).body == {
        "pubkey": BRIDGE.public_hex,
        "until": 5,
    }
    with pytest.raises(ValueError, match="invalid pubkey"):
        build_request("register", "abc")
    with pytest.raises(ValueError, match="needs until"):
        build_request("pairing-window", BRIDGE.public_hex)
    with pytest.raises(ValueError, match="unknown admin operation"):
        build_request("delete-everything", BRIDGE.public_hex)


REGISTER = build_request("register", BRIDGE.public_hex)
UNREGISTER = build_request("unregister", BRIDGE.public_hex)
WINDOW = build_request("pairing-window", BRIDGE.public_hex, until=5)


def test_interpret_responses() -> None:
    assert interpret_response(REGISTER, 201, b"") is Outcome.REGISTERED
    assert interpret_response(REGISTER, 200, b"{}") is Outcome.ALREADY_REGISTERED
    assert interpret_response(UNREGISTER, 200, b"") is Outcome.UNREGISTERED
    assert interpret_response(UNREGISTER, 404, b"") is Outcome.NOT_REGISTERED
    assert interpret_response(WINDOW, 200, b'{"status":"open"}') is Outcome.WINDOW_OPEN
    assert interpret_response(WINDOW, 200, b'{"status":"closed"}') is Outcome.WINDOW_CLOSED
    assert interpret_response(REGISTER, 503, b"") == Retry("HTTP 503", None, 503)
    assert interpret_response(REGISTER, 429, b"", "7") == Retry("HTTP 429", 7.0, 429)
    assert interpret_response(REGISTER, 500, b"", "9999") == Retry("HTTP 500", 60.0, 500)
    assert interpret_response(REGISTER, 408, b"", "soon") == Retry("HTTP 408", None, 408)


@pytest.mark.parametrize(
    ("request_", "status", "body", "message"),
    [
        (REGISTER, 401, b'{"error":"unauthorized"}', "the admin API refused the token (HTTP 401)"),
        (
            REGISTER,
            400,
            b'{"error":"invalid pubkey"}',
            "register failed with HTTP 400: invalid pubkey",
        ),
        (
            WINDOW,
            404,
            b'{"error":"not registered"}',
            "pairing-window failed with HTTP 404: not registered",
        ),
        (REGISTER, 413, b"<html>", "register failed with HTTP 413"),
        (REGISTER, 302, b"", "register failed with HTTP 302"),
    ],
)
def test_permanent_failures(request_: AdminRequest, status: int, body: bytes, message: str) -> None:
    with pytest.raises(AdminApiError) as caught:
        interpret_response(request_, status, body)
    assert str(caught.value) == message
    assert caught.value.status == status
    assert not caught.value.retryable


def test_backoff_is_exponential_capped_and_jittered() -> None:
    assert list(backoff_delays(5, rng=lambda: 1.0)) == [0.5, 1.0, 2.0, 4.0]
    assert list(backoff_delays(8, base=1, cap=5, rng=lambda: 1.0)) == [1, 2, 4, 5, 5, 5, 5]
    assert list(backoff_delays(3, rng=lambda: 0.5)) == [0.25, 0.5]
    assert list(backoff_delays(1)) == []


def test_client_arguments_and_repr() -> None:
    client = AdminClient("https://relay.example.com", TOKEN)
    assert TOKEN not in repr(client)
    with pytest.raises(ValueError, match="attempts"):
        AdminClient("https://relay.example.com", TOKEN, attempts=0)
    with pytest.raises(ValueError, match="token"):
        AdminClient("https://relay.example.com", "")
    with pytest.raises(ValueError, match="https"):
        AdminClient("http://relay.example.com", TOKEN)


# --- over HTTP --------------------------------------------------------------------------------


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[AdminServer]:
    running = await start_admin(tmp_path / "registry.db", AdminToken(TOKEN), "127.0.0.1", 0)
    try:
        yield running
    finally:
        await running.close()


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


async def test_against_the_real_admin_api(server: AdminServer) -> None:
    client = AdminClient(server.url, TOKEN, sleep=Sleeps())
    assert await client.register(BRIDGE.npub, label="laptop") is Outcome.REGISTERED
    assert await client.register(BRIDGE.public_hex) is Outcome.ALREADY_REGISTERED
    until = int(time.time()) + 300
    assert await client.open_pairing_window(BRIDGE.public_hex, until) is Outcome.WINDOW_OPEN
    assert await client.open_pairing_window(BRIDGE.public_hex, 0) is Outcome.WINDOW_CLOSED
    assert await client.unregister(BRIDGE.public_hex) is Outcome.UNREGISTERED
    assert await client.unregister(BRIDGE.public_hex) is Outcome.NOT_REGISTERED
    with pytest.raises(AdminApiError, match="HTTP 404"):
        await client.open_pairing_window(PHONE.public_hex, until)


async def test_a_wrong_token_is_not_retried(server: AdminServer) -> None:
    sleeps = Sleeps()
    client = AdminClient(server.url, "wrong-token-0123456789", sleep=sleeps)
    with pytest.raises(AdminApiError) as caught:
        await client.register(PHONE.public_hex)
    assert caught.value.status == 401
    assert sleeps.delays == []
    assert "wrong-token" not in str(caught.value)


async def test_a_reusable_session(server: AdminServer) -> None:
    async with aiohttp.ClientSession() as session:
        client = AdminClient(server.url, TOKEN, session=session)
        assert await client.register(PHONE.public_hex) is Outcome.REGISTERED
        assert await client.register(PHONE.public_hex) is Outcome.ALREADY_REGISTERED


async def test_transient_failures_are_retried_with_backoff() -> None:
    answers = [503, 429, 201]
    seen: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append(request.headers["Authorization"])
        status = answers.pop(0)
        headers = {"Retry-After": "3"} if status == 429 else {}
        return web.json_response({}, status=status, headers=headers)

    app = web.Application()
    app.router.add_post("/api/register-agent", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        sleeps = Sleeps()
        client = AdminClient(f"http://127.0.0.1:{port}", TOKEN, sleep=sleeps, rng=lambda: 1.0)
        assert await client.register(PHONE.public_hex) is Outcome.REGISTERED
        assert sleeps.delays == [0.5, 3.0]  # the second wait honours Retry-After
        assert seen == [f"Bearer {TOKEN}"] * 3
        answers.extend([500, 500])
        client = AdminClient(
            f"http://127.0.0.1:{port}", TOKEN, sleep=sleeps, rng=lambda: 0.0, attempts=2
        )
        with pytest.raises(AdminApiError) as caught:
            await client.register(PHONE.public_hex)
        assert caught.value.retryable and caught.value.status == 500
        assert str(caught.value) == "register failed after 2 attempt(s): HTTP 500"
    finally:
        await runner.cleanup()


async def test_connection_refused_is_retried_then_reported() -> None:
    sleeps = Sleeps()
    # A port that nothing listens on: bind one, note it, close it.
    runner = web.AppRunner(web.Application())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    await runner.cleanup()
    client = AdminClient(f"http://127.0.0.1:{port}", TOKEN, sleep=sleeps, attempts=3, timeout=2)
    with pytest.raises(AdminApiError) as caught:
        await client.register(PHONE.public_hex)
    assert caught.value.retryable and caught.value.status is None
    assert len(sleeps.delays) == 2
