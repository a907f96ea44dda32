"""What the phone does with the bridge's events, through a real relay."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.nostr.keys import Keypair
from bridge.protocol.kinds import LIVE_KIND, RESPONSE_KIND
from bridge.protocol.messages import (
    InputAckMessage,
    OutputMessage,
    SessionsMessage,
    SyncChunkMessage,
    UsageMessage,
)
from bridge.protocol.shared import UsageData
from tests.conftest import RelayFactory
from tests.phone.builders import make_chunk, make_entry, make_heartbeat, make_session
from tests.support.fake_bridge import FakeBridge
from tests.support.phone import PhoneSimulator
from tests.support.phone_store import PhoneStateError
from tests.support.relay import LoopbackRelay

pytestmark = pytest.mark.timeout(60)


async def test_a_heartbeat_sequence_merges_per_bug_b(
    bridge: FakeBridge, phone: PhoneSimulator
) -> None:
    steps = [
        make_heartbeat("a", "b", "c", folders=["app"], roots=["/w"]),
        make_heartbeat("b", "c"),  # a goes stale
        make_heartbeat("b", "c", removedSessions=["c"]),  # c is deleted
        make_heartbeat(make_session("b", state="offline"), machineOffline=True),
    ]
    seen: list[tuple[set[str], set[str], bool | None]] = []
    for step in steps:
        mark = phone.mark()
        await bridge.publish(step, phone.pubkey)
        await phone.wait_for(SessionsMessage, after=mark)
        views = phone.sessions
        seen.append(
            (
                {sid for sid, v in views.items() if not v.stale},
                {s for s, v in views.items() if v.stale},
                phone.machine.online,
            )
        )

    assert seen == [
        ({"a", "b", "c"}, set(), True),
        ({"b", "c"}, {"a"}, True),
        ({"b"}, {"a"}, True),
        ({"b"}, {"a"}, False),  # offline keeps the sessions
    ]
    assert phone.sessions["b"].state == "offline"
    assert phone.machine.tombstones == ["c"]
    assert phone.machine.folders is None
    assert phone.violations == []


async def test_live_output_fills_the_transcript_and_a_conflict_is_counted(
    bridge: FakeBridge, phone: PhoneSimulator
) -> None:
    for seq in (1, 2, 3):
        await bridge.publish(
            OutputMessage(sessionId="s1", seq=seq, entry=make_entry(f"line {seq}")), phone.pubkey
        )
    await phone.wait_for(OutputMessage, lambda m: m.seq == 3)

    # A chunk that repeats seq 3 identically and rewrites seq 2: one duplicate, one conflict.
    chunk = make_chunk("s1", "sync-x", 2, 4).model_copy(
        update={
            "entries": [
                *make_chunk("s1", "sync-x", 3, 4).entries,
                make_chunk("s1", "sync-x", 2, 2)
                .entries[0]
                .model_copy(update={"entry": make_entry("rewritten")}),
            ]
        }
    )
    await bridge.publish(chunk, phone.pubkey)
    await phone.wait_for(SyncChunkMessage)

    assert phone.transcript("s1") == {seq: make_entry(f"line {seq}") for seq in (1, 2, 3, 4)}
    [conflict] = phone.conflicts
    assert (conflict.seq, conflict.rejected.content, conflict.source) == (2, "rewritten", "sync")
    assert phone.transcripts.duplicates == 1
    assert phone.violations == []


async def test_a_200_kb_message_arrives_in_fragments_and_is_reassembled(
    bridge: FakeBridge, phone: PhoneSimulator
) -> None:
    chunk = make_chunk("s1", "sync-1", 1, 50)
    big = chunk.model_copy(
        update={
            "entries": [
                item.model_copy(update={"entry": make_entry(f"{item.seq}:" + "x€" * 1_400)})
                for item in chunk.entries
            ]
        }
    )
    live = OutputMessage(sessionId="s2", seq=1, entry=make_entry("y" * 200_000))

    stored_events = await bridge.publish(big, phone.pubkey)
    live_events = await bridge.publish(live, phone.pubkey)

    got = await phone.wait_for(SyncChunkMessage)
    got_live = await phone.wait_for(OutputMessage)
    assert len(stored_events) >= 5 and len(live_events) >= 5
    assert got.message == big
    assert got.event_ids == tuple(event.id for event in stored_events)
    assert (got.kind, got_live.kind) == (RESPONSE_KIND, LIVE_KIND)
    assert got_live.message == live
    assert phone.transcript("s1")[50] == big.entries[49].entry
    assert phone.fragments == len(stored_events) + len(live_events)
    assert phone.violations == []


async def test_the_same_event_through_two_relays_counts_once(relay_factory: RelayFactory) -> None:
    first, second = await relay_factory(), await relay_factory()
    urls = [first.url, second.url]
    async with (
        FakeBridge(urls) as bridge,
        PhoneSimulator(bridge=bridge.npub, relays=urls) as phone,
    ):
        await phone.go_online(every_relay=True)
        [event] = await bridge.publish(InputAckMessage(sessionId="s", inputId="i1"), phone.pubkey)
        await phone.wait_for(InputAckMessage)
        await phone.quiesce(0.3)

        assert phone.count(InputAckMessage) == 1

        # Offline and back: both relays replay it (since = lastStoredSeen - 60); still once.
        await phone.go_offline()
        await phone.go_online(every_relay=True)

        assert phone.duplicates >= 1
        assert phone.count(InputAckMessage) == 1
        assert phone.last_stored_seen == event.created_at


async def test_garbage_from_the_bridge_is_recorded_never_raised(
    bridge: FakeBridge, phone: PhoneSimulator
) -> None:
    tags = [["p", phone.pubkey], ["expiration", "9999999999"]]
    events = [
        bridge.build_raw("not nip44 at all", phone.pubkey, RESPONSE_KIND, tags, encrypted=False),
        bridge.build_raw("{not json", phone.pubkey, RESPONSE_KIND, tags),
        bridge.build_raw('{"type":"input-ack","sessionId":"s"}', phone.pubkey, RESPONSE_KIND, tags),
        bridge.build_raw(
            '{"type":"chunk","cid":"c","i":5,"n":2,"part":"x"}', phone.pubkey, RESPONSE_KIND, tags
        ),
    ]
    for event in events:
        await bridge.publish_event(event)
    await bridge.publish(InputAckMessage(sessionId="s", inputId="after"), phone.pubkey)

    await phone.wait_for(InputAckMessage)
    await phone.wait_until(lambda: len(phone.invalid) == 4 or None, what="4 invalid payloads")

    assert [(item.event_id, item.stage) for item in phone.invalid] == [
        (events[0].id, "decrypt"),
        (events[1].id, "decode"),
        (events[2].id, "decode"),
        (events[3].id, "decode"),
    ]
    assert phone.invalid[2].error == 'schema mismatch for type "input-ack": inputId is required'
    assert phone.errors == []


async def test_a_message_on_the_wrong_kind_is_flagged(
    bridge: FakeBridge, phone: PhoneSimulator
) -> None:
    usage = UsageMessage(
        sessionId="s", usage=UsageData(available=False, subscriptionType=None, fetchedAt="t")
    )
    [event] = bridge.build(usage, phone.pubkey)
    wrong = bridge.build_raw(
        '{"type":"usage","sessionId":"s","usage":{"available":false,"subscriptionType":null,"fetchedAt":"t"}}',
        phone.pubkey,
        RESPONSE_KIND,
        [["p", phone.pubkey], ["expiration", str(event.created_at + 3600)]],
    )

    await bridge.publish_event(event)
    await bridge.publish_event(wrong)
    await phone.wait_for_count(UsageMessage, 2)

    # Two rules broken by the same event: its kind, and the expiration tag a 24515 never has.
    assert [(v.event_id, v.kind, v.message_type) for v in phone.violations] == [
        (wrong.id, RESPONSE_KIND, "usage")
    ] * 2
    assert phone.violations[0].problem == f"kind {RESPONSE_KIND}, expected {LIVE_KIND}"
    assert phone.violations[1].problem.startswith("tags [['p', ")


async def test_offline_phone_gets_stored_responses_but_not_live_ones(
    bridge: FakeBridge, phone: PhoneSimulator
) -> None:
    [first] = await bridge.publish(InputAckMessage(sessionId="s", inputId="before"), phone.pubkey)
    await phone.wait_for(InputAckMessage)
    await phone.go_offline()
    assert phone.last_stored_seen == first.created_at

    await bridge.publish(InputAckMessage(sessionId="s", inputId="while-offline"), phone.pubkey)
    await bridge.publish(OutputMessage(sessionId="s", seq=1, entry=make_entry("x")), phone.pubkey)
    await bridge.publish(make_heartbeat("s"), phone.pubkey)
    filters = phone.subscription_filters()
    await phone.go_online()  # returns after EOSE: the stored backlog is in

    assert filters["phone-responses"][0].since == first.created_at - 60
    assert [m.message.inputId for m in phone.messages(InputAckMessage)] == [
        "before",
        "while-offline",
    ]
    assert phone.count(SessionsMessage) == 1  # the relay keeps the current heartbeat
    assert phone.count(OutputMessage) == 0  # ephemeral: gone; sync recovers it
    assert phone.last_stored_seen > first.created_at


async def test_wait_for_fails_with_a_summary_instead_of_hanging(
    bridge: FakeBridge, phone: PhoneSimulator
) -> None:
    await bridge.publish(make_heartbeat("a"), phone.pubkey)
    await phone.wait_for("sessions")

    with pytest.raises(TimeoutError, match=r"'input-ack'.*received \{'sessions': 1\}"):
        await phone.wait_for("input-ack", timeout=0.3)


async def test_state_survives_a_phone_restart(
    tmp_path: Path, relay: LoopbackRelay, bridge: FakeBridge
) -> None:
    state = tmp_path / "phone.json"
    phone = PhoneSimulator(bridge=bridge.npub, relays=[relay.url], state_path=state)
    await phone.go_online()
    await bridge.publish(make_heartbeat("a", "b"), phone.pubkey)
    await bridge.publish(make_heartbeat("b"), phone.pubkey)
    await bridge.publish(OutputMessage(sessionId="b", seq=1, entry=make_entry("one")), phone.pubkey)
    await bridge.publish(InputAckMessage(sessionId="b", inputId="i1"), phone.pubkey)
    await phone.wait_for(InputAckMessage)
    await phone.wait_for(OutputMessage)
    await phone.wait_until(lambda: phone.machine.heartbeats == 2 or None, what="2 heartbeats")
    await phone.close()
    assert state.stat().st_mode & 0o777 == 0o600

    again = PhoneSimulator(state_path=state)

    assert again.pubkey == phone.pubkey
    assert again.bridge_pubkey == bridge.pubkey
    assert again.relays == [relay.url]
    assert again.sessions == phone.sessions and again.sessions["a"].stale
    assert again.transcript("b") == {1: make_entry("one")}
    assert again.last_stored_seen == phone.last_stored_seen
    assert [r.message for r in again.received] == [r.message for r in phone.received]
    assert all(r.restored for r in again.received)
    await again.go_online()  # the relay replays the ack: recognised, not counted again
    assert again.duplicates >= 1
    assert again.count(InputAckMessage) == 1
    await again.close()


async def test_a_broken_state_file_is_an_error_not_a_new_phone(tmp_path: Path) -> None:
    state = tmp_path / "phone.json"
    state.write_text("{oops")
    with pytest.raises(PhoneStateError, match="is not valid JSON"):
        PhoneSimulator(state_path=state)

    state.write_text('{"format": 1, "secretKey": "00"}')
    with pytest.raises(PhoneStateError, match="phone state is malformed"):
        PhoneSimulator(state_path=state)

    state.write_text('{"format": 99}')
    with pytest.raises(PhoneStateError, match="has format 99, expected 1"):
        PhoneSimulator(state_path=state)


async def test_a_state_file_belongs_to_one_identity(tmp_path: Path) -> None:
    state = tmp_path / "phone.json"
    phone = PhoneSimulator(bridge=Keypair.generate().npub, state_path=state)
    phone.save()

    with pytest.raises(PhoneStateError, match="keypair given differs") as caught:
        PhoneSimulator(state_path=state, keypair=Keypair.generate())
    assert phone.keypair.secret_hex not in str(caught.value)
    assert PhoneSimulator(state_path=state, keypair=phone.keypair).pubkey == phone.pubkey
