"""The publish plan: kinds and tags per PROTOCOL-v10-wire.md §1.3, created_at, fragments, heartbeat."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.engine.publish import (
    HEARTBEAT_MAX_BYTES,
    HeartbeatTooLargeError,
    PlannedEvent,
    PublishPlanner,
    expires_at,
    fit_heartbeat,
    is_durable,
)
from bridge.protocol import (
    BRIDGE_TO_PHONE_TYPES,
    CHUNK_ENVELOPE_BUDGET,
    Assembler,
    BridgeToPhone,
    EncodeError,
    OutputEntry,
    OutputMessage,
    RemoteSessionInfo,
    SessionFailedMessage,
    SessionsMessage,
    SyncChunkEntry,
    SyncChunkMessage,
    decode_bridge_to_phone,
    encode,
)

PHONE_A = "0f" * 32
PHONE_B = "ab" * 32
MACHINE = "devbox"
CID = "00112233445566778899aabbccddeeff"
NOW = 1_700_000_000.75
SESSION = "3f1c2a9e-8b7d-4c6e-9f0a-1b2c3d4e5f60"

CORPUS = json.loads(
    (Path(__file__).parents[1] / "conformance" / "corpus.json").read_text(encoding="utf-8")
)
VALID = CORPUS["bridgeToPhone"]["valid"]


def size(text: str) -> int:
    return len(text.encode("utf-8"))


# --- the spec table, written out independently of bridge.protocol.kinds ----------------------------

LIVE = {"output", "usage", "gsd-state"}


def spec_kind(raw: dict[str, Any]) -> int:
    """§1.1: sessions → 30515; output/usage/gsd-state → 24515; every other message → 4516."""
    if raw["type"] == "sessions":
        return 30515
    return 24515 if raw["type"] in LIVE else 4516


def spec_tags(raw: dict[str, Any], phone: str, created_at: int, machine: str) -> list[list[str]]:
    """§1.3, row by row; the heartbeat's ``d`` carries the phone prefix (one stored per phone)."""
    kind = raw["type"]
    if kind == "sessions":
        return [["p", phone], ["d", f"{machine}#{phone[:16]}"]]
    if kind == "output":
        return [["p", phone], ["s", raw["sessionId"]], ["seq", str(raw["seq"])]]
    if kind in ("usage", "gsd-state"):
        return [["p", phone]]
    if kind in ("sync-begin", "sync-chunk", "sync-end"):
        return [["p", phone], ["s", raw["sessionId"]], ["expiration", str(created_at + 3600)]]
    return [["p", phone], ["expiration", str(created_at + 3600)]]


@pytest.mark.parametrize("raw", VALID, ids=[f"{i}-{m['type']}" for i, m in enumerate(VALID)])
def test_kind_and_tags_follow_the_spec_table(raw: dict[str, Any]) -> None:
    message = decode_bridge_to_phone(json.dumps(raw))
    machine = raw.get("machine") or MACHINE
    planner = PublishPlanner()
    [event] = planner.plan(message, (PHONE_A,), NOW, machine, CID)
    created_at = int(NOW)
    assert event == PlannedEvent(
        phone=PHONE_A,
        kind=spec_kind(raw),
        tags=spec_tags(raw, PHONE_A, created_at, machine),
        created_at=created_at,
        plaintext=encode(message),
    )
    assert decode_bridge_to_phone(event.plaintext) == message
    assert expires_at(event) == (created_at + 3600 if event.kind == 4516 else None)


def test_the_corpus_covers_every_message_type() -> None:
    assert {raw["type"] for raw in VALID} == set(BRIDGE_TO_PHONE_TYPES)
    assert len(BRIDGE_TO_PHONE_TYPES) == 25  # v10's 24 and the additive push-ack


def test_the_heartbeat_d_tag_is_the_machine_argument_per_phone() -> None:
    heartbeat = SessionsMessage(machine="devbox (cli)", sessions=[], protocolVersion=10)
    events = PublishPlanner().plan(heartbeat, (PHONE_A, PHONE_B), NOW, "devbox", CID)
    assert [e.tags for e in events] == [
        [["p", PHONE_A], ["d", f"devbox#{PHONE_A[:16]}"]],
        [["p", PHONE_B], ["d", f"devbox#{PHONE_B[:16]}"]],
    ]
    assert len({e.tags[1][1] for e in events}) == 2  # one stored heartbeat per phone


