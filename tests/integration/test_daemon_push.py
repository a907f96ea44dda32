"""Web Push through the real daemon: phone simulators subscribe, the scripted agent makes cards and
ends turns, and the push-service stand-in (tests/support/push_service.py, on 127.0.0.1) checks
each push's VAPID signature and decrypts it as the subscribing browser would.

- On the embedded relay the bridge knows who reads it: a phone that is away gets exactly one push
  per event (a card: ``approval``; the turn's end: ``turn-ended``), none while it is connected,
  and never a word of the transcript.
- On an external relay it cannot know, so it pushes; a subscription the push service calls gone
  (410) is forgotten, and an unpaired phone is never pushed again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bridge.protocol import (
    PUSH,
    InputCommand,
    PermissionResCommand,
    PushSubscribeCommand,
    SessionsMessage,
    decode_phone_to_bridge,
)
from tests.integration.conftest import pair_phone
from tests.integration.test_daemon_sessions import create_session
from tests.support.daemon import DaemonProcess
from tests.support.phone import PhoneSimulator
from tests.support.push_service import BrowserSubscription, PushService, ReceivedPush
from tests.support.relay import LoopbackRelay

MARKER = "ZEBRA-7731-MARKER"
"""In every input and output of these sessions: it must never reach a push service."""
WINDOW = 5.0
QUIET = WINDOW + 3.0
"""Long enough that a push that was going to come would have come."""
PAYLOAD_KEYS = {"v", "bridge", "machine", "reason", "count"}


@pytest.fixture
async def service() -> AsyncIterator[PushService]:
    async with PushService() as running:
        yield running


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def rows(daemon: DaemonProcess, sql: str) -> list[tuple[Any, ...]]:
    with contextlib.closing(sqlite3.connect(daemon.home / "bridge.db")) as conn:
        return conn.execute(sql).fetchall()


async def push_key(phone: PhoneSimulator) -> str:
    heartbeat = (await phone.wait_for(SessionsMessage)).message
    assert heartbeat.capabilities is not None and PUSH in heartbeat.capabilities
    assert heartbeat.pushKey is not None
    return heartbeat.pushKey


async def subscribe(phone: PhoneSimulator, subscription: BrowserSubscription) -> None:
    """``push-subscribe`` with the browser's JSON (``expirationTime`` and all), acked."""
    raw = {"type": "push-subscribe", "subscription": subscription.to_json()}
    command = decode_phone_to_bridge(json.dumps(raw))
    assert isinstance(command, PushSubscribeCommand)
    mark = phone.mark()
    await phone.send(command)
    ack = await phone.wait_for("push-ack", after=mark)
    assert (ack.message.endpoint, ack.message.success) == (subscription.endpoint, True)


async def ask(phone: PhoneSimulator, session: str) -> str:
    """A permission card (the agent asks to run a command that names the marker)."""
    mark = phone.mark()
    text = f'ask Bash {{"command": "make {MARKER}"}}'
    await phone.send(InputCommand(sessionId=session, text=text))
    card = await phone.wait_for(
        "output",
        lambda m: (m.entry.metadata or {}).get("special") == "permission_request",
        after=mark,
        timeout=30,
    )
    return str((card.message.entry.metadata or {})["tool_use_id"])


async def echo(phone: PhoneSimulator, session: str) -> None:
    """A turn that echoes the marker and ends."""
    mark = phone.mark()
    await phone.send(InputCommand(sessionId=session, text=f"say {MARKER}"))
    await phone.wait_for("output", lambda m: m.entry.content == f"echo: say {MARKER}", after=mark)
    await phone.wait_for(
        "output", lambda m: (m.entry.metadata or {}).get("stream_end") is True, after=mark
    )


def check_clean(push: ReceivedPush, daemon: DaemonProcess, session: str) -> None:
    """A push says who and why, nothing of the session."""
    assert set(push.payload) == PAYLOAD_KEYS
    assert push.payload["bridge"] == daemon.keypair().public_hex
    assert push.payload["machine"] == daemon.machine
    for secret in (MARKER, session, "Bash", "make", str(daemon.workspace)):
        assert secret not in push.plaintext.decode()
        assert secret.encode() not in push.body
        assert all(secret not in value for value in push.headers.values())


