"""Group commit: inputs that wait together commit together, and nothing outruns its commit.

The engine here is scripted (each input gets the next list of effects); the commit, the store,
the outbound queue and the loop are the real ones (see :mod:`tests.runtime.support`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from bridge.engine.effects import (
    AppendTranscript,
    Commit,
    DeleteTranscript,
    Dropped,
    Effect,
    MarkProcessed,
    Notify,
    Publish,
    SendSyncChunk,
    SendToRunner,
    StartRunner,
)
from bridge.engine.inputs import Input, RefreshRequested
from bridge.protocol import InputAckMessage, OutputEntry, OutputMessage
from bridge.runtime.engine_loop import GROUP_LIMIT, EngineFailure, EngineLoop, groupable
from store.db import BridgeDatabase
from tests.runtime.support import (
    PHONE,
    WAIT,
    make_stack,
    opened,
    rows,
    sent,
    session_record,
)

AUDIENCE = (PHONE.public_hex,)
ENTRY = OutputEntry(entryType="text", content="hi", timestamp="t")


def ack(n: int) -> InputAckMessage:
    return InputAckMessage(sessionId="s-1", inputId=f"in-{n}")


def line(n: int) -> OutputMessage:
    return OutputMessage(sessionId="s-1", seq=n, entry=ENTRY)


def event_id(n: int) -> str:
    return f"{n:064x}"


def command_effects(n: int) -> list[Effect]:
    """What an ``input`` looks like to the loop: its commit with the ack, then its live line."""
    return [
        Commit((MarkProcessed(event_id(n), 1),), outbox=(Publish(ack(n), AUDIENCE),)),
        Publish(line(n), AUDIENCE),
    ]


class ListEngine:
    """Answers the n-th input with the n-th list of effects."""

    def __init__(self, answers: Sequence[list[Effect]]) -> None:
        self.answers = list(answers)

    def next_deadline(self) -> float | None:
        return None

    def handle(self, event: Input, now: float) -> list[Effect]:
        return self.answers.pop(0)

    def tick(self, now: float) -> list[Effect]:
        return []


async def run_until(loop: EngineLoop, handled: int) -> None:
    """Run `loop` until it handled `handled` inputs, then stop it."""
    task = asyncio.create_task(loop.run())
    try:
        async with asyncio.timeout(WAIT):
            while loop.handled < handled and not task.done():
                await asyncio.sleep(0.01)
    finally:
        loop.stop()
        await task


def test_what_may_join_a_group() -> None:
    chunk = SendSyncChunk(PHONE.public_hex, "s-1", "sync-1", (1, 50))
    assert groupable(
        [*command_effects(1), SendToRunner("s-1"), chunk, Dropped("duplicate", "e", "a")]
    )
    assert groupable([])
    assert not groupable([StartRunner(session_record(), resume=False, create_cwd=False)])
    assert not groupable([Notify("paired", {"label": "x"})])
    # A deletion would let a deferred chunk read the store after it instead of before.
    assert not groupable([Commit((DeleteTranscript("s-1"),))])


async def test_waiting_inputs_are_one_transaction_and_reply_in_order(
    db: BridgeDatabase, tmp_path: Path
) -> None:
    async with make_stack(db, tmp_path / "ws") as stack:
        engine = ListEngine([command_effects(n) for n in (1, 2, 3)])
        loop = EngineLoop(engine, stack.effects, stack.clock)  # type: ignore[arg-type]
        for _ in range(3):
            loop.feed(RefreshRequested())  # they wait together: one group
        before = stack.committer.transactions
        await run_until(loop, 3)
        await sent(stack.outbound)
        assert stack.committer.transactions - before == 1
        assert stack.committer.commits == 3
        assert await rows(db, "SELECT count(*) FROM processed") == [(3,)]
        assert [opened(e) for e in stack.pool.events()] == [
            ack(1),
            line(1),
            ack(2),
            line(2),
            ack(3),
            line(3),
        ]
        assert await rows(db, "SELECT count(*) FROM outbox") == [(0,)]  # every relay took them


async def test_a_lone_input_is_its_own_group(db: BridgeDatabase, tmp_path: Path) -> None:
    async with make_stack(db, tmp_path / "ws") as stack:
        engine = ListEngine([command_effects(1)])
        loop = EngineLoop(engine, stack.effects, stack.clock)  # type: ignore[arg-type]
        before = stack.committer.transactions
        await loop.handle_waiting(RefreshRequested())
        await sent(stack.outbound)
        assert (stack.committer.transactions - before, loop.handled) == (1, 1)
        assert [opened(e) for e in stack.pool.events()] == [ack(1), line(1)]


async def test_an_input_that_cannot_join_flushes_the_group_before_its_effects(
    db: BridgeDatabase, tmp_path: Path
) -> None:
    async with make_stack(db, tmp_path / "ws") as stack:
        seen: list[tuple[int, int]] = []
        notify = stack.effects._notify  # type: ignore[attr-defined]

        def notified(effect: Notify) -> None:
            # The group before it is durable and its replies handed to the sender.
            queued = stack.outbound._queue.qsize()  # type: ignore[attr-defined]
            seen.append((stack.committer.commits, queued))
            notify(effect)

        stack.effects._notify = notified  # type: ignore[attr-defined]
        engine = ListEngine(
            [command_effects(1), command_effects(2), [Notify("paired", {})], command_effects(3)]
        )
        loop = EngineLoop(engine, stack.effects, stack.clock)  # type: ignore[arg-type]
        for _ in range(4):
            loop.feed(RefreshRequested())
        await run_until(loop, 4)
        await sent(stack.outbound)
        assert seen[0][0] == 2  # inputs 1 and 2 committed before the notification
        assert stack.committer.commits == 3
        assert [opened(e) for e in stack.pool.events()] == [
            ack(1),
            line(1),
            ack(2),
            line(2),
            ack(3),
            line(3),
        ]


async def test_a_group_is_at_most_the_limit(db: BridgeDatabase, tmp_path: Path) -> None:
    async with make_stack(db, tmp_path / "ws") as stack:
        count = GROUP_LIMIT + 2
        engine = ListEngine([[Commit((MarkProcessed(event_id(n), 1),))] for n in range(count)])
        loop = EngineLoop(engine, stack.effects, stack.clock)  # type: ignore[arg-type]
        for _ in range(count):
            loop.feed(RefreshRequested())
        before = stack.committer.transactions
        await run_until(loop, count)
        assert stack.committer.transactions - before == 2
        assert await rows(db, "SELECT count(*) FROM processed") == [(count,)]


async def test_a_failed_group_commit_stores_and_sends_nothing_of_the_group(
    db: BridgeDatabase, tmp_path: Path
) -> None:
    async with make_stack(db, tmp_path / "ws") as stack:
        twice = AppendTranscript("s-1", 1, ENTRY)  # the second insert of seq 1 fails
        engine = ListEngine(
            [
                [Commit((MarkProcessed(event_id(1), 1), twice)), Publish(line(1), AUDIENCE)],
                [Commit((MarkProcessed(event_id(2), 1), twice)), Publish(line(2), AUDIENCE)],
            ]
        )
        loop = EngineLoop(engine, stack.effects, stack.clock)  # type: ignore[arg-type]
        loop.feed(RefreshRequested())
        loop.feed(RefreshRequested())
        with pytest.raises(EngineFailure) as failed:
            await loop.run()
        assert str(failed.value).startswith(
            "an effect of a group of 2 inputs failed: 2 commits of AppendTranscript, "
            "MarkProcessed failed: StoreError: "
        )
        await sent(stack.outbound)
        assert stack.pool.published == []
        assert await rows(db, "SELECT count(*) FROM processed") == [(0,)]
        assert await rows(db, "SELECT count(*) FROM transcripts") == [(0,)]
        assert (loop.handled, stack.committer.commits) == (0, 0)
