"""The phone's commands through a real relay: event shape, stamping, pairing, test options."""

from __future__ import annotations

import asyncio
import time

import pytest

from bridge.nostr.event import expiration_of
from bridge.nostr.keys import Keypair
from bridge.nostr.nip44 import conversation_key, decrypt
from bridge.protocol.commands import (
    InputCommand,
    PairRequestCommand,
    RefreshSessionsCommand,
    SyncAckCommand,
)
from bridge.protocol.kinds import COMMAND_KIND
from bridge.protocol.messages import InputAckMessage, PairAckMessage
from tests.conftest import RelayFactory
from tests.support.fake_bridge import FakeBridge
from tests.support.phone import PhoneError, PhoneSimulator, PublishFailed
from tests.support.relay import LoopbackRelay

pytestmark = pytest.mark.timeout(60)

TOKEN = "0f" * 16


async def test_a_command_is_a_stamped_encrypted_4515_event(
    bridge: FakeBridge, phone: PhoneSimulator
) -> None:
    before = int(time.time())

    event = await phone.send(InputCommand(sessionId="s1", text="hello", inputId="i1"))

    assert event.kind == COMMAND_KIND
    assert event.pubkey == phone.pubkey
    assert before <= event.created_at <= int(time.time())
    assert [list(tag) for tag in event.tags] == [
        ["p", bridge.pubkey],
        ["expiration", str(event.created_at + 3600)],
    ]
    key = conversation_key(bridge.keypair.secret, bytes.fromhex(phone.pubkey))
    assert decrypt(event.content, key) == (
        '{"type":"input","sessionId":"s1","text":"hello","inputId":"i1",'
        '"v":10,"caps":["diff","chunked"]}'
    )
    [received] = await bridge.wait_command(InputCommand)
    assert received.event == event
    assert phone.sent[-1].event == event


async def test_stamping_is_configurable(relay: LoopbackRelay, bridge: FakeBridge) -> None:
    async with PhoneSimulator(
        bridge=bridge.pubkey, relays=[relay.url], caps=["chunked"], version=11
    ) as phone:
        await phone.send(RefreshSessionsCommand())
        await phone.send(RefreshSessionsCommand(v=9, caps=[]))
        await phone.send(RefreshSessionsCommand(), stamp=False)
    async with PhoneSimulator(bridge=bridge.pubkey, relays=[relay.url], caps=None) as bare:
        await bare.send(RefreshSessionsCommand())

    commands = [item.command for item in await bridge.wait_command(count=4)]

    assert [(c.v, c.caps) for c in commands] == [
        (11, ["chunked"]),
        (9, []),  # what the command already says wins
        (None, None),
        (10, None),
    ]


async def test_created_at_override_for_skewed_or_stale_commands(
    bridge: FakeBridge, phone: PhoneSimulator
) -> None:
    stale = int(time.time()) - 400

    event = await phone.send(RefreshSessionsCommand(), created_at=stale)

    assert event.created_at == stale
    assert expiration_of(event) == stale + 3600
    [received] = await bridge.wait_command(RefreshSessionsCommand)
    assert received.event.created_at == stale


async def test_a_replayed_event_is_the_same_event(
    bridge: FakeBridge, phone: PhoneSimulator
) -> None:
    event = await phone.send(RefreshSessionsCommand())

    report = await phone.publish_event(event)

    assert report.event_id == event.id
    assert [o.message for o in report.outcomes] == ["duplicate: already have this event"]
    await bridge.wait_command(RefreshSessionsCommand)
    await bridge.quiesce(0.2)
    assert len(bridge.commands) == 1  # the bridge's pool dropped the second copy


