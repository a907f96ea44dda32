"""A pool of relays: publish to all, subscribe on all, reconnect each one on its own.

Theory of operation. Each relay URL gets a *link*: one supervisor task (owned by the pool,
cancelled and awaited by :meth:`RelayPool.close`) that loops connect → replay subscriptions →
wait for the connection to end → sleep a backoff delay → connect again. A link is CONNECTING
during an attempt, OPEN while its connection is up and CLOSED while it waits to retry.

* Publishing sends to every link concurrently and returns a :class:`PublishReport` with one
  :class:`~bridge.nostr.relay.PublishOutcome` per relay; the event is *delivered* when at
  least one relay accepted it (or refused it only as replaced by a newer version). A link that
  is CONNECTING is waited for (at most its connect timeout); a CLOSED one answers
  NOT_CONNECTED at once, so a dead relay never slows a publish down. Retrying what was not
  delivered is the caller's business (it knows which messages must be stored).
* A publish returns as soon as one relay delivered (unless ``wait_all``): a relay that takes
  the event but never answers ``OK`` would otherwise hold every publish for its OK timeout, and
  a caller that sends in order (replies must keep their order) would crawl at one event per
  timeout. The other relays' sends go on as *trailing* tasks owned by the pool (their outcome
  is logged when it is not an acceptance); at most ``max_trailing`` per relay, past which a
  lagging relay is skipped (NOT_CONNECTED, "backlogged") until it catches up.
* Subscriptions are registered once with a *filters factory*. The factory is called again
  on every (re)connect, so a caller that keeps a cursor resumes with a fresh ``since``:
  events published while a relay was unreachable are fetched when it is back, and events
  seen before are dropped by the pool's memory of recent ids.
* Every delivered event was verified by the connection (id and signature). The pool drops
  duplicates by id across relays and subscriptions with an LRU of the last ``seen_capacity``
  ids, so memory stays bounded however long the daemon runs.
* Backoff (see :mod:`bridge.nostr.backoff`: 1, 2, then 3 s at most, so a relay that returns
  after an outage of any length is dialled again within 3 s) is per link and resets on EOSE and
  on an accepted publish: proof that the relay works again.
* :meth:`RelayPool.reconnect_now` (called when the machine wakes from suspend, see
  :mod:`bridge.runtime.edges.wake`) resets every link's backoff, cuts a sleeping delay short, abandons
  an attempt under way and drops every open connection without a closing handshake, then
  reconnects each relay at once (its docstring says why a forced reconnect, not a ping probe).
* A subscription the relay ends with ``CLOSED "error: …"`` or ``"rate-limited: …"`` is sent
  again after the link's next backoff delay; other CLOSED reasons would only be refused
  again, so such a subscription waits for the next reconnect (``auth-required:`` is handled
  by the connection itself: AUTH, then one retry).

Callbacks (``on_event``, ``on_eose``, ``on_open``) run on a reader or supervisor task and must
not block; see :mod:`bridge.nostr.relay`.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import random
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any

from bridge.nostr.backoff import DEFAULT_BASE, DEFAULT_CAP, DEFAULT_JITTER, backoff
from bridge.nostr.event import Event
from bridge.nostr.filters import Filter
from bridge.nostr.keys import Keypair
from bridge.nostr.messages import MAX_MESSAGE_SIZE, MAX_SUBSCRIPTION_ID_LENGTH, message_prefix
from bridge.nostr.relay import (
    ConnectionState,
    Dial,
    PublishOutcome,
    PublishStatus,
    RelayConnection,
    RelayConnectionError,
    RelayEventReceived,
)
from bridge.nostr.seen_ids import SeenIds
from bridge.records import record
from bridge.tasks import TaskSet, race

__all__ = [
    "FiltersFactory",
    "PublishReport",
    "RelayPool",
    "RelayState",
    "RelayStatus",
]

logger = logging.getLogger(__name__)

_TRANSIENT_CLOSED_PREFIXES = frozenset({"error", "rate-limited"})

FiltersFactory = Callable[[], Sequence[Filter]]
"""Returns the filters to send for a subscription now (called on every (re)connect)."""


class RelayState(enum.Enum):
    """Where one relay of the pool is."""

    CONNECTING = "connecting"
    OPEN = "open"
    CLOSED = "closed"
    """Down: waiting for the next attempt, or the pool is closed."""


@record
class RelayStatus:
    """A snapshot of one relay for ``status`` displays (times are unix seconds)."""

    url: str
    state: RelayState
    last_event_at: float | None
    last_error: str | None
    connected_at: float | None
    next_attempt_at: float | None
    failures: int
    """Connection attempts failed or dropped since the last reset of the backoff."""


@record
class PublishReport:
    """The answers of all relays to one publish."""

    event_id: str
    outcomes: tuple[PublishOutcome, ...]

    @property
    def delivered(self) -> bool:
        """At least one relay holds the event (or a newer version of it)."""
        return any(outcome.delivered for outcome in self.outcomes)


class _Link:
    """The pool's side of one relay: its state, its current connection and its backoff."""

    def __init__(self, url: str, new_backoff: Callable[[], Iterator[float]]) -> None:
        self.url = url
        self.state = RelayState.CLOSED
        self.connection: RelayConnection | None = None
        self._new_backoff = new_backoff
        self.delays = new_backoff()
        self.failures = 0
        self.last_error: str | None = None
        self.connected_at: float | None = None
        self.next_attempt_at: float | None = None
        self.last_event_at: float | None = None
        self.attempt_done = asyncio.Event()
        self.hurry = asyncio.Event()
        """Set by :meth:`RelayPool.reconnect_now`: skip (or cut short) the backoff delay."""
        self.handshake: asyncio.Timeout | None = None
        """The deadline of the connect under way, if any (:meth:`RelayPool.reconnect_now`)."""
        self.trailing = 0
        """This relay's sends still waiting for an OK after their publish returned."""
        self.resubscribes: TaskSet
        """Delayed REQs after a transient CLOSED; a fresh set per connection, closed with it."""
        self.resubscribing: set[str]
        """The subscription ids with a delayed REQ in :attr:`resubscribes`."""
        self.new_connection()

    def new_connection(self) -> None:
        """Resubscriptions belong to one connection: start each one with an empty set."""
        self.resubscribes = TaskSet(f"relay-resubscribe {self.url}", logger=logger)
        self.resubscribing = set()

    def reset_backoff(self) -> None:
        if self.failures:
            logger.debug("= %s backoff reset", self.url)
        self.delays = self._new_backoff()
        self.failures = 0

    def status(self) -> RelayStatus:
        return RelayStatus(
            url=self.url,
            state=self.state,
            last_event_at=self.last_event_at,
            last_error=self.last_error,
            connected_at=self.connected_at,
            next_attempt_at=self.next_attempt_at,
            failures=self.failures,
        )


