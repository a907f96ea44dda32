"""The engine loop over the real engine, commit, outbound and runners (fake pool, clock, agents)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, get_args

import pytest

from bridge.engine.effects import (
    AnswerPermission,
    CloseRunner,
    Commit,
    CreateFolder,
    Dropped,
    Effect,
    FetchBlossomImage,
    InterruptRunner,
    ListModels,
    MarkProcessed,
    Notify,
    ProbeAnthropicKey,
    ProbeProvider,
    Publish,
    ReadGsdState,
    Resubscribe,
    SaveImage,
    SendSyncChunk,
    SendToRunner,
    SetRunnerOption,
    StartRunner,
    WakePhones,
)
from bridge.engine.inputs import CommandEventReceived, Input, RefreshRequested, SyncChunkSent
from bridge.nostr.relay import PublishStatus
from bridge.protocol import (
    CreateSessionCommand,
    InputAckMessage,
    InputCommand,
    OutputEntry,
    OutputMessage,
    SessionsMessage,
    SyncChunkEntry,
    SyncChunkMessage,
)
from bridge.runtime import engine_loop
from bridge.runtime.boot import load_engine_state
from bridge.runtime.engine_loop import (
    MAX_WAIT,
    EffectGroup,
    EffectRunner,
    EngineFailure,
    EngineLoop,
    InputQueue,
)
from store import bridge_state
from store.db import BridgeDatabase
from tests.runtime.support import (
    BRIDGE,
    NOW,
    PHONE,
    WAIT,
    FakeClock,
    Stack,
    command_event,
    finished,
    make_engine,
    make_stack,
    opened,
    rows,
    sent,
    session_record,
    tag,
)

T = int(NOW)
ACK = InputAckMessage(sessionId="s-1", inputId="in-1")


async def ready_session(stack: Stack) -> str:
    """A session created from the phone, its fake runner up; the pool's record cleared."""
    await stack.handle(command_event(CreateSessionCommand(), created_at=NOW))
    await stack.pump()
    [record] = stack.engine.session_records()
    assert stack.engine.is_alive(record.session_id)
    stack.pool.published.clear()
    return record.session_id


def input_event(
    session: str, created_at: float = NOW + 1, text: str = "fix the tests"
) -> CommandEventReceived:
    return command_event(
        InputCommand(sessionId=session, text=text, inputId="in-1"), created_at=created_at
    )


# --- the data path of one input ------------------------------------------------------------


async def test_an_input_is_committed_acked_and_delivered_exactly_once(
    db: BridgeDatabase, tmp_path: Path
) -> None:
    async with make_stack(db, tmp_path / "ws") as stack:
        session = await ready_session(stack)
        stack.clock.advance(1)
        event = input_event(session)
        stack.pool.hold = asyncio.Event()  # the relays take the ack but do not answer yet
        await stack.handle(event)
        await finished(stack.runners)

        processed = dict(await rows(db, "SELECT event_id, created_at FROM processed"))
        assert processed[event.event.id] == T + 1
        assert await rows(db, "SELECT value FROM kv WHERE key = 'ingest.lastSeen'") == [
            (str(T + 1),)
        ]
        assert await rows(
            db,
            "SELECT seq, json_extract(entry, '$.content'), json_extract(entry, '$.metadata.role') "
            "FROM transcripts WHERE session_id = ?",
            [session],
        ) == [(1, "fix the tests", "user")]
        [(uid, text, input_id, state)] = await rows(
            db, "SELECT uid, text, input_id, state FROM inbox WHERE session_id = ?", [session]
        )
        assert (text, input_id, state) == ("fix the tests", "in-1", "sent")
        await stack.pool.wait_published(1)
        ack = stack.pool.events()[0]  # the live line may be on its way too (pipelined)
        assert await rows(db, "SELECT event_id FROM outbox") == [(ack.id,)]  # durable first

        stack.pool.hold.set()
        await sent(stack.outbound)
        ack, live = stack.pool.events()
        assert (ack.kind, opened(ack)) == (4516, InputAckMessage(sessionId=session, inputId="in-1"))
        line = opened(live)
        assert live.kind == 24515 and isinstance(line, OutputMessage)
        assert (line.seq, line.entry.content) == (1, "fix the tests")
        assert await rows(db, "SELECT count(*) FROM outbox") == [(0,)]  # every relay took it
        runner = stack.agents.runner(session)
        assert runner.inputs == [(uid, "fix the tests")]

        # The relay delivers the same event again (another relay, a reconnect): nothing happens.
        stack.pool.published.clear()
        await stack.handle(event)
        await stack.pump()
        assert runner.inputs == [(uid, "fix the tests")]
        assert stack.pool.published == []
        assert await rows(db, "SELECT count(*) FROM transcripts") == [(1,)]
        assert len(await rows(db, "SELECT event_id FROM processed")) == 2  # create + input