async def test_an_away_phone_gets_one_clean_push_per_event_and_none_while_connected(
    tmp_path: Path, workspace: Path, service: PushService
) -> None:
    port = free_port()
    url = f"ws://127.0.0.1:{port}"
    daemon = DaemonProcess(
        tmp_path / "home",
        [],
        workspace,
        extra_args=["--embedded-relay", f"127.0.0.1:{port}", "--log-level", "DEBUG"],
    )
    async with daemon:
        away = await pair_phone(daemon, url, "away")
        driver = await pair_phone(daemon, url, "driver")
        try:
            browser = service.subscribe(await push_key(away))
            await subscribe(away, browser)
            await away.go_offline()
            session = await create_session(driver)

            request = await ask(driver, session)
            [card] = await service.wait_for(1, timeout=WINDOW + 10)
            assert (card.payload["reason"], card.payload["count"]) == ("approval", 1)
            assert (card.headers["Urgency"], card.headers["TTL"]) == ("high", "3600")
            mark = driver.mark()
            await driver.send(
                PermissionResCommand(sessionId=session, requestId=request, allow=True)
            )
            await driver.wait_for("output", lambda m: m.entry.content == "allowed Bash", after=mark)
            ended = (await service.wait_for(2, timeout=WINDOW + 10))[1]
            assert (ended.payload["reason"], ended.payload["count"]) == ("turn-ended", 1)
            assert (ended.headers["Urgency"], ended.headers["TTL"]) == ("normal", "900")
            assert card.headers["Topic"] != ended.headers["Topic"]

            await away.go_online()  # connected: it reads the bridge live
            await echo(driver, session)
            await asyncio.sleep(QUIET)
            assert len(service.received) == 2

            await away.go_offline()  # away again: the next turn's end wakes it
            await echo(driver, session)
            third = (await service.wait_for(3, timeout=WINDOW + 10))[2]
            assert third.payload["reason"] == "turn-ended"
            await asyncio.sleep(QUIET)
            assert len(service.received) == 3  # one per event, the driver never (no subscription)
            for push in service.received:
                check_clean(push, daemon, session)
            assert service.refused == []
            assert browser.sub_id not in daemon.log_text  # the log names the service's origin only
            assert browser.p256dh not in daemon.log_text
        finally:
            await away.close()
            await driver.close()
    [(key,)] = rows(daemon, "SELECT length(private_key) FROM push_key")
    assert key == 32


async def test_gone_subscriptions_are_forgotten_and_an_unpaired_phone_is_never_pushed_again(
    relay: LoopbackRelay, tmp_path: Path, workspace: Path, service: PushService
) -> None:
    daemon = DaemonProcess(tmp_path / "home", [relay.url], workspace)
    async with daemon:
        phone = await pair_phone(daemon, relay.url, "phone")
        other = await pair_phone(daemon, relay.url, "other")
        try:
            key = await push_key(phone)
            kept, gone = service.subscribe(key), service.subscribe(key)
            await subscribe(phone, kept)
            await subscribe(phone, gone)
            service.drop(gone)
            assert len(rows(daemon, "SELECT endpoint FROM push_subscriptions")) == 2

            session = await create_session(phone)
            await echo(phone, session)  # online, but on an external relay: pushed anyway
            [push] = await service.wait_for(1, timeout=WINDOW + 10)
            assert push.sub_id == kept.sub_id and push.payload["reason"] == "turn-ended"
            for _ in range(50):
                if len(rows(daemon, "SELECT endpoint FROM push_subscriptions")) == 1:
                    break
                await asyncio.sleep(0.1)
            assert rows(daemon, "SELECT endpoint FROM push_subscriptions") == [(kept.endpoint,)]
            assert service.gone_answers == [gone.sub_id]

            await daemon.call("phones.unpair", npub=phone.keypair.npub)
            assert rows(daemon, "SELECT endpoint FROM push_subscriptions") == []
            await echo(other, session)
            await asyncio.sleep(QUIET)
            assert len(service.received) == 1 and service.gone_answers == [gone.sub_id]
            assert service.refused == []
        finally:
            await phone.close()
            await other.close()
