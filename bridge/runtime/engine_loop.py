"""The engine loop: one task feeds the engine one input at a time and performs its effects in
order, before it takes the next input.

This is step 2 of the data path of one phone ``input`` (the steps: :mod:`bridge.runtime`).

The queue is unbounded on purpose: every input is agent output to store, a command the pool has
already marked as seen (a dropped one would not come back before a restart), or an errand's
answer. Dropping any of them loses data; a burst is worked off instead. :meth:`EngineLoop.feed`
warns when more than :data:`INPUT_BACKLOG_WARNING` wait (agents outrun the store), again only
when the backlog doubled, and says so once it is worked off: one line per change, never one per
input. The phones' commands are taken before any other input that waits (:class:`InputQueue`):
an ``input-ack`` never waits behind a busy agent's lines.

Group commit. When inputs wait in the queue (a busy agent's lines, a phone's burst of commands,
a sync's acks), the loop hands the engine several of them before it performs anything, and their
commits become ONE transaction (:class:`EffectGroup`; a lone input is a group of one). That is
only allowed while every effect of the group can wait for all of the group's commits: commits
themselves, publishes, ``SendToRunner``, ``SendSyncChunk`` (a read of lines the group cannot
remove), ``WakePhones`` (a push is a few seconds away anyway) and ``Dropped``
(:func:`groupable`). An input with any other effect (a runner to start, a
session's transcript deleted, …) first flushes the group — its commits made durable, then
everything they deferred performed, in order — and then has its own effects performed one by one.
So every effect still runs after the commits before it are durable, in the order the engine
returned them; a group only delays replies, by at most :data:`GROUP_LIMIT` inputs, and only when
inputs were waiting anyway. A commit's durable replies are sealed when it joins the group (they
are rows of the transaction); the group's publishes while the transaction runs on the store's
thread, so that, once it is durable, only sending is left (the ``created_at`` clock never goes
back, whichever is sealed first).

Deadlines. The engine's deadlines are unix times (protocol time). The loop waits for the next one
on asyncio's monotonic clock, at most :data:`MAX_WAIT` seconds at a time, so a step of the wall
clock (NTP, a suspended machine waking up) is noticed within that.

Failure policy (one, for the whole loop): an exception escaping the engine, a commit that fails
(a group's transaction fails as a whole: nothing of any of its inputs is stored or sent), or any
other effect that raises stops the loop with :class:`EngineFailure`. The effects the loop
performs are local — a transaction, sealing, queueing, spawning a task — so an exception is a
bug or a broken store; either way the engine's memory may now be ahead of the database. The
daemon stops with a non-zero exit, and systemd restarts it from the durable state, where the
command is not yet processed and runs once when the relay replays it. Nothing after a failed
effect runs.

Stopping: :meth:`EngineLoop.stop` lets the loop finish the input it is on (its effects too) and
return; the daemon waits for that before it closes the runners and the store.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import assert_never

from bridge.engine.core import Engine
from bridge.engine.effects import (
    AnswerPermission,
    CloseRunner,
    Commit,
    CreateFolder,
    DeleteSession,
    DeleteTranscript,
    Dropped,
    Effect,
    FetchBlossomImage,
    InterruptRunner,
    ListModels,
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
from bridge.engine.inputs import CommandEventReceived, Input, SyncChunkSent
from bridge.nostr.keys import hex_to_npub
from bridge.protocol import SessionsMessage, SyncChunkMessage
from bridge.runtime.clock import Clock
from bridge.runtime.commit import CommitFailed, Committer, PreparedCommit
from bridge.runtime.errands.dispatch import Errands
from bridge.runtime.hosts.runners import RunnerManager
from bridge.runtime.outbound import Outbound
from bridge.runtime.progress import Progress
from bridge.runtime.subscriptions import Subscriptions
from bridge.runtime.sync_chunks import chunk_text, reading_batches, start_reading
from store.db import BridgeDatabase

__all__ = [
    "CHUNKS_PER_STEP",
    "GROUP_LIMIT",
    "INPUT_BACKLOG_WARNING",
    "MAX_WAIT",
    "SYNC_READ_BATCH",
    "EffectGroup",
    "EffectRunner",
    "EngineFailure",
    "EngineLoop",
    "InputQueue",
    "groupable",
]

logger = logging.getLogger(__name__)

INPUT_BACKLOG_WARNING = 50_000
"""Inputs waiting for the engine past which a warning is logged (they are never dropped); under
half of it, the backlog counts as worked off."""
MAX_WAIT = 30.0
"""The longest the loop waits for an input before it looks at the clock again."""
CHUNKS_PER_STEP = 8
"""Sync chunks sealed before the loop lets the sender run (see ``_send_sync_chunks``); also the
first batch of a sync read from the store."""
SYNC_READ_BATCH = 64
"""Sync chunks whose lines are read in one trip to the store after the first batch."""
GROUP_LIMIT = 128
"""Inputs at most in one group commit: bounds how long the first one's replies wait for the
rest (each input adds its engine work and sealing; the transaction is one trip)."""

_DEFERRABLE = (Commit, Publish, SendToRunner, SendSyncChunk, WakePhones, Dropped)
_DESTRUCTIVE = (DeleteTranscript, DeleteSession)


def groupable(effects: Sequence[Effect]) -> bool:
    """Whether an input's effects may join a group commit (see the module docstring).

    A commit that deletes a session or its lines is not: a ``SendSyncChunk`` deferred in the
    group would read the store after the deletion instead of before it.
    """
    for effect in effects:
        if not isinstance(effect, _DEFERRABLE):
            return False
        if isinstance(effect, Commit) and any(isinstance(op, _DESTRUCTIVE) for op in effect.ops):
            return False
    return True


@dataclass(slots=True)
class EffectGroup:
    """The effects of several inputs: their commits, then what each commit let go, in order."""

    commits: list[PreparedCommit] = field(default_factory=list)
    after: list[PreparedCommit | Effect] = field(default_factory=list)
    """In effect order: a prepared commit (its replies and cursors to release), or an effect
    to perform once the commits are durable (a publish is sealed meanwhile)."""
    inputs: int = 0


class EngineFailure(Exception):
    """The engine or one of its effects failed; the daemon must stop (see the docstring)."""


class EffectRunner:
    """Performs the engine's effects, in order, each to the part of the daemon it names."""

    def __init__(
        self,
        *,
        db: BridgeDatabase,
        committer: Committer,
        outbound: Outbound,
        runners: RunnerManager,
        errands: Errands,
        subscriptions: Subscriptions,
        notify: Callable[[Notify], None],
        feed: Callable[[Input], None],
        wake: Callable[[WakePhones], None] | None = None,
    ) -> None:
        self._db = db
        self._committer = committer
        self._outbound = outbound
        self._runners = runners
        self._errands = errands
        self._subscriptions = subscriptions
        self._notify = notify
        self._feed = feed
        self._wake = wake

    async def perform(self, effects: list[Effect]) -> None:
        """Every effect in order; an exception stops the rest (nothing may outrun a commit).

        Consecutive ``SendSyncChunk`` effects (a sync emits all its chunks at once) are sent
        together: their lines are read from the store in a few trips, each batch read while
        the one before is sealed.
        """
        for item in _chunk_runs(effects):
            if isinstance(item, list):
                await self._send_sync_chunks(item)
            else:
                assert not isinstance(item, PreparedCommit)  # effects hold none
                await self.perform_one(item)

    def stage(self, effects: Sequence[Effect], group: EffectGroup) -> None:
        """Add one input's :func:`groupable` effects to `group`: commits prepared now (their
        replies sealed), everything else performed by :meth:`flush`."""
        for effect in effects:
            if isinstance(effect, Commit):
                prepared = self._committer.prepare(effect)
                group.commits.append(prepared)
                group.after.append(prepared)
            else:
                group.after.append(effect)
        group.inputs += 1

    async def flush(self, group: EffectGroup) -> None:
        """The group's commits as one transaction, then what they deferred, in order.

        The transaction is handed to the store's thread first, and the group's publishes are
        sealed while it runs there (SQLite and the signatures release the GIL): once it is
        durable, what is left is sending, so the replies are on their way at the loop's next
        step instead of after the sealing (which keeps the sealing off the ack's path).
        """
        writing = self._committer.start(group.commits)
        try:
            sealed = {
                id(item): self._outbound.seal(item, durable=False)
                for item in group.after
                if isinstance(item, Publish)
            }
        finally:
            # Awaited even when the sealing failed: the write is under way (it may commit),
            # and either failure stops the loop.
            await self._committer.finish(group.commits, writing)
        for item in _chunk_runs(group.after):
            if isinstance(item, PreparedCommit):
                self._committer.release(item)
            elif isinstance(item, list):
                await self._send_sync_chunks(item)
            elif isinstance(item, Publish):
                self._outbound.send(sealed[id(item)])
                if isinstance(item.message, SessionsMessage):
                    await self._outbound.save_clock()
            else:
                await self.perform_one(item)
        await self._outbound.room()  # the sender is far behind: let it catch up first

    async def perform_one(self, effect: Effect) -> None:
        match effect:
            case Commit():
                await self._committer.commit(effect)
            case Publish():
                # Durable replies travel in Commit.outbox; a bare Publish is best effort.
                self._outbound.send(self._outbound.seal(effect, durable=False))
                if isinstance(effect.message, SessionsMessage):
                    await self._outbound.save_clock()
            case SendSyncChunk():
                await self._send_sync_chunks([effect])
            case Resubscribe():
                await self._subscriptions.refresh()
            case StartRunner():
                self._runners.start(
                    effect.record, resume=effect.resume, create_cwd=effect.create_cwd
                )
            case SendToRunner():
                self._runners.deliver(effect.session_id)
            case InterruptRunner():
                self._runners.interrupt(effect.session_id)
            case SetRunnerOption():
                self._runners.set_option(effect.session_id, effect.option, effect.value)
            case CloseRunner():
                self._runners.close(effect.session_id)
            case AnswerPermission():
                self._runners.answer(effect)
            case (
                ProbeProvider()
                | ProbeAnthropicKey()
                | ReadGsdState()
                | FetchBlossomImage()
                | SaveImage()
                | CreateFolder()
                | ListModels()
            ):
                self._errands.run(effect)
            case Notify():
                self._notify(effect)
            case WakePhones():
                if self._wake is not None:  # None: push is off
                    self._wake(effect)
            case Dropped():
                logger.info(
                    "x dropped%s%s: %s",
                    f" {effect.event_id[:8]}" if effect.event_id else "",
                    f" from {hex_to_npub(effect.author)[:16]}" if effect.author else "",
                    effect.reason,
                )
            case _:
                assert_never(effect)

    async def _send_sync_chunks(self, chunks: Sequence[SendSyncChunk]) -> None:
        """Read the chunks' lines from the store (a few trips, see
        :mod:`bridge.runtime.sync_chunks`) and send each chunk; the engine hears when each one
        left."""
        batches = reading_batches(chunks, CHUNKS_PER_STEP, SYNC_READ_BATCH)
        reading: Awaitable[list[list[tuple[int, str]]]] | None = start_reading(self._db, batches[0])
        try:
            for number, batch in enumerate(batches):
                assert reading is not None
                lines, reading = await reading, None
                if number + 1 < len(batches):
                    reading = start_reading(self._db, batches[number + 1])
                for index, (chunk, rows) in enumerate(zip(batch, lines, strict=True)):
                    if (number or index) and not index % CHUNKS_PER_STEP:
                        # Let the first chunks leave while the next ones are sealed: the phone
                        # starts on them at once instead of after the whole sync was signed.
                        await asyncio.sleep(0)
                    self._send_sync_chunk(chunk, rows)
        finally:
            if reading is not None:  # sealing failed: the read under way still ends
                with contextlib.suppress(Exception):
                    await reading

    def _send_sync_chunk(self, chunk: SendSyncChunk, rows: Sequence[tuple[int, str]]) -> None:
        low, high = chunk.seq_range
        # The message gives the event's kind and tags; its text is spliced from the lines.
        stub = SyncChunkMessage(
            sessionId=chunk.session_id, syncId=chunk.sync_id, range=[low, high], entries=[]
        )
        text = chunk_text(chunk.session_id, chunk.sync_id, (low, high), rows)
        sealed = self._outbound.seal(Publish(stub, (chunk.phone,)), durable=False, text=text)
        sent = SyncChunkSent(chunk.phone, chunk.sync_id)
        self._outbound.send(sealed, on_sent=functools.partial(self._feed, sent))


