"""Outbound: sealing per phone, ordered sending, the outbox and its retries, the created_at clock."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from bridge.engine.effects import Publish
from bridge.nostr.event import Event, check_event
from bridge.nostr.nip44 import conversation_key, decrypt
from bridge.nostr.relay import PublishStatus
from bridge.protocol import BridgeToPhone, InputAckMessage, OutputEntry, OutputMessage, encode
from bridge.runtime import outbound as outbound_module
from bridge.runtime.outbound import Outbound, SealedEvent
from store import bridge_state
from store.db import BridgeDatabase
from tests.runtime.support import (
    BRIDGE,
    NOW,
    PHONE,
    PHONE_2,
    RELAY_A,
    RELAY_B,
    FakeClock,
    FakePool,
    Published,
    make_engine,
    make_outbound,
    opened,
    rows,
    sent,
)

ACK = InputAckMessage(sessionId="s-1", inputId="in-1")
ENTRY = OutputEntry(entryType="text", content="hello", timestamp="t")
OUTPUT = OutputMessage(sessionId="s-1", seq=7, entry=ENTRY)
HEARTBEAT = make_engine().heartbeat_message()
BOTH = (PHONE.public_hex, PHONE_2.public_hex)
T = int(NOW)


@dataclass
class Rig:
    db: BridgeDatabase
    clock: FakeClock
    pool: FakePool
    outbound: Outbound

    async def queue(
        self, message: BridgeToPhone = ACK, audience: Sequence[str] = (PHONE.public_hex,)
    ) -> list[SealedEvent]:
        """As the committer does: sealed, written to the outbox in a transaction, then sent."""
        sealed = self.outbound.seal(Publish(message, tuple(audience)), durable=True)
        async with self.db.transaction():
            await self.outbound.queue_durable(sealed)
        self.outbound.send(sealed)
        await sent(self.outbound)
        return sealed

    async def outbox(self) -> list[tuple[str, str]]:
        return [
            (str(a), str(b))
            for a, b in await rows(
                self.db, "SELECT event_id, accepted_by FROM outbox ORDER BY rowid"
            )
        ]


@pytest.fixture
async def rig(db: BridgeDatabase) -> AsyncIterator[Rig]:
    """A started Outbound over two relays (resource: its sender task is closed afterwards)."""
    clock, pool = FakeClock(), FakePool((RELAY_A, RELAY_B))
    outbound = make_outbound(db, clock)
    outbound.start(pool)  # type: ignore[arg-type]
    try:
        yield Rig(db, clock, pool, outbound)
    finally:
        if pool.hold is not None:
            pool.hold.set()
        await outbound.close(drain_timeout=1.0)


# --- sealing -------------------------------------------------------------------------------


def expiration(created_at: int) -> tuple[str, str]:
    return ("expiration", str(created_at + 3600))


SEAL_CASES = [
    # id, message, kind, extra tags after p (given the phone and created_at), expires
    ("input-ack", ACK, 4516, lambda phone, at: [expiration(at)], True),
    ("output", OUTPUT, 24515, lambda phone, at: [("s", "s-1"), ("seq", "7")], False),
    ("heartbeat", HEARTBEAT, 30515, lambda phone, at: [("d", f"box#{phone[:16]}")], False),
]


@pytest.mark.parametrize(
    ("message", "kind", "extra", "expires"),
    [c[1:] for c in SEAL_CASES],
    ids=[c[0] for c in SEAL_CASES],
)
def test_seal_makes_one_encrypted_signed_event_per_phone(
    db: BridgeDatabase, message: BridgeToPhone, kind: int, extra: object, expires: bool
) -> None:
    outbound = make_outbound(db, FakeClock())
    sealed = outbound.seal(Publish(message, (*BOTH, PHONE.public_hex)), durable=False)
    assert len(sealed) == 2  # a duplicate in the audience gets one event
    for item, phone in zip(sealed, (PHONE, PHONE_2), strict=True):
        event = item.event
        assert check_event(event) == event  # id and signature hold
        assert (event.pubkey, event.kind, event.created_at) == (BRIDGE.public_hex, kind, T)
        assert event.tags == (("p", phone.public_hex), *extra(phone.public_hex, T))  # type: ignore[operator]
        assert opened(event, phone) == message
        assert item.expires_at == (T + 3600 if expires else None)
        assert item.message_type == message.type
        assert (item.durable, item.relays, item.on_sent) == (False, None, None)
    # Each phone reads only its own event.
    with pytest.raises(ValueError):
        opened(sealed[0].event, PHONE_2)


def test_a_large_message_is_sealed_as_chunks_for_each_phone(db: BridgeDatabase) -> None:
    big = OutputMessage(
        sessionId="s-1",
        seq=1,
        entry=OutputEntry(entryType="text", content="x" * 100_000, timestamp="t"),
    )
    sealed = make_outbound(db, FakeClock()).seal(Publish(big, BOTH), durable=False)
    for phone in (PHONE, PHONE_2):
        mine = [s.event for s in sealed if s.event.tags[0] == ("p", phone.public_hex)]
        assert len(mine) >= 3
        assert {(e.kind, e.tags) for e in mine} == {(24515, (("p", phone.public_hex),))}
        key = conversation_key(phone.secret, bytes.fromhex(BRIDGE.public_hex))
        envelopes = [json.loads(decrypt(e.content, key)) for e in mine]
        assert [(m["type"], m["i"], m["n"]) for m in envelopes] == [
            ("chunk", i, len(mine)) for i in range(len(mine))
        ]
        assert "".join(m["part"] for m in envelopes) == encode(big)


# --- sending -------------------------------------------------------------------------------


def outputs(outbound: Outbound, seqs: range) -> list[SealedEvent]:
    """One live line per seq, sealed for the phone (best effort, as the engine sends them)."""
    return [
        outbound.seal(
            Publish(OUTPUT.model_copy(update={"seq": n}), (PHONE.public_hex,)), durable=False
        )[0]
        for n in seqs
    ]


async def test_send_keeps_the_order(rig: Rig) -> None:
    sealed = outputs(rig.outbound, range(1, 6))
    for item in sealed:
        rig.outbound.send([item])
    await sent(rig.outbound)
    assert [p.event.id for p in rig.pool.published] == [s.event.id for s in sealed]
    assert [opened(e).seq for e in rig.pool.events()] == [1, 2, 3, 4, 5]  # type: ignore[union-attr]
    assert (rig.outbound.published, rig.outbound.failed) == (5, 0)


async def test_a_lone_reply_to_an_idle_sender_is_published_in_the_next_step(rig: Rig) -> None:
    # The ack's path: no step of the sender task between the commit and the frame.
    for _ in range(3):
        await asyncio.sleep(0)  # the sender reached its empty queue
    [ack] = rig.outbound.seal(Publish(ACK, (PHONE.public_hex,)), durable=False)
    rig.outbound.send([ack])
    await asyncio.sleep(0)
    assert rig.pool.events() == [ack.event]
    await sent(rig.outbound)
    assert (rig.outbound.published, rig.outbound.failed) == (1, 0)


@pytest.mark.parametrize("bursts", [1, 2])
async def test_an_idle_senders_bursts_keep_their_order_past_the_depth(
    db: BridgeDatabase, monkeypatch: pytest.MonkeyPatch, bursts: int
) -> None:
    monkeypatch.setattr(outbound_module, "PIPELINE_DEPTH", 3)
    pool = FakePool()
    outbound = make_outbound(db, FakeClock())
    outbound.start(pool)  # type: ignore[arg-type]
    sealed = outputs(outbound, range(1, 9))
    for part in (sealed[:4], sealed[4:]) if bursts == 2 else (sealed,):
        for _ in range(3):
            await asyncio.sleep(0)  # idle again: the next burst's first event starts at once
        outbound.send(part)
    await sent(outbound)
    assert [opened(e).seq for e in pool.events()] == list(range(1, 9))  # type: ignore[union-attr]
    await outbound.close()


async def test_the_sender_survives_a_publish_that_raises(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = (
        rig.outbound.seal(Publish(m, (PHONE.public_hex,)), durable=False)[0] for m in (OUTPUT, ACK)
    )
    rig.pool.fail_with = RuntimeError("boom")
    rig.outbound.send([first, second])
    await sent(rig.outbound)
    assert rig.pool.events() == [first.event, second.event]
    assert rig.outbound.published == 1
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert record.getMessage() == f"! sending output {first.event.id[:8]} failed"


async def test_a_full_queue_drops_and_counts(
    db: BridgeDatabase, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(outbound_module, "QUEUE_LIMIT", 2)
    outbound = make_outbound(db, FakeClock())  # not started: nothing drains the queue
    sealed = outbound.seal(Publish(ACK, BOTH), durable=True) + outbound.seal(
        Publish(ACK, (PHONE.public_hex,)), durable=True
    )
    outbound.send(sealed)
    assert outbound.failed == 1
    assert (
        f"! send queue full; dropped input-ack {sealed[2].event.id[:8]} (kept in the outbox)"
        in [r.getMessage() for r in caplog.records]
    )


# --- the outbox ----------------------------------------------------------------------------


async def test_a_durable_row_leaves_once_every_relay_accepted(rig: Rig) -> None:
    await rig.queue()
    assert len(rig.pool.published) == 1
    assert await rig.outbox() == []


async def test_a_row_some_relay_lacks_stays_with_who_holds_it(rig: Rig) -> None:
    rig.pool.answers[RELAY_B] = PublishStatus.NOT_CONNECTED
    [item] = await rig.queue()
    assert await rig.outbox() == [(item.event.id, RELAY_A)]
    assert rig.outbound.published == 1  # delivered: one relay holds it


async def test_a_row_no_relay_took_stays_and_is_counted_failed(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "bridge.runtime.outbound")
    rig.pool.answers.update({RELAY_A: PublishStatus.TIMEOUT, RELAY_B: PublishStatus.REJECTED})
    [item] = await rig.queue()
    assert await rig.outbox() == [(item.event.id, "")]
    assert (rig.outbound.published, rig.outbound.failed) == (0, 1)
    assert f"- input-ack {item.event.id[:8]} not delivered (kept for retry)" in caplog.messages


@pytest.mark.parametrize(
    ("answer", "left"),
    [
        ((PublishStatus.REJECTED, "blocked: not allowed"), [RELAY_A]),
        ((PublishStatus.REJECTED, "replaced: have a newer event"), []),
        (PublishStatus.PENDING, [RELAY_A]),
    ],
    ids=["rejected", "replaced-counts-as-held", "pending"],
)
async def test_which_answers_count_as_holding_the_event(
    rig: Rig, answer: object, left: list[str]
) -> None:
    rig.pool.answers[RELAY_B] = answer  # type: ignore[assignment]
    [item] = await rig.queue()
    assert await rig.outbox() == [(item.event.id, relay) for relay in left]


async def test_retry_to_one_relay_resends_the_identical_event_it_lacks(rig: Rig) -> None:
    rig.pool.answers[RELAY_B] = PublishStatus.NOT_CONNECTED
    [lacking] = await rig.queue()
    rig.pool.answers[RELAY_B] = PublishStatus.ACCEPTED
    [complete] = await rig.queue(InputAckMessage(sessionId="s-1", inputId="in-2"))
    rig.pool.published.clear()

    assert await rig.outbound.retry_outbox(RELAY_A) == 0  # A holds everything
    await sent(rig.outbound)
    assert rig.pool.published == []

    assert await rig.outbound.retry_outbox(RELAY_B) == 1
    await sent(rig.outbound)
    assert rig.pool.published == [Published(lacking.event, (RELAY_B,))]
    assert rig.pool.published[0].event.to_json() == lacking.event.to_json()  # same id, same sig
    assert complete.event.id != lacking.event.id
    assert await rig.outbox() == []  # B took it: every relay holds it now


async def test_a_resend_to_a_silent_relay_does_not_hold_up_fresh_replies(rig: Rig) -> None:
    """The chaos run's 'silent relay': re-sends wait on it beside the queue, not in front."""
    rig.pool.answers[RELAY_B] = PublishStatus.NOT_CONNECTED
    [lacking] = await rig.queue()
    rig.pool.answers[RELAY_B] = PublishStatus.ACCEPTED
    silent = asyncio.Event()

    async def relay_b_never_answers_the_resend(event: Event) -> None:
        if event.id == lacking.event.id:
            await silent.wait()

    rig.pool.on_publish = relay_b_never_answers_the_resend
    assert await rig.outbound.retry_outbox(RELAY_B) == 1
    left = asyncio.Event()
    fresh = rig.outbound.seal(Publish(OUTPUT, (PHONE.public_hex,)), durable=False)
    rig.outbound.send(fresh, on_sent=left.set)
    async with asyncio.timeout(2):
        await left.wait()  # the fresh reply went out while the re-send still waits
    assert not silent.is_set() and await rig.outbox() == [(lacking.event.id, RELAY_A)]
    silent.set()
    await sent(rig.outbound)
    assert await rig.outbox() == []  # and the re-send still completes


