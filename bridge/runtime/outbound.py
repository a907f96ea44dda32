"""Turning the engine's ``Publish`` effects into signed events on the relays.

- :meth:`Outbound.seal` plans a message (kind, tags, monotonic ``created_at``, fragments),
  encrypts each event to its phone with NIP-44 and signs it. It is CPU only, so the engine loop
  calls it inline, in effect order.
- Best-effort events go on an ordered queue drained by one sender task, so a slow relay never
  stalls the engine loop.
- Durable events (4516 replies) were written to the outbox table in the command's transaction
  before they reach :meth:`Outbound.send`. A row leaves the outbox once *every* configured relay
  accepted its event, not the first one: a phone may reach only one of the bridge's relays, and
  a reply that went out while that relay was down would otherwise never reach it. Rows every
  relay took leave together, one transaction for the answers of a loop step (not one trip to
  the store per reply). Which relays hold it is recorded (``outbox.accepted_by``) when some did
  not; :meth:`Outbound.retry_outbox` re-sends the identical signed events to the relays still
  missing them: to a relay when it opens (at boot too) or reconnects
  (:meth:`Outbound.on_relay_open`), and periodically to every relay still missing one, until
  their NIP-40 expiry.
- Backpressure: the engine loop waits (:meth:`Outbound.room`) while more than
  :data:`HIGH_WATER` events wait to be sent, until the sender is back under :data:`LOW_WATER`, at
  most :data:`ROOM_WAIT` seconds at a time. A busy agent's lines then wait as inputs (nothing is
  lost there) instead of filling the send queue, where a full queue drops live output; the bound
  on the wait keeps a relay that never answers from stalling the engine for good.
- A sealed event may carry an ``on_sent`` callback, called once a relay took it (not when it
  was queued): a ``sync-chunk``'s ack wait starts then.

Tasks: the sender is one task, critical (its end stops the daemon). It starts each fresh event's
publish in queue order and lets up to :data:`PIPELINE_DEPTH` of them wait for their ``OK`` at
once, instead of one round trip per event: a relay answers in the order it was sent to, and
waiting for each ``OK`` before sending the next capped a busy session at one event per relay
round trip (the benchmark's "relay alone" rate). The order on the wire is still the queue's: each
publish writes its frame in the first step of its task, and tasks start in the order they were
created. A relay that never answers holds at most :data:`PIPELINE_DEPTH` events before the
sender waits, as it waited for one before. An event sent while the sender idles (nothing
queued, a slot free, no other event started this way still waiting for its first step) starts
its publish at once instead of through the queue: a lone reply — an ``input-ack`` — leaves a
step of the event loop sooner, and the order holds, since the sender's next task is created
after it. Re-sends of outbox rows (``SealedEvent.relays`` set)
run beside it, at most ``RESEND_CONCURRENCY`` at once, so a relay that never answers ``OK``
cannot hold fresh replies behind them. Outbox bookkeeping and reconnect retries run in a
:class:`~bridge.tasks.TaskSet` that :meth:`Outbound.close` lets finish rather than cancel.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import replace
from typing import Any

import orjson

from bridge.engine.effects import Publish
from bridge.engine.publish import PublishPlanner, expires_at
from bridge.nostr.event import VerifiedEvent, check_event, parse_event, sign_event
from bridge.nostr.keys import Keypair
from bridge.nostr.nip44 import ConversationKeyCache, encrypt
from bridge.nostr.pool import PublishReport, RelayPool
from bridge.protocol import BridgeToPhone
from bridge.records import record
from bridge.tasks import CriticalExit, TaskSet
from store import bridge_state
from store.db import BridgeDatabase, Statement
from store.kv import kv_get, kv_set

__all__ = ["Outbound", "SealedEvent"]

logger = logging.getLogger(__name__)

QUEUE_LIMIT = 10_000
PIPELINE_DEPTH = 64
"""Fresh publishes waiting for their relays' ``OK`` at once (see the module docstring)."""
HIGH_WATER = 4 * PIPELINE_DEPTH
"""Queued events past which :meth:`Outbound.room` makes the engine loop wait.

Low on purpose: a reply sealed now leaves after everything queued before it. With a deep queue,
a phone's burst of commands is committed group after group while the acks pile up unsent (the
engine loop keeps the thread; the sender gets a few steps per group), and the first acks leave
long after their commit. At this depth the sender empties the queue between two groups."""
LOW_WATER = PIPELINE_DEPTH
"""Queued events under which it lets the engine loop go on."""
ROOM_WAIT = 2.0
"""The longest one :meth:`Outbound.room` waits (a relay that never answers must not stall it)."""
RESEND_CONCURRENCY = 16
"""Re-sends in flight at once (each may wait the OK timeout on a relay that does not answer)."""
CLOCK_KEY = "publish.lastCreatedAt"


