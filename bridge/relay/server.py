"""The relay's I/O: a ``websockets`` server around :class:`ClientSession` and :class:`EventStore`.

Built for what the embedded relay must not do (each a defect of rust-nostr's LocalRelay, measured
against it in docs/BENCHMARKS.md):

* **No Nagle delay.** asyncio sets ``TCP_NODELAY`` on every TCP transport it makes, so a frame
  written right after another is not held back for the peer's delayed ACK (Linux's
  ``TCP_DELACK_MIN``, 40 ms).
* **No hang-up on a burst, no block of a paired phone.** There is no per-connection or
  per-key event budget here: who may write is the write policy's decision (``admit``; the
  daemon passes relaypolicy, which lets only the bridge and its paired phones write and
  rate-limits the pairing window per IP). A client is disconnected only when it leaves more
  than ``max_pending_bytes`` unread — it then reconnects and asks again, and nothing stored is
  lost.
* **Complete answers.** A filter returns every stored match up to ``max_limit`` (20,000), newest
  first (:mod:`bridge.relay.storage`).

Order of checks for an event, cheapest first, so a flood of junk costs little: the session's
shape and size checks; ``created_at`` not too far ahead; the id and signature; NIP-40 expiry;
already stored (``duplicate:``, answered without asking the policy, so a re-send does not use
up a rate limit); the write policy; the store. An accepted event goes to every matching
subscription of every client (its author's included, as NIP-01 relays do), then ``OK``.

The port also answers plain HTTP: NIP-11 for a request that accepts
``application/nostr+json``, and every other GET from the :class:`~bridge.relay.site.StaticSite`
it was given (a web app served from the relay's own origin), or one line saying it is a relay.
With an ``ssl`` context the same port speaks TLS: ``wss://`` and ``https://``.

Which phones read the bridge right now (:meth:`RelayServer.readers`) is kept as an immutable
snapshot, replaced whenever a websocket client's subscriptions change, so another thread may
read it without a lock.

When the store is full (its size cap, :mod:`bridge.relay.storage`), an event that would be
stored is refused with ``OK false "error: relay storage full"``, after one attempt to make room
by purging expired events (at most every :data:`FULL_PURGE_SECONDS`). The log says so once when
it fills up, then at most every :data:`FULL_LOG_SECONDS` with the count refused meanwhile, and
once more when there is room again: a relay refusing a flood must not flood its log.

Each client has a writer task draining its queue of frames, so a slow reader never holds up
the others; a REQ's stored answer waits for the client's queue to drain below a mark before it
queues more, so one large answer does not buffer without bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import ssl
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any, Final, assert_never

import orjson
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.frames import Close, CloseCode
from websockets.http11 import Request, Response

from bridge.nostr.event import Event, is_expired, verify_event
from bridge.relay.classes import StorageClass, storage_class
from bridge.relay.local import LocalChannel, LocalLink
from bridge.relay.nip11 import INFO_CONTENT_TYPE, RelayLimits, info_document
from bridge.relay.session import (
    ClientSession,
    Publish,
    Reply,
    Subscribe,
    Unsubscribe,
    eose_frame,
    event_frame,
    ok_frame,
)
from bridge.relay.site import StaticSite
from bridge.relay.storage import EventStore, Put
from bridge.tasks import TaskSet

__all__ = [
    "Admit",
    "RelayServer",
]

logger = logging.getLogger(__name__)

Admit = Callable[[dict[str, Any], str], tuple[bool, str]]
"""The write policy: (event as a NIP-01 dict, client IP) → (accepted, NIP-01 message)."""

PURGE_INTERVAL_SECONDS = 60.0
DRAIN_MARK_BYTES = 1024 * 1024
"""A stored answer queues more only once the client's queue is below this."""

FULL_PURGE_SECONDS = 10
"""A full store tries to make room by purging expired events at most this often."""
FULL_LOG_SECONDS = 600.0
"""While the store stays full, the log repeats that it is at most this often."""
STORAGE_FULL = "error: relay storage full"
_MIB = 1024 * 1024

LOCAL_IP = "127.0.0.1"
"""The address an in-process client is served as (for the write policy): this machine's."""
_GOING_AWAY = Close(CloseCode.GOING_AWAY, "relay stopped")
_UNREAD = Close(CloseCode.POLICY_VIOLATION, "left too many bytes unread")


