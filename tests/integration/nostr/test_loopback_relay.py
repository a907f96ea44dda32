"""The test relay helper itself: write-policy adapter, restart on the same port, LMDB store.

Other test suites (relaypolicy, integration) build on these guarantees.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from bridge.nostr.event import VerifiedEvent, sign_event
from bridge.nostr.filters import Filter
from bridge.nostr.keys import Keypair
from bridge.nostr.relay import PublishStatus, RelayConnection, RelayEventReceived
from tests.support.relay import LoopbackRelay

pytestmark = pytest.mark.timeout(60)

RelayFactory = Callable[..., Awaitable[LoopbackRelay]]
KEYS = Keypair.generate()


def make_event(content: str) -> VerifiedEvent:
    return sign_event(KEYS, 1, content, (), created_at=int(time.time()))


class ScriptedPolicy:
    """Decides by content: "ok", "no", "prefixed", "boom", "bad-return", "slow"."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    async def admit_event(self, event_json: dict[str, Any], source_ip: str) -> tuple[bool, str]:
        content = event_json["content"]
        self.calls.append((content, source_ip))
        if content == "no":
            return False, "not on the list"
        if content == "prefixed":
            return False, "rate-limited: too many requests"
        if content == "boom":
            raise RuntimeError("policy bug")
        if content == "bad-return":
            return "yes"  # type: ignore[return-value]
        if content == "slow":
            await asyncio.sleep(30)
        return True, ""


async def publish(url: str, event: VerifiedEvent, **options: Any) -> Any:
    connection = RelayConnection(url, KEYS, close_timeout=0.5, **options)
    await connection.connect()
    try:
        return await connection.publish(event)
    finally:
        await connection.close()


CASES = [
    ("ok", PublishStatus.ACCEPTED, ""),
    ("no", PublishStatus.REJECTED, "blocked: not on the list"),
    ("prefixed", PublishStatus.REJECTED, "blocked: too many requests"),
    ("boom", PublishStatus.REJECTED, "blocked: internal error"),
    ("bad-return", PublishStatus.REJECTED, "blocked: internal error"),
    ("slow", PublishStatus.REJECTED, "blocked: internal error"),
]


async def test_policy_decisions_reach_the_client(
    relay_factory: RelayFactory, caplog: pytest.LogCaptureFixture
) -> None:
    policy = ScriptedPolicy()
    relay = await relay_factory(policy=policy, policy_timeout=0.5)
    for content, status, message in CASES:
        outcome = await publish(relay.url, make_event(content))
        assert (content, outcome.status, outcome.message) == (content, status, message)
    assert [call[0] for call in policy.calls] == [case[0] for case in CASES]
    assert {call[1] for call in policy.calls} == {"127.0.0.1"}
    assert caplog.text.count("write policy failed, rejecting") == 3
    # The relay survived every failure and still serves.
    assert (await publish(relay.url, make_event("ok"))).accepted


async def test_restart_on_the_same_port_with_lmdb(
    relay_factory: RelayFactory, tmp_path: Path
) -> None:
    relay = await relay_factory(lmdb_dir=tmp_path)
    url = relay.url
    kept = make_event("kept")
    assert (await publish(url, kept)).accepted
    await relay.stop()
    assert not relay.running
    injected = make_event("injected while down")
    await relay.save_event(injected.to_dict())
    await relay.start()
    assert relay.url == url

    got: list[str] = []
    done = asyncio.Event()
    connection = RelayConnection(
        url,
        KEYS,
        on_event=lambda r: got.append(r.event.id),
        on_eose=lambda s: done.set(),
        close_timeout=0.5,
    )
    await connection.connect()
    try:
        await connection.subscribe("s", [Filter(authors=(KEYS.public_hex,))])
        await asyncio.wait_for(done.wait(), 10)
    finally:
        await connection.close()
    assert sorted(got) == sorted([kept.id, injected.id])


async def test_stopped_relay_refuses_connections(relay: LoopbackRelay) -> None:
    url = relay.url
    await relay.stop()
    await relay.stop()  # idempotent
    connection = RelayConnection(url, KEYS, connect_timeout=1.0)
    with pytest.raises(ConnectionError, match="cannot connect"):
        await connection.connect()


async def test_save_event_needs_lmdb(relay: LoopbackRelay) -> None:
    with pytest.raises(RuntimeError, match="needs lmdb_dir"):
        await relay.save_event(make_event("x").to_dict())


def test_bad_auth_mode() -> None:
    with pytest.raises(ValueError, match="auth must be one of"):
        LoopbackRelay(auth="sometimes")


async def test_events_reach_a_live_subscriber_through_the_policy(
    relay_factory: RelayFactory,
) -> None:
    relay = await relay_factory(policy=ScriptedPolicy())
    received: list[RelayEventReceived] = []
    ready, arrived = asyncio.Event(), asyncio.Event()

    def on_event(event: RelayEventReceived) -> None:
        received.append(event)
        arrived.set()

    subscriber = RelayConnection(
        relay.url, KEYS, on_event=on_event, on_eose=lambda s: ready.set(), close_timeout=0.5
    )
    await subscriber.connect()
    try:
        await subscriber.subscribe("s", [Filter(kinds=(1,))])
        await asyncio.wait_for(ready.wait(), 10)
        refused, accepted = make_event("no"), make_event("ok")
        assert not (await publish(relay.url, refused)).accepted
        assert (await publish(relay.url, accepted)).accepted
        await asyncio.wait_for(arrived.wait(), 10)
        assert [r.event.id for r in received] == [accepted.id]
    finally:
        await subscriber.close()
