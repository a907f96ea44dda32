"""The phone's inbound pipeline without a relay: dedup, decrypt, reassemble, decode, checks."""

from __future__ import annotations

import random

from bridge.nostr.event import VerifiedEvent
from bridge.nostr.keys import Keypair
from bridge.nostr.nip44 import conversation_key, decrypt
from bridge.protocol.kinds import LIVE_KIND, RESPONSE_KIND
from bridge.protocol.messages import InputAckMessage, OutputMessage, SyncChunkMessage
from tests.phone.builders import make_chunk, make_entry, make_heartbeat
from tests.support.fake_bridge import FakeBridge
from tests.support.phone_inbound import Decoded, InboundDecoder, SeenIds
from tests.support.phone_state import InvalidPayload

PHONE = Keypair.generate()
ACK = InputAckMessage(sessionId="s1", inputId="i1")


def make_bridge() -> FakeBridge:
    # Never started: only its event building is used here.
    return FakeBridge(["ws://127.0.0.1:9"], machine="box")


def make_decoder(bridge: FakeBridge, **options: object) -> InboundDecoder:
    return InboundDecoder(PHONE, bridge.pubkey, **options)  # type: ignore[arg-type]


def big_chunk() -> SyncChunkMessage:
    text = "".join(random.Random(7).choice('abcdefé€😀\n"\\') for _ in range(4_000))
    chunk = make_chunk("s1", "sync-1", 1, 50)
    entries = [item.model_copy(update={"entry": make_entry(text)}) for item in chunk.entries]
    return chunk.model_copy(update={"entries": entries})


def test_a_message_decodes_with_its_event_metadata() -> None:
    bridge = make_bridge()
    [event] = bridge.build(ACK, PHONE.public_hex, created_at=1_000)

    result = make_decoder(bridge).feed(event, now=0.0)

    assert result == Decoded(ACK, (event.id,), RESPONSE_KIND, 1_000, ())


def test_a_second_copy_of_an_event_is_dropped() -> None:
    bridge = make_bridge()
    [event] = bridge.build(ACK, PHONE.public_hex)
    decoder = make_decoder(bridge)

    assert isinstance(decoder.feed(event, 0.0), Decoded)
    assert decoder.feed(event, 0.0) is None
    assert decoder.duplicates == 1


def test_ids_seen_before_a_restart_are_dropped() -> None:
    bridge = make_bridge()
    [event] = bridge.build(ACK, PHONE.public_hex)

    decoder = make_decoder(bridge, seen=[event.id])

    assert decoder.feed(event, 0.0) is None
    assert decoder.duplicates == 1


def test_events_of_another_author_are_ignored() -> None:
    stranger = make_bridge()
    [event] = stranger.build(ACK, PHONE.public_hex)
    decoder = make_decoder(make_bridge())

    assert decoder.feed(event, 0.0) is None
    assert decoder.foreign == 1


def test_content_that_is_not_nip44_is_recorded_as_invalid() -> None:
    bridge = make_bridge()
    event = bridge.build_raw("plain text", PHONE.public_hex, RESPONSE_KIND, [], encrypted=False)

    result = make_decoder(bridge).feed(event, 0.0)

    assert isinstance(result, InvalidPayload)
    assert (result.event_id, result.stage) == (event.id, "decrypt")


def test_encrypted_garbage_is_recorded_as_invalid() -> None:
    bridge = make_bridge()
    event = bridge.build_raw('{"type":"teleport"}', PHONE.public_hex, RESPONSE_KIND, [])

    result = make_decoder(bridge).feed(event, 0.0)

    assert result == InvalidPayload(
        event.id,
        RESPONSE_KIND,
        event.created_at,
        "decode",
        'schema mismatch for type "teleport": type unknown message type',
    )


