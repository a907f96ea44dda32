"""The admin HTTP API on 127.0.0.1: every status code, the token, the body limits."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bridge.nostr.keys import Keypair
from relaypolicy import admin
from relaypolicy.admin import (
    MAX_BODY,
    AdminServer,
    AdminToken,
    TokenFileError,
    load_token,
    parse_bind,
    start_admin,
)
from store.errors import StoreError
from store.registry import RegistryStore

TOKEN = "s3cret-token-0123456789abcdef"
NOW = 1_700_000_000
BRIDGE = Keypair.generate()
PHONE = Keypair.generate()


class Clock:
    now = float(NOW)

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[AdminServer]:
    running = await start_admin(
        tmp_path / "registry.db", AdminToken(TOKEN), "127.0.0.1", 0, clock=Clock()
    )
    try:
        yield running
    finally:
        await running.close()


@pytest.fixture
async def http(server: AdminServer) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=server.url) as session:
        yield session


AUTH = {"Authorization": f"Bearer {TOKEN}"}


async def post(
    http: aiohttp.ClientSession,
    path: str,
    body: Any = None,
    *,
    headers: dict[str, str] | None = None,
    data: Any = None,
) -> tuple[int, Any, aiohttp.ClientResponse]:
    kwargs: dict[str, Any] = {"headers": AUTH if headers is None else headers}
    if data is not None:
        kwargs["data"] = data
    else:
        kwargs["json"] = body
    async with http.post(path, **kwargs) as response:
        assert response.content_type == "application/json"
        return response.status, await response.json(), response


async def test_register_agent_contract(http: aiohttp.ClientSession, tmp_path: Path) -> None:
    pubkey = BRIDGE.public_hex
    status, body, _ = await post(http, "/api/register-agent", {"pubkey": pubkey})
    assert (status, body) == (201, {"status": "registered", "pubkey": pubkey})
    status, body, _ = await post(http, "/api/register-agent", {"pubkey": pubkey})
    assert (status, body) == (200, {"status": "already_registered", "pubkey": pubkey})
    # Hex in any case, and npubs, name the same key.
    status, _, _ = await post(http, "/api/register-agent", {"pubkey": pubkey.upper()})
    assert status == 200
    status, _, _ = await post(http, "/api/register-agent", {"pubkey": BRIDGE.npub})
    assert status == 200
    status, body, _ = await post(
        http, "/api/register-agent", {"pubkey": PHONE.public_hex, "label": "pixel"}
    )
    assert status == 201
    with RegistryStore.open(tmp_path / "registry.db") as store:
        rows = {row.pubkey: row for row in store.registrations()}
    assert rows[PHONE.public_hex].label == "pixel"
    assert rows[pubkey].registered_at == NOW


BAD_TOKENS: list[tuple[str, dict[str, str]]] = [
    ("missing", {}),
    ("wrong", {"Authorization": "Bearer wrong-token-0123456789abcdef"}),
    ("prefix", {"Authorization": f"Bearer {TOKEN[:-1]}"}),
    ("longer", {"Authorization": f"Bearer {TOKEN}x"}),
    ("scheme", {"Authorization": f"Basic {TOKEN}"}),
    ("no-scheme", {"Authorization": TOKEN}),
    ("empty", {"Authorization": "Bearer "}),
]


@pytest.mark.parametrize("headers", [h for _, h in BAD_TOKENS], ids=[i for i, _ in BAD_TOKENS])
@pytest.mark.parametrize(
    "path", ["/api/register-agent", "/api/unregister-agent", "/api/pairing-window"]
)
async def test_bad_token_is_401(
    http: aiohttp.ClientSession, headers: dict[str, str], path: str
) -> None:
    body = {"pubkey": BRIDGE.public_hex, "until": NOW + 60}
    status, answer, response = await post(http, path, body, headers=headers)
    assert (status, answer) == (401, {"error": "unauthorized"})
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


async def test_scheme_is_case_insensitive(http: aiohttp.ClientSession) -> None:
    headers = {"Authorization": f"bearer {TOKEN}"}
    status, _, _ = await post(
        http, "/api/register-agent", {"pubkey": BRIDGE.public_hex}, headers=headers
    )
    assert status == 201


BAD_BODIES: list[tuple[str, Any, str]] = [
    ("no-pubkey", {}, "pubkey must be 64 hex characters or an npub"),
    ("pubkey-int", {"pubkey": 5}, "pubkey must be 64 hex characters or an npub"),
    ("short", {"pubkey": "ab" * 31}, "invalid pubkey: expected an npub or 64 hex characters"),
    ("not-hex", {"pubkey": "zz" * 32}, "invalid pubkey: expected an npub or 64 hex characters"),
    ("nsec", {"pubkey": BRIDGE.nsec}, "invalid pubkey"),
    ("label-int", {"pubkey": BRIDGE.public_hex, "label": 3}, "label must be a string"),
    ("label-long", {"pubkey": BRIDGE.public_hex, "label": "x" * 201}, "a label is at most 200"),
    ("array", [BRIDGE.public_hex], "body must be a JSON object"),
    ("null", None, "body must be a JSON object"),
]


@pytest.mark.parametrize(
    ("body", "error"), [(b, e) for _, b, e in BAD_BODIES], ids=[i for i, _, _ in BAD_BODIES]
)
async def test_bad_register_body_is_400(http: aiohttp.ClientSession, body: Any, error: str) -> None:
    status, answer, _ = await post(http, "/api/register-agent", body)
    assert status == 400
    assert answer["error"].startswith(error)
    assert BRIDGE.nsec not in answer["error"]


@pytest.mark.parametrize("raw", [b"", b"{", b"\xff\xfe", b"pubkey=abc"])
async def test_malformed_json_is_400(http: aiohttp.ClientSession, raw: bytes) -> None:
    status, answer, _ = await post(http, "/api/register-agent", data=raw)
    assert (status, answer) == (400, {"error": "body must be a JSON object"})


async def test_huge_body_is_413(http: aiohttp.ClientSession) -> None:
    big = b'{"pubkey":"' + b"a" * (MAX_BODY + 1) + b'"}'
    status, answer, _ = await post(http, "/api/register-agent", data=big)
    assert status == 413
    assert "too large" in answer["error"]


async def test_huge_chunked_body_is_413(http: aiohttp.ClientSession) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"pubkey":"'
        for _ in range(64):
            yield b"a" * 1024
        yield b'"}'

    status, answer, _ = await post(http, "/api/register-agent", data=chunks())
    assert status == 413
    assert "too large" in answer["error"]


async def test_token_is_checked_before_the_body(http: aiohttp.ClientSession) -> None:
    big = b"x" * (MAX_BODY * 4)
    status, _, _ = await post(http, "/api/register-agent", data=big, headers={})
    assert status == 401


async def test_unregister(http: aiohttp.ClientSession) -> None:
    body = {"pubkey": PHONE.public_hex}
    status, answer, _ = await post(http, "/api/unregister-agent", body)
    assert (status, answer) == (404, {"error": "not registered"})
    await post(http, "/api/register-agent", body)
    status, answer, _ = await post(http, "/api/unregister-agent", body)
    assert (status, answer) == (200, {"status": "unregistered", "pubkey": PHONE.public_hex})
    status, _, _ = await post(http, "/api/unregister-agent", {"pubkey": "nope"})
    assert status == 400


async def test_pairing_window(http: aiohttp.ClientSession, tmp_path: Path) -> None:
    bridge = BRIDGE.public_hex
    status, answer, _ = await post(
        http, "/api/pairing-window", {"pubkey": bridge, "until": NOW + 60}
    )
    assert (status, answer) == (404, {"error": "not registered"})
    await post(http, "/api/register-agent", {"pubkey": bridge})
    status, answer, _ = await post(
        http, "/api/pairing-window", {"pubkey": bridge, "until": NOW + 900}
    )
    assert (status, answer) == (200, {"status": "open", "pubkey": bridge, "until": NOW + 900})
    with RegistryStore.open(tmp_path / "registry.db") as store:
        assert store.snapshot().windows == {bridge: NOW + 900}
    status, answer, _ = await post(
        http, "/api/pairing-window", {"pubkey": bridge, "until": NOW + 901}
    )
    assert (status, answer) == (
        400,
        {"error": "until is more than 900 s ahead of the relay clock"},
    )
    status, answer, _ = await post(http, "/api/pairing-window", {"pubkey": bridge, "until": NOW})
    assert (status, answer) == (200, {"status": "closed", "pubkey": bridge})
    with RegistryStore.open(tmp_path / "registry.db") as store:
        assert store.snapshot().windows == {}


@pytest.mark.parametrize("until", [None, "1700000060", 1.5, True, -1, [1]])
async def test_pairing_window_needs_an_integer_until(
    http: aiohttp.ClientSession, until: Any
) -> None:
    await post(http, "/api/register-agent", {"pubkey": BRIDGE.public_hex})
    body: dict[str, Any] = {"pubkey": BRIDGE.public_hex}
    if until is not None:
        body["until"] = until
    status, answer, _ = await post(http, "/api/pairing-window", body)
    assert (status, answer) == (400, {"error": "until must be a unix time in seconds (an integer)"})


async def test_health_needs_no_token(http: aiohttp.ClientSession) -> None:
    async with http.get("/api/health") as response:
        assert response.status == 200
        assert await response.json() == {"status": "ok"}


async def test_unknown_routes_and_methods(http: aiohttp.ClientSession) -> None:
    async with http.get("/api/register-agent", headers=AUTH) as response:
        assert response.status == 405
        assert (await response.json())["error"] == "method not allowed"
    async with http.post("/api/health", headers=AUTH) as response:
        assert response.status == 405
    async with http.get("/nope") as response:
        assert response.status == 404
        assert (await response.json())["error"] == "not found"


async def test_registry_failures_are_503_and_bugs_are_500(
    http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_store(self: RegistryStore) -> int:
        raise StoreError("registry.db: disk on fire")

    monkeypatch.setattr(RegistryStore, "count", broken_store)
    async with http.get("/api/health") as response:
        assert (response.status, await response.json()) == (503, {"error": "registry unavailable"})

    def bug(self: RegistryStore, pubkey: str, **kwargs: Any) -> bool:
        raise RuntimeError("details that must not leak")

    monkeypatch.setattr(RegistryStore, "register", bug)
    status, answer, _ = await post(http, "/api/register-agent", {"pubkey": BRIDGE.public_hex})
    assert (status, answer) == (500, {"error": "internal error"})


async def test_start_fails_early_on_a_bad_registry(tmp_path: Path) -> None:
    with pytest.raises(StoreError):
        await start_admin(tmp_path / "missing" / "r.db", AdminToken(TOKEN), "127.0.0.1", 0)


# --- token file -------------------------------------------------------------------------------


def _token_file(tmp_path: Path, content: bytes | str, mode: int = 0o600) -> Path:
    path = tmp_path / "token"
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    os.chmod(path, mode)
    return path


def test_load_token(tmp_path: Path) -> None:
    token = load_token(_token_file(tmp_path, TOKEN + "\n"))
    assert token.matches(f"Bearer {TOKEN}")
    assert not token.matches(None)
    assert TOKEN not in repr(token) and TOKEN not in str(token)
    assert load_token(_token_file(tmp_path, TOKEN, 0o400)).matches(f"Bearer {TOKEN}")


@pytest.mark.parametrize(
    ("content", "mode", "message"),
    [
        (TOKEN, 0o644, "accessible by group/others (mode 0644); run: chmod 600"),
        (TOKEN, 0o640, "accessible by group/others (mode 0640)"),
        (TOKEN, 0o602, "accessible by group/others"),
        ("", 0o600, "is empty"),
        ("  \n", 0o600, "is empty"),
        ("short", 0o600, "shorter than 16 characters"),
        ("two tokens-0123456789", 0o600, "without spaces or lines"),
        (b"\xff" * 20, 0o600, "not UTF-8"),
        ("x" * 5000, 0o600, "larger than 4096 bytes"),
    ],
)
def test_bad_token_files(tmp_path: Path, content: str | bytes, mode: int, message: str) -> None:
    path = _token_file(tmp_path, content, mode)
    with pytest.raises(TokenFileError) as caught:
        load_token(path)
    assert message in str(caught.value)
    assert TOKEN not in str(caught.value)


def test_missing_or_odd_token_files(tmp_path: Path) -> None:
    with pytest.raises(TokenFileError, match="does not exist; create it with"):
        load_token(tmp_path / "missing")
    with pytest.raises(TokenFileError, match="not a regular file"):
        load_token(tmp_path)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("127.0.0.1:8089", ("127.0.0.1", 8089)),
        ("0.0.0.0:80", ("0.0.0.0", 80)),
        ("[::1]:9000", ("::1", 9000)),
        ("localhost:0", ("localhost", 0)),
    ],
)
def test_parse_bind(value: str, expected: tuple[str, int]) -> None:
    assert parse_bind(value) == expected


@pytest.mark.parametrize("value", ["8089", ":8089", "host:", "host:x", "host:70000"])
def test_parse_bind_errors(value: str) -> None:
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_bind(value)


def test_module_exports() -> None:
    assert set(admin.__all__) <= set(dir(admin))