async def test_create_session_starts_the_runner_and_announces_it(
    db: BridgeDatabase, tmp_path: Path
) -> None:
    async with make_stack(db, tmp_path / "ws") as stack:
        await stack.handle(command_event(CreateSessionCommand(), created_at=NOW))
        await stack.pump()
        [record] = stack.engine.session_records()
        [(_, spec, resume)] = stack.agents.runner(record.session_id).calls
        assert (spec.cwd, spec.permission_mode, resume) == (
            stack.workspace.resolve(),
            "plan",
            False,
        )
        assert [(e.kind, opened(e).type) for e in stack.pool.events()] == [
            (4516, "session-pending"),
            (4516, "session-ready"),
            (30515, "sessions"),
        ]
        assert record.cwd == str(stack.workspace.resolve())
        [(stored,)] = await rows(db, "SELECT json_extract(record, '$.state') FROM sessions")
        assert stored == "idle"


# --- timers --------------------------------------------------------------------------------

WAIT_CASES = [
    # id, phones, max_wait, clock advance, expected wait
    ("heartbeat-due-now", (PHONE,), MAX_WAIT, 0.0, 0.0),
    ("no-phone-prune-capped", (), MAX_WAIT, 0.0, MAX_WAIT),
    ("no-phone-prune-uncapped", (), 100.0, 0.0, 60.0),
    ("no-phone-later", (), 100.0, 45.0, 15.0),
    ("no-phone-past-due", (), 100.0, 61.0, 0.0),
]


@pytest.mark.parametrize(
    ("phones", "max_wait", "advance", "expected"),
    [c[1:] for c in WAIT_CASES],
    ids=[c[0] for c in WAIT_CASES],
)
def test_wait_time_follows_the_next_deadline(
    phones: Sequence[Any], max_wait: float, advance: float, expected: float
) -> None:
    clock = FakeClock()
    loop = EngineLoop(make_engine(phones=phones), None, clock, max_wait=max_wait)  # type: ignore[arg-type]
    clock.advance(advance)
    assert loop.wait_time() == expected


async def test_the_heartbeat_goes_out_when_due_and_not_before(
    db: BridgeDatabase, tmp_path: Path
) -> None:
    async with make_stack(db, tmp_path / "ws") as stack:
        await stack.loop.boot()
        await sent(stack.outbound)
        [first] = stack.pool.events()
        assert first.kind == 30515 and first.created_at == T
        assert stack.loop.wait_time() == MAX_WAIT  # next one in 60 s, waited for 30 s at a time

        stack.clock.advance(59.5)
        assert stack.loop.wait_time() == 0.5
        await stack.loop.tick()
        await sent(stack.outbound)
        assert len(stack.pool.published) == 1

        stack.clock.advance(0.5)
        assert stack.loop.wait_time() == 0.0
        await stack.loop.tick()
        await sent(stack.outbound)
        _, beat = stack.pool.events()
        message = opened(beat)
        assert isinstance(message, SessionsMessage) and message.machine == "box"
        assert (beat.kind, beat.created_at, tag(beat, "d")) == (
            30515,
            T + 60,
            f"box#{PHONE.public_hex[:16]}",
        )


# --- failure policy ------------------------------------------------------------------------


class ExplodingEngine:
    """Raises from every entry point the loop calls."""

    def next_deadline(self) -> float | None:
        return None

    def handle(self, event: Input, now: float) -> list[Effect]:
        raise RuntimeError("boom")

    def tick(self, now: float) -> list[Effect]:
        raise RuntimeError("boom")

    def boot(self, now: float) -> list[Effect]:
        raise RuntimeError("boom")