async def test_periodic_retry_sends_each_row_to_the_relays_missing_it(rig: Rig) -> None:
    rig.pool.answers[RELAY_B] = PublishStatus.NOT_CONNECTED
    [only_a] = await rig.queue()
    rig.pool.answers[RELAY_A] = PublishStatus.NOT_CONNECTED
    [none] = await rig.queue()
    rig.pool.published.clear()
    rig.pool.answers[RELAY_A] = PublishStatus.ACCEPTED
    assert await rig.outbound.retry_outbox() == 2
    await sent(rig.outbound)
    assert rig.pool.published == [
        Published(only_a.event, (RELAY_B,)),
        Published(none.event, (RELAY_A, RELAY_B)),
    ]
    assert await rig.outbox() == [(only_a.event.id, RELAY_A), (none.event.id, RELAY_A)]


async def test_a_relay_that_opens_gets_what_it_lacks(rig: Rig) -> None:
    rig.pool.answers[RELAY_B] = PublishStatus.NOT_CONNECTED
    [item] = await rig.queue()
    rig.pool.published.clear()
    rig.pool.answers[RELAY_B] = PublishStatus.ACCEPTED
    rig.outbound.on_relay_open(RELAY_B)
    await sent(rig.outbound)  # the retry task runs in the outbound's work set
    await sent(rig.outbound)  # …and what it queued is sent
    assert rig.pool.published == [Published(item.event, (RELAY_B,))]
    assert await rig.outbox() == []