@record
class SealedEvent:
    """A signed event ready for the relays; `durable` ones have an outbox row."""

    event: VerifiedEvent
    durable: bool
    expires_at: int | None
    message_type: str
    relays: tuple[str, ...] | None = None
    """Send only to these relays (a retry); None: to every relay."""
    on_sent: Callable[[], None] | None = None
    """Called once a relay took the event (see the module docstring)."""


class Outbound:
    """Seals messages and sends them, in order, through the pool."""

    def __init__(
        self,
        keypair: Keypair,
        keys: ConversationKeyCache,
        machine: str,
        db: BridgeDatabase,
        *,
        clock: Callable[[], float] = time.time,
        on_critical_exit: CriticalExit | None = None,
    ) -> None:
        self._keypair = keypair
        self._keys = keys
        self._machine = machine
        self._db = db
        self._clock = clock
        self._planner = PublishPlanner()
        self._clock_saved = 0
        self._queue: asyncio.Queue[SealedEvent] = asyncio.Queue(QUEUE_LIMIT)
        self._pool: RelayPool | None = None
        self._sender = TaskSet("outbound sender", logger=logger, on_critical_exit=on_critical_exit)
        self._work = TaskSet("outbound", logger=logger)
        self._resends = TaskSet("outbound re-sends", logger=logger)
        self._in_flight = TaskSet("outbound publishes", logger=logger)
        self._window = asyncio.Semaphore(PIPELINE_DEPTH)
        self._starting = False
        """A publish started by :meth:`send` itself has not taken its slot yet."""
        self._sender_idle = False
        """The sender waits on an empty queue (it has run, and nothing woke it since)."""
        self._has_room = asyncio.Event()
        self._has_room.set()
        self._resend_slots = asyncio.Semaphore(RESEND_CONCURRENCY)
        self._retrying: set[str | None] = set()
        self._taken: list[str] = []
        """Outbox rows every relay accepted, to delete in the next batch (:meth:`_drop_taken`)."""
        self.published = 0
        self.failed = 0

    # --- the created_at clock, kept across restarts ------------------------------------------------

    async def load_clock(self) -> None:
        """Continue ``created_at`` from the last run (a restart within the same second must not
        make the new heartbeat look older than the stored one)."""
        stored = await kv_get(self._db, CLOCK_KEY)
        if stored is not None and stored.isdigit():
            self._planner = PublishPlanner(last_created_at=int(stored))
            self._clock_saved = int(stored)

    async def save_clock(self) -> None:
        last = self._planner.last_created_at
        if last > self._clock_saved:
            await kv_set(self._db, CLOCK_KEY, str(last))
            self._clock_saved = last

    # --- sealing (CPU only) -----------------------------------------------------------------------

    def seal(
        self, publish: Publish, *, durable: bool, text: str | None = None
    ) -> list[SealedEvent]:
        """Plan, encrypt and sign `publish` for every phone of its audience.

        `text`: the message already encoded (see :meth:`PublishPlanner.plan`).
        """
        now = self._clock()
        planned = self._planner.plan(
            publish.message,
            publish.audience,
            now,
            self._machine,
            os.urandom(16).hex(),
            text=text,
        )
        sealed = []
        for item in planned:
            content = encrypt(item.plaintext, self._keys.get(item.phone))
            event = sign_event(
                self._keypair, item.kind, content, item.tags, created_at=item.created_at
            )
            sealed.append(SealedEvent(event, durable, expires_at(item), _type_of(publish.message)))
        return sealed

    def outbox_statements(self, sealed: Sequence[SealedEvent], now: int) -> list[Statement]:
        """The outbox rows of durable events, for the command's transaction to write."""
        return [
            st
            for item in sealed
            for st in bridge_state.add_outbox_statements(
                item.event.id, item.event.to_json(), item.expires_at, now
            )
        ]

    async def queue_durable(self, sealed: list[SealedEvent]) -> None:
        """Write durable events to the outbox (in the caller's transaction, if it holds one)."""
        await self._db.write(self.outbox_statements(sealed, int(self._clock())))

    # --- sending ----------------------------------------------------------------------------------

    def start(self, pool: RelayPool) -> None:
        self._pool = pool
        self._sender.spawn(self._run(), "outbound-sender", critical=True)

    async def close(self, *, drain_timeout: float = 5.0) -> None:
        """Send what is queued (for at most `drain_timeout` s), then stop the sender."""
        if self._pool is None or self._sender.closed:
            return
        if len(self._sender):
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(drain_timeout):
                    await self._queue.join()
        await self._sender.close()
        # Publishes still waiting for an OK are given the rest of the drain time, then cut short.
        await self._in_flight.drain(timeout=drain_timeout)
        await self._in_flight.close()
        # Re-sends still waiting for a silent relay are cut short: their rows stay in the outbox.
        await self._resends.drain(timeout=drain_timeout)
        await self._resends.close()
        # Outbox bookkeeping already started finishes (a row deleted or updated); what is
        # left unknown stays in the outbox and is sent again at the next boot.
        await self._work.drain(timeout=drain_timeout)
        await self._work.close()

    def on_relay_open(self, url: str) -> None:
        """A relay (re)connected: re-send it the durable replies it does not hold yet."""
        self._work.spawn(self._retry_after_open(url), f"outbox retry {url}")

    async def _retry_after_open(self, url: str) -> None:
        try:
            await self.retry_outbox(url)
        except Exception:
            logger.exception("! retrying the outbox after %s reconnected failed", url)

    def send(self, sealed: list[SealedEvent], *, on_sent: Callable[[], None] | None = None) -> None:
        """Queue events for the sender task (in order); `on_sent` once the last one left."""
        if on_sent is not None and sealed:
            sealed = [*sealed[:-1], replace(sealed[-1], on_sent=on_sent)]
        for item in sealed:
            if self._start_now(item):
                continue
            try:
                self._queue.put_nowait(item)
                if self._queue.qsize() >= HIGH_WATER:
                    self._has_room.clear()
            except asyncio.QueueFull:
                # Durable ones stay in the outbox and go out on the next retry.
                self.failed += 1
                logger.warning(
                    "! send queue full; dropped %s %s%s",
                    item.message_type,
                    item.event.id[:8],
                    " (kept in the outbox)" if item.durable else "",
                )

    def _start_now(self, item: SealedEvent) -> bool:
        """Start `item`'s publish here when the sender idles (see the module docstring)."""
        if (
            self._starting
            or not self._sender_idle
            or item.relays is not None
            or not self._queue.empty()
            or self._window.locked()
        ):
            return False
        task = self._in_flight.spawn(self._publish_now(item), f"publish {item.event.id[:8]}")
        self._starting = task is not None
        return self._starting

    async def _publish_now(self, item: SealedEvent) -> None:
        try:
            await self._window.acquire()  # free when this task was created, taken at once
        finally:
            self._starting = False
        try:
            await self._publish(item)
        finally:
            self._window.release()

    async def room(self) -> None:
        """Wait while the send queue is above :data:`HIGH_WATER` (see the module docstring)."""
        if self._has_room.is_set() or self._pool is None:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(ROOM_WAIT):
                await self._has_room.wait()

    async def retry_outbox(self, relay: str | None = None, *, older_than: int = 0) -> int:
        """Re-send queued durable events that have not expired; returns how many.

        Args:
            relay: only to this relay (it just opened), the events it does not hold;
                None (periodic): each event to every relay that has not accepted it.
            older_than: only events queued at least this many seconds ago (the periodic
                retry leaves sends still under way alone).
        """
        if relay in self._retrying or self._pool is None:
            return 0
        self._retrying.add(relay)
        try:
            everyone = frozenset(self._pool.urls)
            now = int(self._clock())
            await bridge_state.prune_outbox(self._db, now)
            # outbox_rows keeps queued_at < queued_before, and "queued at least `older_than` s
            # ago" is queued_at <= now - older_than: the bound is one past it.
            rows = await bridge_state.outbox_rows(
                self._db, now, queued_before=now - older_than + 1 if older_than else None
            )
            sent = 0
            for row in rows:
                missing = (everyone if relay is None else {relay}) - row.accepted_by
                if not missing:
                    continue
                try:
                    event = check_event(parse_event(orjson.loads(row.event)))
                except ValueError:
                    logger.error("! outbox row %s is not a valid event; dropped", row.event_id[:8])
                    await bridge_state.delete_outbox(self._db, row.event_id)
                    continue
                self.send(
                    [SealedEvent(event, True, row.expires_at, "retry", tuple(sorted(missing)))]
                )
                sent += 1
            if sent:
                logger.info(
                    "retrying %d undelivered response(s)%s",
                    sent,
                    "" if relay is None else f" on {relay}",
                )
            return sent
        finally:
            self._retrying.discard(relay)

    def _settled(self, item: SealedEvent) -> Callable[[PublishReport], None]:
        """Once every relay answered: drop the outbox row, or record who holds the event."""

        def settled(report: PublishReport) -> None:
            assert self._pool is not None
            accepted = {o.relay for o in report.outcomes if o.delivered}
            if not accepted:
                return
            if accepted >= set(self._pool.urls):
                # The usual case, final whatever else is in flight: batched with the others.
                self._taken.append(item.event.id)
                if len(self._taken) == 1 and self._work.spawn(self._drop_taken(), "outbox") is None:
                    self._taken.clear()  # closing down: the rows stay, sent again at next boot
                return
            work = bridge_state.record_outbox_acceptance(
                self._db, item.event.id, accepted, self._pool.urls
            )
            if self._work.spawn(self._book(work, item), f"outbox {item.event.id[:8]}") is None:
                work.close()  # closing down: the row stays and is sent again at the next boot

        return settled

    async def _drop_taken(self) -> None:
        """Delete the outbox rows every relay took, those of this loop step in one transaction."""
        await asyncio.sleep(0)  # the answers that arrive in the same step join this batch
        taken, self._taken = self._taken, []
        try:
            await self._db.write(bridge_state.delete_outbox_statements(taken))
        except Exception:
            # The rows stay: their events are sent again, which relays and phones deduplicate.
            logger.exception("! outbox bookkeeping for %d replies failed", len(taken))

    async def _book(self, work: Coroutine[Any, Any, bool], item: SealedEvent) -> None:
        try:
            await work
        except Exception:
            # The row stays as it was: the event is sent again, which relays and phones
            # deduplicate by id.
            logger.exception("! outbox bookkeeping for %s failed", item.event.id[:8])

    async def _run(self) -> None:
        """Start each queued publish in order, :data:`PIPELINE_DEPTH` in flight at most.

        A queue item is done (``task_done``) once its publish finished, so ``join`` on the
        queue waits for the relays' answers, as it did when each publish was awaited here.
        """
        assert self._pool is not None
        while True:
            self._sender_idle = self._queue.empty()
            try:
                item = await self._queue.get()
            finally:
                self._sender_idle = False
            if self._queue.qsize() <= LOW_WATER:
                self._has_room.set()
            handed_over = False
            try:
                if item.relays is None:
                    await self._window.acquire()
                    task = self._in_flight.spawn(
                        self._publish_in_window(item), f"publish {item.event.id[:8]}"
                    )
                    handed_over = task is not None
                    if not handed_over:
                        self._window.release()  # closing down
                else:
                    # Refused only while closing down: the row stays in the outbox for next boot.
                    self._resends.spawn(self._resend(item), f"resend {item.event.id[:8]}")
            finally:
                if not handed_over:
                    self._queue.task_done()

    async def _publish_in_window(self, item: SealedEvent) -> None:
        try:
            await self._publish(item)
        finally:
            self._window.release()
            self._queue.task_done()

    async def _resend(self, item: SealedEvent) -> None:
        """A re-send to the relays missing an event, beside the queue, never in front of it.

        Re-sends go to the relays that did not take the event, often one that is down or never
        answers ``OK``; on the queue, each would hold every fresh reply behind it for the OK
        timeout. Phones and relays deduplicate by id, so their order does not matter.
        """
        async with self._resend_slots:
            await self._publish(item)

    async def _publish(self, item: SealedEvent) -> None:
        assert self._pool is not None
        try:
            report = await self._pool.publish(
                item.event,
                relays=item.relays,
                on_settled=self._settled(item) if item.durable else None,
            )
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("! sending %s %s failed", item.message_type, item.event.id[:8])
            return
        if report.delivered:
            self.published += 1
            if logger.isEnabledFor(logging.DEBUG):
                logger.debug("> %s %s", item.message_type, item.event.id[:8])
            if item.on_sent is not None:
                item.on_sent()
        else:
            self.failed += 1
            logger.info(
                "- %s %s not delivered%s",
                item.message_type,
                item.event.id[:8],
                " (kept for retry)" if item.durable else "",
            )


def _type_of(message: BridgeToPhone) -> str:
    return str(getattr(message, "type", type(message).__name__))