class _ConnectionExtra(logging.Filter):
    """Replaces the connection object ``websockets`` attaches to its records with its address.

    The library logs through a ``LoggerAdapter`` that adds ``websocket=<the connection>``; the
    daemon's formatters print extras, and an object's repr (a weak proxy, which may be dead by
    then) tells the reader nothing. ``client`` is the peer's ``host:port`` when it is known.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        connection = record.__dict__.pop("websocket", None)
        if connection is not None:
            with contextlib.suppress(ReferenceError, AttributeError, TypeError, IndexError):
                address = connection.remote_address
                record.client = f"{address[0]}:{address[1]}"
        return True


_LIBRARY_LOG: Final = logging.getLogger(f"{__name__}.websockets")
"""The logger ``websockets`` writes to for this relay's server and its connections.

At WARNING: the library logs each connection opened and closed and each HTTP answer at INFO, so
every doctor probe and every phone reconnect would leave lines in the daemon's log. The relay
logs its clients itself (at DEBUG); what passes from the library is what went wrong (a handler
or a ``process_request`` that raised, a keepalive that failed).
"""
_LIBRARY_LOG.setLevel(logging.WARNING)
_LIBRARY_LOG.addFilter(_ConnectionExtra())

_PREFIXED = re.compile(r"(?:duplicate|pow|blocked|rate-limited|invalid|restricted|mute|error): ")


class _Client:
    """One connection: its protocol state and its queue of frames to send."""

    __slots__ = (
        "connection",
        "drained",
        "dropped",
        "ip",
        "link",
        "pending",
        "pending_bytes",
        "session",
        "wakeup",
    )

    def __init__(
        self,
        connection: ServerConnection | None,
        ip: str,
        limits: RelayLimits,
        link: LocalLink | None = None,
    ) -> None:
        self.connection = connection
        """The websocket; None for an in-process client, whose frames travel by `link`."""
        self.link = link
        self.ip = ip
        self.session = ClientSession(limits)
        self.pending: list[str] = []
        self.pending_bytes = 0
        self.wakeup = asyncio.Event()
        self.drained = asyncio.Event()
        self.dropped = False

    def push(self, frame: str) -> None:
        if self.dropped:
            return
        self.pending.append(frame)
        self.pending_bytes += len(frame)
        self.wakeup.set()

    def stopped_reading(self, limit: int) -> bool:
        """More than ``limit`` bytes wait and the kernel takes no more: the peer is not reading.

        Both conditions, because bytes waiting in the queue alone may only mean its writer has
        not had a turn yet (a burst handled without yielding).
        """
        if self.pending_bytes <= limit:
            return False
        if self.link is not None:
            return self.link.to_client.unread_bytes > 0
        assert self.connection is not None
        transport = self.connection.transport
        return transport is not None and transport.get_write_buffer_size() > 0


class RelayServer:
    """A NIP-01 relay on ``host``:``port`` over ``store``, asking ``admit`` who may write.

    Runs on the event loop that calls :meth:`start`; :mod:`bridge.runtime.edges.embedded_relay`
    gives it a thread of its own.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        store: EventStore,
        admit: Admit | None,
        clock: Callable[[], float],
        limits: RelayLimits | None = None,
        version: str = "",
        site: StaticSite | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.store = store
        self.limits = limits or RelayLimits()
        self._admit = admit
        self._clock = clock
        self._version = version
        self._site = site
        self._tls = tls
        self._reading: frozenset[tuple[str, str]] = frozenset()
        """(author, p) for every websocket subscription naming both: see :meth:`readers`."""
        self._clients: set[_Client] = set()
        self._server: Server | None = None
        self._tasks = TaskSet("relay", logger=logger)
        """The purge timer and every client's writer (on the relay's own loop)."""
        self._congested = False
        self._uncommitted: list[tuple[_Client, str, Event, str]] = []
        self._full = _FullNotice()
        self._full_purged_at = 0
        self.stats = {"accepted": 0, "refused": 0, "dropped_clients": 0, "refused_full": 0}

    @property
    def client_count(self) -> int:
        return len(self._clients)

    def connections(self) -> list[ServerConnection]:
        """The open websocket connections (for diagnostics and tests; in-process ones aside)."""
        return [client.connection for client in self._clients if client.connection is not None]

    def readers(self, author: str) -> frozenset[str]:
        """The pubkeys P for which a websocket client holds a subscription whose filter has
        ``authors`` containing ``author`` and ``#p`` containing P: who is reading ``author``'s
        events addressed to them now (in-process clients aside).

        Safe to call from any thread: it reads a snapshot the relay's loop replaces whole.
        """
        return frozenset(reader for who, reader in self._reading if who == author)

    def _subscriptions_changed(self) -> None:
        pairs: set[tuple[str, str]] = set()
        for client in self._clients:
            if client.connection is None or client.dropped:
                continue
            for filters in client.session.subscriptions.values():
                for one in filters:
                    if one.authors and one.tags.get("p"):
                        pairs.update((a, p) for a in one.authors for p in one.tags["p"])
        if pairs != self._reading:
            self._reading = frozenset(pairs)

    async def start(self) -> None:
        """Listen (``port`` 0 picks a free port, read back into :attr:`port`). Raises OSError."""
        self._server = await serve(
            self._serve,
            self.host,
            self.port,
            process_request=self._http,
            compression=None,  # a loopback/LAN relay: deflate costs CPU for nothing
            max_size=self.limits.max_message_length,
            server_header=None,
            logger=_LIBRARY_LOG,
            ssl=self._tls,
        )
        sockets = list(self._server.sockets)
        if sockets:
            self.port = int(sockets[0].getsockname()[1])
        self._tasks.spawn(self._purge_periodically(), "relay purge")

    async def close(self) -> None:
        """Stop listening and close every connection (idempotent)."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
            await server.wait_closed()
        await self._tasks.close()

    # --- HTTP: NIP-11 and the site ------------------------------------------------------------

    def _http(self, connection: ServerConnection, request: Request) -> Response | None:
        if request.headers.get("Upgrade", "").lower() == "websocket":
            return None
        if INFO_CONTENT_TYPE in request.headers.get("Accept", ""):
            document = info_document(
                self.limits,
                name="codedeck-bridge embedded relay",
                description="A private relay: only this bridge and its paired phones write.",
                version=self._version,
            )
            response = connection.respond(HTTPStatus.OK, orjson.dumps(document).decode())
            del response.headers["Content-Type"]
            response.headers["Content-Type"] = INFO_CONTENT_TYPE
            response.headers["Access-Control-Allow-Origin"] = "*"
            return response
        if self._site is not None:
            return self._from_site(request)
        return connection.respond(
            HTTPStatus.OK, "A Nostr relay (codedeck-bridge): connect with a websocket.\n"
        )

    def _from_site(self, request: Request) -> Response:
        wanted = {
            name: request.headers.get(name, "") for name in ("accept-encoding", "if-none-match")
        }
        assert self._site is not None
        # websockets before 16 parses GET only, and its Request has no method then.
        method = getattr(request, "method", "GET")
        answer = self._site.answer(method, request.path, wanted)
        headers = Headers(answer.headers)
        headers["Connection"] = "close"  # websockets closes the connection after an answer
        status = HTTPStatus(answer.status)
        return Response(status.value, status.phrase, headers, answer.body)

    # --- connections ----------------------------------------------------------------------------

    async def accept_local(self, client_loop: asyncio.AbstractEventLoop) -> LocalChannel:
        """A client in this process, reading on `client_loop`: its end of a
        :class:`~bridge.relay.local.LocalLink`. Call on the relay's loop.

        The client is served like a websocket's, frame by frame through its own
        :class:`~bridge.relay.session.ClientSession`, as from ``127.0.0.1`` for the write policy;
        closing the relay closes the link ("going away"), and the client reconnects as after a
        socket closed.

        Raises:
            ConnectionRefusedError: the relay is closing.
        """
        link = LocalLink(asyncio.get_running_loop(), client_loop, answer_cap=self.limits.max_limit)
        client = _Client(None, LOCAL_IP, self.limits, link)
        serving = self._tasks.spawn(self._serve_client(client, link.to_relay.get), "relay local")
        if serving is None:  # the relay is closing: nobody would ever read this link
            link.close(_GOING_AWAY)
            raise ConnectionRefusedError("the relay is stopping")
        return link.channel

    async def _serve(self, connection: ServerConnection) -> None:
        address = connection.remote_address
        ip = str(address[0]) if address else ""
        await self._serve_client(_Client(connection, ip, self.limits), connection.recv)

    async def _serve_client(
        self, client: _Client, receive: Callable[[], Awaitable[str | bytes]]
    ) -> None:
        """Read `client`'s frames until its connection ends; a writer task sends its frames."""
        self._clients.add(client)
        writer = self._tasks.spawn(self._write(client), f"relay writer {client.ip}")
        logger.debug("= relay client %s connected (%d now)", client.ip, len(self._clients))
        try:
            while True:
                await self._receive(client, await receive())
                if self._congested:
                    # Frames waiting for other clients: let their writers run before the next
                    # frame (a connection with frames ready does not yield).
                    self._congested = False
                    await asyncio.sleep(0)
        except ConnectionClosed:
            pass
        finally:
            self._clients.discard(client)
            client.dropped = True
            if client.connection is not None:
                self._subscriptions_changed()
            if client.link is not None:
                client.link.close(_GOING_AWAY)
            if writer is not None:
                writer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await writer
            logger.debug("= relay client %s gone (%d now)", client.ip, len(self._clients))

    async def _write(self, client: _Client) -> None:
        if client.link is not None:
            await self._write_local(client, client.link)
            return
        connection = client.connection
        assert connection is not None
        try:
            while True:
                await client.wakeup.wait()
                client.wakeup.clear()
                while client.pending:
                    frames, client.pending = client.pending, []
                    for frame in frames:
                        client.pending_bytes -= len(frame)
                        await connection.send(frame)
                        if client.pending_bytes <= DRAIN_MARK_BYTES:
                            client.drained.set()
        except ConnectionClosed:
            pass
        finally:
            client.drained.set()  # nobody waits for a queue that will never drain

    async def _write_local(self, client: _Client, link: LocalLink) -> None:
        """Hand an in-process client its frames a batch at a time, while it keeps up."""
        pipe = link.to_client
        try:
            while True:
                await client.wakeup.wait()
                client.wakeup.clear()
                while client.pending:
                    await pipe.room(DRAIN_MARK_BYTES)
                    frames, client.pending = client.pending, []
                    client.pending_bytes -= sum(len(frame) for frame in frames)
                    if not pipe.put(frames):
                        return
                    client.drained.set()
        finally:
            client.drained.set()  # nobody waits for a queue that will never drain

    async def _receive(self, client: _Client, data: str | bytes) -> None:
        request = client.session.receive(data)
        match request:
            case Publish(event=event, event_json=event_json):
                self._publish(client, event, event_json)
            case Subscribe(subscription_id=subscription_id, filters=filters):
                if client.connection is not None:
                    self._subscriptions_changed()
                now = int(self._clock())
                stored = self.store.query(filters, now, self.limits.max_limit)
                for event_json in stored:
                    client.push(event_frame(subscription_id, event_json))
                    if client.pending_bytes > DRAIN_MARK_BYTES:
                        await self._drained(client)
                client.push(eose_frame(subscription_id))
            case Unsubscribe():
                if client.connection is not None:
                    self._subscriptions_changed()
            case Reply(frame=frame):
                logger.debug("! relay client %s: %.120s", client.ip, frame)
                client.push(frame)
            case _:
                assert_never(request)
        if client.stopped_reading(self.limits.max_pending_bytes):
            self._drop(client)

    async def _drained(self, client: _Client) -> None:
        while client.pending_bytes > DRAIN_MARK_BYTES and not client.dropped:
            client.drained.clear()
            await client.drained.wait()

    def _drop(self, client: _Client) -> None:
        """Disconnect a client that stopped reading (it reconnects and asks again)."""
        if client.dropped:
            return
        logger.warning(
            "! relay client %s left %d bytes unread; disconnecting it",
            client.ip,
            client.pending_bytes,
        )
        client.dropped = True
        client.pending.clear()
        client.pending_bytes = 0
        client.drained.set()
        self.stats["dropped_clients"] += 1
        if client.link is not None:
            client.link.close(_UNREAD)
            return
        assert client.connection is not None
        self._subscriptions_changed()
        transport = client.connection.transport
        if transport is not None:
            transport.abort()

    # --- events ---------------------------------------------------------------------------------

    def _publish(self, client: _Client, event: Event, event_json: str) -> None:
        """Check, admit, store and broadcast one event, and answer ``OK``.

        A stored event is answered and broadcast only after its commit, which covers every
        event stored in the same turn of the event loop (group commit): an ``OK`` is a promise
        that the event is kept.
        """
        accepted, message, stored = self._decide(client, event, event_json)
        if accepted:
            self.stats["accepted"] += 1
        else:
            self.stats["refused"] += 1
            if logger.isEnabledFor(logging.DEBUG):
                logger.debug(
                    "! relay refused %s kind %d from %s: %s",
                    event.id[:8],
                    event.kind,
                    client.ip,
                    message,
                )
        answer = ok_frame(event.id, accepted, message)
        if not stored:
            if accepted and not message:  # ephemeral: nothing to commit
                self._broadcast(event, event_json)
            client.push(answer)
            return
        if not self._uncommitted:
            asyncio.get_running_loop().call_soon(self._commit)
        self._uncommitted.append((client, answer, event, event_json))

    def _commit(self) -> None:
        """Commit the events stored this turn, then answer and broadcast them in order."""
        done, self._uncommitted = self._uncommitted, []
        try:
            self.store.commit()
        except Exception:
            logger.exception("! relay could not commit %d event(s); refusing them", len(done))
            self.store.rollback()
            for client, _, event, _ in done:
                client.push(ok_frame(event.id, False, "error: the relay could not store it"))
            return
        for client, answer, event, event_json in done:
            self._broadcast(event, event_json)
            client.push(answer)

    def _decide(self, client: _Client, event: Event, event_json: str) -> tuple[bool, str, bool]:
        """(accepted, OK message, stored now and waiting for the commit)."""
        now = int(self._clock())
        if event.created_at > now + self.limits.max_future_seconds:
            return False, "invalid: created_at is too far in the future", False
        if not verify_event(event):
            return False, "invalid: bad id or signature", False
        if is_expired(event, now):
            return False, "invalid: event has expired", False
        stored_class = storage_class(event.kind)
        ephemeral = stored_class is StorageClass.EPHEMERAL
        if not ephemeral and self.store.has(event.id):
            return True, "duplicate: already have this event", False
        if self._admit is not None:
            accepted, reason = self._ask_policy(event, client.ip)
            if not accepted:
                return False, reason if _PREFIXED.match(reason) else f"blocked: {reason}", False
        if ephemeral:
            return True, "", False
        put = self.store.put(event, event_json, commit=False)
        if put is Put.FULL and now - self._full_purged_at >= FULL_PURGE_SECONDS:
            self._full_purged_at = now
            if self.store.purge_expired(now):
                put = self.store.put(event, event_json, commit=False)
        if put is Put.STORED:
            self._full.room(self.store)
        match put:
            case Put.STORED:
                return True, "", True
            case Put.FULL:
                self.stats["refused_full"] += 1
                self._full.refuse(self.store, self._clock())
                return False, STORAGE_FULL, False
            case Put.DUPLICATE:
                return True, "duplicate: already have this event", False
            case Put.HAVE_NEWER:
                return False, "duplicate: have a newer event", False
            case Put.DELETED:
                return False, "blocked: deleted by its author", False
            case _:
                assert_never(put)

    def _ask_policy(self, event: Event, ip: str) -> tuple[bool, str]:
        assert self._admit is not None
        try:
            return self._admit(event.to_dict(), ip)
        except Exception:
            logger.exception("! relay write policy failed on %s; refusing it", event.id[:8])
            return False, "error: internal error"

    def _broadcast(self, event: Event, event_json: str) -> None:
        for client in self._clients:
            for subscription_id in client.session.matching(event):
                client.push(event_frame(subscription_id, event_json))
            if client.pending_bytes > DRAIN_MARK_BYTES:
                self._congested = True
                if client.stopped_reading(self.limits.max_pending_bytes):
                    self._drop(client)

    async def _purge_periodically(self) -> None:
        while True:
            await asyncio.sleep(PURGE_INTERVAL_SECONDS)
            removed = self.store.purge_expired(int(self._clock()))
            if removed:
                logger.debug("= relay purged %d expired event(s)", removed)