@pytest.mark.parametrize(
    ("age", "resent"),
    [(59, 0), (60, 1), (61, 1)],
    ids=["younger", "exactly-older-than", "older"],
)
async def test_periodic_retry_leaves_young_rows_alone(rig: Rig, age: int, resent: int) -> None:
    rig.pool.answers[RELAY_B] = PublishStatus.NOT_CONNECTED
    await rig.queue()
    rig.clock.advance(age)
    assert await rig.outbound.retry_outbox(older_than=60) == resent


@pytest.mark.parametrize(
    ("age", "resent", "left"),
    [(3599, 1, 1), (3600, 0, 0)],
    ids=["before-expiry", "at-expiry"],
)
async def test_expired_rows_are_pruned_not_resent(
    rig: Rig, age: int, resent: int, left: int
) -> None:
    rig.pool.answers[RELAY_B] = PublishStatus.NOT_CONNECTED
    await rig.queue()
    rig.pool.published.clear()
    rig.clock.advance(age)
    assert await rig.outbound.retry_outbox() == resent
    await sent(rig.outbound)
    assert len(rig.pool.published) == resent
    assert await rows(rig.db, "SELECT count(*) FROM outbox") == [(left,)]


async def test_an_unreadable_outbox_row_is_dropped(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    [good] = rig.outbound.seal(Publish(ACK, (PHONE.public_hex,)), durable=True)
    forged = good.event.to_json().replace(good.event.content, good.event.content[:-4] + "AAAA")
    await bridge_state.add_outbox(rig.db, "ee" * 32, "{not json", None, T)
    await bridge_state.add_outbox(rig.db, "ff" * 32, forged, None, T)
    assert await rig.outbound.retry_outbox() == 0
    assert await rig.outbox() == []
    assert rig.pool.published == []
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors == [
        "! outbox row eeeeeeee is not a valid event; dropped",
        "! outbox row ffffffff is not a valid event; dropped",
    ]


# --- on_sent -------------------------------------------------------------------------------


async def test_on_sent_fires_once_after_the_last_event_was_delivered(rig: Rig) -> None:
    calls: list[int] = []
    rig.pool.hold = asyncio.Event()
    sealed = rig.outbound.seal(Publish(OUTPUT, BOTH), durable=False)
    rig.outbound.send(sealed, on_sent=lambda: calls.append(len(rig.pool.published)))
    await rig.pool.wait_published(1)
    assert calls == []  # taken by the pool, not answered yet
    rig.pool.hold.set()
    await sent(rig.outbound)
    assert calls == [2]  # once, after the second (last) event


async def test_on_sent_never_fires_when_no_relay_took_it(rig: Rig) -> None:
    calls: list[str] = []
    rig.pool.answers.update({RELAY_A: PublishStatus.NOT_CONNECTED, RELAY_B: PublishStatus.TIMEOUT})
    rig.outbound.send(
        rig.outbound.seal(Publish(OUTPUT, (PHONE.public_hex,)), durable=False),
        on_sent=lambda: calls.append("sent"),
    )
    await sent(rig.outbound)
    assert len(rig.pool.published) == 1
    assert calls == []


# --- close ---------------------------------------------------------------------------------


async def test_close_sends_what_is_queued(db: BridgeDatabase) -> None:
    pool = FakePool()
    outbound = make_outbound(db, FakeClock())
    outbound.start(pool)  # type: ignore[arg-type]
    sealed = [
        outbound.seal(Publish(OUTPUT, (PHONE.public_hex,)), durable=False)[0] for _ in range(3)
    ]
    outbound.send(sealed)
    await outbound.close()
    assert pool.events() == [s.event for s in sealed]


async def test_close_gives_up_on_a_stuck_relay_after_its_timeout(
    db: BridgeDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(outbound_module, "PIPELINE_DEPTH", 2)
    pool = FakePool()
    pool.hold = asyncio.Event()  # never set: the relay never answers
    outbound = make_outbound(db, FakeClock())
    outbound.start(pool)  # type: ignore[arg-type]
    outbound.send(
        [outbound.seal(Publish(OUTPUT, (PHONE.public_hex,)), durable=False)[0] for _ in range(5)]
    )
    async with asyncio.timeout(2):
        await outbound.close(drain_timeout=0.05)
    # The first two were with the relay (a full pipeline); the rest were never sent.
    assert len(pool.published) == 2
    await outbound.close()  # idempotent


async def test_publishes_are_pipelined_in_order_up_to_the_depth(
    db: BridgeDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(outbound_module, "PIPELINE_DEPTH", 3)
    pool = FakePool()
    pool.hold = asyncio.Event()  # the relay takes the events but answers none yet
    outbound = make_outbound(db, FakeClock())
    outbound.start(pool)  # type: ignore[arg-type]
    sealed = outputs(outbound, range(1, 6))
    outbound.send(sealed)
    await pool.wait_published(3)
    await asyncio.sleep(0.05)
    assert len(pool.published) == 3  # three wait for their OK at once; the rest wait their turn
    pool.hold.set()
    await sent(outbound)
    assert [opened(e).seq for e in pool.events()] == [1, 2, 3, 4, 5]  # type: ignore[union-attr]
    assert outbound.published == 5
    await outbound.close()


# --- the created_at clock ------------------------------------------------------------------


async def test_created_at_survives_a_restart(db: BridgeDatabase) -> None:
    clock = FakeClock()
    first = make_outbound(db, clock)
    await first.load_clock()
    clock.advance(5)
    [beat] = first.seal(Publish(HEARTBEAT, (PHONE.public_hex,)), durable=False)
    assert beat.event.created_at == T + 5
    await first.save_clock()
    assert await rows(db, "SELECT value FROM kv WHERE key = 'publish.lastCreatedAt'") == [
        (str(T + 5),)
    ]

    restarted = make_outbound(db, FakeClock(NOW))  # the wall clock is behind the last event
    await restarted.load_clock()
    [ack] = restarted.seal(Publish(ACK, (PHONE.public_hex,)), durable=False)
    [again] = restarted.seal(Publish(HEARTBEAT, (PHONE.public_hex,)), durable=False)
    assert ack.event.created_at == T + 5  # never backwards
    assert again.event.created_at == T + 6  # a heartbeat is strictly newer than the stored one

    fresh = make_outbound(db, FakeClock(NOW))  # without load_clock: the wall clock only
    [plain] = fresh.seal(Publish(ACK, (PHONE.public_hex,)), durable=False)
    assert plain.event.created_at == T


async def test_rows_every_relay_took_leave_the_outbox_in_one_transaction(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[int] = []
    write = rig.db.write

    async def counted(statements: Sequence[Any]) -> None:
        writes.append(len(statements))
        await write(statements)

    monkeypatch.setattr(rig.db, "write", counted)
    sealed = rig.outbound.seal(Publish(ACK, BOTH), durable=True)
    await rig.db.write(rig.outbound.outbox_statements(sealed, T))
    writes.clear()
    rig.outbound.send(sealed)
    await sent(rig.outbound)
    assert await rig.outbox() == []
    assert writes == [2]  # both rows, one write


# --- backpressure --------------------------------------------------------------------------


async def test_room_waits_while_the_send_queue_is_too_full(
    db: BridgeDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(outbound_module, "PIPELINE_DEPTH", 1)
    monkeypatch.setattr(outbound_module, "HIGH_WATER", 3)
    monkeypatch.setattr(outbound_module, "LOW_WATER", 1)
    pool = FakePool()
    pool.hold = asyncio.Event()  # the relay takes events but answers none yet
    outbound = make_outbound(db, FakeClock())
    outbound.start(pool)  # type: ignore[arg-type]
    try:
        await outbound.room()  # empty: at once
        outbound.send(
            [
                outbound.seal(Publish(OUTPUT, (PHONE.public_hex,)), durable=False)[0]
                for _ in range(5)
            ]
        )
        room = asyncio.ensure_future(outbound.room())
        await asyncio.sleep(0.05)
        assert not room.done()  # the sender is behind: the engine loop would wait here
        pool.hold.set()
        async with asyncio.timeout(2):
            await room
    finally:
        await outbound.close()


async def test_room_gives_up_waiting_on_a_relay_that_never_answers(
    db: BridgeDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(outbound_module, "PIPELINE_DEPTH", 1)
    monkeypatch.setattr(outbound_module, "HIGH_WATER", 2)
    monkeypatch.setattr(outbound_module, "ROOM_WAIT", 0.05)
    pool = FakePool()
    pool.hold = asyncio.Event()  # never set
    outbound = make_outbound(db, FakeClock())
    outbound.start(pool)  # type: ignore[arg-type]
    try:
        outbound.send(
            [
                outbound.seal(Publish(OUTPUT, (PHONE.public_hex,)), durable=False)[0]
                for _ in range(4)
            ]
        )
        async with asyncio.timeout(2):
            await outbound.room()  # returns after ROOM_WAIT: a silent relay stalls nothing
    finally:
        await outbound.close(drain_timeout=0.05)
