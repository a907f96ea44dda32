"""One websocket connection to one Nostr relay (asyncio, on ``websockets``).

Theory of operation. A :class:`RelayConnection` is the I/O edge around a
:class:`~bridge.nostr.relay_session.RelaySession`, which holds everything the relay's frames
mean: subscriptions and their filters, event verification, backlog paging, the EOSE and NIP-42
deadlines, the AUTH exchange (read its module docstring for the rules). This module moves
frames, keeps time, signs AUTH events and calls back; it decides nothing about the protocol.

A connection is single-use: :meth:`~RelayConnection.connect` opens it, one reader task (owned
by the connection's :class:`~bridge.tasks.TaskSet`) feeds the session, and the connection ends
when the socket closes or :meth:`~RelayConnection.close` is called; the pool makes a new one to
reconnect. The reader waits for the next frame, but no longer than the session's
:meth:`~bridge.nostr.relay_session.RelaySession.next_deadline` (rescheduled whenever another
task's input moves it), and hands the session the frame (``receive``) or the time (``tick``).
Whatever the session returns is carried out in order, by the task that gave the input:

* frames are sent (``>`` logged); a send that fails because the connection is ending is
  dropped, as the pool replays subscriptions on reconnect;
* :class:`~bridge.nostr.relay_session.Log` lines are logged under this module's logger;
* events go to ``on_event(RelayEventReceived)`` (live ones at once, a backlog whole and oldest
  first), ``on_eose`` once a subscription's stored events were all handed on, ``on_closed``
  when the relay ended a subscription for good;
* an ``OK`` resolves the future of the :meth:`~RelayConnection.publish` waiting for that id;
  a publish refused with ``OK false "auth-required: …"`` asks the session to authenticate,
  waits for its verdict and retries once;
* a request to sign an AUTH event is answered at once, before anything else can reach the
  session: here, because signing needs the keypair, unix time and fresh BIP-340 randomness,
  none of which the sans-I/O session may hold or draw.

The callbacks run on the reader task, so they must not block: a callback that awaited a
publish would wait for an ``OK`` only the reader can deliver. Hand work to a queue instead.
An exception from a callback is logged and the connection keeps going.

Bad input never ends the connection: a frame that is not JSON, not an array, of an unknown
type or wrong arity, an event with a bad id or signature, or a frame above
``max_message_size`` is logged (``!`` prefix, ``id[:8]`` and the reason, never the payload)
and dropped. Frames above ``hard_max_message_size`` are refused by ``websockets`` itself
(its ``max_size``): it fails the connection with close code 1009 (message too big), the
reader ends and the pool reconnects with backoff; nothing larger is ever buffered.

Keepalive is ``websockets``' ping/pong (``ping_interval``, ``ping_timeout``): a relay that
stops answering pings is closed with 1011 and the pool reconnects.

Logging follows ``websockets``: ``>`` sent, ``<`` received, ``=`` state, ``x`` closing, ``!``
handled error, ``-`` timeout; ids as ``id[:8]``; never content, keys or whole frames.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, assert_never

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, ConnectionClosedOK, WebSocketException

from bridge.nostr.event import Event
from bridge.nostr.filters import Filter
from bridge.nostr.keys import Keypair
from bridge.nostr.messages import (
    MAX_MESSAGE_SIZE,
    AuthResponse,
    ClientMessage,
    CloseMessage,
    OkMessage,
    PublishMessage,
    ReqMessage,
    serialize_client_message,
)
from bridge.nostr.nip42 import build_auth_event, is_auth_required
from bridge.nostr.relay_session import (
    AuthFinished,
    EndOfStoredEvents,
    Log,
    LogLevel,
    OkReceived,
    RelayEventReceived,
    RelaySession,
    SendMessage,
    SessionOutput,
    SignAuth,
    SubscriptionClosed,
)
from bridge.records import record
from bridge.tasks import TaskSet

__all__ = [
    "ConnectionState",
    "Dial",
    "FrameChannel",
    "PublishOutcome",
    "PublishStatus",
    "RelayConnection",
    "RelayConnectionError",
    "RelayEventReceived",
]

logger = logging.getLogger(__name__)

_NOTICE_LOG_CHARS = 200


class FrameChannel(Protocol):
    """A connection carrying a relay's text frames other than a websocket (see ``dial``).

    ``recv`` must be cancel-safe; ``send`` and ``recv`` raise ``websockets``'
    ``ConnectionClosed`` once it ended, with ``close_code``/``close_reason`` saying why.
    """

    close_code: int | None
    close_reason: str
    answer_cap: int | None
    """The relay's cap on one stored answer when every answer below it is complete (a relay
    in this process, whose code we know), else None: the cap is learnt, and large answers are
    paged through (:mod:`bridge.nostr.backlog`)."""

    async def send(self, text: str) -> None: ...

    async def recv(self) -> str: ...

    async def close(self) -> None: ...

    def abort(self) -> None: ...


Dial = Callable[[], Awaitable[FrameChannel]]
"""Opens a :class:`FrameChannel` to the relay (OSError when it cannot)."""


class RelayConnectionError(ConnectionError):
    """The relay cannot be reached, refused the handshake, or the connection is not open."""


class ConnectionState(enum.Enum):
    """Life of one connection; it never goes back from CLOSED."""

    CONNECTING = "connecting"
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


class PublishStatus(enum.Enum):
    """How a relay answered one publish."""

    ACCEPTED = "accepted"
    """``OK true`` (including ``duplicate:``)."""
    REJECTED = "rejected"
    """``OK false`` with the relay's reason."""
    TIMEOUT = "timeout"
    """No ``OK`` within the timeout; the relay may or may not have the event."""
    NOT_CONNECTED = "not-connected"
    """Not sent, or the connection was lost before the ``OK``."""
    PENDING = "pending"
    """Sent, no ``OK`` yet when the report was made (another relay accepted first)."""


