"""Multi-relay redundancy: publish to all, dedup inbound across them, survive any one down.

The daemon runs with two or three relays; phones talk to all of them or to one only. A phone that
listens to a single relay must get everything (that relay had to receive every durable reply), a
command that arrives through every relay runs once, and with any one relay stopped the others
carry the traffic.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from bridge.protocol import CreateSessionCommand, InputCommand
from tests.support.daemon import DaemonProcess
from tests.support.phone import PhoneSimulator
from tests.support.relay import LoopbackRelay

pytestmark = pytest.mark.timeout(180)

RelayFactory = Callable[..., Awaitable[LoopbackRelay]]


@pytest.fixture
async def relays(relay_factory: RelayFactory) -> list[LoopbackRelay]:
    """Three relays that a stop really disconnects (proxied)."""
    return [await relay_factory(proxied=True) for _ in range(3)]


@pytest.fixture
async def daemon(relays: list[LoopbackRelay], tmp_path: Path) -> AsyncIterator[DaemonProcess]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    urls = [relay.url for relay in relays]
    async with DaemonProcess(
        tmp_path / "home", urls, workspace, env={"CODEDECK_AGENT": "scripted"}
    ) as running:
        yield running
    running.kill()


async def paired_phone(daemon: DaemonProcess, urls: list[str], label: str) -> PhoneSimulator:
    """A phone paired by key that talks to `urls` only, online, with a first heartbeat in."""
    phone = PhoneSimulator(bridge=daemon.keypair().npub, relays=urls, label=label)
    mark = phone.mark()
    await daemon.call("pair.npub", npub=phone.npub, label=label)
    await phone.go_online(every_relay=True)
    await phone.wait_for("sessions", after=mark, timeout=30)
    return phone


def ack_of(input_id: str) -> Callable[[Any], bool]:
    return lambda message: bool(message.inputId == input_id)


def echo_of(text: str) -> Callable[[Any], bool]:
    return lambda message: bool(message.entry.content == f"echo: {text}")


async def new_session(phone: PhoneSimulator) -> str:
    mark = phone.mark()
    await phone.send(CreateSessionCommand())
    ready = await phone.wait_for("session-ready", after=mark, timeout=30)
    return str(ready.message.session.id)


async def test_publishes_to_every_relay_and_runs_a_command_once(
    daemon: DaemonProcess, relays: list[LoopbackRelay]
) -> None:
    urls = [relay.url for relay in relays]
    phone = await paired_phone(daemon, urls, "all-relays")
    try:
        session = await new_session(phone)
        mark = phone.mark()
        event = await phone.send(InputCommand(sessionId=session, text="once", inputId="in-1"))
        await phone.wait_for("input-ack", after=mark, timeout=30)
        await phone.wait_for("output", echo_of("once"), after=mark)
        for url in urls:  # the very same event again through each relay, one by one
            await phone.publish_event(event, relays=[url])
        await phone.quiesce(idle=1.0)
        assert phone.count("input-ack", ack_of("in-1")) == 1
        assert list(daemon.executions().values()) == [1]
    finally:
        await phone.close()
    for url in urls:  # each relay alone holds the durable ack: the bridge published to all
        alone = PhoneSimulator(bridge=phone.bridge_pubkey, relays=[url], keypair=phone.keypair)
        async with alone:
            ack = await alone.wait_for("input-ack", timeout=30)
            assert ack.message.inputId == "in-1" and ack.relay == url


async def test_keeps_working_with_any_one_relay_down(
    daemon: DaemonProcess, relays: list[LoopbackRelay]
) -> None:
    phone = await paired_phone(daemon, [relay.url for relay in relays], "survivor")
    try:
        session = await new_session(phone)
        for n, down in enumerate(relays):
            await down.stop()
            mark = phone.mark()
            text = f"while relay {n} is down"
            await phone.send(InputCommand(sessionId=session, text=text, inputId=f"in-{n}"))
            await phone.wait_for("input-ack", ack_of(f"in-{n}"), after=mark)
            await phone.wait_for("output", echo_of(text), after=mark, timeout=30)
            await down.start()
            await phone.go_online(every_relay=True, timeout=30)
        await phone.quiesce(idle=1.0)
        executions = daemon.executions()
        assert len(executions) == len(relays) and set(executions.values()) == {1}
        for n in range(len(relays)):
            assert phone.count("input-ack", ack_of(f"in-{n}")) == 1
        assert phone.violations == [] and phone.conflicts == []
    finally:
        await phone.close()


async def test_a_phone_on_relay_a_and_a_phone_on_relay_b_are_both_served(
    daemon: DaemonProcess, relays: list[LoopbackRelay]
) -> None:
    a, b = relays[0].url, relays[1].url
    on_a = await paired_phone(daemon, [a], "on-a")
    on_b = await paired_phone(daemon, [b], "on-b")
    try:
        session = await new_session(on_a)
        await on_b.wait_for("sessions", lambda m: session in [s.id for s in m.sessions])
        marks = {"a": on_a.mark(), "b": on_b.mark()}
        await on_a.send(InputCommand(sessionId=session, text="from a", inputId="in-a"))
        await on_b.send(InputCommand(sessionId=session, text="from b", inputId="in-b"))
        for phone, mark, relay in ((on_a, marks["a"], a), (on_b, marks["b"], b)):
            acks = await phone.wait_for_count("input-ack", 2, after=mark, timeout=30)
            assert sorted(ack.message.inputId for ack in acks) == ["in-a", "in-b"]
            assert {ack.relay for ack in acks} == {relay}
            for text in ("from a", "from b"):
                await phone.wait_for("output", echo_of(text), after=mark)
        await on_a.quiesce(idle=1.0)
        for phone in (on_a, on_b):
            result = await phone.sync(session, timeout=30)
            assert result is not None and result.complete
            stored = daemon.transcript(session)
            assert sorted(phone.transcript(session)) == sorted(stored)
            assert phone.conflicts == [] and phone.violations == []
        assert set(daemon.executions().values()) == {1} and len(daemon.executions()) == 2
    finally:
        await on_a.close()
        await on_b.close()


async def test_a_reply_sent_while_a_relay_was_down_reaches_it_when_it_is_back(
    daemon: DaemonProcess, relays: list[LoopbackRelay]
) -> None:
    """The outbox keeps a durable reply until every relay holds it (not just the first one)."""
    a, b = relays[0], relays[1]
    on_a = await paired_phone(daemon, [a.url], "only-a")
    on_b = await paired_phone(daemon, [b.url], "only-b")
    try:
        session = await new_session(on_b)
        await a.stop()
        mark = on_b.mark()
        await on_b.send(InputCommand(sessionId=session, text="while a is down", inputId="in-x"))
        await on_b.wait_for("input-ack", ack_of("in-x"), after=mark, timeout=30)
        mark_a = on_a.mark()
        await a.start()  # the daemon reconnects and re-sends what relay A is missing
        ack = await on_a.wait_for("input-ack", ack_of("in-x"), after=mark_a, timeout=60)
        assert ack.relay == a.url
    finally:
        await on_a.close()
        await on_b.close()
    # Every relay holds every reply now: the outbox empties (its bookkeeping runs after the
    # last relay answered).
    async with asyncio.timeout(20):
        while outbox_rows(daemon):
            await asyncio.sleep(0.1)


def outbox_rows(daemon: DaemonProcess) -> int:
    uri = f"file:{daemon.home / 'bridge.db'}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=10)) as conn:
        return int(conn.execute("SELECT count(*) FROM outbox").fetchone()[0])
