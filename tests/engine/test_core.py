"""The engine end to end, sans I/O: real crypto and codec, a fake clock, exact effect lists."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import orjson
import pytest

from bridge.engine.core import Engine, EngineConfig, EngineState
from bridge.engine.effects import (
    AddInbox,
    AddTombstone,
    AdvanceCursor,
    AppendTranscript,
    CloseRunner,
    Commit,
    CreateFolder,
    DeleteSession,
    DeleteTranscript,
    Dropped,
    Effect,
    InterruptRunner,
    MarkProcessed,
    Notify,
    PairedPhone,
    Publish,
    Resubscribe,
    SavePhone,
    SaveSession,
    SendSyncChunk,
    SendToRunner,
    SetRunnerOption,
    StartRunner,
)
from bridge.engine.ingest import MAX_COMMAND_AGE_SECONDS
from bridge.engine.inputs import (
    AgentEnded,
    AgentEntry,
    AgentFailed,
    AgentOptionSet,
    AgentReady,
    CommandEventReceived,
    FolderCreated,
    PairingWindowRequested,
    PhonePairedManually,
    PhoneUnpaired,
)
from bridge.engine.sessions.rules import PENDING_STATE
from bridge.nostr.event import sign_event
from bridge.nostr.keys import Keypair
from bridge.nostr.nip44 import ConversationKeyCache, conversation_key, decrypt, encrypt
from bridge.protocol import (
    CloseSessionCommand,
    CreateFolderCommand,
    CreateSessionCommand,
    EffortCommand,
    InputCommand,
    InterruptCommand,
    ModeCommand,
    OutputEntry,
    PairRequestCommand,
    PhoneToBridge,
    RefreshSessionsCommand,
    SyncAckCommand,
    SyncRequestCommand,
    encode,
)
from bridge.protocol.kinds import command_tags

BRIDGE = Keypair.from_secret("11" * 32)
PHONE = Keypair.from_secret("22" * 32)
STRANGER = Keypair.from_secret("33" * 32)
NOW = 1_800_000_000.0
ROOT = "/ws"


def ids() -> Iterator[str]:
    for n in itertools.count(1):
        yield f"id-{n:04d}"


def make_engine(
    *, phones: tuple[Keypair, ...] = (PHONE,), now: float = NOW, **state: object
) -> Engine:
    keys = ConversationKeyCache(BRIDGE.secret)
    counter = ids()
    paired = [
        PairedPhone(p.public_hex, p.npub, f"phone-{i}", "2026-01-01T00:00:00.000Z")
        for i, p in enumerate(phones)
    ]
    return Engine(
        EngineConfig(
            bridge_pubkey=BRIDGE.public_hex,
            machine="box",
            relays=("ws://127.0.0.1:7777",),
            roots=(ROOT,),
        ),
        EngineState(phones=paired, **state),  # type: ignore[arg-type]
        decrypt=lambda author, payload: decrypt(payload, keys.get(author)),
        new_id=lambda: next(counter),
        now=now,
    )


def command_event(
    message: PhoneToBridge | str,
    *,
    author: Keypair = PHONE,
    created_at: float = NOW,
    to: str = BRIDGE.public_hex,
) -> CommandEventReceived:
    text = message if isinstance(message, str) else encode(message)
    key = conversation_key(author.secret, bytes.fromhex(BRIDGE.public_hex))
    tags = command_tags(to, int(created_at))
    event = sign_event(author, 4515, encrypt(text, key), tags, created_at=int(created_at))
    return CommandEventReceived(event)


def published(effects: list[Effect]) -> list[tuple[str, tuple[str, ...]]]:
    out = []
    for effect in effects:
        if isinstance(effect, Commit):
            out += [(p.message.type, p.audience) for p in effect.outbox]
        elif isinstance(effect, Publish):
            out.append((effect.message.type, effect.audience))
    return out


def commit_ops(effects: list[Effect]) -> list[type]:
    return [type(op) for e in effects if isinstance(e, Commit) for op in e.ops]


def ready_session(engine: Engine, now: float = NOW) -> str:
    effects = engine.handle(command_event(CreateSessionCommand(), created_at=now), now)
    start = next(e for e in effects if isinstance(e, StartRunner))
    engine.handle(AgentReady(start.record.session_id, "sdk-1", "m", ROOT), now)
    return start.record.session_id


# --- ingest --------------------------------------------------------------------------------


def test_command_from_an_unpaired_author_is_dropped_without_state() -> None:
    engine = make_engine()
    effects = engine.handle(command_event(RefreshSessionsCommand(), author=STRANGER), NOW)
    assert [type(e) for e in effects] == [Dropped]
    assert not engine.admission.ingest.seen(effects[0].event_id or "")


def test_duplicate_is_a_no_op() -> None:
    engine = make_engine()
    event = command_event(RefreshSessionsCommand())
    first = engine.handle(event, NOW)
    assert MarkProcessed in commit_ops(first)
    second = engine.handle(event, NOW + 1)
    assert [type(e) for e in second] == [Dropped]
    assert "duplicate" in second[0].reason  # type: ignore[union-attr]


def test_processed_ids_loaded_at_boot_stop_a_replay() -> None:
    event = command_event(RefreshSessionsCommand())
    engine = make_engine(processed={event.event.id: int(NOW)})
    assert [type(e) for e in engine.handle(event, NOW)] == [Dropped]


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ("{not json", "invalid payload"),
        ('{"type":"teleport"}', "invalid payload"),
        ('{"type":"input","text":"no session id"}', "invalid payload"),
    ],
)
def test_garbage_is_marked_processed_and_dropped(payload: str, reason: str) -> None:
    engine = make_engine()
    effects = engine.handle(command_event(payload), NOW)
    assert [type(e) for e in effects] == [Commit, Dropped]
    assert commit_ops(effects) == [MarkProcessed]
    assert reason in effects[1].reason  # type: ignore[union-attr]


def fragment_events(message: PhoneToBridge, count: int = 2) -> list[CommandEventReceived]:
    """`message` split into exactly `count` chunk envelopes, each its own signed event."""
    text = encode(message)
    size = -(-len(text) // count)
    pieces = [text[i : i + size] for i in range(0, len(text), size)]
    assert len(pieces) == count
    return [
        command_event(
            orjson.dumps(
                {"type": "chunk", "cid": "c1", "i": i, "n": count, "part": piece}
            ).decode(),
            created_at=NOW + i,
        )
        for i, piece in enumerate(pieces)
    ]


def test_a_fragment_is_not_recorded_until_its_group_completes() -> None:
    engine = make_engine()
    session = ready_session(engine)
    first, second = fragment_events(InputCommand(sessionId=session, text="x" * 300, inputId="i1"))
    held = engine.handle(first, NOW)
    assert [type(e) for e in held] == [Dropped]
    assert not engine.admission.ingest.seen(first.event.id)
    done = engine.handle(second, NOW + 1)
    marked = {
        op.event_id
        for e in done
        if isinstance(e, Commit)
        for op in e.ops
        if isinstance(op, MarkProcessed)
    }
    assert marked == {first.event.id, second.event.id}
    assert engine.admission.ingest.seen(first.event.id) and engine.admission.ingest.seen(
        second.event.id
    )
    assert ("input-ack", (PHONE.public_hex,)) in published(done)


def test_a_group_cut_by_a_crash_completes_from_the_replayed_fragments() -> None:
    engine = make_engine()
    first, second = fragment_events(InputCommand(sessionId="s-gone", text="y" * 300, inputId="i2"))
    engine.handle(first, NOW)
    # kill -9: nothing of the held group was committed; the relay replays both fragments.
    reborn = make_engine(last_seen=int(NOW))
    assert [type(e) for e in reborn.handle(first, NOW + 2)] == [Dropped]
    effects = reborn.handle(second, NOW + 3)
    assert ("input-failed", (PHONE.public_hex,)) in published(effects)
    marked = [
        op.event_id
        for e in effects
        if isinstance(e, Commit)
        for op in e.ops
        if isinstance(op, MarkProcessed)
    ]
    assert sorted(marked) == sorted([first.event.id, second.event.id])


def test_a_fragment_delivered_twice_is_held_once() -> None:
    engine = make_engine()
    session = ready_session(engine)
    first, second = fragment_events(InputCommand(sessionId=session, text="z" * 300, inputId="i3"))
    engine.handle(first, NOW)
    again = engine.handle(first, NOW)
    assert [type(e) for e in again] == [Dropped]
    done = engine.handle(second, NOW + 1)
    assert published(done).count(("input-ack", (PHONE.public_hex,))) == 1
    assert [type(e) for e in engine.handle(second, NOW + 2)] == [Dropped]


def test_a_flood_of_incomplete_groups_is_recorded_once_evicted() -> None:
    engine = make_engine()
    junk = [
        command_event(
            orjson.dumps({"type": "chunk", "cid": f"j{n}", "i": 0, "n": 9, "part": "x"}).decode(),
            created_at=NOW - n,
        )
        for n in range(70)
    ]
    recorded: list[str] = []
    for event in junk:
        effects = engine.handle(event, NOW)
        recorded += [
            op.event_id
            for e in effects
            if isinstance(e, Commit)
            for op in e.ops
            if isinstance(op, MarkProcessed)
        ]
    # The assembler holds 64 groups: the 6 oldest (by created_at) were evicted, can never
    # complete, and are recorded, so a relay replaying them cannot flood the assembler again.
    assert recorded == [e.event.id for e in junk[64:]]
    replayed = engine.handle(junk[69], NOW)
    assert [type(e) for e in replayed] == [Dropped]
    assert "duplicate" in replayed[0].reason  # type: ignore[union-attr]


def test_wrong_conversation_key_is_dropped() -> None:
    engine = make_engine()
    other = Keypair.from_secret("44" * 32)
    key = conversation_key(
        PHONE.secret, bytes.fromhex(other.public_hex)
    )  # encrypted to someone else
    event = sign_event(
        PHONE,
        4515,
        encrypt('{"type":"refresh-sessions"}', key),
        command_tags(BRIDGE.public_hex, int(NOW)),
        created_at=int(NOW),
    )
    effects = engine.handle(CommandEventReceived(event), NOW)
    assert [type(e) for e in effects] == [Commit, Dropped]
    assert "decrypt" in effects[1].reason  # type: ignore[union-attr]


def test_event_addressed_elsewhere_is_dropped() -> None:
    engine = make_engine()
    effects = engine.handle(command_event(RefreshSessionsCommand(), to=STRANGER.public_hex), NOW)
    assert [type(e) for e in effects] == [Dropped]


def test_stale_input_with_id_is_answered_expired_and_not_executed() -> None:
    engine = make_engine()
    session = ready_session(engine)
    old = NOW - MAX_COMMAND_AGE_SECONDS - 1
    effects = engine.handle(
        command_event(InputCommand(sessionId=session, text="hi", inputId="in-1"), created_at=old),
        NOW,
    )
    assert published(effects) == [("input-failed", (PHONE.public_hex,))]
    failed = effects[0].outbox[0].message  # type: ignore[union-attr]
    assert failed.reason == "expired" and failed.inputId == "in-1"
    assert not any(isinstance(e, SendToRunner) for e in effects)
    assert AppendTranscript not in commit_ops(effects)


def test_exactly_300_seconds_old_still_runs() -> None:
    engine = make_engine()
    session = ready_session(engine)
    effects = engine.handle(
        command_event(
            InputCommand(sessionId=session, text="hi"), created_at=NOW - MAX_COMMAND_AGE_SECONDS
        ),
        NOW,
    )
    assert any(isinstance(e, SendToRunner) for e in effects)


def test_cursor_never_runs_ahead_of_the_clock() -> None:
    engine = make_engine()
    effects = engine.handle(command_event(RefreshSessionsCommand(), created_at=NOW + 120), NOW)
    cursor = [
        op
        for e in effects
        if isinstance(e, Commit)
        for op in e.ops
        if isinstance(op, AdvanceCursor)
    ]
    assert cursor == [AdvanceCursor(int(NOW))]
    assert engine.admission.ingest.since(NOW) == int(NOW) - MAX_COMMAND_AGE_SECONDS


def test_since_reaches_back_to_the_cursor_after_a_long_outage() -> None:
    engine = make_engine(last_seen=int(NOW) - 3000)
    assert engine.admission.ingest.since(NOW) == int(NOW) - 3005
    assert engine.command_filters(NOW)[0].since == int(NOW) - 3005


def test_no_command_subscription_without_phones() -> None:
    assert make_engine(phones=()).command_filters(NOW) == []


# --- pairing -------------------------------------------------------------------------------


def pair_request(token: str) -> PairRequestCommand:
    return PairRequestCommand(
        npub=STRANGER.npub, pubkeyHex=STRANGER.public_hex, label="Pixel", token=token
    )


def test_pairing_success_order() -> None:
    engine = make_engine(phones=())
    assert engine.handle(PairingWindowRequested("ab" * 16), NOW) == [Resubscribe()]
    assert engine.pairing_filters(NOW)[0].since == int(NOW) - 5
    assert engine.pairing_filters(NOW)[0].authors is None
    effects = engine.handle(command_event(pair_request("ab" * 16), author=STRANGER), NOW + 1)
    kinds = [type(e) for e in effects]
    assert kinds == [Commit, Resubscribe, Publish, Notify]
    assert commit_ops(effects) == [MarkProcessed, SavePhone]
    ack = effects[0].outbox[0]  # type: ignore[union-attr]
    assert (
        ack.message.type == "pair-ack" and ack.message.ok and ack.audience == (STRANGER.public_hex,)
    )
    assert ack.message.relays == ["ws://127.0.0.1:7777"] and ack.message.host == "cli"
    assert effects[2].message.type == "sessions"  # type: ignore[union-attr]
    assert engine.pairing.window is None and STRANGER.public_hex in engine.phones
    assert effects[3] == Notify("paired", {"npub": STRANGER.npub, "label": "Pixel"})


def test_bad_token_and_closed_window_are_nacked_within_budget() -> None:
    engine = make_engine(phones=())
    engine.handle(PairingWindowRequested("ab" * 16), NOW)
    answers = []
    for n in range(7):
        effects = engine.handle(
            command_event(pair_request(f"{n:032x}"), author=STRANGER, created_at=NOW + n), NOW + n
        )
        answers.append(published(effects))
    assert answers[:5] == [[("pair-ack", (STRANGER.public_hex,))]] * 5
    assert answers[5:] == [[], []]  # budget of 5 per 10 minutes spent
    assert STRANGER.public_hex not in engine.phones


def test_window_closes_at_expiry_and_strangers_are_then_ignored() -> None:
    engine = make_engine(phones=())
    engine.handle(PairingWindowRequested("ab" * 16, duration=600), NOW)
    assert engine.tick(NOW + 599.9) == [] or Resubscribe() not in engine.tick(NOW + 599.9)
    effects = engine.tick(NOW + 600)
    assert Resubscribe() in effects and Notify("pairing-closed", {"reason": "expired"}) in effects
    late = engine.handle(
        command_event(pair_request("ab" * 16), author=STRANGER, created_at=NOW + 601), NOW + 601
    )
    assert [type(e) for e in late] == [Dropped]


def test_stranger_may_only_pair_through_the_window() -> None:
    engine = make_engine(phones=())
    engine.handle(PairingWindowRequested("ab" * 16), NOW)
    effects = engine.handle(command_event(RefreshSessionsCommand(), author=STRANGER), NOW)
    assert [type(e) for e in effects] == [Commit, Dropped]


def test_manual_pairing_and_unpairing() -> None:
    engine = make_engine(phones=())
    effects = engine.handle(PhonePairedManually(STRANGER.public_hex, "Tab"), NOW)
    assert [type(e) for e in effects] == [Commit, Resubscribe, Publish, Notify]
    assert engine.command_filters(NOW)[0].authors == (STRANGER.public_hex,)
    assert engine.command_filters(NOW)[0].tags == {"p": (BRIDGE.public_hex,)}
    effects = engine.handle(PhoneUnpaired(STRANGER.public_hex), NOW)
    assert [type(e) for e in effects] == [Commit, Resubscribe]  # no heartbeat: nobody left
    assert engine.command_filters(NOW) == []


# --- sessions ------------------------------------------------------------------------------


def test_create_session_two_phases() -> None:
    engine = make_engine()
    effects = engine.handle(command_event(CreateSessionCommand(cwd="app", createCwd=True)), NOW)
    assert published(effects) == [("session-pending", (PHONE.public_hex,))]
    start = effects[-1]
    assert isinstance(start, StartRunner) and start.create_cwd and not start.resume
    session_id = start.record.session_id
    pending = effects[0].outbox[0].message  # type: ignore[union-attr]
    assert pending.pendingId == session_id
    assert engine.heartbeat_message().sessions == []  # pending sessions are never listed
    ready = engine.handle(AgentReady(session_id, "sdk", "model-x", "/ws/app"), NOW + 1)
    assert ("session-ready", (PHONE.public_hex,)) in published(ready)
    msg = ready[0].outbox[0].message  # type: ignore[union-attr]
    assert (
        msg.pendingId == session_id
        and msg.session.id == session_id
        and msg.session.cwd == "/ws/app"
    )
    assert [s.id for s in engine.heartbeat_message().sessions] == [session_id]


def test_session_ready_and_the_heartbeat_say_whether_the_agent_is_sandboxed() -> None:
    engine = make_engine()
    effects = engine.handle(command_event(CreateSessionCommand(cwd="app", createCwd=True)), NOW)
    session_id = effects[-1].record.session_id  # type: ignore[union-attr]
    ready = engine.handle(AgentReady(session_id, "sdk", "m", "/ws/app", True), NOW + 1)
    assert ready[0].outbox[0].message.session.sandboxed is True  # type: ignore[union-attr]
    assert engine.heartbeat_message().sessions[0].sandboxed is True
    # A runner that adopted a live host reports ready without saying: the record keeps it.
    engine.handle(AgentReady(session_id, "sdk", "m", "/ws/app"), NOW + 2)
    assert engine.heartbeat_message().sessions[0].sandboxed is True
    engine.handle(AgentReady(session_id, "sdk", "m", "/ws/app", False), NOW + 3)
    assert engine.heartbeat_message().sessions[0].sandboxed is False


def test_create_session_failure_before_ready() -> None:
    engine = make_engine()
    effects = engine.handle(command_event(CreateSessionCommand(cwd="/etc")), NOW)
    session_id = effects[-1].record.session_id  # type: ignore[union-attr]
    failed = engine.handle(
        AgentFailed(session_id, "/etc is outside the bridge's workspace roots"), NOW
    )
    assert published(failed) == [("session-failed", (PHONE.public_hex,))]
    assert commit_ops(failed) == [DeleteSession]
    assert engine.session(session_id) is None and engine.sessions.tombstones == []


def test_provider_bound_session_is_refused_until_profiles_exist() -> None:
    engine = make_engine()
    effects = engine.handle(command_event(CreateSessionCommand(providerId="kimi")), NOW)
    assert published(effects) == [
        ("session-pending", (PHONE.public_hex,)),
        ("session-failed", (PHONE.public_hex,)),
    ]
    assert not any(isinstance(e, StartRunner) for e in effects)


def test_input_flow_order() -> None:
    engine = make_engine()
    session = ready_session(engine)
    effects = engine.handle(
        command_event(
            InputCommand(sessionId=session, text="fix the tests", inputId="in-1"),
            created_at=NOW + 1,
        ),
        NOW + 1,
    )
    assert [type(e) for e in effects] == [Commit, Publish, SendToRunner]
    assert commit_ops(effects) == [
        MarkProcessed,
        AdvanceCursor,
        AppendTranscript,
        SaveSession,
        AddInbox,
    ]
    commit = effects[0]
    assert isinstance(commit, Commit)
    append = commit.ops[2]
    assert isinstance(append, AppendTranscript) and append.seq == 1
    assert append.entry.metadata == {"role": "user"} and append.entry.content == "fix the tests"
    assert [p.message.type for p in commit.outbox] == ["input-ack"]
    output = effects[1].message  # type: ignore[union-attr]
    assert output.type == "output" and output.seq == 1
    assert engine.session(session).title == "fix the tests"  # type: ignore[union-attr]


def test_input_without_id_gets_no_ack_and_seqs_grow() -> None:
    engine = make_engine()
    session = ready_session(engine)
    for n in range(1, 4):
        effects = engine.handle(
            command_event(InputCommand(sessionId=session, text=f"t{n}"), created_at=NOW + n),
            NOW + n,
        )
        assert published(effects) == [("output", (PHONE.public_hex,))]
        assert effects[0].ops[-3].seq == n  # type: ignore[union-attr]
    reply = engine.handle(
        AgentEntry(session, OutputEntry(entryType="text", content="ok", timestamp="t")), NOW + 5
    )
    assert reply[0].ops[0].seq == 4  # type: ignore[union-attr]


@pytest.mark.parametrize(("known", "reason"), [(False, "no-session"), (True, "error")])
def test_input_to_missing_or_dead_session_fails(known: bool, reason: str) -> None:
    engine = make_engine()
    session = ready_session(engine) if known else "nope"
    if known:
        engine.handle(AgentEnded(session, "crashed"), NOW)
    effects = engine.handle(
        command_event(InputCommand(sessionId=session, text="x", inputId="i")), NOW + 1
    )
    assert published(effects) == [("input-failed", (PHONE.public_hex,))]
    assert effects[0].outbox[0].message.reason == reason  # type: ignore[union-attr]


def test_close_session() -> None:
    engine = make_engine()
    session = ready_session(engine)
    effects = engine.handle(
        command_event(CloseSessionCommand(sessionId=session), created_at=NOW + 1), NOW + 1
    )
    assert commit_ops(effects) == [
        MarkProcessed,
        AdvanceCursor,
        DeleteSession,
        DeleteTranscript,
        AddTombstone,
    ]
    assert published(effects) == [("close-session-ack", (PHONE.public_hex,))]
    assert effects[0].outbox[0].message.success is True  # type: ignore[union-attr]
    assert CloseRunner(session) in effects
    assert engine.heartbeat_message().removedSessions == [session]
    again = engine.handle(
        command_event(CloseSessionCommand(sessionId=session), created_at=NOW + 1), NOW + 1
    )
    assert again[0].outbox[0].message.success is False  # type: ignore[union-attr]


def test_interrupt_and_options_reach_the_runner() -> None:
    engine = make_engine()
    session = ready_session(engine)
    assert InterruptRunner(session) in engine.handle(
        command_event(InterruptCommand(sessionId=session)), NOW
    )
    effects = engine.handle(
        command_event(ModeCommand(sessionId=session, mode="acceptEdits"), created_at=NOW + 1),
        NOW + 1,
    )
    assert SetRunnerOption(session, "mode", "acceptEdits") in effects
    confirmed = engine.handle(
        AgentOptionSet(session, "mode", "acceptEdits", "acceptEdits"), NOW + 1
    )
    assert published(confirmed) == [("mode-confirmed", (PHONE.public_hex,))]
    refused = engine.handle(AgentOptionSet(session, "mode", "plan", None), NOW + 1)
    assert published(refused) == []  # mode-confirmed only on success
    engine.handle(
        command_event(EffortCommand(sessionId=session, level="high"), created_at=NOW + 2), NOW + 2
    )
    engine.handle(AgentOptionSet(session, "effort", "medium", "medium"), NOW + 2)
    effort = engine.handle(AgentOptionSet(session, "effort", "high", None), NOW + 2)
    assert published(effort) == [("effort-confirmed", (PHONE.public_hex,))]
    assert effort[0].outbox[0].message.level == "medium"  # type: ignore[union-attr]  # the previous one


def test_create_folder_validation_and_success() -> None:
    engine = make_engine()
    bad = engine.handle(command_event(CreateFolderCommand(path="../up", requestId="r1")), NOW)
    assert published(bad) == [("folder-ack", (PHONE.public_hex,))]
    assert bad[0].outbox[0].message.error == "folder path escapes the workspace root"  # type: ignore[union-attr]
    unknown_root = engine.handle(
        command_event(
            CreateFolderCommand(path="x", root="/else", requestId="r2"), created_at=NOW + 1
        ),
        NOW + 1,
    )
    assert unknown_root[0].outbox[0].message.error == "unknown workspace root"  # type: ignore[union-attr]
    ok = engine.handle(
        command_event(CreateFolderCommand(path=" new/app ", requestId="r3"), created_at=NOW + 2),
        NOW + 2,
    )
    assert CreateFolder("r3", ROOT, "new/app") in ok
    done = engine.handle(FolderCreated("r3", "new/app"), NOW + 2)
    assert done[0].outbox[0].message.success is True  # type: ignore[union-attr]


def test_sync_request_goes_to_the_requester_only() -> None:
    other = Keypair.from_secret("55" * 32)
    engine = make_engine(phones=(PHONE, other))
    session = ready_session(engine)
    for n in range(120):
        engine.handle(
            AgentEntry(session, OutputEntry(entryType="text", content=str(n), timestamp="t")), NOW
        )
    effects = engine.handle(
        command_event(
            SyncRequestCommand(sessionId=session, haveRanges=[[1, 10]]), created_at=NOW + 1
        ),
        NOW + 1,
    )
    begin = [e for e in effects if isinstance(e, Publish)]
    assert [(p.message.type, p.audience) for p in begin] == [("sync-begin", (PHONE.public_hex,))]
    chunks = [e for e in effects if isinstance(e, SendSyncChunk)]
    assert [c.seq_range for c in chunks] == [(11, 60), (61, 110), (111, 120)]
    for n, chunk in enumerate(chunks):
        acked = engine.handle(
            command_event(
                SyncAckCommand(syncId=chunk.sync_id, range=list(chunk.seq_range)),
                created_at=NOW + 2 + n,
            ),
            NOW + 2 + n,
        )
    end = [e for e in acked if isinstance(e, Publish)]
    assert [p.message.type for p in end] == ["sync-end"]
    assert [list(r) for r in end[0].message.deliveredRanges] == [[11, 120]]  # type: ignore[union-attr]


# --- heartbeat, boot and shutdown ----------------------------------------------------------


def test_heartbeat_never_without_phones_and_every_minute_otherwise() -> None:
    engine = make_engine()
    boot = engine.boot(NOW)
    assert [p.message.type for p in boot if isinstance(p, Publish)] == ["sessions"]
    assert engine.next_deadline() == NOW + 60
    assert engine.tick(NOW + 59.9) == []
    tick = engine.tick(NOW + 60)
    assert [p.message.type for p in tick if isinstance(p, Publish)] == ["sessions"]


def test_heartbeat_contents() -> None:
    engine = make_engine()
    session = ready_session(engine)
    beat = engine.heartbeat_message()
    assert beat.machine == "box" and beat.protocolVersion == 10 and beat.host == "cli"
    assert beat.capabilities == [
        "sync/1",
        "folders",
        "gsd",
        "images",
        "usage",
        "models",
        "diff",
        "custom-providers",
        "chunked",
    ]
    assert beat.roots == [ROOT] and beat.removedSessions is None and beat.machineOffline is None
    info = beat.sessions[0]
    assert info.id == session and info.slug == session[:8] and info.state == "idle"
    assert info.lineCount == info.seqHigh == 0


def test_lonely_engine_publishes_nothing() -> None:
    engine = make_engine(phones=())
    assert [e for e in engine.boot(NOW) if isinstance(e, Publish)] == []
    assert [e for e in engine.tick(NOW + 3600) if isinstance(e, Publish)] == []


def test_boot_resumes_listed_and_restarts_pending_sessions() -> None:
    from bridge.engine.effects import SessionRecord

    listed = SessionRecord("s-1", "/ws", "t", "t", state="offline")
    pending = SessionRecord("s-2", "", "t", "t", state=PENDING_STATE)
    engine = make_engine(sessions=[listed, pending])
    starts = [e for e in engine.boot(NOW) if isinstance(e, StartRunner)]
    assert {(s.record.session_id, s.resume) for s in starts} == {("s-1", True), ("s-2", False)}
    assert engine.session("s-1").state == "idle"  # type: ignore[union-attr]


def test_shutdown_publishes_everything_offline() -> None:
    engine = make_engine()
    session = ready_session(engine)
    effects = engine.shutdown(NOW)
    assert CloseRunner(session) in effects
    final = [e for e in effects if isinstance(e, Publish)]
    assert len(final) == 1
    message = final[0].message
    assert message.machineOffline is True  # type: ignore[union-attr]
    assert [s.state for s in message.sessions] == ["offline"]  # type: ignore[union-attr]


def test_input_while_the_runner_resumes_waits_in_the_inbox() -> None:
    from bridge.engine.effects import SessionRecord

    engine = make_engine(sessions=[SessionRecord("s-1", "/ws", "t", "t", state="idle")])
    engine.boot(NOW)  # resume started, not ready yet
    effects = engine.handle(
        command_event(InputCommand(sessionId="s-1", text="early", inputId="e")), NOW
    )
    assert published(effects) == [
        ("input-ack", (PHONE.public_hex,)),
        ("output", (PHONE.public_hex,)),
    ]
    assert AddInbox in commit_ops(effects)
    ready = engine.handle(AgentReady("s-1", "sdk", "m"), NOW + 1)
    assert SendToRunner("s-1") in ready  # the inbox is flushed once the runner is up


def test_a_commit_shows_in_the_heartbeat_once() -> None:
    from bridge.engine.inputs import SessionCommitted

    engine = make_engine()
    session = ready_session(engine)
    assert engine.heartbeat_message().sessions[0].committed is None
    first = engine.handle(SessionCommitted(session), NOW)
    assert commit_ops(first) == [SaveSession]
    assert engine.heartbeat_message().sessions[0].committed is True
    assert engine.handle(SessionCommitted(session), NOW) == []