@record
class PublishOutcome:
    """One relay's answer to one publish."""

    relay: str
    status: PublishStatus
    message: str = ""

    @property
    def accepted(self) -> bool:
        """The relay said ``OK true``."""
        return self.status is PublishStatus.ACCEPTED

    @property
    def delivered(self) -> bool:
        """Accepted, or refused only because the relay already holds a newer version.

        The reference bridge counts an ``OK false`` whose message contains ``replaced`` or
        ``newer event`` as delivered: for a replaceable event the relay then serves something
        at least as new, which is all a publisher of a replaceable event can ask for.
        """
        if self.status is PublishStatus.ACCEPTED:
            return True
        return self.status is PublishStatus.REJECTED and (
            "replaced" in self.message or "newer event" in self.message
        )


EventCallback = Callable[[RelayEventReceived], None]
EoseCallback = Callable[[str], None]
ClosedCallback = Callable[[str, str], None]

_Effect = (
    SendMessage
    | RelayEventReceived
    | EndOfStoredEvents
    | SubscriptionClosed
    | OkReceived
    | AuthFinished
    | Log
)
"""A session output once :class:`SignAuth` was answered (see :meth:`RelayConnection._signed`)."""


def _ignore(*_args: Any) -> None:
    return None


def _level(level: LogLevel) -> int:
    match level:
        case LogLevel.DEBUG:
            return logging.DEBUG
        case LogLevel.INFO:
            return logging.INFO
        case LogLevel.WARNING:
            return logging.WARNING
        case _:
            assert_never(level)


def _describe_close(exc: BaseException) -> str:
    """A short reason for logs and status (no payload)."""
    if isinstance(exc, ConnectionClosed):
        frame = exc.rcvd or exc.sent
        if frame is None:
            return "connection lost (no close frame)"
        reason = f" {frame.reason[:60]}" if frame.reason else ""
        return f"closed with code {frame.code}{reason}"
    text = str(exc) or type(exc).__name__
    return text[:200]