class ScriptedEngine(ExplodingEngine):
    """Answers every input with the same effects."""

    def __init__(self, effects: list[Effect]) -> None:
        self.effects = effects

    def handle(self, event: Input, now: float) -> list[Effect]:
        return list(self.effects)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("handle", "the engine failed on RefreshRequested: RuntimeError: boom"),
        ("tick", "the engine failed on a tick: RuntimeError: boom"),
        ("boot", "the engine failed at boot: RuntimeError: boom"),
    ],
)
async def test_an_engine_that_raises_is_an_engine_failure(call: str, message: str) -> None:
    loop = EngineLoop(ExplodingEngine(), None, FakeClock())  # type: ignore[arg-type]
    with pytest.raises(EngineFailure) as failed:
        await (loop.handle(RefreshRequested()) if call == "handle" else getattr(loop, call)())
    assert str(failed.value) == message
    assert isinstance(failed.value.__cause__, RuntimeError)
    assert loop.handled == 0


async def test_an_effect_that_raises_stops_the_effects_after_it(
    db: BridgeDatabase, tmp_path: Path
) -> None:
    async with make_stack(db, tmp_path / "ws") as stack:
        engine = ScriptedEngine([Publish(ACK, ("not-a-pubkey",)), Notify("paired", {"label": "x"})])
        loop = EngineLoop(engine, stack.effects, stack.clock)  # type: ignore[arg-type]
        with pytest.raises(EngineFailure) as failed:
            await loop.handle(RefreshRequested())
        assert str(failed.value) == (
            "an effect of RefreshRequested failed: ValueError: pubkey must be 64 lowercase hex "
            "characters"
        )
        assert stack.notified == []
        assert loop.handled == 0


BROKEN_INBOX = (
    "CREATE TRIGGER inbox_broken BEFORE INSERT ON inbox "
    "BEGIN SELECT RAISE(ABORT, 'inbox is broken'); END"
)


async def test_a_failed_commit_stops_the_loop_and_nothing_after_it_runs(
    db: BridgeDatabase, tmp_path: Path
) -> None:
    async with make_stack(db, tmp_path / "ws") as stack:
        session = await ready_session(stack)
        await db.execute(BROKEN_INBOX)
        stack.clock.advance(1)
        event = input_event(session)
        with pytest.raises(EngineFailure) as failed:
            await stack.handle(event)
        assert str(failed.value).startswith(
            "an effect of CommandEventReceived failed: a commit of AddInbox, AdvanceCursor, "
            "AppendTranscript, MarkProcessed, SaveSession failed: StoreError: "
        )
        assert str(failed.value).endswith(": inbox is broken")
        await stack.pump()
        assert stack.pool.published == []  # neither the ack nor the live line
        assert stack.agents.runner(session).inputs == []  # SendToRunner did not run
        assert (
            await rows(db, "SELECT event_id FROM processed WHERE event_id = ?", [event.event.id])
            == []
        )
        assert await rows(db, "SELECT count(*) FROM transcripts") == [(0,)]

    # systemd restarts the daemon from the durable state: the command runs when replayed.
    await db.execute("DROP TRIGGER inbox_broken")
    restarted = make_engine(roots=(str(tmp_path / "ws"),), **_state(await load_engine_state(db)))
    effects = restarted.handle(event, NOW + 2)
    assert [type(e) for e in effects] == [Commit, Publish, SendToRunner]
    assert isinstance(effects[0], Commit) and MarkProcessed in {type(op) for op in effects[0].ops}


def _state(state: Any) -> dict[str, Any]:
    return {
        "last_seen": state.last_seen,
        "processed": state.processed,
        "sessions": state.sessions,
        "tombstones": state.tombstones,
    }


# --- run and stop --------------------------------------------------------------------------


async def test_stop_finishes_the_input_it_took_and_returns(
    db: BridgeDatabase, tmp_path: Path
) -> None:
    async with make_stack(db, tmp_path / "ws") as stack:
        entered, gate = asyncio.Event(), asyncio.Event()
        flush = stack.effects.flush

        async def gated(group: EffectGroup) -> None:
            entered.set()
            await gate.wait()
            await flush(group)

        stack.effects.flush = gated  # type: ignore[method-assign]
        stack.loop.feed(RefreshRequested())
        task = asyncio.create_task(stack.loop.run())
        async with asyncio.timeout(WAIT):
            await entered.wait()
        # Fed while the first is performed (had it waited with it, both were one group).
        stack.loop.feed(RefreshRequested())
        stack.loop.stop()
        gate.set()
        async with asyncio.timeout(WAIT):
            await task
        await sent(stack.outbound)
        assert stack.loop.handled == 1
        assert stack.loop.pending == 1  # the second was never taken
        assert [e.kind for e in stack.pool.events()] == [30515]  # the first one's heartbeat