DURABLE = {
    "sessions": False,
    "output": False,
    "usage": False,
    "gsd-state": False,
    "sync-begin": False,
    "sync-chunk": False,
    "sync-end": False,
}


@pytest.mark.parametrize("message_type", sorted(BRIDGE_TO_PHONE_TYPES))
def test_is_durable_means_stored_and_not_sync(message_type: str) -> None:
    raw = next(m for m in VALID if m["type"] == message_type)
    message = decode_bridge_to_phone(json.dumps(raw))
    assert is_durable(message) is DURABLE.get(message_type, True)


# --- created_at ------------------------------------------------------------------------------------

# (now, expected created_at), in sequence on one planner.
CLOCK = [
    (1000.2, 1000),
    (1000.9, 1001),  # burst in one second: runs ahead
    (1000.99, 1002),
    (1001.5, 1003),
    (999.0, 1004),  # the clock went backwards
    (10.0, 1005),
    (1010.0, 1010),  # the wall clock caught up
    (1010.0, 1011),
]


def test_created_at_is_monotonic() -> None:
    planner = PublishPlanner()
    message = decode_bridge_to_phone(json.dumps(VALID[0]))
    for now, expected in CLOCK:
        events = planner.plan(message, (PHONE_A,), now, MACHINE, CID)
        assert [event.created_at for event in events] == [expected]
        assert planner.last_created_at == expected


def test_created_at_continues_from_a_persisted_value() -> None:
    planner = PublishPlanner(last_created_at=5000)
    assert planner.peek_created_at(1000.0) == 5000
    assert planner.peek_created_at(1000.0, heartbeat=True) == 5001
    assert planner.last_created_at == 5000  # peeking does not move the clock
    ack = SessionFailedMessage(pendingId="p", reason="no")
    assert planner.plan(ack, (PHONE_A,), 1000.0, MACHINE, CID)[0].created_at == 5000


def test_ordinary_messages_never_run_ahead_of_the_clock() -> None:
    planner = PublishPlanner()
    ack = SessionFailedMessage(pendingId="p", reason="no")
    stamps = [planner.plan(ack, (PHONE_A,), 1000.5, MACHINE, CID)[0].created_at for _ in range(500)]
    assert stamps == [1000] * 500  # a burst stays in its second


@given(st.lists(st.floats(min_value=0, max_value=4e9), min_size=1, max_size=40))
def test_created_at_never_goes_back_and_heartbeats_strictly_increase(nows: list[float]) -> None:
    planner = PublishPlanner()
    previous = previous_heartbeat = 0
    beat = SessionsMessage(machine=MACHINE, sessions=[], protocolVersion=10)
    for n, now in enumerate(nows):
        heartbeat = n % 3 == 0
        message = beat if heartbeat else SessionFailedMessage(pendingId="p", reason="")
        created_at = planner.peek_created_at(now, heartbeat=heartbeat)
        planner.plan(message, (PHONE_A,), now, MACHINE, CID)
        assert planner.last_created_at == created_at
        assert created_at >= previous and created_at >= int(now)
        if heartbeat:
            assert created_at > previous_heartbeat
            previous_heartbeat = created_at
        previous = created_at


@pytest.mark.parametrize("now", [float("nan"), float("inf"), -1.0])
def test_a_bad_clock_raises(now: float) -> None:
    planner = PublishPlanner()
    with pytest.raises(ValueError, match="now must be a finite, non-negative number"):
        planner.plan(SessionFailedMessage(pendingId="p", reason=""), (PHONE_A,), now, MACHINE, CID)
    assert planner.last_created_at == 0


def test_negative_persisted_clock_raises() -> None:
    with pytest.raises(ValueError, match="last_created_at"):
        PublishPlanner(last_created_at=-1)


# --- audience ----------------------------------------------------------------------------------------


