"""One websocket connection to one Nostr relay (asyncio, on ``websockets``).

Theory of operation. A :class:`RelayConnection` is single-use: :meth:`~RelayConnection.connect`
opens it, one reader task owned by the connection parses every frame, and the connection ends
when the socket closes or :meth:`~RelayConnection.close` is called; the pool makes a new one to
reconnect. Everything the reader learns is handed on synchronously:

* ``EVENT`` → dropped unless it belongs to a subscription we opened, matches the filters that
  subscription was sent with, and passes :func:`~bridge.nostr.event.check_event` (id recomputed,
  BIP-340 signature checked); then ``on_event(RelayEventReceived)`` — at once for live events,
  and for a subscription's stored backlog only when all of it is in: relays cap one answer, so
  a large backlog is fetched over page REQs and handed on oldest first
  (:mod:`bridge.nostr.backlog`).
* ``OK`` → resolves the future of the :meth:`~RelayConnection.publish` waiting for that id.
* ``EOSE`` → ``on_eose`` once the subscription's whole backlog was handed on; ``CLOSED`` →
  ``on_closed``; ``NOTICE`` and ``COUNT`` → logged.
* ``AUTH`` → the challenge is remembered. NIP-42 authentication is lazy: when a publish gets
  ``OK false "auth-required: …"`` or a REQ gets ``CLOSED "auth-required: …"``, the connection
  signs a kind-22242 event, sends ``AUTH``, waits for its ``OK`` and retries the request once.

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

Logging follows ``websockets``: ``>`` sent, ``<`` received, ``=`` state, ``!`` handled error,
``-`` timeout; ids as ``id[:8]``; never content, keys or whole frames.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, WebSocketException

from bridge.nostr.backlog import Backlog
from bridge.nostr.event import Event, InvalidEventError, VerifiedEvent, check_event
from bridge.nostr.filters import Filter, matches_any
from bridge.nostr.keys import Keypair
from bridge.nostr.messages import (
    MAX_MESSAGE_SIZE,
    MAX_SUBSCRIPTION_ID_LENGTH,
    AuthChallenge,
    AuthResponse,
    ClientMessage,
    ClosedMessage,
    CloseMessage,
    CountMessage,
    EoseMessage,
    EventMessage,
    NoticeMessage,
    OkMessage,
    PublishMessage,
    RelayMessageError,
    ReqMessage,
    parse_relay_message,
    serialize_client_message,
)
from bridge.nostr.nip42 import build_auth_event, is_auth_required

__all__ = [
    "ConnectionState",
    "PublishOutcome",
    "PublishStatus",
    "RelayConnection",
    "RelayConnectionError",
    "RelayEventReceived",
]

logger = logging.getLogger(__name__)

_NOTICE_LOG_CHARS = 200


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


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class RelayEventReceived:
    """A verified event a relay delivered for one of our subscriptions."""

    relay: str
    subscription_id: str
    event: VerifiedEvent


EventCallback = Callable[[RelayEventReceived], None]
EoseCallback = Callable[[str], None]
ClosedCallback = Callable[[str, str], None]


def _ignore(*_args: Any) -> None:
    return None


@dataclass(slots=True)
class _Subscription:
    filters: tuple[Filter, ...]
    backlog: Backlog | None
    """The stored events being gathered (see :mod:`bridge.nostr.backlog`); None once released.
    A page shares its parent's."""
    auth_retried: bool = False
    parent: str | None = None
    """For a backlog page: the id of the subscription it serves."""
    eose: bool = False


