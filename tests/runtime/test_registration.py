"""Relay registration against the real admin API on 127.0.0.1, and the token file's rules."""

from __future__ import annotations

import gc
import logging
import warnings
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bridge.runtime.edges.registration import (
    RegistrationError,
    RelayRegistration,
    failure_hint,
    read_token_file,
)
from relaypolicy.admin import AdminServer, AdminToken, start_admin
from relaypolicy.client import AdminApiError
from store.registry import RegisteredPubkey, RegistryStore
from tests.runtime.support import BRIDGE, PHONE, finished

TOKEN = "admin-token-5e0c7a19b3"
WRONG = "wrong-token-d41f86e2"
NOW = 1_800_000_000


@pytest.fixture
async def admin(tmp_path: Path) -> AsyncIterator[tuple[AdminServer, Path]]:
    """The relay's admin API on a free port of 127.0.0.1, its registry, stopped afterwards."""
    registry = tmp_path / "registry.db"
    server = await start_admin(registry, AdminToken(TOKEN), "127.0.0.1", 0, clock=lambda: NOW)
    try:
        yield server, registry
    finally:
        await server.close()


def registrations(registry: Path) -> dict[str, RegisteredPubkey]:
    with RegistryStore.open(registry) as store:
        return {r.pubkey: r for r in store.registrations()}


async def test_register_window_and_unregister_reach_the_admin_api(
    admin: tuple[AdminServer, Path], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "bridge.runtime.edges.registration")
    server, registry = admin
    registration = RelayRegistration(server.url, TOKEN)
    try:
        registration.register(BRIDGE.public_hex, "bridge box")
        await finished(registration)
        registration.open_window(BRIDGE.public_hex, NOW, 600)
        registration.register(PHONE.public_hex, "Pixel")
        await finished(registration)
        assert registrations(registry) == {
            BRIDGE.public_hex: RegisteredPubkey(BRIDGE.public_hex, "bridge box", NOW, NOW + 600),
            PHONE.public_hex: RegisteredPubkey(PHONE.public_hex, "Pixel", NOW, None),
        }
        registration.open_window(BRIDGE.public_hex, NOW, 5_000)  # capped at 15 minutes
        registration.unregister(PHONE.public_hex)
        await finished(registration)
        assert registrations(registry) == {
            BRIDGE.public_hex: RegisteredPubkey(BRIDGE.public_hex, "bridge box", NOW, NOW + 900)
        }
    finally:
        await registration.close()  # the window still open closes with the daemon
    assert registrations(registry) == {
        BRIDGE.public_hex: RegisteredPubkey(BRIDGE.public_hex, "bridge box", NOW, None)
    }
    assert sorted(caplog.messages) == sorted(
        [
            f"relay registration: register {BRIDGE.public_hex[:8]}… → REGISTERED",
            f"relay registration: pairing window {BRIDGE.public_hex[:8]}… → WINDOW_OPEN",
            f"relay registration: register {PHONE.public_hex[:8]}… → REGISTERED",
            f"relay registration: pairing window {BRIDGE.public_hex[:8]}… → WINDOW_OPEN",
            f"relay registration: unregister {PHONE.public_hex[:8]}… → UNREGISTERED",
            f"relay registration: pairing window close {BRIDGE.public_hex[:8]}… → WINDOW_CLOSED",
        ]
    )


def window_of(registry: Path, pubkey: str) -> int | None:
    return registrations(registry)[pubkey].pairing_until


async def test_the_relay_window_closes_when_the_bridge_window_does(
    admin: tuple[AdminServer, Path], caplog: pytest.LogCaptureFixture
) -> None:
    """Closed on the relay (``until`` in the past) when asked, in the order asked, and only
    once: a window already closed there is not closed again, not even at shutdown."""
    caplog.set_level(logging.INFO, "bridge.runtime.edges.registration")
    server, registry = admin
    registration = RelayRegistration(server.url, TOKEN)
    try:
        registration.close_window(BRIDGE.public_hex)  # none opened: nothing to close
        registration.register(BRIDGE.public_hex, "bridge box")
        registration.open_window(BRIDGE.public_hex, NOW, 600)
        registration.close_window(BRIDGE.public_hex)  # a phone paired through it
        await finished(registration)
        assert window_of(registry, BRIDGE.public_hex) is None
        # Queued one after the other, the calls reach the relay in that order.
        registration.open_window(BRIDGE.public_hex, NOW, 300)
        registration.close_window(BRIDGE.public_hex)
        registration.open_window(BRIDGE.public_hex, NOW, 400)
        await finished(registration)
        assert window_of(registry, BRIDGE.public_hex) == NOW + 400
        registration.close_window(BRIDGE.public_hex)  # it expired on the bridge
        await finished(registration)
        assert window_of(registry, BRIDGE.public_hex) is None
    finally:
        await registration.close()
    closes = [m for m in caplog.messages if "pairing window close" in m]
    assert len(closes) == 3  # nothing was left open for the shutdown to close