def test_a_large_message_is_reassembled_from_its_fragments_in_any_order() -> None:
    bridge = make_bridge()
    message = big_chunk()
    events = bridge.build(message, PHONE.public_hex)
    assert len(events) >= 5
    decoder = make_decoder(bridge)
    shuffled = [*events[1:], events[0]]

    results = [decoder.feed(event, 0.0) for event in shuffled]

    assert results[:-1] == [None] * (len(events) - 1)
    final = results[-1]
    assert isinstance(final, Decoded)
    assert final.message == message
    assert final.event_ids == tuple(event.id for event in shuffled)
    assert final.violations == ()
    assert decoder.fragments == len(events)


def test_a_message_on_the_wrong_kind_is_a_contract_violation() -> None:
    bridge = make_bridge()
    tags = [["p", PHONE.public_hex]]
    event = bridge.build_raw(
        '{"type":"input-ack","sessionId":"s","inputId":"i"}', PHONE.public_hex, LIVE_KIND, tags
    )

    result = make_decoder(bridge).feed(event, 0.0)

    assert isinstance(result, Decoded)
    problems = [v.problem for v in result.violations]
    assert problems[0] == f"kind {LIVE_KIND}, expected {RESPONSE_KIND}"
    assert problems[1].startswith("tags [['p'")


def test_wrong_tags_are_a_contract_violation() -> None:
    bridge = make_bridge()
    output = OutputMessage(sessionId="s1", seq=3, entry=make_entry("x"))
    wrong = [["p", PHONE.public_hex], ["s", "s1"], ["seq", "4"]]
    event = bridge.build_raw(
        '{"type":"output","sessionId":"s1","seq":3,"entry":'
        '{"entryType":"text","content":"x","timestamp":"2026-01-01T00:00:00Z"}}',
        PHONE.public_hex,
        LIVE_KIND,
        wrong,
    )

    result = make_decoder(bridge).feed(event, 0.0)

    assert isinstance(result, Decoded)
    assert result.message == output
    [violation] = result.violations
    assert violation.message_type == "output"
    assert "['seq', '4']" in violation.problem and "['seq', '3']" in violation.problem


def test_fragments_with_different_created_at_are_a_contract_violation() -> None:
    bridge = make_bridge()
    events = bridge.build(big_chunk(), PHONE.public_hex, created_at=500)
    decoder = make_decoder(bridge)
    for event in events[:-1]:
        decoder.feed(event, 0.0)
    # The last fragment, re-signed one second later (with the right tags for that time).
    plaintext = _decrypt_for_phone(bridge, events[-1])
    late = bridge.build_raw(
        plaintext,
        PHONE.public_hex,
        RESPONSE_KIND,
        [["p", PHONE.public_hex], ["expiration", str(501 + 3600)]],
        created_at=501,
    )

    result = decoder.feed(late, 0.0)

    assert isinstance(result, Decoded)
    assert [v.problem for v in result.violations] == [
        "fragments have several created_at: [500, 501]"
    ]


def test_a_heartbeat_checks_its_d_tag() -> None:
    bridge = make_bridge()
    event = bridge.build_raw(
        '{"type":"sessions","machine":"box","sessions":[],"protocolVersion":10}',
        PHONE.public_hex,
        30515,
        [["p", PHONE.public_hex], ["d", "other"]],
    )

    result = make_decoder(bridge).feed(event, 0.0)

    assert isinstance(result, Decoded)
    assert result.message == make_heartbeat(host=None, capabilities=None)
    assert len(result.violations) == 1


def test_seen_ids_are_bounded() -> None:
    seen = SeenIds(3, ["a", "b", "c"])

    assert seen.add("d") is True
    assert "a" not in seen
    assert seen.add("b") is False  # refreshed: now the newest
    seen.add("e")
    assert seen.export() == ["d", "b", "e"]
    assert len(seen) == 3


def _decrypt_for_phone(bridge: FakeBridge, event: VerifiedEvent) -> str:
    key = conversation_key(PHONE.secret, bytes.fromhex(bridge.pubkey))
    return decrypt(event.content, key)