class _PendingOk:
    """The future of one event id awaiting an OK, shared by concurrent publishers of that id."""

    __slots__ = ("future", "waiters")

    def __init__(self, future: asyncio.Future[OkMessage | None]) -> None:
        self.future = future
        self.waiters = 0


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
        clock: unix time in seconds (for AUTH ``created_at``).
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
        self._eose_timeout = eose_timeout
        self._max_message_size = max_message_size
        self._hard_max_message_size = hard_max_message_size
        self._clock = clock
        self._state = ConnectionState.CONNECTING
        self._ws: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = asyncio.Event()
        self._pending: dict[str, _PendingOk] = {}
        self._subscriptions: dict[str, _Subscription] = {}
        self._largest_answer = 0
        """The most stored events one answer of this relay held: its cap, as far as known."""
        self._challenge: str | None = None
        self._challenge_seen = asyncio.Event()
        self._authed_challenge: str | None = None
        self._auth_lock = asyncio.Lock()
        self.close_reason: str | None = None
        """Why the connection ended (for status), once it has."""
        self.last_event_at: float | None = None
        """Unix time of the last verified event delivered."""

    def __repr__(self) -> str:
        return f"<RelayConnection {self.url} {self._state.value}>"

    @property
    def state(self) -> ConnectionState:
        """Where this connection is in its life."""
        return self._state

    @property
    def subscription_ids(self) -> tuple[str, ...]:
        """The subscriptions currently open on this connection."""
        return tuple(self._subscriptions)

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
        try:
            self._ws = await connect(
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
        self._state = ConnectionState.OPEN
        self._reader = asyncio.create_task(self._read_loop(), name=f"relay-reader {self.url}")
        logger.debug("= %s open", self.url)

    async def close(self) -> None:
        """Close the connection (idempotent). Pending publishes finish as NOT_CONNECTED.

        Cancel-safe: if cancelled, the socket is still torn down by the reader's cleanup.
        """
        if self._state is ConnectionState.CLOSED and self._reader is None:
            return
        if self._state is ConnectionState.OPEN:
            self._state = ConnectionState.CLOSING
            logger.debug("x %s closing", self.url)
        try:
            if self._ws is not None:
                await self._ws.close()
        finally:
            await self._stop_tasks()
            if self._reader is not None:
                self._reader.cancel()
                await asyncio.gather(self._reader, return_exceptions=True)
                self._reader = None
            self._mark_closed(self.close_reason or "closed by us")

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
        outcome = await self._request_ok(PublishMessage(event), event.id, wait)
        if (
            outcome.status is PublishStatus.REJECTED
            and is_auth_required(outcome.message)
            and await self._authenticate(wait)
        ):
            outcome = await self._request_ok(PublishMessage(event), event.id, wait)
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
        message = ReqMessage(subscription_id, tuple(filters))
        backlog = Backlog(message.filters)
        subscription = _Subscription(message.filters, backlog)
        self._subscriptions[subscription_id] = subscription
        await self._send(message)
        self._watch_answer(subscription_id, subscription)

    async def unsubscribe(self, subscription_id: str) -> None:
        """Send a CLOSE; events still in flight for it are dropped.

        Raises:
            RelayConnectionError: the connection is not open.
        """
        if self._subscriptions.pop(subscription_id, None) is not None:
            await self._send(CloseMessage(subscription_id))

    # --- internals: sending ---------------------------------------------------------------------

    async def _send(self, message: ClientMessage) -> None:
        if self._state is not ConnectionState.OPEN or self._ws is None:
            raise RelayConnectionError(f"{self.url}: connection is {self._state.value}")
        text = serialize_client_message(message)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("> %s %s %d bytes", self.url, _describe(message), len(text))
        try:
            await self._ws.send(text)
        except ConnectionClosed as exc:
            raise RelayConnectionError(f"{self.url}: {_describe_close(exc)}") from exc

    async def _request_ok(
        self, message: PublishMessage | AuthResponse, event_id: str, timeout: float
    ) -> PublishOutcome:
        pending = self._pending.get(event_id)
        if pending is None:
            pending = _PendingOk(asyncio.get_running_loop().create_future())
            self._pending[event_id] = pending
        pending.waiters += 1
        try:
            await self._send(message)
            answer = await asyncio.wait_for(asyncio.shield(pending.future), timeout)
        except RelayConnectionError as exc:
            return PublishOutcome(self.url, PublishStatus.NOT_CONNECTED, str(exc))
        except TimeoutError:
            logger.info("- %s no OK for %s within %.1fs", self.url, event_id[:8], timeout)
            return PublishOutcome(self.url, PublishStatus.TIMEOUT, f"no OK within {timeout:g}s")
        finally:
            pending.waiters -= 1
            if pending.waiters == 0 and self._pending.get(event_id) is pending:
                del self._pending[event_id]
        if answer is None:
            reason = self.close_reason or "connection closed"
            return PublishOutcome(self.url, PublishStatus.NOT_CONNECTED, reason)
        status = PublishStatus.ACCEPTED if answer.accepted else PublishStatus.REJECTED
        return PublishOutcome(self.url, status, answer.message)

    async def _authenticate(self, timeout: float) -> bool:
        """NIP-42: answer the latest challenge once; True when the relay accepted it."""
        async with self._auth_lock:
            try:
                await asyncio.wait_for(self._challenge_seen.wait(), timeout)
            except TimeoutError:
                logger.warning("! %s asked for AUTH but sent no challenge", self.url)
                return False
            challenge = self._challenge
            if challenge is None:  # woken because the connection closed
                return False
            if challenge == self._authed_challenge:
                return True
            event = build_auth_event(
                self._keypair, self.url, challenge, created_at=int(self._clock())
            )
            outcome = await self._request_ok(AuthResponse(event), event.id, timeout)
            if outcome.accepted:
                self._authed_challenge = challenge
                logger.info("= %s authenticated (NIP-42)", self.url)
                return True
            logger.warning(
                "! %s AUTH %s: %s", self.url, outcome.status.value, outcome.message[:200]
            )
            return False

    async def _resubscribe_after_auth(self, subscription_id: str, closed: ClosedMessage) -> None:
        subscription = self._subscriptions.get(subscription_id)
        if (
            subscription is not None
            and await self._authenticate(self._ok_timeout)
            # Still ours and not replaced meanwhile: send the same REQ again.
            and self._subscriptions.get(subscription_id) is subscription
        ):
            # If the connection ended meanwhile, the pool replays subscriptions on reconnect.
            with contextlib.suppress(RelayConnectionError):
                await self._send(ReqMessage(subscription_id, subscription.filters))
            return
        if subscription is not None and self._subscriptions.get(subscription_id) is subscription:
            del self._subscriptions[subscription_id]
            self._notify(self._on_closed, subscription_id, closed.message)

    def _spawn(self, coro: Any, name: str) -> None:
        task: asyncio.Task[None] = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error(
                "! %s task %s crashed", self.url, task.get_name(), exc_info=task.exception()
            )

    async def _stop_tasks(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # --- internals: receiving -------------------------------------------------------------------

    async def _read_loop(self) -> None:
        assert self._ws is not None
        try:
            async for frame in self._ws:
                self._handle_frame(frame)
            self.close_reason = self.close_reason or _close_text(self._ws)
        except ConnectionClosed as exc:
            self.close_reason = _describe_close(exc)
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
            if not pending.future.done():
                pending.future.set_result(None)
        self._pending.clear()
        self._challenge_seen.set()  # wake an AUTH waiting for a challenge; it will fail to send
        self._closed.set()

    def _handle_frame(self, frame: str | bytes) -> None:
        try:
            message = parse_relay_message(frame, max_size=self._max_message_size)
        except RelayMessageError as exc:
            logger.warning("! %s dropped frame: %s", self.url, exc)
            return
        match message:
            case EventMessage():
                self._handle_event(message)
            case OkMessage():
                pending = self._pending.get(message.event_id)
                if pending is None:
                    logger.debug("< %s OK for unknown %s", self.url, message.event_id[:8])
                elif not pending.future.done():
                    pending.future.set_result(message)
            case EoseMessage():
                subscription = self._subscriptions.get(message.subscription_id)
                if subscription is not None and not subscription.eose:
                    subscription.eose = True
                    logger.debug("< %s EOSE %s", self.url, message.subscription_id)
                    self._answer_ended(message.subscription_id, subscription)
            case ClosedMessage():
                self._handle_closed(message)
            case AuthChallenge():
                logger.debug("< %s AUTH challenge", self.url)
                self._challenge = message.challenge
                self._challenge_seen.set()
            case NoticeMessage():
                logger.info("< %s NOTICE %s", self.url, message.message[:_NOTICE_LOG_CHARS])
            case CountMessage():
                logger.debug("< %s COUNT %s ignored", self.url, message.subscription_id)

    def _handle_event(self, message: EventMessage) -> None:
        event = message.event
        subscription = self._subscriptions.get(message.subscription_id)
        if subscription is None:
            # Normal right after a CLOSE: the relay may have had events in flight.
            logger.debug("< %s EVENT %s for no open subscription", self.url, event.id[:8])
            return
        if not matches_any(subscription.filters, event):
            logger.warning(
                "! %s dropped event %s: does not match subscription %s",
                self.url,
                event.id[:8],
                message.subscription_id,
            )
            return
        try:
            verified = check_event(event)
        except InvalidEventError as exc:
            logger.warning("! %s dropped event %s: %s", self.url, event.id[:8], exc)
            return
        self.last_event_at = self._clock()
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "< %s EVENT %s %s kind %d",
                self.url,
                message.subscription_id,
                event.id[:8],
                event.kind,
            )
        parent_id = subscription.parent or message.subscription_id
        if subscription.parent is not None and not self._serves(subscription):
            return  # a page of a subscription since closed or replaced
        if subscription.backlog is not None:
            subscription.backlog.hold(verified, stored=not subscription.eose)
            return
        self._notify(self._on_event, RelayEventReceived(self.url, parent_id, verified))

    def _serves(self, page: _Subscription) -> bool:
        """Whether a page's parent is still open and still gathering that backlog."""
        parent = self._subscriptions.get(page.parent or "")
        return parent is not None and page.backlog is not None and parent.backlog is page.backlog

    def _answer_ended(
        self, subscription_id: str, subscription: _Subscription, *, refused: bool = False
    ) -> None:
        """A REQ's stored answer ended: ask for the next page, or release the backlog.

        See :mod:`bridge.nostr.backlog`. Pages go one at a time; their events are delivered
        under the parent's id; ``on_eose`` tells the parent's backlog was released whole.
        """
        parent_id = subscription.parent or subscription_id
        if subscription.parent is not None:
            if not refused:
                self._spawn(self._close_page(subscription_id), name=f"relay-page-close {self.url}")
            if not self._serves(subscription):
                return
        parent = self._subscriptions[parent_id]
        backlog = parent.backlog
        if backlog is None:
            return
        self._largest_answer = max(self._largest_answer, backlog.answer_size)
        filters = backlog.answer_ended(0 if refused else self._largest_answer, int(self._clock()))
        for warning in backlog.take_warnings():
            logger.warning("! %s %s: %s", self.url, parent_id, warning)
        if filters is not None:
            page_id = f"{parent_id[: MAX_SUBSCRIPTION_ID_LENGTH - 8]}~p{backlog.pages}"
            logger.info(
                "= %s %s: fetching stored events, page %d", self.url, parent_id, backlog.pages
            )
            page = _Subscription(filters, backlog, parent=parent_id)
            self._subscriptions[page_id] = page
            self._spawn(self._send_page(page_id, filters), name=f"relay-page {self.url}")
            self._watch_answer(page_id, page)
            return
        parent.backlog = None
        for event in backlog.release():
            self._notify(self._on_event, RelayEventReceived(self.url, parent_id, event))
        self._notify(self._on_eose, parent_id)

    def _watch_answer(self, subscription_id: str, subscription: _Subscription) -> None:
        """Bound the wait for a stored answer's EOSE (see :meth:`_answer_overdue`)."""
        self._spawn(
            self._answer_overdue(subscription_id, subscription),
            name=f"relay-eose-deadline {self.url}",
        )

    async def _answer_overdue(self, subscription_id: str, subscription: _Subscription) -> None:
        """A relay that never ends a stored answer must not leave the backlog held forever.

        The events of a backlog are held until its last answer ends; without this deadline one
        REQ the relay never answers would silence the subscription on that relay. Past it, the
        answer counts as refused (its window is skipped, logged) and the backlog goes on.
        """
        await asyncio.sleep(self._eose_timeout)
        if self._subscriptions.get(subscription_id) is not subscription or subscription.eose:
            return
        logger.warning(
            "- %s %s: no EOSE after %g s; going on without the rest of that answer",
            self.url,
            subscription_id,
            self._eose_timeout,
        )
        subscription.eose = True
        if subscription.parent is not None:
            await self._close_page(subscription_id)
        self._answer_ended(subscription_id, subscription, refused=True)

    async def _send_page(self, page_id: str, filters: tuple[Filter, ...]) -> None:
        try:
            await self._send(ReqMessage(page_id, filters))
        except RelayConnectionError:
            self._subscriptions.pop(page_id, None)

    async def _close_page(self, page_id: str) -> None:
        if self._subscriptions.pop(page_id, None) is not None:
            with contextlib.suppress(RelayConnectionError):
                await self._send(CloseMessage(page_id))

    def _handle_closed(self, message: ClosedMessage) -> None:
        subscription_id = message.subscription_id
        subscription = self._subscriptions.get(subscription_id)
        if subscription is None:
            return
        if is_auth_required(message.message) and not subscription.auth_retried:
            subscription.auth_retried = True
            logger.info("< %s CLOSED %s: auth-required, authenticating", self.url, subscription_id)
            self._spawn(
                self._resubscribe_after_auth(subscription_id, message),
                name=f"relay-auth {self.url} {subscription_id}",
            )
            return
        logger.warning(
            "< %s CLOSED %s: %s", self.url, subscription_id, message.message[:_NOTICE_LOG_CHARS]
        )
        del self._subscriptions[subscription_id]
        if subscription.parent is not None:
            # A page refused: its window is skipped (logged above), the backlog goes on.
            if not subscription.eose:
                self._answer_ended(subscription_id, subscription, refused=True)
            return
        self._notify(self._on_closed, subscription_id, message.message)

    def _notify(self, callback: Callable[..., None], *args: Any) -> None:
        try:
            callback(*args)
        except Exception:
            logger.exception(
                "! %s callback %s failed", self.url, getattr(callback, "__name__", "?")
            )


def _close_text(ws: ClientConnection) -> str:
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