async def test_a_window_a_killed_run_left_open_closes_at_the_next_start(
    admin: tuple[AdminServer, Path],
) -> None:
    server, registry = admin
    with RegistryStore.open(registry) as store:
        store.register(BRIDGE.public_hex, label="bridge box", now=NOW)
        store.set_pairing_window(BRIDGE.public_hex, NOW + 600, now=NOW)
    registration = RelayRegistration(server.url, TOKEN)
    try:
        registration.register_bridge(BRIDGE.public_hex, "bridge box")
        await finished(registration)
        assert window_of(registry, BRIDGE.public_hex) is None
    finally:
        await registration.close()


async def test_a_close_cut_short_by_the_shutdown_is_made_at_shutdown(
    admin: tuple[AdminServer, Path],
) -> None:
    server, registry = admin
    registration = RelayRegistration(server.url, TOKEN)
    registration.register(BRIDGE.public_hex, "bridge box")
    registration.open_window(BRIDGE.public_hex, NOW, 600)
    await finished(registration)
    registration.close_window(BRIDGE.public_hex)  # queued, then the daemon stops
    await registration.close()
    assert window_of(registry, BRIDGE.public_hex) is None


async def test_a_refused_token_is_logged_with_what_to_check_and_never_shown(
    admin: tuple[AdminServer, Path], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, every level: the client, aiohttp, the API
    server, registry = admin
    registration = RelayRegistration(server.url, WRONG)
    try:
        registration.register(BRIDGE.public_hex, "bridge box")
        await finished(registration)
    finally:
        await registration.close()
    assert registrations(registry) == {}
    warnings_ = [
        r.getMessage() for r in caplog.records if r.name == "bridge.runtime.edges.registration"
    ]
    assert warnings_ == [
        f"! relay registration (register {BRIDGE.public_hex[:8]}…) at {server.url} failed: "
        "the admin API refused the token (HTTP 401); "
        "check the admin token (register_token_file) against the relay's"
    ]
    for record in caplog.records:
        shown = f"{record.getMessage()} {record.args!r} {record.exc_text or ''}"
        assert WRONG not in shown and TOKEN not in shown, record.name


async def test_a_call_closed_before_it_ran_leaves_nothing_behind(
    admin: tuple[AdminServer, Path],
) -> None:
    server, registry = admin
    registration = RelayRegistration(server.url, TOKEN)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        registration.register(BRIDGE.public_hex)  # cancelled before its task ever ran
        await registration.close()
        registration.unregister(PHONE.public_hex)  # refused: the registration is closed
        gc.collect()
    assert [str(w.message) for w in caught] == []  # no "coroutine … was never awaited"
    assert registrations(registry) == {}


# --- the token file ------------------------------------------------------------------------

TOKEN_FILE_CASES = [
    # id, content (None: no file), mode, the error (None: the token read)
    ("first-non-empty-line", "\n  \n  tok-1  \ntok-2\n", 0o600, None),
    (
        "readable-by-others",
        f"{TOKEN}\n",
        0o644,
        "is readable by other users; run: chmod 600 {path}",
    ),
    ("group-readable", f"{TOKEN}\n", 0o640, "is readable by other users; run: chmod 600 {path}"),
    ("empty", "\n \n", 0o600, "{path} is empty; put the relay's admin token in it"),
    ("missing", None, 0o600, "cannot read {path} (No such file or directory)"),
]


@pytest.mark.parametrize(
    ("content", "mode", "error"),
    [c[1:] for c in TOKEN_FILE_CASES],
    ids=[c[0] for c in TOKEN_FILE_CASES],
)
def test_read_token_file(tmp_path: Path, content: str | None, mode: int, error: str | None) -> None:
    path = tmp_path / "admin.token"
    if content is not None:
        path.write_text(content)
        path.chmod(mode)
    if error is None:
        assert read_token_file(path, "register_token_file") == "tok-1"
        return
    with pytest.raises(RegistrationError) as failed:
        read_token_file(path, "register_token_file")
    message = str(failed.value)
    assert message.startswith("register_token_file: ")
    assert message.endswith(error.format(path=path))
    assert TOKEN not in message


def test_an_unreadable_token_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "token-dir"
    path.mkdir(mode=0o700)  # reading a directory fails like an unreadable file
    with pytest.raises(RegistrationError, match=r"register_token_file: cannot read .*token-dir \("):
        read_token_file(path, "register_token_file")


@pytest.mark.parametrize(
    ("status", "retryable", "names"),
    [
        (401, False, "admin token"),
        (403, False, "admin token"),
        (404, False, "register_url"),
        (400, False, "register_url"),
        (500, False, "relay is up"),
        (503, True, "relay is up"),
        (None, True, "relay is up"),
    ],
)
def test_each_failure_names_what_to_check(status: int | None, retryable: bool, names: str) -> None:
    assert names in failure_hint(AdminApiError("x", status=status, retryable=retryable))