async def test_run_ticks_handles_fed_inputs_and_stops_while_idle(
    db: BridgeDatabase, tmp_path: Path
) -> None:
    async with make_stack(db, tmp_path / "ws") as stack:
        task = asyncio.create_task(stack.loop.run())
        await stack.pool.wait_published(1)  # the heartbeat was due: a tick sent it
        assert stack.loop.wait_time() == MAX_WAIT  # …and the loop now waits for inputs
        stack.loop.feed(RefreshRequested())
        await stack.pool.wait_published(2)
        stack.loop.stop()  # while it waits: it wakes and returns
        async with asyncio.timeout(WAIT):
            await task
        assert (stack.loop.handled, stack.loop.pending) == (1, 0)
        assert [(e.kind, e.created_at) for e in stack.pool.events()] == [
            (30515, T),
            (30515, T + 1),  # a heartbeat is strictly newer than the last
        ]


async def test_an_input_taken_as_the_loop_stops_is_handled_not_lost(
    db: BridgeDatabase, tmp_path: Path
) -> None:
    async with make_stack(db, tmp_path / "ws") as stack:
        task = asyncio.create_task(stack.loop.run())
        await stack.pool.wait_published(1)  # the boot-time tick is done
        async with asyncio.timeout(WAIT):
            while not stack.loop.waiting:
                await asyncio.sleep(0)  # until the loop waits for an input
        stack.loop.feed(RefreshRequested())
        stack.loop.stop()  # in the same step: the waiting getter already holds the input
        async with asyncio.timeout(WAIT):
            await task
        assert (stack.loop.handled, stack.loop.pending) == (1, 0)
        await sent(stack.outbound)
        assert len(stack.pool.published) == 2  # its heartbeat went out


def test_the_input_queue_puts_commands_first_and_keeps_each_source_in_order() -> None:
    queue = InputQueue()
    assert not queue and len(queue) == 0
    first, second = RefreshRequested(), RefreshRequested()
    commands = [input_event("s-1", text="one"), input_event("s-1", text="two")]
    for event in (first, commands[0], second, commands[1]):
        queue.append(event)
    assert queue and len(queue) == 4
    taken = [queue.popleft() for _ in range(4)]
    assert taken[:2] == commands
    assert taken[2] is first and taken[3] is second
    with pytest.raises(IndexError):
        queue.popleft()


def test_after_a_fence_commands_wait_for_what_was_queued_and_keep_their_order() -> None:
    queue = InputQueue()
    replay = [RefreshRequested(), RefreshRequested()]
    for event in replay:
        queue.append(event)
    queue.fence()  # a start: the hosts' replay is queued, the held commands come next
    held, later = input_event("s-1", text="held"), input_event("s-1", text="later")
    queue.append(held)
    after = RefreshRequested()
    queue.append(after)
    queue.append(later)
    assert [queue.popleft() for _ in range(5)] == [*replay, held, after, later]
    fresh, output = input_event("s-1", text="fresh"), RefreshRequested()
    queue.append(output)
    queue.append(fresh)  # the fence is passed: commands come first again
    assert [queue.popleft(), queue.popleft()] == [fresh, output]
    queue.fence()  # nothing queued: nothing to wait for
    queue.append(output)
    queue.append(fresh)
    assert queue.popleft() is fresh


async def test_a_command_waits_behind_no_other_input(db: BridgeDatabase, tmp_path: Path) -> None:
    async with make_stack(db, tmp_path / "ws") as stack:
        session = await ready_session(stack)
        stack.clock.advance(1)
        stack.loop.feed(RefreshRequested())  # queued first: a heartbeat
        stack.loop.feed(input_event(session))
        task = asyncio.create_task(stack.loop.run())
        await stack.pool.wait_published(3)
        stack.loop.stop()
        async with asyncio.timeout(WAIT):
            await task
        kinds = [e.kind for e in stack.pool.events()]
        assert kinds[:2] == [4516, 24515]  # the ack and the input's line before the heartbeat
        assert 30515 in kinds[2:]


