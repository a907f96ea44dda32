"""The push edge: turns the engine's ``WakePhones`` into Web Push requests, off the engine loop.

The engine says *that* something happened (a card waits, a turn ended, a session died) and to
which phones it matters; this edge decides whether a push goes out, and sends it:

1. Each ``WakePhones`` becomes one event per phone in that phone's coalescing window
   (:mod:`bridge.push.coalesce`, 5 s); the engine loop only appends to a list and sets an event.
2. When a window closes: if a client of the phone is connected to the embedded relay
   (``connected``), the phone reads the bridge live and needs no push; events of cards answered
   meanwhile are left out; what is left becomes one push (its most urgent reason and the count).
   With external relays only, the bridge cannot know who is connected, so it pushes (the web
   app's service worker stays quiet while one of its pages is visible).
3. The phone's subscriptions are read from the store, and each is sent in a task of its own
   (a :class:`~bridge.tasks.TaskSet` this edge owns), with a timeout: a slow push service never
   holds the daemon. A push service answering 404/410 has dropped the subscription: so does the
   bridge. Every other failure is logged and dropped (the next event tries again).

Log lines name the push service's origin only: an endpoint's path identifies the
subscription, and its keys are secrets.

The VAPID key is made at the first start with push on and kept in the bridge database
(:func:`load_or_create_vapid_key`), in the home the agents' sandbox hides.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Final

import aiohttp

from bridge.engine.effects import WakePhones
from bridge.logs import register_secret
from bridge.protocol import PushReason
from bridge.push import (
    Batch,
    Coalescer,
    Outcome,
    VapidKey,
    Wake,
    endpoint_origin,
    notice_for,
    send_push,
    summarize,
)
from bridge.push.coalesce import WINDOW
from bridge.push.sender import SEND_TIMEOUT
from bridge.tasks import TaskSet
from store.db import BridgeDatabase
from store.push import (
    StoredSubscription,
    delete_subscription,
    load_push_key,
    load_subscriptions,
    save_push_key,
)

__all__ = ["MAX_CONCURRENT_SENDS", "PushEdge", "load_or_create_vapid_key"]

logger = logging.getLogger(__name__)

MAX_CONCURRENT_SENDS: Final = 8
"""Pushes in flight at once; more wait for a free slot (a burst after a long outage)."""


async def load_or_create_vapid_key(db: BridgeDatabase) -> VapidKey:
    """The bridge's VAPID key: the stored one, else a new one (stored before it is used).

    Raises:
        StoreError: the database failed.
        ValueError: the stored key is not a P-256 key (a damaged database).
    """
    stored = await load_push_key(db)
    if stored is not None:
        register_secret(stored)
        return VapidKey.from_private_bytes(stored)
    key = VapidKey.generate()
    register_secret(key.private_bytes())
    await save_push_key(db, key.private_bytes())
    logger.info("push: made the bridge's VAPID key (phones subscribe with it)")
    return key


class PushEdge:
    """Coalesces the engine's wake-ups per phone and sends the pushes.

    Args:
        db: the bridge database (subscriptions).
        vapid: the bridge's VAPID key.
        bridge: the bridge's pubkey (hex), for the payload.
        machine: the machine name, for the payload.
        wall: unix seconds (the VAPID token's expiry).
        monotonic: the clock of the coalescing windows.
        connected: the phones with a client on the embedded relay now; None without one.
        card_open: whether a card (session id, request id) still waits.
        window: seconds of a coalescing window.
        timeout: seconds one push may take.
    """

    def __init__(
        self,
        db: BridgeDatabase,
        vapid: VapidKey,
        *,
        bridge: str,
        machine: str,
        wall: Callable[[], float],
        monotonic: Callable[[], float],
        connected: Callable[[], frozenset[str]] | None,
        card_open: Callable[[str, str], bool],
        window: float = WINDOW,
        timeout: float = SEND_TIMEOUT,
    ) -> None:
        self._db = db
        self._vapid = vapid
        self._bridge = bridge
        self._machine = machine
        self._wall = wall
        self._monotonic = monotonic
        self._connected = connected
        self._card_open = card_open
        self._timeout = timeout
        self._coalescer = Coalescer(window)
        self._changed = asyncio.Event()
        self._slots = asyncio.Semaphore(MAX_CONCURRENT_SENDS)
        self._session: aiohttp.ClientSession | None = None
        self.tasks = TaskSet("push", logger=logger)
        self.sent = 0
        """Pushes a push service accepted (for tests and status)."""

    @property
    def public_key(self) -> str:
        return self._vapid.public_key

    def start(self) -> None:
        """Start the windows' timer (call from the daemon's loop)."""
        self.tasks.spawn(self._run(), "the push windows")

    def wake(self, effect: WakePhones) -> None:
        """The engine's ``WakePhones``: one event per phone, in its window. Never blocks."""
        now = self._monotonic()
        for phone in effect.phones:
            self._coalescer.add(Wake(phone, effect.reason, effect.card), now)
        self._changed.set()

    async def close(self) -> None:
        """Stop: open windows are dropped, pushes in flight cancelled."""
        await self.tasks.close()
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _run(self) -> None:
        while True:
            self._changed.clear()  # before the look: a wake from here on sets it again
            deadline = self._coalescer.next_deadline()
            if deadline is None:
                await self._changed.wait()
                continue
            wait = deadline - self._monotonic()
            if wait > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), wait)
                continue
            for batch in self._coalescer.due(self._monotonic()):
                try:
                    await self._flush(batch)
                except Exception:  # the store failed: this push is lost, the next ones are not
                    logger.exception("! push: the window of %s could not be sent", batch.phone[:8])

    async def _flush(self, batch: Batch) -> None:
        """A closed window: one push to each of the phone's subscriptions, or none."""
        phone = batch.phone
        if self._connected is not None and phone in self._connected():
            logger.debug("push: %s is connected; no push", phone[:8])
            return
        summary = summarize(batch.events, self._card_open)
        if summary is None:
            return
        subscriptions = await load_subscriptions(self._db, phone)
        if not subscriptions:
            return
        reason, count = summary
        for subscription in subscriptions:
            self.tasks.spawn(self._send(subscription, reason, count), f"a push to {phone[:8]}")

    async def _send(self, subscription: StoredSubscription, reason: PushReason, count: int) -> None:
        notice = notice_for(self._bridge, self._machine, reason, count)
        origin = endpoint_origin(subscription.endpoint)
        async with self._slots:
            sent = await send_push(
                self._http(),
                endpoint=subscription.endpoint,
                p256dh=subscription.p256dh,
                auth=subscription.auth,
                notice=notice,
                vapid=self._vapid,
                now=self._wall(),
                timeout=self._timeout,
            )
        phone = subscription.phone[:8]
        match sent.outcome:
            case Outcome.DELIVERED:
                self.sent += 1
                logger.info("push: %s (%d) to %s via %s", reason, count, phone, origin)
            case Outcome.GONE:
                await delete_subscription(self._db, subscription.phone, subscription.endpoint)
                logger.info(
                    "push: %s dropped a subscription of %s (%s%s); forgotten",
                    origin,
                    phone,
                    sent.detail,
                    f", HTTP {sent.status}" if sent.status else "",
                )
            case Outcome.FAILED:
                logger.warning(
                    "! push to %s via %s failed: %s%s",
                    phone,
                    origin,
                    sent.detail,
                    f" (HTTP {sent.status})" if sent.status else "",
                )

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(trust_env=False)
        return self._session