class RelayPool:
    """Many relays behind one publish/subscribe interface.

    Args:
        urls: relay URLs; duplicates are ignored.
        keypair: signs NIP-42 AUTH events.
        on_event: called once per new verified event, whatever relay it came from.
        on_eose: called with (subscription id, relay url) on each relay's EOSE.
        on_open: called with the relay url each time a relay (re)connects, after the
            subscriptions were replayed (e.g. to retry undelivered messages).
        backoff_base / backoff_cap / backoff_jitter: reconnect delays (seconds, fraction).
        rng: randomness for the jitter, returns [0, 1).
        connect_timeout / ok_timeout / ping_interval / ping_timeout / close_timeout /
        max_message_size: passed to each :class:`~bridge.nostr.relay.RelayConnection`.
        seen_capacity: how many recent event ids are remembered to drop duplicates.
        max_trailing: most sends per relay still waiting for an ``OK`` after their publish
            returned (see the module docstring).
        clock: unix time in seconds.
        dialers: for a url here, how to open its connection instead of a websocket (a relay in
            this process: the daemon's embedded relay, see :mod:`bridge.relay.local`).
    """

    def __init__(
        self,
        urls: Sequence[str],
        keypair: Keypair,
        *,
        on_event: Callable[[RelayEventReceived], None],
        on_eose: Callable[[str, str], None] | None = None,
        on_open: Callable[[str], None] | None = None,
        backoff_base: float = DEFAULT_BASE,
        backoff_cap: float = DEFAULT_CAP,
        backoff_jitter: float = DEFAULT_JITTER,
        rng: Callable[[], float] = random.random,
        connect_timeout: float = 10.0,
        ok_timeout: float = 10.0,
        ping_interval: float | None = 20.0,
        ping_timeout: float | None = 20.0,
        close_timeout: float = 5.0,
        max_message_size: int = MAX_MESSAGE_SIZE,
        seen_capacity: int = 10_000,
        max_trailing: int = 1_000,
        clock: Callable[[], float] = time.time,
        dialers: Mapping[str, Dial] | None = None,
    ) -> None:
        if not urls:
            raise ValueError("a relay pool needs at least one relay url")
        if max_trailing < 1:
            raise ValueError("max_trailing must be >= 1")
        backoff(rng, base=backoff_base, cap=backoff_cap, jitter=backoff_jitter)  # validate now

        def new_backoff() -> Iterator[float]:
            return backoff(rng, base=backoff_base, cap=backoff_cap, jitter=backoff_jitter)

        self._links = {url: _Link(url, new_backoff) for url in dict.fromkeys(urls)}
        self._keypair = keypair
        self._on_event = on_event
        self._on_eose = on_eose
        self._on_open = on_open
        self._connect_timeout = connect_timeout
        self._connection_options: dict[str, Any] = {
            "connect_timeout": connect_timeout,
            "ok_timeout": ok_timeout,
            "ping_interval": ping_interval,
            "ping_timeout": ping_timeout,
            "close_timeout": close_timeout,
            "max_message_size": max_message_size,
            "clock": clock,
        }
        self._clock = clock
        self._dialers = dict(dialers or {})
        self._seen = SeenIds(seen_capacity)
        self._subscriptions: dict[str, FiltersFactory] = {}
        self._state_changed = asyncio.Event()
        self._started = False
        self._closed = False
        self._max_trailing = max_trailing
        self._supervisors = TaskSet("relay pool links", logger=logger)
        self._sends = TaskSet("relay pool sends", logger=logger)
        """Every publish's per-relay sends: awaited by the publish, then trailing (see above)."""

    # --- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start connecting to every relay (does not wait; see :meth:`wait_open`)."""
        if self._closed:
            raise RuntimeError("relay pool is closed")
        if self._started:
            return
        self._started = True
        for link in self._links.values():
            link.state = RelayState.CONNECTING
            self._supervisors.spawn(self._supervise(link), name=f"relay-link {link.url}")

    async def close(self) -> None:
        """Close every connection and stop reconnecting (idempotent).

        Pending publishes end as NOT_CONNECTED, trailing sends are cancelled; no task of the
        pool outlives this call.
        """
        self._closed = True
        await self._sends.close()
        await self._supervisors.close()
        self._notify_state()

    async def __aenter__(self) -> RelayPool:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def wait_open(self, *, every: bool = False) -> None:
        """Wait until one relay (or, with ``every``, all relays) is open.

        Callers bound the wait with ``asyncio.timeout()``. Cancel-safe.
        """
        while True:
            states = [link.state for link in self._links.values()]
            opened = [state is RelayState.OPEN for state in states]
            if all(opened) if every else any(opened):
                return
            self._state_changed.clear()
            await self._state_changed.wait()

    def status(self) -> tuple[RelayStatus, ...]:
        """A snapshot of every relay, in the order the URLs were given."""
        return tuple(link.status() for link in self._links.values())

    def reconnect_now(self, reason: str) -> None:
        """Reset every relay's backoff and reconnect each one at once, dropping open connections.

        For a machine that woke from suspend. A connection open across a suspend usually looks
        open but is dead (the relay gave up on its pings, or a NAT forgot it) and no FIN or RST
        reached us; keepalive would notice after ``ping_interval`` + ``ping_timeout`` (up to
        40 s). A ping probe would cost its timeout in exactly that common case to spare one cheap
        reconnect in the rare one (a short nap, a loopback relay), and an answered ping does not
        prove the relay kept our subscriptions. So every connection is dropped without a closing
        handshake (which would wait ``close_timeout`` for a peer that is gone) and replaced: the
        subscriptions are replayed from their cursors (nothing sent while we slept is lost) and
        ``on_open`` is called (the outbox is re-sent). A link sleeping a backoff delay wakes; an
        attempt under way is abandoned (its SYN may predate the suspend) and made again.
        A no-op on a closed pool.
        """
        if self._closed:
            return
        logger.info("= reconnecting every relay now: %s", reason)
        for link in self._links.values():
            link.reset_backoff()
            link.hurry.set()
            if link.handshake is not None:
                link.handshake.reschedule(asyncio.get_running_loop().time())
            if link.connection is not None:
                link.connection.abort(reason)

    # --- publish / subscribe --------------------------------------------------------------------

    async def publish(
        self,
        event: Event,
        *,
        wait_all: bool = False,
        relays: Collection[str] | None = None,
        on_settled: Callable[[PublishReport], None] | None = None,
    ) -> PublishReport:
        """Send ``event`` to every relay concurrently; report once one relay delivered it.

        With one relay the send runs in the calling task (its answer is the report).

        With ``wait_all`` (or when no relay delivers) every relay's answer is awaited; else
        the relays still without an answer are reported PENDING and finish as trailing tasks.
        Never raises for relay behaviour; bounded by (connect timeout +) 3 x ``ok_timeout``
        per relay in the worst case (publish, AUTH, retry). Cancel-safe: a cancelled publish
        cancels its sends.

        Args:
            relays: send only to these of the pool's relays (e.g. to one that just came back).
            on_settled: called once with the final answer of every relay, trailing ones
                included (not called if the pool closes first).
        """
        links = [link for link in self._links.values() if relays is None or link.url in relays]
        outcomes: list[PublishOutcome] = []
        if self._sends.closed:
            outcomes = [_pool_closed(link) for link in links]
        elif len(links) == 1:
            # One relay (the embedded relay, or a single one configured): its answer is the
            # report, so its send runs in this task. A task of its own would write the frame a
            # step of the event loop later, on every reply (on the ack's path).
            outcome = await self._publish_to(links[0], event)
            if self._closed and not outcome.delivered:
                outcomes = [_pool_closed(links[0])]  # as a send the close cancelled: unknown
            else:
                outcomes = [outcome]
                if on_settled is not None:
                    _report_settled(on_settled, PublishReport(event.id, (outcome,)))
        else:
            tasks: dict[asyncio.Task[PublishOutcome], _Link] = {}
            for link in links:
                task = self._sends.spawn(self._publish_to(link, event), name=f"publish {link.url}")
                assert task is not None  # the set is open: checked above, nothing awaited since
                tasks[task] = link
            pending = set(tasks)
            try:
                while pending:
                    done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                    if not wait_all and any(_outcome(t, tasks[t]).delivered for t in done):
                        break
            except BaseException:
                for task in tasks:
                    task.cancel()
                raise
            for task, link in tasks.items():
                if task in pending:
                    outcomes.append(PublishOutcome(link.url, PublishStatus.PENDING))
                    self._trail(task, link, event)
                else:
                    outcomes.append(_outcome(task, link))
            if on_settled is not None:
                self._settle(event.id, list(tasks), on_settled)
        report = PublishReport(event.id, tuple(outcomes))
        if not report.delivered:
            logger.warning(
                "! event %s kind %d not delivered: %s",
                event.id[:8],
                event.kind,
                "; ".join(f"{o.relay} {o.status.value} {o.message[:80]}" for o in report.outcomes),
            )
        return report

    @property
    def urls(self) -> tuple[str, ...]:
        """The pool's relays, in configuration order."""
        return tuple(self._links)

    @property
    def trailing(self) -> int:
        """Sends still waiting for a relay's ``OK`` after their publish returned."""
        return sum(link.trailing for link in self._links.values())

    def _settle(
        self,
        event_id: str,
        tasks: list[asyncio.Task[PublishOutcome]],
        on_settled: Callable[[PublishReport], None],
    ) -> None:
        """Call `on_settled` with every relay's final outcome once the last send finished."""
        left = [task for task in tasks if not task.done()]

        def report() -> None:
            if any(task.cancelled() or task.exception() is not None for task in tasks):
                return  # the pool closed (or a send crashed, logged): nothing is known
            _report_settled(
                on_settled, PublishReport(event_id, tuple(task.result() for task in tasks))
            )

        if not left:
            report()
            return
        remaining = len(left)

        def one_done(_task: asyncio.Task[PublishOutcome]) -> None:
            nonlocal remaining
            remaining -= 1
            if remaining == 0:
                report()

        for task in left:
            task.add_done_callback(one_done)

    def _trail(self, task: asyncio.Task[PublishOutcome], link: _Link, event: Event) -> None:
        """A send outlives its publish: count it against the relay, log how it ended."""
        link.trailing += 1

        def finished(task: asyncio.Task[PublishOutcome]) -> None:
            link.trailing -= 1
            if task.cancelled() or task.exception() is not None:
                return  # the pool closed, or a crash (logged by the task set)
            outcome = task.result()
            if not outcome.delivered:
                logger.info(
                    "- event %s kind %d: %s %s %s",
                    event.id[:8],
                    event.kind,
                    link.url,
                    outcome.status.value,
                    outcome.message[:80],
                )

        task.add_done_callback(finished)

    async def subscribe(self, subscription_id: str, filters_factory: FiltersFactory) -> None:
        """Register a subscription and open it on every open relay.

        It is replayed on every reconnect with the factory's filters of that moment.
        Registering an id again replaces the subscription.

        Raises:
            ValueError: bad subscription id; or the factory's filters are bad (raised here,
                not at reconnect time, so mistakes show up at the call site).
        """
        if not subscription_id or len(subscription_id) > MAX_SUBSCRIPTION_ID_LENGTH:
            raise ValueError("subscription id must be 1..64 chars")
        filters = tuple(filters_factory())
        if not filters:
            raise ValueError("a subscription needs at least one filter")
        self._subscriptions[subscription_id] = filters_factory
        for link in self._links.values():
            connection = link.connection
            if link.state is RelayState.OPEN and connection is not None:
                # If the link is going down, it replays subscriptions when back.
                with contextlib.suppress(RelayConnectionError):
                    await connection.subscribe(subscription_id, filters)

    async def unsubscribe(self, subscription_id: str) -> None:
        """Forget a subscription and CLOSE it on every open relay (unknown ids: no-op)."""
        if self._subscriptions.pop(subscription_id, None) is None:
            return
        for link in self._links.values():
            connection = link.connection
            if connection is not None and connection.state is ConnectionState.OPEN:
                # Closed anyway; not replayed since it is forgotten.
                with contextlib.suppress(RelayConnectionError):
                    await connection.unsubscribe(subscription_id)

    # --- internals ------------------------------------------------------------------------------

    async def _publish_to(self, link: _Link, event: Event) -> PublishOutcome:
        if link.trailing >= self._max_trailing:
            reason = f"backlogged: {link.trailing} sends still wait for an OK"
            return PublishOutcome(link.url, PublishStatus.NOT_CONNECTED, reason)
        if link.state is RelayState.CONNECTING:
            # An attempt is under way (e.g. right after start): its result is worth waiting for.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._connect_timeout):
                    await link.attempt_done.wait()
        connection = link.connection
        if link.state is not RelayState.OPEN or connection is None:
            reason = link.last_error or "not connected"
            return PublishOutcome(link.url, PublishStatus.NOT_CONNECTED, reason)
        outcome = await connection.publish(event)
        if outcome.delivered:
            link.reset_backoff()
        return outcome

    async def _supervise(self, link: _Link) -> None:
        """Connect, replay, wait for the end, back off; until cancelled by :meth:`close`."""
        try:
            while True:
                link.hurry.clear()
                await self._attempt(link)
                if link.hurry.is_set():
                    continue  # reconnect_now(): no delay
                link.failures += 1
                delay = next(link.delays)
                link.next_attempt_at = self._clock() + delay
                logger.info(
                    "= %s reconnecting in %.1fs (%s)", link.url, delay, link.last_error or "closed"
                )
                await race(link.hurry.wait(), timeout=delay)
                link.next_attempt_at = None
        finally:
            link.state = RelayState.CLOSED
            link.next_attempt_at = None
            link.attempt_done.set()
            self._notify_state()

    async def _attempt(self, link: _Link) -> None:
        link.state = RelayState.CONNECTING
        link.attempt_done.clear()
        link.new_connection()
        self._notify_state()
        connection = RelayConnection(
            link.url,
            self._keypair,
            on_event=lambda received: self._handle_event(link, received),
            on_eose=lambda subscription_id: self._handle_eose(link, subscription_id),
            on_closed=lambda subscription_id, message: self._handle_closed(
                link, connection, subscription_id, message
            ),
            dial=self._dialers.get(link.url),
            **self._connection_options,
        )
        try:
            # reconnect_now() moves this deadline to now, abandoning a handshake that may hang
            # on a socket from before a suspend (connect() itself raises no TimeoutError).
            async with asyncio.timeout(None) as link.handshake:
                await connection.connect()
        except (RelayConnectionError, TimeoutError) as exc:
            connection.abort("reconnecting now")
            await connection.close()
            link.last_error = connection.close_reason or str(exc)
            logger.info("! %s: %s", link.url, link.last_error)
            link.state = RelayState.CLOSED
            link.attempt_done.set()
            self._notify_state()
            return
        finally:
            link.handshake = None
        link.hurry.clear()
        try:
            link.connection = connection
            link.connected_at = self._clock()
            await self._replay(link, connection)
            link.state = RelayState.OPEN
            link.attempt_done.set()
            self._notify_state()
            logger.info("= %s open", link.url)
            if self._on_open is not None:
                try:
                    self._on_open(link.url)
                except Exception:
                    logger.exception("! %s on_open callback failed", link.url)
            await connection.wait_closed()
        finally:
            await link.resubscribes.close()
            link.connection = None
            link.connected_at = None
            link.state = RelayState.CLOSED
            link.attempt_done.set()
            self._notify_state()
            await connection.close()
            link.last_error = connection.close_reason

    async def _replay(self, link: _Link, connection: RelayConnection) -> None:
        for subscription_id, factory in list(self._subscriptions.items()):
            try:
                filters = tuple(factory())
            except Exception:
                logger.exception("! %s filters for %s failed", link.url, subscription_id)
                continue
            try:
                await connection.subscribe(subscription_id, filters)
            except RelayConnectionError:
                return  # the connection ended already; the supervisor sees it next
            except ValueError:
                logger.exception("! %s bad filters for %s", link.url, subscription_id)

    def _handle_event(self, link: _Link, received: RelayEventReceived) -> None:
        link.last_event_at = self._clock()
        if not self._seen.add(received.event.id):
            logger.debug("< %s duplicate %s dropped", link.url, received.event.id[:8])
            return
        try:
            self._on_event(received)
        except Exception:
            logger.exception("! on_event failed for %s", received.event.id[:8])

    def _handle_eose(self, link: _Link, subscription_id: str) -> None:
        link.reset_backoff()
        if self._on_eose is not None:
            try:
                self._on_eose(subscription_id, link.url)
            except Exception:
                logger.exception("! %s on_eose callback failed", link.url)

    def _handle_closed(
        self, link: _Link, connection: RelayConnection, subscription_id: str, message: str
    ) -> None:
        # NIP-01 CLOSED prefixes: `error:` and `rate-limited:` describe the relay's moment, so
        # the REQ is sent again after a backoff delay; `blocked:`, `restricted:`, `invalid:`…
        # (and an empty message, e.g. an ids-only REQ served completely) would only be refused
        # again: those wait for the next reconnect, which replays every subscription.
        if message_prefix(message) not in _TRANSIENT_CLOSED_PREFIXES:
            return
        if subscription_id not in self._subscriptions or subscription_id in link.resubscribing:
            return
        delay = next(link.delays)
        waiting = link.resubscribing
        task = link.resubscribes.spawn(
            self._resubscribe(link, connection, subscription_id, delay, waiting),
            name=f"relay-resubscribe {link.url} {subscription_id}",
        )
        if task is not None:  # None: that connection's resubscriptions were closed already
            waiting.add(subscription_id)
            logger.info("= %s resubscribing %s in %.1fs", link.url, subscription_id, delay)

    async def _resubscribe(
        self,
        link: _Link,
        connection: RelayConnection,
        subscription_id: str,
        delay: float,
        waiting: set[str],
    ) -> None:
        try:
            await asyncio.sleep(delay)
            factory = self._subscriptions.get(subscription_id)
            if factory is None or link.connection is not connection:
                return
            try:
                filters = tuple(factory())
                await connection.subscribe(subscription_id, filters)
            except RelayConnectionError:
                pass  # the connection ended; the reconnect replays the subscription
            except Exception:
                logger.exception("! %s resubscribing %s failed", link.url, subscription_id)
        finally:
            waiting.discard(subscription_id)

    def _notify_state(self) -> None:
        self._state_changed.set()


def _report_settled(on_settled: Callable[[PublishReport], None], report: PublishReport) -> None:
    try:
        on_settled(report)
    except Exception:
        logger.exception("! on_settled callback for %s failed", report.event_id[:8])


def _pool_closed(link: _Link) -> PublishOutcome:
    return PublishOutcome(link.url, PublishStatus.NOT_CONNECTED, "relay pool is closed")


def _outcome(task: asyncio.Task[PublishOutcome], link: _Link) -> PublishOutcome:
    """A finished send's outcome; cancelled means the pool closed under it."""
    return _pool_closed(link) if task.cancelled() else task.result()