async def test_a_backlog_is_warned_about_once_not_per_input_and_again_only_when_it_doubled(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Agents outrunning the store: the operator reads one line per doubling, not per input."""
    monkeypatch.setattr(engine_loop, "INPUT_BACKLOG_WARNING", 100)
    caplog.set_level(logging.INFO, "bridge.runtime.engine_loop")
    loop = EngineLoop(ScriptedEngine([NOTIFY]), Parts().runner(), FakeClock())  # type: ignore[arg-type]
    event = RefreshRequested()

    def feed(count: int) -> list[str]:
        caplog.clear()
        for _ in range(count):
            loop.feed(event)
        return caplog.messages

    assert feed(99) == []  # under the mark
    assert feed(1) == ["! 100 inputs wait for the engine (agents outrun the store)"]
    assert feed(99) == []  # more waits, but it has not doubled
    assert feed(1) == ["! 200 inputs wait for the engine (agents outrun the store)"]
    assert feed(150) == []

    # The loop works the backlog off; the next time it piles up, the operator hears of it again.
    task = asyncio.create_task(loop.run())
    async with asyncio.timeout(WAIT):
        while not loop.waiting:
            await asyncio.sleep(0)
    loop.stop()
    async with asyncio.timeout(WAIT):
        await task
    assert (loop.handled, loop.pending) == (350, 0)
    assert feed(1) == ["the inputs waiting for the engine are back under 50"]
    assert feed(98) == []
    assert feed(1) == ["! 100 inputs wait for the engine (agents outrun the store)"]


async def test_run_ends_with_the_engine_failure(tmp_path: Path) -> None:
    loop = EngineLoop(ExplodingEngine(), None, FakeClock())  # type: ignore[arg-type]
    loop.feed(RefreshRequested())
    with pytest.raises(EngineFailure, match="the engine failed on RefreshRequested"):
        async with asyncio.timeout(WAIT):
            await loop.run()


# --- sync chunks ---------------------------------------------------------------------------

E1 = OutputEntry(entryType="text", content="one", timestamp="t1")
E3 = OutputEntry(entryType="text", content="three", timestamp="t3")
CHUNK = SendSyncChunk(PHONE.public_hex, "s-1", "sync-1", (1, 3))


async def store_lines(db: BridgeDatabase) -> None:
    for seq, entry in ((1, E1), (3, E3)):  # seq 2 was pruned
        await bridge_state.append_transcript(
            db, "s-1", seq, entry.model_dump_json(exclude_none=True)
        )


async def test_a_sync_chunk_is_read_from_the_store_and_acknowledged_once_delivered(
    db: BridgeDatabase, tmp_path: Path
) -> None:
    async with make_stack(db, tmp_path / "ws") as stack:
        await store_lines(db)
        stack.pool.hold = asyncio.Event()
        await stack.effects.perform_one(CHUNK)
        await stack.pool.wait_published(1)
        assert stack.fed == []  # queued and with the relay: not sent yet
        stack.pool.hold.set()
        await sent(stack.outbound)
        assert stack.fed == [SyncChunkSent(PHONE.public_hex, "sync-1")]
        [event] = stack.pool.events()
        assert opened(event) == SyncChunkMessage(
            sessionId="s-1",
            syncId="sync-1",
            range=[1, 3],
            entries=[SyncChunkEntry(seq=1, entry=E1), SyncChunkEntry(seq=3, entry=E3)],
        )
        assert (event.kind, tag(event, "s")) == (4516, "s-1")
        assert await rows(db, "SELECT count(*) FROM outbox") == [(0,)]  # sync has its own acks


async def test_a_sync_chunk_no_relay_took_is_not_acknowledged(
    db: BridgeDatabase, tmp_path: Path
) -> None:
    async with make_stack(db, tmp_path / "ws") as stack:
        await store_lines(db)
        stack.pool.answers[stack.pool.urls[0]] = PublishStatus.NOT_CONNECTED
        await stack.effects.perform_one(CHUNK)
        await sent(stack.outbound)
        assert len(stack.pool.published) == 1
        assert stack.fed == []


# --- where each effect goes ----------------------------------------------------------------


class Parts:
    """Every part the effect runner talks to, recording the calls it gets."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.sealed = [object()]

    def part(self, name: str, *, awaited: Sequence[str] = ()) -> Any:
        parts = self

        class Part:
            def __getattr__(self, method: str) -> Any:
                def call(*args: Any, **kwargs: Any) -> Any:
                    parts.calls.append((f"{name}.{method}", args, kwargs))
                    if method in awaited:
                        return asyncio.sleep(0)
                    return parts.sealed if method == "seal" else None

                return call

        return Part()

    def runner(self) -> EffectRunner:
        return EffectRunner(
            db=None,  # type: ignore[arg-type]
            committer=self.part("committer", awaited=("commit",)),
            outbound=self.part("outbound", awaited=("save_clock",)),
            runners=self.part("runners"),
            errands=self.part("errands"),
            subscriptions=self.part("subscriptions", awaited=("refresh",)),
            notify=lambda effect: self.calls.append(("notify", (effect,), {})),
            wake=lambda effect: self.calls.append(("wake", (effect,), {})),
            feed=lambda event: self.calls.append(("feed", (event,), {})),
        )


RECORD = session_record("s-1")
HEARTBEAT = make_engine().heartbeat_message()
ERRANDS: list[Effect] = [
    ProbeProvider(PHONE.public_hex, "kimi", "https://kimi.test", "tok"),
    ProbeAnthropicKey(PHONE.public_hex, "key"),
    ReadGsdState("s-1", "/ws"),
    FetchBlossomImage(PHONE.public_hex, "s-1", "https://b.test/x", "00" * 32, "11" * 32, "22" * 12),
    SaveImage("s-1", "x.png", b"png"),
    CreateFolder("req-1", "/ws", "app"),
    ListModels(),
]
ANSWER = AnswerPermission("s-1", "req-1", True)
NOTIFY = Notify("paired", {"label": "Pixel"})
COMMIT = Commit((MarkProcessed("aa" * 32, 1),))
Route = tuple[Effect, list[tuple[str, tuple[Any, ...], dict[str, Any]]]]
ERRAND_ROUTES: list[Route] = [(errand, [("errands.run", (errand,), {})]) for errand in ERRANDS]
WAKE = WakePhones("approval", (PHONE.public_hex,), ("s-1", "req-1"))
ROUTES: list[Route] = [
    (COMMIT, [("committer.commit", (COMMIT,), {})]),
    (
        Publish(ACK, (PHONE.public_hex,)),
        [
            ("outbound.seal", (Publish(ACK, (PHONE.public_hex,)),), {"durable": False}),
            ("outbound.send", ("SEALED",), {}),
        ],
    ),
    (
        Publish(HEARTBEAT, (PHONE.public_hex,)),
        [
            ("outbound.seal", (Publish(HEARTBEAT, (PHONE.public_hex,)),), {"durable": False}),
            ("outbound.send", ("SEALED",), {}),
            ("outbound.save_clock", (), {}),  # the heartbeat's created_at survives a restart
        ],
    ),
    (Resubscribe(), [("subscriptions.refresh", (), {})]),
    (
        StartRunner(RECORD, resume=True, create_cwd=True),
        [("runners.start", (RECORD,), {"resume": True, "create_cwd": True})],
    ),
    (SendToRunner("s-1"), [("runners.deliver", ("s-1",), {})]),
    (InterruptRunner("s-1"), [("runners.interrupt", ("s-1",), {})]),
    (SetRunnerOption("s-1", "mode", "plan"), [("runners.set_option", ("s-1", "mode", "plan"), {})]),
    (CloseRunner("s-1"), [("runners.close", ("s-1",), {})]),
    (ANSWER, [("runners.answer", (ANSWER,), {})]),
    *ERRAND_ROUTES,
    (NOTIFY, [("notify", (NOTIFY,), {})]),
    (WAKE, [("wake", (WAKE,), {})]),
    (Dropped("duplicate", "ab" * 32, PHONE.public_hex), []),
]


@pytest.mark.parametrize(
    ("effect", "expected"),
    ROUTES,
    ids=[type(e).__name__ + f"-{i}" for i, (e, _) in enumerate(ROUTES)],
)
async def test_each_effect_goes_to_its_part(
    effect: Effect, expected: list[tuple[str, tuple[Any, ...], dict[str, Any]]]
) -> None:
    parts = Parts()
    await parts.runner().perform_one(effect)
    wanted = [
        (name, tuple(parts.sealed if a == "SEALED" else a for a in args), kwargs)
        for name, args, kwargs in expected
    ]
    assert parts.calls == wanted


def test_every_effect_type_has_a_route() -> None:
    routed = {type(effect) for effect, _ in ROUTES} | {SendSyncChunk}  # tested above, for real
    assert routed == set(get_args(Effect))


async def test_dropped_is_logged_with_its_reason(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "bridge.runtime.engine_loop")
    await Parts().runner().perform_one(Dropped("duplicate", "ab" * 32, PHONE.public_hex))
    assert caplog.messages == [f"x dropped abababab from {PHONE.npub[:16]}: duplicate"]
    assert BRIDGE.npub not in caplog.text