async def test_publishing_to_one_relay_only(relay_factory: RelayFactory) -> None:
    first, second = await relay_factory(), await relay_factory()
    bridge_keys = Keypair.generate()
    async with (
        FakeBridge([first.url], bridge_keys) as on_first,
        FakeBridge([second.url], bridge_keys) as on_second,
        PhoneSimulator(bridge=bridge_keys.npub, relays=[first.url, second.url]) as phone,
    ):
        event = await phone.send(RefreshSessionsCommand(), relays=[second.url])
        await on_second.wait_command(RefreshSessionsCommand)
        await phone.send(InputCommand(sessionId="s", text="x"))  # both relays
        await on_first.wait_command(InputCommand)

        assert on_second.commands[0].event.id == event.id
        assert [c.command.type for c in on_first.commands] == ["input"]


async def test_one_relay_publishing_works_offline_and_the_pool_does_not(
    relay: LoopbackRelay, bridge: FakeBridge
) -> None:
    phone = PhoneSimulator(bridge=bridge.npub, relays=[relay.url])

    with pytest.raises(PhoneError, match="phone is offline"):
        await phone.send(RefreshSessionsCommand())
    await phone.send(RefreshSessionsCommand(), relays=[relay.url])

    await bridge.wait_command(RefreshSessionsCommand)
    await phone.close()


async def test_garbage_payloads_reach_the_bridge_as_such(
    bridge: FakeBridge, phone: PhoneSimulator
) -> None:
    await phone.send_raw("definitely not json")
    await phone.send_raw('{"type":"input","sessionId":""}')
    await phone.send_raw("not even nip44", encrypted=False)

    rejected = await bridge.wait_until(
        lambda: bridge.rejected if len(bridge.rejected) == 3 else None, what="3 rejected events"
    )
    errors = sorted(item.error for item in rejected)
    assert errors[0].startswith("DecodeError: invalid JSON")
    assert errors[1] == (
        'DecodeError: schema mismatch for type "input": sessionId must not be empty'
    )
    assert errors[2].startswith("Nip44Error")


async def test_an_oversize_command_goes_as_fragments(
    bridge: FakeBridge, phone: PhoneSimulator
) -> None:
    command = InputCommand(sessionId="s1", text="é" * 60_000, inputId="big")
    with pytest.raises(PhoneError, match="use send_chunked"):
        await phone.send(command)

    events = await phone.send_chunked(command)

    assert len(events) == 3  # 120,000 bytes of text in envelopes of at most 40,896
    assert len({event.created_at for event in events}) == 1
    assert all(
        [list(t) for t in e.tags]
        == [["p", bridge.pubkey], ["expiration", str(e.created_at + 3600)]]
        for e in events
    )
    [received] = await bridge.wait_command(InputCommand)
    assert received.command == phone.stamp(command)


async def test_an_undelivered_command_raises_unless_told_otherwise(
    relay: LoopbackRelay, bridge: FakeBridge
) -> None:
    phone = PhoneSimulator(bridge=bridge.npub, relays=[relay.url])
    await phone.go_online()
    await relay.stop()

    with pytest.raises(PublishFailed, match="not delivered"):
        await phone.send(RefreshSessionsCommand(), timeout=0.5)
    event = await phone.send(RefreshSessionsCommand(), require_delivery=False, timeout=0.5)

    assert event.kind == COMMAND_KIND
    await phone.close()


async def test_request_waits_for_the_reply_after_the_command(
    bridge: FakeBridge, phone: PhoneSimulator
) -> None:
    async def answer() -> None:
        [inbound] = await bridge.wait_command(InputCommand)
        await bridge.publish(InputAckMessage(sessionId="s1", inputId="i7"), inbound.author)

    responder = asyncio.create_task(answer())
    reply = await phone.request(
        InputCommand(sessionId="s1", text="x", inputId="i7"),
        InputAckMessage,
        lambda m: m.inputId == "i7",
    )
    await responder

    assert reply.message == InputAckMessage(sessionId="s1", inputId="i7")


# --- pairing ------------------------------------------------------------------------------------