def _chunk_runs(
    items: Sequence[PreparedCommit | Effect],
) -> list[PreparedCommit | Effect | list[SendSyncChunk]]:
    """`items` in order, each run of consecutive ``SendSyncChunk`` gathered in one list."""
    out: list[PreparedCommit | Effect | list[SendSyncChunk]] = []
    for item in items:
        if isinstance(item, SendSyncChunk):
            last = out[-1] if out else None
            if isinstance(last, list):
                last.append(item)
            else:
                out.append([item])
        else:
            out.append(item)
    return out


class InputQueue:
    """The engine loop's waiting inputs: the phones' commands first, each source in order.

    A command waits behind no agent output: its ``input-ack`` is what the phone's outbox waits
    for, and a burst of commands (a phone back online with its outbox, a sync's acks) is
    acknowledged before the turns it starts fill the queue with their lines. Reordering across
    sources is safe while the phone has seen only what the engine handled: inputs from different
    sources race each other to the queue anyway, and a command can depend only on what the
    phone saw.

    Not at a start: a phone may answer a card the previous daemon showed, which this one has
    only queued again (a session host's replay). :meth:`fence` makes every command wait for
    the inputs queued so far; until they are taken, commands queue behind them in arrival
    order (so a phone's commands keep their order too).
    """

    __slots__ = ("_commands", "_fenced", "_others")

    def __init__(self) -> None:
        self._commands: collections.deque[Input] = collections.deque()
        self._others: collections.deque[Input] = collections.deque()
        self._fenced = 0
        """How many inputs at the head of ``_others`` every command must wait for."""

    def fence(self) -> None:
        """From now on, commands wait for every input queued so far (see the class)."""
        self._fenced = len(self._others)

    def append(self, event: Input) -> None:
        if not isinstance(event, CommandEventReceived):
            self._others.append(event)
        elif self._fenced:
            self._others.append(event)
            self._fenced = len(self._others)  # the next commands come after this one
        else:
            self._commands.append(event)

    def popleft(self) -> Input:
        """The oldest command, else the oldest other input (IndexError when empty)."""
        if self._commands:
            return self._commands.popleft()
        event = self._others.popleft()
        self._fenced = max(0, self._fenced - 1)
        return event

    def __len__(self) -> int:
        return len(self._commands) + len(self._others)

    def __bool__(self) -> bool:
        return bool(self._commands) or bool(self._others)


