"""A phone simulator: the CodeDeck v10 phone's side of the contract, over real relays.

The daemon's integration tests drive the bridge through :class:`PhoneSimulator` the way the
CodeDeck app does (REFERENCE-BEHAVIOUR.md §4, the reference ``PhoneSimulator`` row):

* **Identity**: its own keypair; the bridge's pubkey from a pairing URL (``pair``) or given.
* **Commands** (:meth:`~PhoneSimulator.send`): encoded with the v10 codec, stamped ``v: 10`` and
  ``caps``, NIP-44 encrypted to the bridge, signed as kind 4515 with ``p`` + ``expiration`` tags,
  published through a :class:`~bridge.nostr.pool.RelayPool`. Test options: ``created_at`` (skew,
  stale commands), replaying a pre-built event (``publish_event``), raw or garbage payloads
  (``send_raw``), fragmented commands (``send_chunked``), publishing to some relays only.
* **Subscriptions**, **inbound pipeline**, **heartbeat merge**, **transcripts** and **sync**: see
  :mod:`.phone_core` and the modules it names.
* **Offline/online**: ``go_offline`` closes the pool and keeps every cursor; ``go_online``
  reconnects with them (the 4516 ``since`` comes from the stored cursor). With ``state_path``
  the state is saved to a JSON file on ``go_offline``, ``close`` and ``save``, and loaded by a new
  simulator given the same path: a phone restart.

Every wait has a timeout and fails with a summary of what did arrive (:mod:`.phone_waits`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from bridge.nostr.event import VerifiedEvent
from bridge.nostr.keys import Keypair
from bridge.nostr.pool import PublishReport, RelayPool, RelayStatus
from bridge.protocol.capabilities import ALL_PHONE_CAPABILITIES, PROTOCOL_VERSION
from bridge.protocol.codec import encode
from bridge.protocol.commands import Command, PairRequestCommand
from bridge.protocol.kinds import COMMAND_KIND
from bridge.protocol.messages import PairAckMessage, SyncChunkMessage
from tests.support.phone_core import SUBSCRIPTION_IDS, PhoneCore, Sent
from tests.support.phone_outbound import PhoneError, PublishFailed, command_events, publish_direct
from tests.support.phone_pairing import parse_pairing_url
from tests.support.phone_state import Received
from tests.support.phone_sync import MAX_REREQUESTS, SyncResult, SyncTracker
from tests.support.phone_waits import Selector

__all__ = [
    "PhoneError",
    "PhoneSimulator",
    "PublishFailed",
    "Sent",
]

_FAST_RECONNECT = {"backoff_base": 0.2, "backoff_cap": 2.0}


class PhoneSimulator(PhoneCore):
    """One simulated phone. Every wait is bounded by a ``timeout``.

    Args:
        bridge: the bridge's npub or hex pubkey (or learn it with :meth:`pair`); overrides
            the one in the state file.
        relays: relay URLs (or take them from the pairing URL); override the state file's.
        keypair: the phone's identity; generated when absent (or loaded from ``state_path``).
        caps: stamped as ``caps`` on every command (default ``["diff","chunked"]``); None: none.
        version: stamped as ``v`` (default 10); None stamps none.
        label: the label sent in ``pair-request``.
        state_path: a JSON state file, loaded now if it exists, written by :meth:`save`,
            :meth:`go_offline` and :meth:`close`.
        drop_ack: called with each ``sync-chunk``; True drops its ack (for resend tests).
        ack_drop_rate: probability of dropping an ack when ``drop_ack`` is None, drawn from
            ``random.Random(seed)`` so a run is reproducible.
        max_rerequests: re-requests of a partial sync (the reference phone: 3).
        seen_capacity: how many event ids the phone's dedup remembers.
        outbox_retry_seconds: how long the phone keeps retrying its own acks and re-requests.
        pool_options: extra :class:`RelayPool` arguments (by default it reconnects fast).
        clock: unix time, for ``created_at``.
    """

    def __init__(
        self,
        *,
        bridge: str | None = None,
        relays: Sequence[str] = (),
        keypair: Keypair | None = None,
        caps: Sequence[str] | None = ALL_PHONE_CAPABILITIES,
        version: int | None = PROTOCOL_VERSION,
        label: str = "Phone",
        state_path: str | Path | None = None,
        drop_ack: Callable[[SyncChunkMessage], bool] | None = None,
        ack_drop_rate: float = 0.0,
        seed: int = 0,
        max_rerequests: int = MAX_REREQUESTS,
        seen_capacity: int = 20_000,
        outbox_retry_seconds: float = 10.0,
        pool_options: Mapping[str, Any] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(
            bridge=bridge,
            relays=relays,
            keypair=keypair,
            caps=caps,
            version=version,
            label=label,
            state_path=state_path,
            drop_ack=drop_ack,
            ack_drop_rate=ack_drop_rate,
            seed=seed,
            max_rerequests=max_rerequests,
            seen_capacity=seen_capacity,
            outbox_retry_seconds=outbox_retry_seconds,
            clock=clock,
        )
        self._pool_options = {**_FAST_RECONNECT, **(pool_options or {})}
        self._pool: RelayPool | None = None
        self._eose: set[tuple[str, str]] = set()
        self._closed = False

    def __repr__(self) -> str:
        return f"<PhoneSimulator {self.npub[:16]}… online={self.online}>"

    @property
    def online(self) -> bool:
        return self._pool is not None

    def relay_status(self) -> tuple[RelayStatus, ...]:
        return self._pool.status() if self._pool is not None else ()

    # --- connection -----------------------------------------------------------------------------

    async def __aenter__(self) -> PhoneSimulator:
        if self.bridge_pubkey is not None and self.relays:
            await self.go_online()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def go_online(
        self, *, timeout: float = 10.0, wait: bool = True, every_relay: bool = False
    ) -> None:
        """Connect and open the three subscriptions (``since`` from the stored cursor).

        Already online: only waits (so ``go_online(every_relay=True)`` after a plain connect
        waits for the other relays too).

        Args:
            wait: return once each subscription got EOSE, i.e. the stored backlog is processed.
            every_relay: wait for EOSE from every relay rather than from one.

        Raises:
            PhoneError: closed, no bridge or no relays.
            TimeoutError: not ready within ``timeout`` (the pool keeps trying until closed).
        """
        if self._closed:
            raise PhoneError("phone is closed")
        self.require_bridge()
        if not self.relays:
            raise PhoneError("no relays: pass relays= or pair() with a pairing URL")
        if self._pool is None:
            await self._connect()
        if wait:
            await self._wait_ready(timeout, every_relay)

    async def go_offline(self, *, drain_timeout: float = 5.0) -> None:
        """Close the pool, keeping every cursor and all state (then save it, if configured).

        The phone's own queued acks and re-requests are flushed first (up to ``drain_timeout``).
        """
        if self._pool is None:
            return
        await self._outbox.flush(drain_timeout)
        self._outbox.detach()
        pool, self._pool = self._pool, None
        await pool.close()
        if self.state_path is not None:
            self.save()
        self.notify()

    async def close(self) -> None:
        """Go offline, stop the outbox and save the state (idempotent)."""
        if self._closed:
            return
        await self.go_offline()
        self._closed = True
        await self._outbox.close()
        if self.state_path is not None:
            self.save()

    async def pair(
        self, url: str, label: str | None = None, *, timeout: float = 10.0
    ) -> Received[PairAckMessage]:
        """Pair from a ``codedeck://pair?…`` URL: subscribe first, then send ``pair-request``.

        The bridge answers ``pair-ack`` to the event author, possibly before a subscription
        opened afterwards would exist, hence the order. A refusal (``ok: false``) is returned,
        not raised; no answer at all raises TimeoutError.
        """
        info = parse_pairing_url(url)
        if self.bridge_pubkey != info.bridge_pubkey and self.online:
            raise PhoneError("phone is online with another bridge; go_offline() first")
        self.set_bridge(info.bridge_pubkey)
        self.merge_relays(info.relays)
        await self.go_online(timeout=timeout)
        mark = self.mark()
        command = PairRequestCommand(
            npub=self.npub, pubkeyHex=self.pubkey, label=label or self.label, token=info.token
        )
        await self.send(command, timeout=timeout)
        return await self.wait_for(PairAckMessage, after=mark, timeout=timeout)

    # --- sending --------------------------------------------------------------------------------

    async def send(
        self,
        command: Command,
        *,
        created_at: int | None = None,
        relays: Sequence[str] | None = None,
        stamp: bool = True,
        require_delivery: bool = True,
        timeout: float = 10.0,
    ) -> VerifiedEvent:
        """Encode, stamp, encrypt, sign and publish one command; return its event.

        Args:
            created_at: override the wall clock (clock skew, stale commands).
            relays: publish to these relays only, on short-lived connections (works offline).
            stamp: add ``v``/``caps``; False sends the command as given.
            require_delivery: raise :class:`PublishFailed` when no relay accepted it.
        """
        event = self.build_command(command, created_at=created_at, stamp=stamp)
        await self.publish_event(
            event, relays=relays, require_delivery=require_delivery, timeout=timeout
        )
        self.record_sent(self.stamp(command) if stamp else command, event)
        return event

    async def send_raw(
        self,
        plaintext: str,
        *,
        created_at: int | None = None,
        encrypted: bool = True,
        kind: int = COMMAND_KIND,
        tags: Sequence[Sequence[str]] | None = None,
        relays: Sequence[str] | None = None,
        require_delivery: bool = True,
        timeout: float = 10.0,
    ) -> VerifiedEvent:
        """Publish an arbitrary payload (not JSON, wrong schema, not even NIP-44...)."""
        event = self.build_raw(
            plaintext, created_at=created_at, encrypted=encrypted, kind=kind, tags=tags
        )
        await self.publish_event(
            event, relays=relays, require_delivery=require_delivery, timeout=timeout
        )
        self.record_sent(None, event)
        return event

    async def send_chunked(
        self,
        command: Command,
        *,
        created_at: int | None = None,
        stamp: bool = True,
        require_delivery: bool = True,
        timeout: float = 10.0,
    ) -> list[VerifiedEvent]:
        """Send a command as ``chunk`` fragments when it is over the threshold (§3), in order."""
        stamped = self.stamp(command) if stamp else command
        when = self.now() if created_at is None else created_at
        events = command_events(
            self.keypair, self.require_bridge(), encode(stamped), created_at=when
        )
        for event in events:
            await self.publish_event(event, require_delivery=require_delivery, timeout=timeout)
            self.record_sent(stamped, event)
        return events

    async def publish_event(
        self,
        event: VerifiedEvent,
        *,
        relays: Sequence[str] | None = None,
        require_delivery: bool = True,
        timeout: float = 10.0,
    ) -> PublishReport:
        """Publish a pre-built event (e.g. replay one :meth:`send` returned).

        Through the pool (first waiting up to ``timeout`` for a relay to be open, when the
        delivery is required), or, with ``relays``, through short-lived connections to those.
        """
        if relays is not None:
            report = await publish_direct(self.keypair, event, relays, timeout)
        else:
            pool = self._pool
            if pool is None:
                raise PhoneError("phone is offline (go_online() first, or pass relays=)")
            if require_delivery:
                try:
                    async with asyncio.timeout(timeout):
                        await pool.wait_open()
                except TimeoutError:
                    pass  # publish anyway: the report says why nothing took it
            report = await pool.publish(event)
        if require_delivery and not report.delivered:
            raise PublishFailed(report)
        return report

    async def request(
        self,
        command: Command,
        reply: Selector,
        predicate: Callable[[Any], bool] | None = None,
        *,
        timeout: float = 10.0,
    ) -> Received[Any]:
        """Send ``command`` and wait for the first matching reply that arrives after it."""
        mark = self.mark()
        await self.send(command, timeout=timeout)
        return await self.wait_for(reply, predicate, after=mark, timeout=timeout)

    # --- sync -----------------------------------------------------------------------------------

    async def sync(
        self, session_id: str, *, wait: bool = True, timeout: float = 30.0
    ) -> SyncResult | None:
        """Send ``sync-request`` with the ranges held; with ``wait``, return how the sync ended.

        A gap left by ``sync-end.deliveredRanges`` is re-requested at once, at most
        ``max_rerequests`` times, before the result is final.
        """
        self.require_bridge()
        tracker = self.syncs.get(session_id)
        if tracker is None or tracker.done:
            tracker = self.syncs[session_id] = SyncTracker(session_id, self.max_rerequests)
        self.request_sync(tracker)
        return await self.wait_sync(session_id, timeout=timeout) if wait else None

    async def wait_sync(self, session_id: str, *, timeout: float = 30.0) -> SyncResult:
        """Wait until the last sync of ``session_id`` is over (complete or given up)."""
        tracker = self.syncs.get(session_id)
        if tracker is None:
            raise PhoneError(f"no sync was started for session {session_id[:40]!r}")
        return await self.wait_until(
            lambda: tracker.result, timeout=timeout, what=f"sync of {session_id[:40]!r}"
        )

    # --- internals ------------------------------------------------------------------------------

    async def _connect(self) -> None:
        self.decoder()
        self._eose.clear()
        pool = RelayPool(
            self.relays,
            self.keypair,
            on_event=self.handle_event,
            on_eose=self._on_eose,
            **self._pool_options,
        )
        for sub_id, factory in self.filter_factories().items():
            await pool.subscribe(sub_id, factory)
        self._pool = pool
        await pool.start()
        self._outbox.attach(pool)

    async def _wait_ready(self, timeout: float, every_relay: bool) -> None:
        relays = set(self.relays)

        def ready() -> bool | None:
            got = {
                sub: {url for s, url in self._eose if s == sub} for sub in SUBSCRIPTION_IDS.values()
            }
            if every_relay:
                return all(urls >= relays for urls in got.values()) or None
            return all(got.values()) or None

        await self.wait_until(ready, timeout=timeout, what="EOSE on the three subscriptions")

    def _on_eose(self, subscription_id: str, relay: str) -> None:
        self._eose.add((subscription_id, relay))
        self.notify()