class _FullNotice:
    """The log lines of a full store: when it fills, every so often while full, when it has room."""

    __slots__ = ("full", "logged_at", "refused", "unlogged")

    def __init__(self) -> None:
        self.full = False
        self.logged_at = 0.0
        self.unlogged = 0
        """Refusals since the last log line."""
        self.refused = 0
        """Refusals since the store filled up."""

    def refuse(self, store: EventStore, now: float) -> None:
        """An event was refused because the store is full."""
        self.refused += 1
        self.unlogged += 1
        if not self.full:
            self.full = True
            logger.warning(
                "! relay storage is full (%s of events, the cap is %s): new events are refused "
                "until stored ones expire (embedded_relay_max_mb raises the cap)",
                _amount(store.stored_bytes),
                _amount(store.max_bytes or 0),
            )
        elif now - self.logged_at >= FULL_LOG_SECONDS:
            logger.warning(
                "! relay storage is still full: %d more event(s) refused", self.unlogged - 1
            )
        else:
            return
        self.logged_at = now
        self.unlogged = 1

    def room(self, store: EventStore) -> None:
        """An event was kept: if the store was full, say it has room again."""
        if not self.full:
            return
        logger.info(
            "relay storage has room again (%s of events); %d event(s) were refused while it was "
            "full",
            _amount(store.stored_bytes),
            self.refused,
        )
        self.full = False
        self.refused = self.unlogged = 0


def _amount(size: int) -> str:
    """A size for the log: bytes below a MiB, else MiB."""
    return f"{size} bytes" if size < _MIB else f"{size / _MIB:.1f} MiB"
