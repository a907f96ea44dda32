"""Relays answer at most 500 stored events per REQ: the connection fetches the rest.

The holey case is real: rust-nostr's LMDB store answers a filter with both ``authors`` and a
tag with 500 events that are sorted but not the newest. Bisecting the time window until every
answer is below the cap gets everything (see :mod:`bridge.nostr.backlog`).

The paging rules themselves are tested without a relay (``test_backlog.py``,
``test_relay_session.py``); these tests hold them against real relays' caps and answers.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from bridge.nostr.event import VerifiedEvent, sign_event
from bridge.nostr.filters import Filter
from bridge.nostr.keys import Keypair
from bridge.nostr.relay import RelayConnection, RelayEventReceived
from tests.support.relay import LoopbackRelay, ScriptedRelay


async def _publish(url: str, events: list[VerifiedEvent]) -> None:
    publisher = RelayConnection(url, Keypair.generate())
    await publisher.connect()
    try:
        for event in events:
            outcome = await publisher.publish(event)
            assert outcome.accepted, outcome
    finally:
        await publisher.close()


def _to(event: VerifiedEvent, phone: Keypair) -> bool:
    return any(tuple(tag[:2]) == ("p", phone.public_hex) for tag in event.tags)


async def _read(url: str, filters: list[Filter]) -> tuple[list[RelayEventReceived], bool]:
    """Everything one subscription delivers up to its EOSE (and whether EOSE came)."""
    received: list[RelayEventReceived] = []
    eose = asyncio.Event()
    reader = RelayConnection(
        url, Keypair.generate(), on_event=received.append, on_eose=lambda _sid: eose.set()
    )
    await reader.connect()
    try:
        await reader.subscribe("backlog", filters)
        async with asyncio.timeout(60):
            await eose.wait()
    finally:
        await reader.close()
    return received, eose.is_set()


async def test_a_backlog_larger_than_the_relay_cap_arrives_whole_and_oldest_first(
    relay: LoopbackRelay,
) -> None:
    author = Keypair.generate()
    now = int(time.time())
    # Spread over ~20 minutes, several per second, as a queue of commands would be.
    events = [sign_event(author, 1, f"n{n}", created_at=now - 1200 + n // 2) for n in range(1234)]
    await _publish(relay.url, events)
    received, _ = await _read(relay.url, [Filter(authors=(author.public_hex,), since=now - 1300)])
    assert {r.event.id for r in received} == {e.id for e in events}
    assert len(received) == len(events)  # once each
    assert {r.subscription_id for r in received} == {"backlog"}  # pages: under the parent's id
    stamps = [r.event.created_at for r in received]
    assert stamps == sorted(stamps)  # a queue of commands runs in the order it was sent


async def test_a_relay_that_answers_with_holes_still_yields_everything(tmp_path: Path) -> None:
    bridge, phone, other = Keypair.generate(), Keypair.generate(), Keypair.generate()
    now = int(time.time())
    events = []
    for n in range(1800):
        author = bridge if n % 3 else other
        target = phone if n % 2 else other
        events.append(
            sign_event(
                author, 4516, f"m{n}", [["p", target.public_hex]], created_at=now - 900 + n // 2
            )
        )
    wanted = {e.id for e in events if e.pubkey == bridge.public_hex and _to(e, phone)}
    assert len(wanted) == 600  # more than one relay answer: the cut is where the holes appear
    async with LoopbackRelay(lmdb_dir=tmp_path / "lmdb") as relay:
        # Straight into the LMDB store, all at once (1800 publishes, one write and one OK
        # each, took seconds): the holes come from how LMDB answers the REQ, not from how the
        # events got there.
        await asyncio.gather(*(relay.save_event(event.to_dict()) for event in events))
        phone_filter = Filter(
            kinds=(4516,), authors=(bridge.public_hex,), tags={"p": (phone.public_hex,)}
        )
        received, _ = await _read(relay.url, [phone_filter])
    assert {r.event.id for r in received} == wanted


async def test_a_filter_with_a_limit_is_not_paged(relay: LoopbackRelay) -> None:
    author = Keypair.generate()
    now = int(time.time())
    events = [sign_event(author, 1, f"n{n}", created_at=now - 300 + n) for n in range(150)]
    await _publish(relay.url, events)
    received, eose = await _read(relay.url, [Filter(authors=(author.public_hex,), limit=120)])
    assert eose and len(received) == 120
    assert {r.event.id for r in received} == {e.id for e in events[-120:]}


async def test_a_relay_that_never_ends_its_answer_does_not_hold_the_events_forever(
    caplog: pytest.LogCaptureFixture,
) -> None:
    author = Keypair.generate()
    stored = sign_event(author, 1, "stored", created_at=int(time.time()) - 10)
    live = sign_event(author, 1, "live", created_at=int(time.time()))
    received: list[RelayEventReceived] = []
    eose = asyncio.Event()
    async with ScriptedRelay() as relay:
        reader = RelayConnection(
            relay.url,
            Keypair.generate(),
            on_event=received.append,
            on_eose=lambda _sid: eose.set(),
            eose_timeout=0.5,
        )
        await reader.connect()
        try:
            await reader.subscribe("s", [Filter(authors=(author.public_hex,))])
            await relay.next_frame("REQ")
            await relay.send(["EVENT", "s", json.loads(stored.to_json())])
            await asyncio.sleep(0.1)
            assert received == []  # held: the stored answer is not over yet
            async with asyncio.timeout(5):
                await eose.wait()  # the deadline ended it
            assert [r.event.id for r in received] == [stored.id]
            await relay.send(["EVENT", "s", json.loads(live.to_json())])
            async with asyncio.timeout(5):
                while len(received) < 2:
                    await asyncio.sleep(0.02)
            assert received[1].event.id == live.id  # live events flow at once from then on
        finally:
            await reader.close()
    assert "no EOSE after 0.5 s" in caplog.text