def test_one_event_per_phone_with_one_created_at() -> None:
    planner = PublishPlanner()
    ack = SessionFailedMessage(pendingId="p", reason="no")
    events = planner.plan(ack, (PHONE_A, PHONE_B, PHONE_A), NOW, MACHINE, CID)
    assert [event.phone for event in events] == [PHONE_A, PHONE_B]
    assert [event.tags[0] for event in events] == [["p", PHONE_A], ["p", PHONE_B]]
    assert {event.created_at for event in events} == {int(NOW)}
    assert {event.plaintext for event in events} == {encode(ack)}


def test_an_empty_audience_plans_nothing_and_keeps_the_clock() -> None:
    planner = PublishPlanner()
    ack = SessionFailedMessage(pendingId="p", reason="no")
    assert planner.plan(ack, (), NOW, MACHINE, CID) == []
    assert planner.last_created_at == 0


@pytest.mark.parametrize("bad", ["AB" * 32, "ab" * 31, "npub1xyz", ""], ids=repr)
def test_a_malformed_recipient_plans_nothing(bad: str) -> None:
    planner = PublishPlanner()
    ack = SessionFailedMessage(pendingId="p", reason="no")
    with pytest.raises(ValueError, match="pubkey must be 64 lowercase hex characters"):
        planner.plan(ack, (PHONE_A, bad), NOW, MACHINE, CID)
    assert planner.last_created_at == 0


# --- egress validation ---------------------------------------------------------------------------------

ENTRY = OutputEntry(entryType="text", content="hi", timestamp="2026-03-01T12:00:00.000Z")

INVALID: dict[str, BridgeToPhone] = {
    "empty session id": OutputMessage.model_construct(sessionId="", seq=1, entry=ENTRY),
    "negative seq": OutputMessage.model_construct(sessionId=SESSION, seq=-1, entry=ENTRY),
    "heartbeat without a protocol version": SessionsMessage.model_construct(
        machine=MACHINE, sessions=[], protocolVersion=0
    ),
    "unknown input-failed reason": decode_bridge_to_phone(
        json.dumps({"type": "input-failed", "sessionId": SESSION, "reason": "error"})
    ).model_copy(update={"reason": "meltdown"}),
}


@pytest.mark.parametrize("message", list(INVALID.values()), ids=list(INVALID))
def test_egress_validation_refuses_an_invalid_message(message: BridgeToPhone) -> None:
    planner = PublishPlanner()
    with pytest.raises(EncodeError, match=r"^schema mismatch for type"):
        planner.plan(message, (PHONE_A,), NOW, MACHINE, CID)
    assert planner.last_created_at == 0


# --- fragments -----------------------------------------------------------------------------------------


