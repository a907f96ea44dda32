"""The commit: every store operation lands in its table, all of a commit in one transaction.

Real database, real sealing; the fake pool shows what reached the relays and when.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

import pytest

from bridge.engine.effects import (
    AddInbox,
    AddTombstone,
    AdvanceCursor,
    AnswerPermission,
    AppendTranscript,
    Commit,
    DeletePhone,
    DeleteProviderProfile,
    DeletePushSubscription,
    DeletePushSubscriptions,
    DeleteSession,
    DeleteTranscript,
    MarkInboxTaken,
    MarkProcessed,
    PairedPhone,
    PruneProcessed,
    Publish,
    RecordDecision,
    RemoveInbox,
    SaveAgentCursor,
    SaveAnswer,
    SaveDeviceConfig,
    SavePhone,
    SaveProviderProfile,
    SavePushSubscription,
    SaveSession,
    SetCredential,
    StoreOp,
)
from bridge.logs import REDACTED, redact
from bridge.nostr.event import Event
from bridge.protocol import InputAckMessage, OutputEntry
from bridge.runtime.boot import load_engine_state
from bridge.runtime.commit import CommitFailed, Committer, live_ops
from store.db import BridgeDatabase, open_bridge_db
from tests.runtime.support import (
    NOW,
    PHONE,
    PHONE_2,
    FakeClock,
    FakePool,
    make_outbound,
    opened,
    rows,
    sent,
    session_record,
)

EVENT_A, EVENT_B, EVENT_C = "aa" * 32, "bb" * 32, "cc" * 32
RECORD = session_record("s-1", "/ws/app", title="fix it", model="m-1")
ENTRY = OutputEntry(entryType="text", content="hi", timestamp="t", metadata={"role": "user"})
PROFILE = {
    "label": "Kimi",
    "baseUrl": "https://kimi.test",
    "models": [{"id": "k2"}],
    "authToken": "kimi-token-7f3a9c",
}
KEY = "stored-key-5d21e8"
PHONE_ROW = PairedPhone(PHONE.public_hex, PHONE.npub, "Pixel", "2026-01-01T00:00:00.000Z")
ACK = InputAckMessage(sessionId="s-1", inputId="in-1")


@dataclass(frozen=True)
class OpCase:
    id: str
    op: StoreOp
    query: str
    expected: list[tuple[Any, ...]]
    setup: tuple[StoreOp, ...] = ()


CASES = [
    OpCase(
        "mark-processed",
        MarkProcessed(EVENT_A, 1234),
        "SELECT event_id, created_at FROM processed",
        [(EVENT_A, 1234)],
    ),
    OpCase(
        "advance-cursor",
        AdvanceCursor(456),
        "SELECT value FROM kv WHERE key = 'ingest.lastSeen'",
        [("456",)],
        setup=(AdvanceCursor(100),),
    ),
    OpCase(
        "save-phone",
        SavePhone(PHONE_ROW),
        "SELECT pubkey, npub, label, paired_at FROM phones",
        [(PHONE.public_hex, PHONE.npub, "Pixel", "2026-01-01T00:00:00.000Z")],
    ),
    OpCase(
        "delete-phone",
        DeletePhone(PHONE.public_hex),
        "SELECT pubkey FROM phones",
        [(PHONE_2.public_hex,)],
        setup=(
            SavePhone(PHONE_ROW),
            SavePhone(dataclasses.replace(PHONE_ROW, pubkey=PHONE_2.public_hex)),
        ),
    ),
    OpCase(
        "save-session",
        SaveSession(RECORD),
        "SELECT session_id, json_extract(record, '$.cwd'), json_extract(record, '$.title'), "
        "json_extract(record, '$.model') FROM sessions",
        [("s-1", "/ws/app", "fix it", "m-1")],
    ),
    OpCase(
        "delete-session",
        DeleteSession("s-1"),
        "SELECT (SELECT count(*) FROM sessions), (SELECT group_concat(uid) FROM inbox)",
        [(0, "u-2")],
        setup=(
            SaveSession(RECORD),
            AddInbox("u-1", "s-1", "one", None),
            AddInbox("u-2", "s-2", "two", None),
        ),
    ),
    OpCase(
        "add-tombstone",
        AddTombstone("s-0"),
        "SELECT session_id FROM tombstones ORDER BY position",
        [("s-1",), ("s-0",)],  # a repeat moves to the end, never a duplicate
        setup=(AddTombstone("s-0"), AddTombstone("s-1")),
    ),
    OpCase(
        "append-transcript",
        AppendTranscript("s-1", 3, ENTRY),
        "SELECT session_id, seq, json_extract(entry, '$.content'), "
        "json_extract(entry, '$.metadata.role') FROM transcripts",
        [("s-1", 3, "hi", "user")],
    ),
    OpCase(
        "delete-transcript",
        DeleteTranscript("s-1"),
        "SELECT session_id, seq FROM transcripts",
        [("s-2", 1)],
        setup=(
            AppendTranscript("s-1", 1, ENTRY),
            AppendTranscript("s-1", 2, ENTRY),
            AppendTranscript("s-2", 1, ENTRY),
        ),
    ),
    OpCase(
        "add-inbox",
        AddInbox("u-1", "s-1", "do it", "in-1"),
        "SELECT uid, session_id, text, input_id, state, created_at FROM inbox",
        [("u-1", "s-1", "do it", "in-1", "pending", int(NOW))],
    ),
    OpCase(
        "prune-processed",
        PruneProcessed(before=200),
        "SELECT event_id FROM processed ORDER BY created_at",
        [(EVENT_B,), (EVENT_C,)],  # exactly `before` is kept
        setup=(
            MarkProcessed(EVENT_A, 199),
            MarkProcessed(EVENT_B, 200),
            MarkProcessed(EVENT_C, 300),
        ),
    ),
    OpCase(
        "save-provider-profile",
        SaveProviderProfile("kimi", PROFILE),
        "SELECT id, json_extract(record, '$.label'), json_extract(record, '$.authToken') "
        "FROM provider_profiles",
        [("kimi", "Kimi", "kimi-token-7f3a9c")],
    ),
    OpCase(
        "delete-provider-profile",
        DeleteProviderProfile("kimi"),
        "SELECT id FROM provider_profiles",
        [("other",)],
        setup=(SaveProviderProfile("kimi", PROFILE), SaveProviderProfile("other", PROFILE)),
    ),
    OpCase(
        "set-credential",
        SetCredential("anthropicApiKey", KEY),
        "SELECT name, value FROM credentials",
        [("anthropicApiKey", KEY)],
    ),
    OpCase(
        "set-credential-none-deletes",
        SetCredential("githubPat", None),
        "SELECT name FROM credentials",
        [("anthropicApiKey",)],
        setup=(SetCredential("anthropicApiKey", KEY), SetCredential("githubPat", "pat-1")),
    ),
    OpCase(
        "save-device-config",
        SaveDeviceConfig(PHONE.public_hex, {"relayDebug": True}),
        "SELECT phone, json_extract(config, '$.relayDebug') FROM device_config",
        [(PHONE.public_hex, 1)],
    ),
    OpCase(
        "record-decision",
        RecordDecision("2026-01-01T00:00:00Z", "s-1", "Bash", "blocked", ("rm_rf",), "rm -rf /"),
        "SELECT at, session_id, tool, outcome, reasons, detail FROM decisions",
        [("2026-01-01T00:00:00Z", "s-1", "Bash", "blocked", '["rm_rf"]', "rm -rf /")],
    ),
    OpCase(
        "save-agent-cursor",
        SaveAgentCursor("s-1", 42),
        "SELECT json_extract(record, '$.agent_seq'), json_extract(record, '$.cwd') FROM sessions",
        [(42, "/ws/app")],  # only the cursor changes
        setup=(SaveSession(RECORD),),
    ),
    OpCase(
        "mark-inbox-taken",
        MarkInboxTaken("u-2"),
        "SELECT uid, state FROM inbox ORDER BY rowid",
        [("u-1", "pending"), ("u-2", "taken")],
        setup=(AddInbox("u-1", "s-1", "one", None), AddInbox("u-2", "s-1", "two", None)),
    ),
    OpCase(
        "remove-inbox",
        RemoveInbox(("u-1", "u-3")),
        "SELECT uid FROM inbox ORDER BY rowid",
        [("u-2",)],
        setup=(
            AddInbox("u-1", "s-1", "one", None),
            AddInbox("u-2", "s-1", "two", None),
            AddInbox("u-3", "s-2", "three", None),
        ),
    ),
    OpCase(
        "save-answer",
        SaveAnswer(AnswerPermission("s-1", "req-1", True, always=True, updated_input={"a": 1})),
        "SELECT session_id, request_id, json_extract(answer, '$.allow'), "
        "json_extract(answer, '$.always'), json_extract(answer, '$.updated_input.a') "
        "FROM host_answers",
        [("s-1", "req-1", 1, 1, 1)],
        setup=(SaveAnswer(AnswerPermission("s-1", "req-1", False, "no")),),  # a later one wins
    ),
    OpCase(
        "save-push-subscription",
        SavePushSubscription(PHONE.public_hex, "https://push.example/b", "kb", "ab"),
        "SELECT phone, endpoint, p256dh, auth FROM push_subscriptions ORDER BY id",
        [
            (PHONE_2.public_hex, "https://push.example/a", "ka", "aa"),
            (PHONE.public_hex, "https://push.example/b", "kb", "ab"),
        ],
        # The endpoint moves to the phone that subscribed it last, refreshed.
        setup=(
            SavePushSubscription(PHONE.public_hex, "https://push.example/b", "old", "old"),
            SavePushSubscription(PHONE_2.public_hex, "https://push.example/a", "ka", "aa"),
            SavePushSubscription(PHONE_2.public_hex, "https://push.example/b", "kx", "ax"),
        ),
    ),
    OpCase(
        "delete-push-subscription",
        DeletePushSubscription(PHONE.public_hex, "https://push.example/a"),
        "SELECT phone, endpoint FROM push_subscriptions ORDER BY id",
        [(PHONE_2.public_hex, "https://push.example/b")],
        # A phone forgets only its own subscription.
        setup=(
            SavePushSubscription(PHONE.public_hex, "https://push.example/a", "k", "a"),
            SavePushSubscription(PHONE_2.public_hex, "https://push.example/b", "k", "a"),
            DeletePushSubscription(PHONE.public_hex, "https://push.example/b"),
        ),
    ),
    OpCase(
        "delete-push-subscriptions",
        DeletePushSubscriptions(PHONE.public_hex),
        "SELECT phone FROM push_subscriptions",
        [(PHONE_2.public_hex,)],
        setup=(
            SavePushSubscription(PHONE.public_hex, "https://push.example/a", "k", "a"),
            SavePushSubscription(PHONE.public_hex, "https://push.example/c", "k", "a"),
            SavePushSubscription(PHONE_2.public_hex, "https://push.example/b", "k", "a"),
        ),
    ),
]


def committer(db: BridgeDatabase, clock: FakeClock | None = None) -> Committer:
    clock = clock or FakeClock()
    return Committer(db, make_outbound(db, clock), clock.wall)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_each_store_op_lands_in_its_table(db: BridgeDatabase, case: OpCase) -> None:
    commits = committer(db)
    if case.setup:
        await commits.commit(Commit(case.setup))
    await commits.commit(Commit((case.op,)))
    assert await rows(db, case.query) == case.expected
    assert commits.commits == (2 if case.setup else 1)


def test_every_store_op_type_has_a_case() -> None:
    # With the parametrized test above, this fails when apply_op misses an operation:
    # assert_never raises inside the transaction instead of skipping the write.
    assert {type(case.op) for case in CASES} == set(get_args(StoreOp))


async def test_save_session_stores_the_whole_record(db: BridgeDatabase) -> None:
    await committer(db).commit(Commit((SaveSession(RECORD),)))
    [(agent, text)] = await rows(db, "SELECT agent, record FROM sessions")
    whole = dataclasses.asdict(RECORD)
    assert agent == whole.pop("agent") == "claude"  # its own column (schema v8)
    assert json.loads(text) == whole


async def test_the_agent_of_a_session_round_trips_through_the_store(db: BridgeDatabase) -> None:
    record = dataclasses.replace(RECORD, agent="opencode")
    await committer(db).commit(Commit((SaveSession(record),)))
    assert await rows(db, "SELECT agent FROM sessions") == [("opencode",)]
    (loaded,) = (await load_engine_state(db)).sessions
    assert loaded == record


@pytest.mark.parametrize(
    ("ops", "count"),
    [
        ((SaveSession(RECORD), DeleteSession("s-1")), 0),
        ((DeleteSession("s-1"), SaveSession(RECORD)), 1),
    ],
    ids=["save-then-delete", "delete-then-save"],
)
async def test_ops_apply_in_order(db: BridgeDatabase, ops: tuple[StoreOp, ...], count: int) -> None:
    await committer(db).commit(Commit(ops))
    assert await rows(db, "SELECT count(*) FROM sessions") == [(count,)]


async def test_secrets_are_registered_for_redaction_when_written(db: BridgeDatabase) -> None:
    token, key = "kimi-token-only-here-91b2", "stored-key-only-here-44c7"
    assert redact(f"a {token} b {key}") == f"a {token} b {key}"
    await committer(db).commit(
        Commit((SaveProviderProfile("p", {**PROFILE, "authToken": token}), SetCredential("k", key)))
    )
    assert redact(f"a {token} b {key}") == f"a {REDACTED} b {REDACTED}"


# --- one transaction -----------------------------------------------------------------------

BROKEN_INBOX = (
    "CREATE TRIGGER inbox_broken BEFORE INSERT ON inbox "
    "BEGIN SELECT RAISE(ABORT, 'inbox is broken'); END"
)
EVERY_TABLE = (
    "SELECT (SELECT count(*) FROM processed), (SELECT count(*) FROM kv WHERE key = "
    "'ingest.lastSeen'), (SELECT count(*) FROM transcripts), (SELECT count(*) FROM inbox), "
    "(SELECT count(*) FROM sessions), (SELECT count(*) FROM outbox)"
)


@dataclass(frozen=True)
class FailCase:
    id: str
    before: Sequence[str]
    """SQL run (and committed) before the failing commit."""
    ops: tuple[StoreOp, ...]
    cause: str
    left: tuple[int, ...]
    """EVERY_TABLE afterwards: what was there before, nothing of the failed commit."""


FAIL_CASES = [
    FailCase(
        "trigger-on-inbox",
        [BROKEN_INBOX],
        (
            MarkProcessed(EVENT_A, int(NOW)),
            AdvanceCursor(int(NOW)),
            AppendTranscript("s-1", 1, ENTRY),
            AddInbox("u-1", "s-1", "do it", "in-1"),
            SaveSession(RECORD),
        ),
        "inbox is broken",
        (0, 0, 0, 0, 0, 0),
    ),
    FailCase(
        "duplicate-transcript-seq",
        ["INSERT INTO transcripts (session_id, seq, entry) VALUES ('s-1', 1, '{}')"],
        (
            MarkProcessed(EVENT_A, int(NOW)),
            AdvanceCursor(int(NOW)),
            SaveSession(RECORD),
            AppendTranscript("s-1", 1, ENTRY),
            AddInbox("u-1", "s-1", "do it", "in-1"),
        ),
        "UNIQUE constraint failed",
        (0, 0, 1, 0, 0, 0),
    ),
]


@pytest.mark.parametrize("case", FAIL_CASES, ids=[c.id for c in FAIL_CASES])
async def test_a_failing_op_rolls_back_the_whole_commit_and_sends_nothing(
    db: BridgeDatabase, case: FailCase
) -> None:
    clock, pool = FakeClock(), FakePool()
    outbound = make_outbound(db, clock)
    outbound.start(pool)  # type: ignore[arg-type]
    commits = Committer(db, outbound, clock.wall)
    for sql in case.before:
        await db.execute(sql)
    try:
        with pytest.raises(CommitFailed) as failed:
            await commits.commit(Commit(case.ops, outbox=(Publish(ACK, (PHONE.public_hex,)),)))
        await sent(outbound)
    finally:
        await outbound.close()
    kinds = ", ".join(sorted({type(op).__name__ for op in case.ops}))
    assert str(failed.value).startswith(f"a commit of {kinds} failed: ")
    assert case.cause in str(failed.value.__cause__)
    assert await rows(db, EVERY_TABLE) == [case.left]
    assert pool.published == []
    assert commits.commits == 0
    # The database is usable again: the transaction did not stay open.
    await db.execute("DROP TRIGGER IF EXISTS inbox_broken")
    await commits.commit(Commit((MarkProcessed(EVENT_B, 1),)))
    assert await rows(db, "SELECT event_id FROM processed") == [(EVENT_B,)]


async def test_a_commit_that_cannot_seal_writes_nothing(db: BridgeDatabase) -> None:
    commits = committer(db)
    with pytest.raises(ValueError):
        await commits.commit(
            Commit((MarkProcessed(EVENT_A, 1),), outbox=(Publish(ACK, ("not-a-pubkey",)),))
        )
    assert await rows(db, EVERY_TABLE) == [(0, 0, 0, 0, 0, 0)]


async def test_durable_replies_are_in_the_outbox_before_the_sender_sees_them(
    db: BridgeDatabase,
) -> None:
    clock, pool = FakeClock(), FakePool()
    outbound = make_outbound(db, clock)
    seen_in_outbox: list[list[tuple[Any, ...]]] = []

    async def look(event: Event) -> None:
        seen_in_outbox.append(
            await rows(
                db, "SELECT event, expires_at, queued_at FROM outbox WHERE event_id = ?", [event.id]
            )
        )

    pool.on_publish = look
    outbound.start(pool)  # type: ignore[arg-type]
    try:
        await Committer(db, outbound, clock.wall).commit(
            Commit(
                (MarkProcessed(EVENT_A, int(NOW)),),
                outbox=(Publish(ACK, (PHONE.public_hex, PHONE_2.public_hex)),),
            )
        )
        await sent(outbound)
    finally:
        await outbound.close()
    events = pool.events()
    assert [e.kind for e in events] == [4516, 4516]
    assert seen_in_outbox == [
        [(event.to_json(), event.created_at + 3600, int(NOW))] for event in events
    ]
    assert opened(events[0], PHONE) == ACK
    assert opened(events[1], PHONE_2) == ACK
    # Every relay accepted: the rows are gone.
    assert await rows(db, "SELECT count(*) FROM outbox") == [(0,)]


async def test_an_empty_commit_is_a_commit(db: BridgeDatabase) -> None:
    commits = committer(db)
    await commits.commit(Commit(()))
    assert commits.commits == 1


# --- overwritten writes are left out ------------------------------------------------------------

SESSION_TABLES = (
    "SELECT session_id, agent, record FROM sessions ORDER BY session_id",
    "SELECT session_id, seq, entry FROM transcripts ORDER BY session_id, seq",
)


def test_a_busy_sessions_rewrites_of_its_row_are_left_out_of_a_group() -> None:
    # A turn's host records, as the engine commits them: every record moves agent_seq, most
    # save the whole record too. Only the last write of each row is needed.
    s1, s2 = session_record("s-1"), session_record("s-2")
    ops: list[StoreOp] = []
    for seq in range(1, 5):
        ops += [SaveAgentCursor("s-1", seq), AppendTranscript("s-1", seq, ENTRY)]
        ops.append(SaveSession(dataclasses.replace(s1, agent_seq=seq, seq_high=seq)))
    ops += [SaveSession(s2), SaveAgentCursor("s-2", 1), SaveAgentCursor("s-2", 2)]
    live = live_ops(ops)
    kept = [op for op, keep in zip(ops, live, strict=True) if keep]
    assert kept == [
        *(AppendTranscript("s-1", seq, ENTRY) for seq in range(1, 5)),
        SaveSession(dataclasses.replace(s1, agent_seq=4, seq_high=4)),
        SaveSession(s2),
        SaveAgentCursor("s-2", 2),
    ]
    # A delete makes every earlier write of the row moot, and is itself always kept.
    assert live_ops([SaveSession(s1), SaveAgentCursor("s-1", 1), DeleteSession("s-1")]) == [
        False,
        False,
        True,
    ]
    # A cursor after the last save still counts: it is the newest agent_seq.
    assert live_ops([SaveSession(s1), SaveAgentCursor("s-1", 9)]) == [True, True]


async def test_a_group_leaves_the_rows_its_ops_one_by_one_leave(
    db: BridgeDatabase, tmp_path: Path
) -> None:
    # Random runs of session writes, cut into commits at random: written as one group (moot
    # writes left out) and op by op (one commit each, nothing left out), the rows are the same.
    one_by_one = await open_bridge_db(tmp_path / "other")
    grouped_commits, single_commits = committer(db), committer(one_by_one)
    draw = random.Random(15)
    try:
        for _ in range(120):
            ops = session_writes(draw)
            cuts = sorted(draw.sample(range(1, len(ops)), k=draw.randint(0, 3)))
            bounds = [0, *cuts, len(ops)]
            commits = [Commit(tuple(ops[a:b])) for a, b in itertools.pairwise(bounds)]
            await grouped_commits.write([grouped_commits.prepare(c) for c in commits])
            for op in ops:
                await single_commits.commit(Commit((op,)))
            for query in SESSION_TABLES:
                assert await rows(db, query) == await rows(one_by_one, query), ops
            for database in (db, one_by_one):
                await database.execute("DELETE FROM sessions")
                await database.execute("DELETE FROM transcripts")
    finally:
        await one_by_one.close()


def session_writes(draw: random.Random) -> list[StoreOp]:
    """Eight to twenty writes of two sessions' rows and transcripts, in any order."""
    ops: list[StoreOp] = []
    seqs = {"s-1": 0, "s-2": 0}
    for _ in range(draw.randint(8, 20)):
        session_id = draw.choice(("s-1", "s-2"))
        kind = draw.choice(("save", "save", "cursor", "cursor", "cursor", "delete", "line"))
        if kind == "save":
            record = session_record(
                session_id,
                state=draw.choice(("idle", "running")),
                agent_seq=draw.randint(0, 9),
                agent=draw.choice(("claude", "opencode")),
            )
            ops.append(SaveSession(record))
        elif kind == "cursor":
            ops.append(SaveAgentCursor(session_id, draw.randint(0, 9)))
        elif kind == "delete":
            ops.append(DeleteSession(session_id))
        else:
            seqs[session_id] += 1
            ops.append(AppendTranscript(session_id, seqs[session_id], ENTRY))
    return ops
