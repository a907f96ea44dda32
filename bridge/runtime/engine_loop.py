"""The engine loop: one task feeds the engine one input at a time and performs its effects in
order, before it takes the next input.

The data path of one phone ``input``, end to end, in four runtime files:

1. here: the relay pool hands the verified event to :meth:`EngineLoop.feed`; the loop calls
   ``Engine.handle`` and performs the effects in list order (:class:`EffectRunner`);
2. :mod:`bridge.runtime.commit`: the ``Commit`` — the processed mark, the cursor, the user's
   transcript line, the inbox row and the ``input-ack`` in the outbox — is one transaction;
3. :mod:`bridge.runtime.outbound`: once durable, the ack and the live line are sealed (NIP-44,
   signed) and sent to every relay;
4. :mod:`bridge.runtime.runners`: ``SendToRunner`` hands the inbox row to the session's agent,
   marked ``sent`` in the store before the agent gets it.

The queue is unbounded on purpose: every input is agent output to store, a command the pool has
already marked as seen (a dropped one would not come back before a restart), or an errand's
answer. Dropping any of them loses data; a burst is worked off instead, with a warning while more
than :data:`INPUT_BACKLOG_WARNING` wait.

Deadlines. The engine's deadlines are unix times (protocol time). The loop waits for the next one
on asyncio's monotonic clock, at most :data:`MAX_WAIT` seconds at a time, so a step of the wall
clock (NTP, a suspended machine waking up) is noticed within that.

Failure policy (one, for the whole loop): an exception escaping the engine, a commit that fails,
or any other effect that raises stops the loop with :class:`EngineFailure`. The effects the loop
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
import logging
from collections.abc import Callable
from typing import assert_never, cast

from bridge.engine.core import Engine
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
)
from bridge.engine.inputs import Input, SyncChunkSent
from bridge.nostr.keys import hex_to_npub
from bridge.protocol import SessionsMessage, SyncChunkEntry, SyncChunkMessage, decode_as
from bridge.protocol.shared import OutputEntry
from bridge.runtime.clock import Clock
from bridge.runtime.commit import CommitFailed, Committer
from bridge.runtime.errands import Errands
from bridge.runtime.outbound import Outbound
from bridge.runtime.runners import RunnerManager
from bridge.runtime.subscriptions import Subscriptions
from bridge.tasks import race
from store import bridge_state
from store.db import BridgeDatabase

__all__ = ["INPUT_BACKLOG_WARNING", "MAX_WAIT", "EffectRunner", "EngineFailure", "EngineLoop"]

logger = logging.getLogger(__name__)

INPUT_BACKLOG_WARNING = 50_000
"""Inputs waiting for the engine past which a warning is logged (they are never dropped)."""
MAX_WAIT = 30.0
"""The longest the loop waits for an input before it looks at the clock again."""


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
    ) -> None:
        self._db = db
        self._committer = committer
        self._outbound = outbound
        self._runners = runners
        self._errands = errands
        self._subscriptions = subscriptions
        self._notify = notify
        self._feed = feed

    async def perform(self, effects: list[Effect]) -> None:
        """Every effect in order; an exception stops the rest (nothing may outrun a commit)."""
        for effect in effects:
            await self.perform_one(effect)

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
                await self._send_sync_chunk(effect)
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
            case Dropped():
                logger.info(
                    "x dropped%s%s: %s",
                    f" {effect.event_id[:8]}" if effect.event_id else "",
                    f" from {hex_to_npub(effect.author)[:16]}" if effect.author else "",
                    effect.reason,
                )
            case _:
                assert_never(effect)

    async def _send_sync_chunk(self, effect: SendSyncChunk) -> None:
        """Read the chunk's lines from the store and send it; the engine hears when it left."""
        low, high = effect.seq_range
        rows = await bridge_state.read_transcript(self._db, effect.session_id, low, high)
        entries = [
            SyncChunkEntry(seq=seq, entry=decode_as(OutputEntry, text)) for seq, text in rows
        ]
        message = SyncChunkMessage(
            sessionId=effect.session_id, syncId=effect.sync_id, range=[low, high], entries=entries
        )
        sealed = self._outbound.seal(Publish(message, (effect.phone,)), durable=False)
        sent = SyncChunkSent(effect.phone, effect.sync_id)
        self._outbound.send(sealed, on_sent=lambda: self._feed(sent))


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
        self._inputs: asyncio.Queue[Input] = asyncio.Queue()
        self._backlog_warned = False
        self._stopping = False
        self._wake = asyncio.Event()
        self.handled = 0

    @property
    def pending(self) -> int:
        """Inputs waiting for the engine."""
        return self._inputs.qsize()

    def feed(self, event: Input) -> None:
        """Queue an input for the engine (from callbacks; never blocks, never drops)."""
        self._inputs.put_nowait(event)
        waiting = self._inputs.qsize()
        if waiting >= INPUT_BACKLOG_WARNING and not self._backlog_warned:
            self._backlog_warned = True
            logger.warning("! %d inputs wait for the engine (agents outrun the store)", waiting)
        elif waiting < INPUT_BACKLOG_WARNING // 2:
            self._backlog_warned = False

    def stop(self) -> None:
        """Finish the current input, then return from :meth:`run`."""
        self._stopping = True
        self._wake.set()

    def wait_time(self) -> float:
        """How long to wait for an input before :meth:`tick` is due (never negative)."""
        deadline = self._engine.next_deadline()
        if deadline is None:
            return self._max_wait
        return max(0.0, min(self._max_wait, deadline - self._clock.wall()))

    async def run(self) -> None:
        """Take inputs one at a time until stopped.

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
                await self.handle(event)

    async def _next(self, timeout: float) -> Input | None:
        """The next input, or None when `timeout` passed (or the loop was told to stop)."""
        if not self._inputs.empty():
            return self._inputs.get_nowait()
        # The getter first: an input taken from the queue is returned, never dropped.
        first = await race(self._inputs.get(), self._wake.wait(), timeout=timeout)
        if first is None or first[0] != 0:
            return None
        return cast(Input, first[1])

    async def handle(self, event: Input) -> None:
        """One input: the engine's effects, performed in order."""
        try:
            effects = self._engine.handle(event, self._clock.wall())
        except Exception as exc:
            raise EngineFailure(
                f"the engine failed on {type(event).__name__}: {_describe(exc)}"
            ) from exc
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


def _describe(exc: Exception) -> str:
    """A failure for the log line: a commit's own text, else the exception's type and text."""
    return str(exc) if isinstance(exc, CommitFailed) else f"{type(exc).__name__}: {exc}"