class RelayConnection:
    """One connection to one relay. Create, :meth:`connect`, use, :meth:`close`.

    Args:
        url: ``ws://`` or ``wss://`` URL, used verbatim in NIP-42 AUTH events.
        keypair: signs NIP-42 AUTH events (never logged).
        on_event: called with every verified event of one of our subscriptions.
        on_eose: called with the subscription id on EOSE.
        on_closed: called with (subscription id, message) when the relay ends a subscription
            for good (after the one AUTH retry, if it asked for AUTH).
        connect_timeout: seconds for TCP + TLS + websocket handshake.
        ok_timeout: default seconds to wait for the OK of a publish (and of an AUTH).
        ping_interval / ping_timeout: websocket keepalive; ``None`` disables it.
        close_timeout: seconds to wait for the closing handshake before dropping TCP.
        max_message_size: frames above this are logged and dropped; the connection stays.
        hard_max_message_size: frames above this fail the connection (``websockets``'
            ``max_size``, close code 1009), so nothing bigger is ever buffered; defaults to
            four times ``max_message_size``.
        eose_timeout: seconds a stored answer may take before it counts as refused.
        clock: unix time in seconds (for AUTH ``created_at`` and backlog windows).
        dial: opens the connection instead of a websocket to `url`: a relay in this process
            (:meth:`bridge.runtime.edges.embedded_relay.EmbeddedRelay.dial`). The frames are the
            same; the keepalive and ``hard_max_message_size`` are the socket's and do not apply.
    """

    def __init__(
        self,
        url: str,
        keypair: Keypair,
        *,
        on_event: EventCallback = _ignore,
        on_eose: EoseCallback = _ignore,
        on_closed: ClosedCallback = _ignore,
        connect_timeout: float = 10.0,
        ok_timeout: float = 10.0,
        ping_interval: float | None = 20.0,
        ping_timeout: float | None = 20.0,
        close_timeout: float = 5.0,
        max_message_size: int = MAX_MESSAGE_SIZE,
        hard_max_message_size: int | None = None,
        eose_timeout: float = 15.0,
        clock: Callable[[], float] = time.time,
        dial: Dial | None = None,
    ) -> None:
        if hard_max_message_size is None:
            hard_max_message_size = 4 * max_message_size
        if hard_max_message_size < max_message_size:
            raise ValueError("hard_max_message_size must be >= max_message_size")
        self.url = url
        self._keypair = keypair
        self._on_event = on_event
        self._on_eose = on_eose
        self._on_closed = on_closed
        self._connect_timeout = connect_timeout
        self._ok_timeout = ok_timeout
        self._ping_interval = ping_interval
        self._ping_timeout = ping_timeout
        self._close_timeout = close_timeout
        self._hard_max_message_size = hard_max_message_size
        self._clock = clock
        self._dial = dial
        self._session = RelaySession(
            url,
            eose_timeout=eose_timeout,
            auth_timeout=ok_timeout,
            max_message_size=max_message_size,
        )
        self._state = ConnectionState.CONNECTING
        self._ws: ClientConnection | FrameChannel | None = None
        self._tasks = TaskSet(f"relay {url}", logger=logger)
        self._timer: asyncio.Timeout | None = None
        """The reader's wait for the next frame, bounded by the session's next deadline."""
        self._closed = asyncio.Event()
        self._pending: dict[str, asyncio.Future[OkMessage | None]] = {}
        self._auth_verdict: asyncio.Future[bool] | None = None
        self.close_reason: str | None = None
        """Why the connection ended (for status), once it has."""

    def __repr__(self) -> str:
        return f"<RelayConnection {self.url} {self._state.value}>"

    @property
    def state(self) -> ConnectionState:
        """Where this connection is in its life."""
        return self._state

    @property
    def subscription_ids(self) -> tuple[str, ...]:
        """The subscriptions currently open on this connection."""
        return self._session.subscription_ids

    @property
    def last_event_at(self) -> float | None:
        """Unix time of the last verified event delivered."""
        return self._session.last_event_at

    # --- lifecycle ------------------------------------------------------------------------------

    async def connect(self) -> None:
        """Open the websocket and start reading.

        Raises:
            RelayConnectionError: unreachable, handshake refused, bad URL, or timeout. The
                connection is then CLOSED and must not be reused.
        """
        if self._state is not ConnectionState.CONNECTING or self._ws is not None:
            raise RelayConnectionError(f"{self.url}: a connection object is single-use")
        logger.debug("= %s connecting", self.url)
        ws: ClientConnection | FrameChannel
        try:
            if self._dial is not None:
                async with asyncio.timeout(self._connect_timeout):
                    ws = await self._dial()
            else:
                ws = await connect(
                    self.url,
                    open_timeout=self._connect_timeout,
                    ping_interval=self._ping_interval,
                    ping_timeout=self._ping_timeout,
                    close_timeout=self._close_timeout,
                    max_size=self._hard_max_message_size,
                    user_agent_header=None,
                )
        except (OSError, TimeoutError, WebSocketException, ValueError) as exc:
            self._mark_closed(f"cannot connect: {_describe_close(exc)}")
            raise RelayConnectionError(f"{self.url}: {self.close_reason}") from exc
        if self._state is not ConnectionState.CONNECTING:  # closed while the handshake ran
            await ws.close()
            raise RelayConnectionError(f"{self.url}: closed while connecting")
        self._ws = ws
        if not isinstance(ws, ClientConnection) and ws.answer_cap is not None:
            self._session.trust_answers_below(ws.answer_cap)
        self._state = ConnectionState.OPEN
        self._tasks.spawn(self._read_loop(ws), name=f"relay-reader {self.url}")
        logger.debug("= %s open", self.url)

    async def close(self) -> None:
        """Close the connection (idempotent). Pending publishes finish as NOT_CONNECTED.

        Cancel-safe: if cancelled, the socket is still torn down by the reader's cleanup.
        """
        if self._state is ConnectionState.CLOSED and (self._ws is None or self._tasks.closed):
            return
        if self._state is ConnectionState.OPEN:
            self._state = ConnectionState.CLOSING
            logger.debug("x %s closing", self.url)
        try:
            if self._ws is not None:
                await self._ws.close()
        finally:
            await self._tasks.close()
            self._mark_closed(self.close_reason or "closed by us")

    def abort(self, reason: str) -> None:
        """End the connection at once, without the closing handshake (idempotent).

        For a connection that may be dead without a FIN having arrived, as after a suspend:
        :meth:`close` would wait ``close_timeout`` for a closing frame from a peer that is gone.
        Here the TCP connection is dropped, pending publishes finish as NOT_CONNECTED and
        :meth:`wait_closed` returns; :meth:`close` afterwards reaps the reader without waiting.
        A connection still connecting is marked closed: its handshake, if it ever finishes, is
        closed and :meth:`connect` raises (interrupting a hanging handshake is the caller's
        business: cancel :meth:`connect`).
        """
        if self._state is ConnectionState.CLOSED:
            return
        ws = self._ws
        self._mark_closed(reason)
        if isinstance(ws, ClientConnection):
            ws.transport.abort()
        elif ws is not None:
            ws.abort()

    async def wait_closed(self) -> None:
        """Return once the connection has ended, for whatever reason. Cancel-safe."""
        await self._closed.wait()

    # --- requests -------------------------------------------------------------------------------

    async def publish(self, event: Event, *, timeout: float | None = None) -> PublishOutcome:
        """Send ``event`` and wait for the relay's OK; authenticate and retry once if asked.

        Never raises for relay behaviour: a missing OK becomes TIMEOUT, a lost connection
        NOT_CONNECTED. Cancel-safe (nothing is left waiting for the OK).

        Args:
            event: a signed event (its id keys the OK).
            timeout: seconds to wait for each OK; defaults to ``ok_timeout``.
        """
        wait = self._ok_timeout if timeout is None else timeout
        outcome = await self._request_ok(event, wait)
        if (
            outcome.status is PublishStatus.REJECTED
            and is_auth_required(outcome.message)
            and await self._authenticate(wait)
        ):
            outcome = await self._request_ok(event, wait)
        level = logging.DEBUG if outcome.accepted else logging.INFO
        if logger.isEnabledFor(level):
            logger.log(
                level,
                "< %s OK %s %s %s",
                self.url,
                event.id[:8],
                outcome.status.value,
                outcome.message[:_NOTICE_LOG_CHARS],
            )
        return outcome

    async def subscribe(self, subscription_id: str, filters: Sequence[Filter]) -> None:
        """Send a REQ (replacing any subscription with that id). Events go to ``on_event``.

        Raises:
            RelayConnectionError: the connection is not open.
            ClientMessageError: a bad subscription id or no filter.
        """
        self._check_open()
        now = asyncio.get_running_loop().time()
        await self._apply(self._session.subscribe(subscription_id, filters, now), strict=True)

    async def unsubscribe(self, subscription_id: str) -> None:
        """Send a CLOSE; events still in flight for it are dropped.

        Raises:
            RelayConnectionError: the connection is not open.
        """
        await self._apply(self._session.unsubscribe(subscription_id), strict=True)

    # --- internals: sending ---------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._state is not ConnectionState.OPEN or self._ws is None:
            raise RelayConnectionError(f"{self.url}: connection is {self._state.value}")

    async def _send(self, message: ClientMessage) -> None:
        self._check_open()
        assert self._ws is not None
        text = serialize_client_message(message)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("> %s %s %d bytes", self.url, _describe(message), len(text))
        try:
            await self._ws.send(text)
        except ConnectionClosed as exc:
            raise RelayConnectionError(f"{self.url}: {_describe_close(exc)}") from exc

    async def _request_ok(self, event: Event, timeout: float) -> PublishOutcome:
        future = self._pending.get(event.id)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            self._pending[event.id] = future
        self._session.expect_ok(event.id)
        try:
            await self._send(PublishMessage(event))
            answer = await asyncio.wait_for(asyncio.shield(future), timeout)
        except RelayConnectionError as exc:
            return PublishOutcome(self.url, PublishStatus.NOT_CONNECTED, str(exc))
        except TimeoutError:
            logger.info("- %s no OK for %s within %.1fs", self.url, event.id[:8], timeout)
            return PublishOutcome(self.url, PublishStatus.TIMEOUT, f"no OK within {timeout:g}s")
        finally:
            if self._session.release_ok(event.id) and self._pending.get(event.id) is future:
                del self._pending[event.id]
        if answer is None:
            reason = self.close_reason or "connection closed"
            return PublishOutcome(self.url, PublishStatus.NOT_CONNECTED, reason)
        status = PublishStatus.ACCEPTED if answer.accepted else PublishStatus.REJECTED
        return PublishOutcome(self.url, status, answer.message)

    async def _authenticate(self, timeout: float) -> bool:
        """NIP-42 for a publish: the session's verdict (True: the relay accepted our AUTH).

        The session runs one attempt at a time and ends each with ``AuthFinished`` (by its
        deadlines at the latest: ``timeout`` for the challenge, then for the OK), which
        resolves the one verdict future every waiter shares. Cancel-safe.
        """
        if self._state is not ConnectionState.OPEN:
            return False
        verdict = self._auth_verdict
        if verdict is None or verdict.done():
            verdict = asyncio.get_running_loop().create_future()
            self._auth_verdict = verdict
        now = asyncio.get_running_loop().time()
        await self._apply(self._session.authenticate(now, timeout=timeout))
        try:
            # The session's deadlines end the attempt; this keeps this publish's own bound
            # when it joined an attempt begun with a longer timeout (or the reader is stuck).
            return await asyncio.wait_for(asyncio.shield(verdict), 2 * timeout)
        except TimeoutError:
            return False

    # --- internals: carrying out what the session says ------------------------------------------

    async def _apply(self, outputs: list[SessionOutput], *, strict: bool = False) -> None:
        """Carry out a session input's outputs, in order.

        Args:
            strict: a failed send raises (the caller's own request); else it is dropped, as
                the connection is ending and the pool replays subscriptions on reconnect.
        """
        effects = self._signed(outputs)
        self._rearm()
        for effect in effects:
            match effect:
                case SendMessage(message):
                    try:
                        await self._send(message)
                    except RelayConnectionError:
                        if strict:
                            raise
                case Log():
                    level = _level(effect.level)
                    if logger.isEnabledFor(level):
                        template = "%s %s " + effect.template
                        logger.log(level, template, effect.prefix, self.url, *effect.args)
                case RelayEventReceived():
                    self._notify(self._on_event, effect)
                case EndOfStoredEvents(subscription_id):
                    self._notify(self._on_eose, subscription_id)
                case SubscriptionClosed(subscription_id, message):
                    self._notify(self._on_closed, subscription_id, message)
                case OkReceived(ok):
                    future = self._pending.get(ok.event_id)
                    if future is not None and not future.done():
                        future.set_result(ok)
                case AuthFinished(accepted):
                    verdict, self._auth_verdict = self._auth_verdict, None
                    if verdict is not None and not verdict.done():
                        verdict.set_result(accepted)
                case _:
                    assert_never(effect)

    def _signed(self, outputs: list[SessionOutput]) -> list[_Effect]:
        """Answer every :class:`SignAuth` now, synchronously, so no other input comes between."""
        effects: list[_Effect] = []
        for output in outputs:
            if isinstance(output, SignAuth):
                event = build_auth_event(
                    self._keypair, self.url, output.challenge, created_at=int(self._clock())
                )
                now = asyncio.get_running_loop().time()
                effects += self._signed(self._session.auth_signed(event, now))
            else:
                effects.append(output)
        return effects

    def _rearm(self) -> None:
        """The session's next deadline may have moved: move the reader's wait with it."""
        timer = self._timer
        if timer is not None and not timer.expired():
            timer.reschedule(self._session.next_deadline())

    def _notify(self, callback: Callable[..., None], *args: Any) -> None:
        try:
            callback(*args)
        except Exception:
            logger.exception(
                "! %s callback %s failed", self.url, getattr(callback, "__name__", "?")
            )

    # --- internals: receiving -------------------------------------------------------------------

    async def _read_loop(self, ws: ClientConnection | FrameChannel) -> None:
        """Feed the session every frame and every deadline, one input at a time.

        ``recv()`` is cancel-safe (``websockets``: no message is lost), so waiting for a frame
        under the session's deadline and ticking when it passes loses nothing.
        """
        loop = asyncio.get_running_loop()
        try:
            while True:
                try:
                    async with asyncio.timeout_at(self._session.next_deadline()) as timer:
                        self._timer = timer
                        frame = await ws.recv()
                except TimeoutError:
                    await self._apply(self._session.tick(loop.time(), self._clock()))
                    continue
                finally:
                    self._timer = None
                await self._apply(self._session.receive(frame, loop.time(), self._clock()))
        except ConnectionClosedOK:
            self.close_reason = self.close_reason or _close_text(ws)
        except ConnectionClosed as exc:
            self.close_reason = self.close_reason or _describe_close(exc)  # abort() set one
        except Exception:
            # A bug in frame handling, not relay behaviour: say so loudly and end the
            # connection; the pool closes it and reconnects.
            logger.exception("! %s reader crashed", self.url)
            self.close_reason = "internal error in the reader"
        finally:
            self._mark_closed(self.close_reason or "closed")

    def _mark_closed(self, reason: str) -> None:
        if self._state is not ConnectionState.CLOSED:
            was_open = self._state in (ConnectionState.OPEN, ConnectionState.CLOSING)
            self._state = ConnectionState.CLOSED
            self.close_reason = reason
            if was_open:
                logger.info("= %s closed: %s", self.url, reason)
        for pending in self._pending.values():
            if not pending.done():
                pending.set_result(None)
        self._pending.clear()
        verdict, self._auth_verdict = self._auth_verdict, None
        if verdict is not None and not verdict.done():
            verdict.set_result(False)  # an AUTH cannot finish on a closed connection
        self._closed.set()


def _close_text(ws: ClientConnection | FrameChannel) -> str:
    if ws.close_code is None:
        return "closed"
    reason = f" {ws.close_reason[:60]}" if ws.close_reason else ""
    return f"closed with code {ws.close_code}{reason}"


def _describe(message: ClientMessage) -> str:
    match message:
        case PublishMessage(event):
            return f"EVENT {event.id[:8]} kind {event.kind}"
        case ReqMessage(subscription_id, filters):
            return f"REQ {subscription_id} ({len(filters)} filters)"
        case CloseMessage(subscription_id):
            return f"CLOSE {subscription_id}"
        case AuthResponse(event):
            return f"AUTH {event.id[:8]}"
    return "?"