async def _answer_pairing(bridge: FakeBridge, ack: PairAckMessage) -> PairRequestCommand:
    [inbound] = await bridge.wait_command(PairRequestCommand)
    await bridge.publish(ack, inbound.author)  # to the event author, as the contract says
    return inbound.command


async def test_pairing_from_a_url(relay: LoopbackRelay, bridge: FakeBridge) -> None:
    phone = PhoneSimulator(label="Pixel 9")
    ack = PairAckMessage(
        machine="box", ok=True, relays=[relay.url, "wss://extra.example"], host="cli"
    )
    responder = asyncio.create_task(_answer_pairing(bridge, ack))

    reply = await phone.pair(bridge.pairing_url(TOKEN))
    request = await responder

    assert reply.message == ack
    assert request.npub == phone.npub
    assert request.pubkeyHex == phone.pubkey
    assert request.label == "Pixel 9"
    assert request.token == TOKEN
    assert (request.v, request.caps) == (10, ["diff", "chunked"])
    assert phone.bridge_pubkey == bridge.pubkey
    assert phone.relays == [relay.url, "wss://extra.example"]  # merged from the ack
    await phone.close()


async def test_a_refused_pairing_is_returned_not_raised(bridge: FakeBridge) -> None:
    phone = PhoneSimulator()
    ack = PairAckMessage(machine="box", ok=False, reason="bad-token")
    responder = asyncio.create_task(_answer_pairing(bridge, ack))

    reply = await phone.pair(bridge.pairing_url("wrong"), "Phone")
    await responder

    assert reply.message.ok is False
    assert reply.message.reason == "bad-token"
    assert phone.relays == [bridge.relays[0]]
    await phone.close()


async def test_pairing_without_an_answer_times_out(bridge: FakeBridge) -> None:
    phone = PhoneSimulator()

    with pytest.raises(TimeoutError, match="waiting for 1 x PairAckMessage"):
        await phone.pair(bridge.pairing_url(TOKEN), timeout=0.5)
    await phone.close()


async def test_pairing_with_another_bridge_while_online_is_refused(
    bridge: FakeBridge, phone: PhoneSimulator
) -> None:
    other = FakeBridge(bridge.relays)

    with pytest.raises(PhoneError, match="online with another bridge"):
        await phone.pair(other.pairing_url(TOKEN))


async def test_going_online_needs_a_bridge_and_relays(relay: LoopbackRelay) -> None:
    with pytest.raises(PhoneError, match="no bridge pubkey"):
        await PhoneSimulator(relays=[relay.url]).go_online()
    with pytest.raises(PhoneError, match="no relays"):
        await PhoneSimulator(bridge=Keypair.generate().npub).go_online()


# --- the phone's own traffic --------------------------------------------------------------------


async def test_the_outbox_retries_until_the_relay_is_back(
    relay: LoopbackRelay, bridge: FakeBridge, phone: PhoneSimulator
) -> None:
    await relay.stop()
    phone.enqueue(SyncAckCommand(syncId="sync-1", range=(1, 50)))
    await relay.start()  # same port: both pools reconnect and resubscribe

    [ack] = await bridge.wait_command(SyncAckCommand, timeout=20)

    assert ack.command.range == (1, 50)
    assert ack.command.v == 10
    sent = await phone.wait_until(lambda: phone.sent or None, what="the OK of the relay")
    assert [item.command for item in sent] == [ack.command]
    assert phone.undelivered == []


async def test_the_outbox_gives_up_after_its_retry_time(relay: LoopbackRelay) -> None:
    bridge_keys = Keypair.generate()
    phone = PhoneSimulator(bridge=bridge_keys.npub, relays=[relay.url], outbox_retry_seconds=0.3)
    await phone.go_online()
    await relay.stop()

    phone.enqueue(SyncAckCommand(syncId="sync-1", range=(1, 50)))
    await phone.go_offline(drain_timeout=5)

    assert phone.undelivered == [SyncAckCommand(syncId="sync-1", range=(1, 50))]
    assert phone.errors == []
    await phone.close()
