"""Transcript sync from the phone's side, against a scripted bridge through a real relay."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from bridge.protocol import ranges
from bridge.protocol.commands import SyncAckCommand, SyncRequestCommand
from bridge.protocol.messages import (
    OutputMessage,
    SyncBeginMessage,
    SyncChunkMessage,
    SyncEndMessage,
)
from bridge.protocol.ranges import Range
from tests.phone.builders import make_chunk, make_entry
from tests.support.fake_bridge import FakeBridge
from tests.support.phone import PhoneError, PhoneSimulator
from tests.support.phone_sync import SyncResult

pytestmark = pytest.mark.timeout(60)

SESSION = "s1"


async def serve_sync(
    bridge: FakeBridge,
    phone: PhoneSimulator,
    seq_high: int,
    *,
    after: int,
    send: Sequence[Range] | None = None,
    delivered: Sequence[Range] | None = None,
) -> tuple[SyncRequestCommand, str, int]:
    """Answer the next sync-request like a bridge: begin, chunks of 50, end (all scripted).

    Returns the request, the sync id, and the position in ``bridge.commands`` just after the
    request (where to look for the next one: a re-request can arrive before this returns).
    """
    [inbound] = await bridge.wait_command(SyncRequestCommand, after=after)
    request = inbound.command
    position = bridge.commands.index(inbound) + 1
    missing = ranges.missing(request.haveRanges, 1, seq_high)
    sync_id = f"sync-{after}"
    await bridge.publish(
        SyncBeginMessage(sessionId=SESSION, syncId=sync_id, seqHigh=seq_high, ranges=missing),
        phone.pubkey,
    )
    for low, high in ranges.chunk_ranges(missing if send is None else send, 50):
        await bridge.publish(make_chunk(SESSION, sync_id, low, high), phone.pubkey)
    end = SyncEndMessage(
        sessionId=SESSION,
        syncId=sync_id,
        deliveredRanges=missing if delivered is None else list(delivered),
    )
    await bridge.publish(end, phone.pubkey)
    return request, sync_id, position


async def test_live_output_then_sync_fill_the_transcript_and_every_chunk_is_acked(
    bridge: FakeBridge, phone: PhoneSimulator
) -> None:
    for seq in (1, 2, 3):
        await bridge.publish(
            OutputMessage(sessionId=SESSION, seq=seq, entry=make_entry(f"line {seq}")), phone.pubkey
        )
    await phone.wait_for(OutputMessage, lambda m: m.seq == 3)

    await phone.sync(SESSION, wait=False)
    request, sync_id, _ = await serve_sync(bridge, phone, 120, after=0)
    result = await phone.wait_sync(SESSION)

    assert request.haveRanges == [(1, 3)]
    assert (request.v, request.caps) == (10, ["diff", "chunked"])
    acks = await bridge.wait_command(SyncAckCommand, count=3)
    assert [(a.command.syncId, a.command.range) for a in acks] == [
        (sync_id, (4, 53)),
        (sync_id, (54, 103)),
        (sync_id, (104, 120)),
    ]
    assert phone.acks_sent == [(sync_id, (4, 53)), (sync_id, (54, 103)), (sync_id, (104, 120))]
    assert result == SyncResult(
        session_id=SESSION,
        complete=True,
        seq_high=120,
        delivered=((4, 120),),
        missing=(),
        requests=1,
        sync_ids=(sync_id,),
    )
    assert phone.transcript(SESSION) == {seq: make_entry(f"line {seq}") for seq in range(1, 121)}
    assert phone.conflicts == [] and phone.violations == []


async def test_a_partial_delivery_is_re_requested_at_once(
    bridge: FakeBridge, phone: PhoneSimulator
) -> None:
    await phone.sync(SESSION, wait=False)
    # The bridge "loses" seqs 101-150 and says so in deliveredRanges.
    _, _, after = await serve_sync(
        bridge, phone, 150, after=0, send=[(1, 100)], delivered=[(1, 100)]
    )
    second, _, _ = await serve_sync(bridge, phone, 150, after=after)
    result = await phone.wait_sync(SESSION)

    assert second.haveRanges == [(1, 100)]
    assert result.complete is True
    assert (result.requests, result.delivered) == (2, ((1, 150),))
    assert sorted(phone.transcript(SESSION)) == list(range(1, 151))


async def test_deliveredranges_is_the_truth_even_when_the_entries_arrived(
    bridge: FakeBridge, phone: PhoneSimulator
) -> None:
    await phone.sync(SESSION, wait=False)
    # Every chunk arrives, but the bridge reports only the first as delivered (acks lost).
    _, _, after = await serve_sync(bridge, phone, 100, after=0, delivered=[(1, 50)])
    second, _, _ = await serve_sync(bridge, phone, 100, after=after)
    result = await phone.wait_sync(SESSION)

    assert second.haveRanges == [(1, 100)]  # what it holds, so nothing is sent twice
    assert result.complete is True
    assert result.requests == 2


async def test_re_requests_stop_after_three(bridge: FakeBridge, phone: PhoneSimulator) -> None:
    await phone.sync(SESSION, wait=False)
    after = 0
    for _ in range(4):
        _, _, after = await serve_sync(
            bridge, phone, 100, after=after, send=[(1, 50)], delivered=[(1, 50)]
        )
    result = await phone.wait_sync(SESSION)
    await bridge.quiesce(0.3)

    assert (result.complete, result.missing, result.requests) == (False, ((51, 100),), 4)
    assert len(bridge.received(SyncRequestCommand)) == 4


async def test_a_drop_hook_loses_chosen_acks(bridge: FakeBridge, phone: PhoneSimulator) -> None:
    phone.drop_ack = lambda chunk: chunk.range == (51, 100)

    await phone.sync(SESSION, wait=False)
    _, sync_id, _ = await serve_sync(bridge, phone, 150, after=0)
    await phone.wait_sync(SESSION)
    await bridge.wait_command(SyncAckCommand, count=2)
    await bridge.quiesce(0.3)

    assert phone.acks_dropped == [(sync_id, (51, 100))]
    acked = [a.command.range for a in bridge.received(SyncAckCommand)]
    assert acked == [(1, 50), (101, 150)]


async def test_a_seeded_drop_rate_is_reproducible(bridge: FakeBridge) -> None:
    runs: list[list[Range]] = []
    for _ in range(2):
        phone = PhoneSimulator(bridge=bridge.npub, relays=bridge.relays, ack_drop_rate=0.5, seed=4)
        await phone.go_online()
        after = len(bridge.commands)
        await phone.sync(SESSION, wait=False)
        await serve_sync(bridge, phone, 500, after=after)
        await phone.wait_for_count(SyncChunkMessage, 10)
        await phone.close()  # flushes the acks first
        assert len(phone.acks_sent) + len(phone.acks_dropped) == 10
        await bridge.wait_command(SyncAckCommand, after=after, count=len(phone.acks_sent))
        await bridge.quiesce(0.2)
        acked = [a.command.range for a in bridge.received(SyncAckCommand, after=after)]
        assert acked == [seq_range for _, seq_range in phone.acks_sent]
        runs.append([seq_range for _, seq_range in phone.acks_dropped])

    assert runs[0] == runs[1]
    assert 0 < len(runs[0]) < 10


async def test_a_newer_request_supersedes_the_older_one(
    bridge: FakeBridge, phone: PhoneSimulator
) -> None:
    await phone.sync(SESSION, wait=False)
    await phone.sync(SESSION, wait=False)  # asks again before the first one began
    first = await bridge.wait_command(SyncRequestCommand, count=2)
    assert len(first) == 2

    # The bridge answers the older request with a begin and no end, then the newer one fully.
    await bridge.publish(
        SyncBeginMessage(sessionId=SESSION, syncId="old", seqHigh=10, ranges=[(1, 10)]),
        phone.pubkey,
    )
    await bridge.publish(
        SyncBeginMessage(sessionId=SESSION, syncId="new", seqHigh=10, ranges=[(1, 10)]),
        phone.pubkey,
    )
    await bridge.publish(make_chunk(SESSION, "new", 1, 10), phone.pubkey)
    await bridge.publish(
        SyncEndMessage(sessionId=SESSION, syncId="new", deliveredRanges=[(1, 10)]), phone.pubkey
    )
    result = await phone.wait_sync(SESSION)

    assert result.complete and result.sync_ids == ("old", "new") and result.requests == 2


async def test_pruned_seqs_covered_by_a_chunk_are_not_asked_again(
    bridge: FakeBridge, phone: PhoneSimulator
) -> None:
    await phone.sync(SESSION, wait=False)
    [inbound] = await bridge.wait_command(SyncRequestCommand)
    assert inbound.command.haveRanges == []
    await bridge.publish(
        SyncBeginMessage(sessionId=SESSION, syncId="a", seqHigh=60, ranges=[(1, 60)]), phone.pubkey
    )
    # Seqs 1-40 were pruned by the bridge's retention: absent from the entries, covered by range.
    await bridge.publish(
        make_chunk(SESSION, "a", 1, 50, skip=frozenset(range(1, 41))), phone.pubkey
    )
    await bridge.publish(make_chunk(SESSION, "a", 51, 60), phone.pubkey)
    await bridge.publish(
        SyncEndMessage(sessionId=SESSION, syncId="a", deliveredRanges=[(1, 60)]), phone.pubkey
    )
    result = await phone.wait_sync(SESSION)

    assert result.complete
    assert sorted(phone.transcript(SESSION)) == list(range(41, 61))
    assert phone.have_ranges(SESSION) == [(1, 60)]


async def test_waiting_for_a_sync_never_started_is_an_error(phone: PhoneSimulator) -> None:
    with pytest.raises(PhoneError, match="no sync was started"):
        await phone.wait_sync("nope")