def big_output(content_chars: int) -> OutputMessage:
    # Multibyte characters, escapes and astral characters, so byte and character counts differ.
    unit = 'x"\\\n€😀\u0001ab'
    content = (unit * (content_chars // len(unit) + 1))[:content_chars]
    entry = OutputEntry(entryType="tool_result", content=content, timestamp="2026-03-01T12:00:00Z")
    return OutputMessage(sessionId=SESSION, seq=42, entry=entry)


def fragments_of(events: list[PlannedEvent], phone: str) -> list[dict[str, Any]]:
    return [orjson.loads(event.plaintext) for event in events if event.phone == phone]


def test_a_200_kb_output_travels_in_fragments() -> None:
    message = big_output(85_000)
    text = encode(message)
    assert size(text) > 200_000
    planner = PublishPlanner()
    events = planner.plan(message, (PHONE_A, PHONE_B), NOW, MACHINE, CID)
    assert len({event.created_at for event in events}) == 1
    assert all(event.kind == 24515 for event in events)
    assert all(size(event.plaintext) <= CHUNK_ENVELOPE_BUDGET == 40_896 for event in events)
    for phone in (PHONE_A, PHONE_B):
        mine = [event for event in events if event.phone == phone]
        assert all(event.tags == [["p", phone]] for event in mine)  # no s, no seq
        assert all(expires_at(event) is None for event in mine)
        envelopes = fragments_of(events, phone)
        assert len(envelopes) >= 5
        assert [list(envelope) for envelope in envelopes] == [["type", "cid", "i", "n", "part"]] * (
            len(envelopes)
        )
        assert [envelope["i"] for envelope in envelopes] == list(range(len(envelopes)))
        assert {envelope["n"] for envelope in envelopes} == {len(envelopes)}
        assert {envelope["cid"] for envelope in envelopes} == {CID}
        assert "".join(envelope["part"] for envelope in envelopes) == text
        # And the phone side of the contract puts it back together.
        assembler = Assembler()
        joined = [assembler.feed(event.plaintext, 0.0, "bridge") for event in mine]
        assert joined[:-1] == [None] * (len(mine) - 1)
        assert joined[-1] is not None
        assert decode_bridge_to_phone(joined[-1]) == message
    # Phone-major order: all of A's fragments, then all of B's.
    assert [event.phone for event in events] == [PHONE_A] * (len(events) // 2) + [PHONE_B] * (
        len(events) // 2
    )


def test_a_stored_message_fragments_keep_kind_4516_and_expiration() -> None:
    entries = [
        SyncChunkEntry(seq=seq, entry=big_output(2_000).entry) for seq in range(1, 51)
    ]  # 50 entries of ~3.5 KB: a sync-chunk over the threshold (§8 last rule)
    message = SyncChunkMessage(sessionId=SESSION, syncId="s1", range=(1, 50), entries=entries)
    assert size(encode(message)) > 40_960
    events = PublishPlanner().plan(message, (PHONE_A,), NOW, MACHINE, CID)
    created_at = int(NOW)
    assert len(events) > 1
    for event in events:
        assert event.kind == 4516
        assert event.tags == [["p", PHONE_A], ["expiration", str(created_at + 3600)]]
        assert expires_at(event) == created_at + 3600
    assert "".join(e["part"] for e in fragments_of(events, PHONE_A)) == encode(message)


def padded_failure(total_bytes: int) -> SessionFailedMessage:
    base = size(encode(SessionFailedMessage(pendingId="p", reason="")))
    return SessionFailedMessage(pendingId="p", reason="r" * (total_bytes - base))


@pytest.mark.parametrize(("total", "fragmented"), [(40_960, False), (40_961, True)])
def test_the_fragment_threshold_is_40960_bytes(total: int, fragmented: bool) -> None:
    message = padded_failure(total)
    assert size(encode(message)) == total
    events = PublishPlanner().plan(message, (PHONE_A,), NOW, MACHINE, CID)
    assert (len(events) > 1) is fragmented
    if not fragmented:
        assert events[0].plaintext == encode(message)


def test_fragmenting_needs_a_usable_cid() -> None:
    planner = PublishPlanner()
    with pytest.raises(ValueError, match="cid must not be empty"):
        planner.plan(padded_failure(50_000), (PHONE_A,), NOW, MACHINE, "")
    assert planner.last_created_at == 0
    # A message that fits does not use the cid at all.
    assert len(planner.plan(padded_failure(100), (PHONE_A,), NOW, MACHINE, "")) == 1


# --- the heartbeat is trimmed, never fragmented --------------------------------------------------------


def session_info(index: int, title_chars: int = 40) -> RemoteSessionInfo:
    session_id = f"{index:08x}-8b7d-4c6e-9f0a-1b2c3d4e5f60"
    return RemoteSessionInfo(
        id=session_id,
        slug=session_id[:8],
        cwd=f"/home/dev/project-{index}",
        lastActivity="2026-03-01T12:00:00.000Z",
        lineCount=index,
        title="t" * title_chars,
        project=f"project-{index}",
        state="idle",
        seqHigh=index,
    )


def heartbeat(
    sessions: int = 3, folders: int = 0, tombstones: int = 0, title_chars: int = 40
) -> SessionsMessage:
    return SessionsMessage(
        machine=MACHINE,
        host="cli",
        sessions=[session_info(i, title_chars) for i in range(sessions)],
        protocolVersion=10,
        capabilities=["sync-v1", "chunked"],
        folders=[f"apps/some-rather-long-folder-name-{i:04d}" for i in range(folders)] or None,
        roots=["/home/dev"],
        removedSessions=[f"{i:08x}-dead-4c6e-9f0a-1b2c3d4e5f60" for i in range(tombstones)] or None,
    )


def test_a_heartbeat_that_fits_is_left_alone() -> None:
    message = heartbeat(folders=200, tombstones=100)
    assert size(encode(message)) <= HEARTBEAT_MAX_BYTES
    assert fit_heartbeat(message) is message


def test_a_huge_heartbeat_is_trimmed_not_fragmented() -> None:
    message = heartbeat(sessions=60, folders=200, tombstones=100, title_chars=300)
    assert size(encode(message)) > HEARTBEAT_MAX_BYTES
    planner = PublishPlanner()
    events = planner.plan(message, (PHONE_A, PHONE_B), NOW, MACHINE, CID)
    assert len(events) == 2  # one event per phone, no fragments
    for event, phone in zip(events, (PHONE_A, PHONE_B), strict=True):
        assert event.kind == 30515
        assert event.tags == [["p", phone], ["d", f"{MACHINE}#{phone[:16]}"]]
        assert size(event.plaintext) <= HEARTBEAT_MAX_BYTES
        sent = decode_bridge_to_phone(event.plaintext)
        assert isinstance(sent, SessionsMessage)
        assert sent.folders is None  # dropped first
        assert sent.removedSessions == message.removedSessions  # this was enough
        assert sent.sessions == message.sessions
        assert sent.roots == message.roots


def test_the_oldest_tombstones_go_next_and_no_more_than_needed() -> None:
    message = heartbeat(sessions=2, folders=50, tombstones=100)
    without_folders = size(encode(message.model_copy(update={"folders": None})))
    tombstone_bytes = len('"00000000-dead-4c6e-9f0a-1b2c3d4e5f60",')
    limit = without_folders - 10 * tombstone_bytes - 5  # 10 do not quite suffice: 11 go
    fitted = fit_heartbeat(message, limit)
    assert size(encode(fitted)) <= limit
    assert fitted.folders is None
    assert message.removedSessions is not None
    assert fitted.removedSessions == message.removedSessions[11:]  # the newest are kept
    one_more = fitted.model_copy(update={"removedSessions": message.removedSessions[10:]})
    assert size(encode(one_more)) > limit


def test_when_every_tombstone_goes_the_field_is_absent() -> None:
    message = heartbeat(sessions=2, tombstones=5)
    bare = message.model_copy(update={"removedSessions": None})
    fitted = fit_heartbeat(message, size(encode(bare)))
    assert fitted.removedSessions is None
    assert '"removedSessions"' not in encode(fitted)


def test_a_heartbeat_too_large_even_when_bare_is_an_error() -> None:
    message = heartbeat(sessions=200, folders=10, tombstones=10, title_chars=300)
    planner = PublishPlanner()
    with pytest.raises(HeartbeatTooLargeError) as caught:
        planner.plan(message, (PHONE_A,), NOW, MACHINE, CID)
    text = str(caught.value)
    assert text.startswith("heartbeat of 200 sessions is ")
    assert text.endswith(
        "bytes without folders and tombstones, over the 40960-byte limit of one event"
    )
    assert "ttt" not in text and "project-" not in text  # sizes and counts, never contents
    assert planner.last_created_at == 0


def test_a_heartbeat_with_nothing_to_trim_is_an_error() -> None:
    message = heartbeat(sessions=2)
    with pytest.raises(HeartbeatTooLargeError, match=r"^heartbeat of 2 sessions is "):
        fit_heartbeat(message, 100)


def test_a_message_encoded_by_the_caller_is_sent_as_given() -> None:
    """``text``: a sync chunk spliced from stored lines; the message gives the kind and tags."""
    stub = SyncChunkMessage(sessionId="s-1", syncId="y", range=[1, 2], entries=[])
    text = '{"type":"sync-chunk","sessionId":"s-1","syncId":"y","range":[1,2],"entries":[]}'
    [event] = PublishPlanner().plan(stub, (PHONE_A,), NOW, MACHINE, CID, text=text)
    assert (event.kind, event.plaintext) == (4516, text)
    assert ["s", "s-1"] in event.tags
    big = text[:-2] + "x" * 50_000 + "]}"
    assert len(PublishPlanner().plan(stub, (PHONE_A,), NOW, MACHINE, CID, text=big)) > 1


def test_a_heartbeat_is_never_taken_encoded() -> None:
    beat = SessionsMessage(machine=MACHINE, sessions=[], protocolVersion=10)
    with pytest.raises(ValueError, match="heartbeat"):
        PublishPlanner().plan(beat, (PHONE_A,), NOW, MACHINE, CID, text="{}")