class EngineLoop:
    """The one task that feeds the engine (see the module docstring).

    Args:
        engine: the engine.
        effects: performs what the engine returns.
        clock: the wall clock is the engine's ``now``.
        max_wait: the longest wait for an input before the clock is looked at again.
    """

    def __init__(
        self,
        engine: Engine,
        effects: EffectRunner,
        clock: Clock,
        *,
        max_wait: float = MAX_WAIT,
    ) -> None:
        self._engine = engine
        self._effects = effects
        self._clock = clock
        self._max_wait = max_wait
        self._inputs = InputQueue()
        self._backlog_mark = INPUT_BACKLOG_WARNING
        self._backlog_warn_at = self._backlog_mark
        """The backlog that warns next: the mark, or twice the backlog last warned about."""
        self._stopping = False
        self._waiter: asyncio.Future[None] | None = None
        """Set while the loop waits for an input: what :meth:`feed` and :meth:`stop` resolve."""
        self.handled = 0
        self.progress = Progress()
        """Raised after every input handled (long-polling readers wait on it)."""

    @property
    def pending(self) -> int:
        """Inputs waiting for the engine."""
        return len(self._inputs)

    @property
    def waiting(self) -> bool:
        """Whether the loop waits for an input now (idle)."""
        return self._waiter is not None

    def feed(self, event: Input) -> None:
        """Queue an input for the engine (from callbacks; never blocks, never drops).

        Every input arrives here, so this is where a backlog shows (see the module docstring):
        checked per input, logged per change.
        """
        inputs = self._inputs
        inputs.append(event)
        self._wake_up()
        waiting = len(inputs)
        if waiting >= self._backlog_warn_at:
            logger.warning("! %d inputs wait for the engine (agents outrun the store)", waiting)
            self._backlog_warn_at = 2 * waiting
        elif self._backlog_warn_at > self._backlog_mark and waiting < self._backlog_mark // 2:
            logger.info(
                "the inputs waiting for the engine are back under %d", self._backlog_mark // 2
            )
            self._backlog_warn_at = self._backlog_mark

    def fence(self) -> None:
        """Make the phones' commands wait for every input queued so far (at a start: the
        session hosts' replay; see :class:`InputQueue`)."""
        self._inputs.fence()

    def stop(self) -> None:
        """Finish the current input, then return from :meth:`run`."""
        self._stopping = True
        self._wake_up()

    def _wake_up(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def wait_time(self) -> float:
        """How long to wait for an input before :meth:`tick` is due (never negative)."""
        deadline = self._engine.next_deadline()
        if deadline is None:
            return self._max_wait
        return max(0.0, min(self._max_wait, deadline - self._clock.wall()))

    async def run(self) -> None:
        """Take inputs until stopped: one at a time, or a group when more are waiting.

        Raises:
            EngineFailure: the engine or an effect failed (see the module docstring).
        """
        while not self._stopping:
            event = await self._next(self.wait_time())
            if self._stopping:
                if event is not None:  # taken from the queue: it is handled, not lost
                    await self.handle(event)
                return
            if event is None:
                await self.tick()
            else:
                await self.handle_waiting(event)
            self.progress.bump()

    async def handle_waiting(self, first: Input) -> None:
        """`first`, and the inputs waiting behind it as one group commit while they can be.

        See the module docstring: an input whose effects cannot join ends the group (flushed
        first) and has its effects performed on their own; a lone input is performed at once.
        """
        effects = self._decide(first)
        if not groupable(effects):
            await self._perform(effects, type(first).__name__)
            self.handled += 1
            return
        group = EffectGroup()
        self._stage(effects, group, first)
        while group.inputs < GROUP_LIMIT and self._inputs:
            event = self._inputs.popleft()
            effects = self._decide(event)
            if groupable(effects):
                self._stage(effects, group, event)
                continue
            await self._flush(group)
            await self._perform(effects, type(event).__name__)
            self.handled += 1
            return
        await self._flush(group)

    def _decide(self, event: Input) -> list[Effect]:
        try:
            return self._engine.handle(event, self._clock.wall())
        except Exception as exc:
            raise EngineFailure(
                f"the engine failed on {type(event).__name__}: {_describe(exc)}"
            ) from exc

    def _stage(self, effects: list[Effect], group: EffectGroup, event: Input) -> None:
        try:
            self._effects.stage(effects, group)
        except Exception as exc:
            raise EngineFailure(
                f"an effect of {type(event).__name__} failed: {_describe(exc)}"
            ) from exc

    async def _flush(self, group: EffectGroup) -> None:
        await self._perform_group(group)
        self.handled += group.inputs

    async def _next(self, timeout: float) -> Input | None:
        """The next input, or None when `timeout` passed (or the loop was told to stop).

        One future that :meth:`feed`, :meth:`stop` and a timer resolve: waking up for an input
        is one step of the event loop (a race of a queue getter, a stop event and a timeout
        takes several, each on the ack's path). An input queued meanwhile is returned even
        when the loop was also told to stop: :meth:`run` handles it, nothing is dropped.
        """
        if not self._inputs and not self._stopping:
            loop = asyncio.get_running_loop()
            waiter = self._waiter = loop.create_future()
            timer = loop.call_later(timeout, _resolve, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                self._waiter = None
        return self._inputs.popleft() if self._inputs else None

    async def handle(self, event: Input) -> None:
        """One input: the engine's effects, performed in order."""
        effects = self._decide(event)
        await self._perform(effects, f"{type(event).__name__}")
        self.handled += 1

    async def tick(self) -> None:
        """The engine's timers that are due."""
        try:
            effects = self._engine.tick(self._clock.wall())
        except Exception as exc:
            raise EngineFailure(f"the engine failed on a tick: {_describe(exc)}") from exc
        await self._perform(effects, "a tick")

    async def boot(self) -> None:
        """The engine's boot effects (resume sessions, announce ourselves).

        Raises:
            EngineFailure: the engine or an effect failed (the same policy as :meth:`handle`).
        """
        try:
            effects = self._engine.boot(self._clock.wall())
        except Exception as exc:
            raise EngineFailure(f"the engine failed at boot: {_describe(exc)}") from exc
        await self._perform(effects, "boot")

    async def _perform(self, effects: list[Effect], cause: str) -> None:
        try:
            await self._effects.perform(effects)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise EngineFailure(f"an effect of {cause} failed: {_describe(exc)}") from exc

    async def _perform_group(self, group: EffectGroup) -> None:
        try:
            await self._effects.flush(group)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise EngineFailure(
                f"an effect of a group of {group.inputs} inputs failed: {_describe(exc)}"
            ) from exc


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _describe(exc: Exception) -> str:
    """A failure for the log line: a commit's own text, else the exception's type and text."""
    return str(exc) if isinstance(exc, CommitFailed) else f"{type(exc).__name__}: {exc}"
