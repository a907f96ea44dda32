"""The sans-I/O half of one relay connection: frames in → frames, events and deadlines out.

A :class:`RelaySession` is what :class:`~bridge.nostr.relay.RelayConnection` knows about one
relay, without the socket: which subscriptions are open and with which filters, which stored
answers are still coming in, how far each backlog got, what the relay's NIP-42 challenge is
and whether we answered it. It reads no clock, draws no randomness and logs nothing: every
input carries the time (``now``: monotonic seconds, for deadlines; ``now_unix``: unix
seconds, for backlog windows), and every input returns the list of what follows from it, in
order (:data:`SessionOutput`): frames to send, events for the callbacks, lines to log.

Rules (each input, and what it returns):

* :meth:`~RelaySession.subscribe` → ``REQ``. The subscription's stored answer must end
  (``EOSE``) within ``eose_timeout``.
* ``EVENT`` → dropped (with a :class:`Log` saying why) unless it belongs to a subscription we
  opened, matches the filters that subscription was sent with, and passes
  :func:`~bridge.nostr.event.check_event` (id recomputed, BIP-340 signature checked); then a
  :class:`RelayEventReceived` — at once for live events, and for a subscription's stored
  backlog only when all of it is in: relays cap one answer, so a large backlog is fetched over
  page ``REQ``\\ s and handed on oldest first (:mod:`bridge.nostr.backlog`; the cap is learnt
  as the largest answer this relay gave). Pages are the session's own subscriptions
  (``<id>~p<n>``): their events go out under the parent's id, and the caller never sees them.
* ``EOSE`` → the answer ended: the next page ``REQ`` (and ``CLOSE`` of the page that ended),
  or the whole backlog, oldest first, then :class:`EndOfStoredEvents`.
* A deadline (:meth:`~RelaySession.next_deadline`, :meth:`~RelaySession.tick`): a stored
  answer without ``EOSE`` by then counts as refused — its window is skipped, logged with
  ``-``, and the backlog goes on, so one REQ the relay never answers cannot silence a
  subscription. An AUTH without a challenge or without an ``OK`` by then has failed.
* ``CLOSED`` → :class:`SubscriptionClosed`; for a page, its window is skipped and the backlog
  goes on. ``CLOSED "auth-required: …"`` the first time for a subscription: authenticate
  (below), then send the same ``REQ`` again; if that fails, or the relay closes it again,
  :class:`SubscriptionClosed` with the relay's message.
* ``AUTH`` challenge → remembered. NIP-42 authentication is lazy: only a ``CLOSED`` (here) or
  a publish's ``OK false`` (:meth:`~RelaySession.authenticate`, called by the I/O layer)
  starts it. One attempt at a time: :class:`SignAuth` once a challenge is known, the signed
  event comes back through :meth:`~RelaySession.auth_signed` and goes out as ``AUTH``, and
  its ``OK`` ends the attempt with :class:`AuthFinished` (and the waiting ``REQ``\\ s). A
  challenge already answered is not answered again.
* ``OK`` → :class:`OkReceived` for an id announced with :meth:`~RelaySession.expect_ok`; the
  ``OK`` of our AUTH event is the session's own; any other is ignored (logged at DEBUG).
* ``NOTICE`` and ``COUNT`` → logged. A frame that does not parse → dropped and logged.

Why the I/O layer signs the AUTH event. Signing needs the key, unix time for ``created_at``
and fresh BIP-340 aux randomness (``os.urandom`` inside :meth:`~bridge.nostr.keys.Keypair.
sign_schnorr`). Keeping all three outside keeps the session deterministic (its outputs are a
function of its inputs) and its state free of secrets; the price is one round trip, which the
I/O layer answers synchronously, before any other input reaches the session.

Logging. Each :class:`Log` names its level, its greppable prefix (``<`` received, ``=``
state, ``!`` handled error, ``-`` timeout) and a ``%``-template with its arguments, so the
I/O layer formats only what its logger will emit. Ids appear as ``id[:8]``; payloads never.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import assert_never

from bridge.nostr.backlog import Backlog
from bridge.nostr.event import InvalidEventError, VerifiedEvent, check_event
from bridge.nostr.filters import Filter, matches_any
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
    RelayMessageError,
    ReqMessage,
    parse_relay_message,
    serialize_client_message,
)
from bridge.nostr.nip42 import is_auth_required
from bridge.records import record

__all__ = [
    "AuthFinished",
    "EndOfStoredEvents",
    "Log",
    "LogLevel",
    "OkReceived",
    "RelayEventReceived",
    "RelaySession",
    "SendMessage",
    "SessionOutput",
    "SignAuth",
    "SubscriptionClosed",
]

_NOTICE_LOG_CHARS = 200


class LogLevel(enum.Enum):
    """How loud a :class:`Log` is (the I/O layer maps it onto ``logging``'s levels)."""

    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"


@record
class Log:
    """Log this line: ``<prefix> <relay url> <template % args>``."""

    level: LogLevel
    prefix: str
    template: str
    args: tuple[str | int | float, ...] = ()

    @property
    def text(self) -> str:
        """The line without prefix and URL."""
        return self.template % self.args


@record
class SendMessage:
    """Send this frame to the relay."""

    message: ClientMessage


@record
class SignAuth:
    """Sign the kind-22242 event answering ``challenge``, and hand it to ``auth_signed``."""

    challenge: str


@record
class RelayEventReceived:
    """A verified event a relay delivered for one of our subscriptions."""

    relay: str
    subscription_id: str
    event: VerifiedEvent


@record
class EndOfStoredEvents:
    """The subscription's whole stored backlog was handed on; live events follow."""

    subscription_id: str


@record
class SubscriptionClosed:
    """The relay ended the subscription for good (after the one AUTH retry, if asked)."""

    subscription_id: str
    message: str


@record
class OkReceived:
    """The relay's ``OK`` for an event announced with :meth:`RelaySession.expect_ok`."""

    ok: OkMessage


@record
class AuthFinished:
    """The NIP-42 attempt ended: ``accepted`` when the relay took our AUTH event."""

    accepted: bool


def _debug(prefix: str, template: str, *args: str | int | float) -> Log:
    return Log(LogLevel.DEBUG, prefix, template, args)


def _info(prefix: str, template: str, *args: str | int | float) -> Log:
    return Log(LogLevel.INFO, prefix, template, args)


def _warning(prefix: str, template: str, *args: str | int | float) -> Log:
    return Log(LogLevel.WARNING, prefix, template, args)


SessionOutput = (
    SendMessage
    | SignAuth
    | RelayEventReceived
    | EndOfStoredEvents
    | SubscriptionClosed
    | OkReceived
    | AuthFinished
    | Log
)
"""Everything an input to :class:`RelaySession` can lead to."""


@dataclass(slots=True)
class _Subscription:
    filters: tuple[Filter, ...]
    backlog: Backlog | None
    """The stored events being gathered; None once released. A page shares its parent's."""
    deadline: float | None
    """When the current stored answer must have ended; None once it did, or while the REQ
    waits for AUTH."""
    parent: str | None = None
    """For a backlog page: the id of the subscription it serves."""
    eose: bool = False
    auth_retried: bool = False
    auth_closed: str | None = None
    """While the REQ waits for AUTH: the relay's CLOSED message (reported if AUTH fails)."""


@dataclass(slots=True)
class _AuthAttempt:
    challenge: str | None
    """The challenge being answered; None while we wait for the relay to send one."""
    deadline: float
    timeout: float
    event_id: str | None = None
    """Our signed AUTH event, once sent: its OK ends the attempt."""


class RelaySession:
    """The protocol state of one connection to one relay (see the module docstring).

    Args:
        url: the relay's URL, as events are reported (and as AUTH events must carry it).
        eose_timeout: seconds a stored answer may take to end (see the module docstring).
        auth_timeout: default seconds for each step of NIP-42: the challenge, then the OK.
        max_message_size: frames above this many bytes are dropped (and logged).
    """

    def __init__(
        self,
        url: str,
        *,
        eose_timeout: float = 15.0,
        auth_timeout: float = 10.0,
        max_message_size: int = MAX_MESSAGE_SIZE,
    ) -> None:
        self.url = url
        self._eose_timeout = eose_timeout
        self._auth_timeout = auth_timeout
        self._max_message_size = max_message_size
        self._subscriptions: dict[str, _Subscription] = {}
        self._largest_answer = 0
        """The most stored events one answer of this relay held: its cap, as far as known."""
        self._known_cap: int | None = None
        """Set by :meth:`trust_answers_below`: the relay's cap, known rather than learnt."""
        self._awaiting_ok: dict[str, int] = {}
        self._challenge: str | None = None
        self._authed_challenge: str | None = None
        self._auth: _AuthAttempt | None = None
        self.last_event_at: float | None = None
        """Unix time (as passed in) of the last verified event of an open subscription."""

    def __repr__(self) -> str:
        return f"<RelaySession {self.url} {len(self._subscriptions)} subscriptions>"

    def trust_answers_below(self, cap: int) -> None:
        """The relay answers every ``REQ`` with all its matches up to `cap` stored events.

        Only for a relay whose code we know (the daemon's embedded relay, in process): an
        answer smaller than `cap` is then complete, and a large backlog is one answer instead
        of a bisection down to single seconds (the pages a relay met over a socket needs,
        since some return capped answers with holes; see :mod:`bridge.nostr.backlog`).

        Raises:
            ValueError: `cap` is not positive.
        """
        if cap < 1:
            raise ValueError("a relay's answer cap must be positive")
        self._known_cap = cap

    @property
    def subscription_ids(self) -> tuple[str, ...]:
        """The caller's open subscriptions (backlog pages are the session's, not listed)."""
        return tuple(sid for sid, sub in self._subscriptions.items() if sub.parent is None)

    @property
    def authenticated(self) -> bool:
        """The relay's latest challenge was answered and accepted."""
        return self._challenge is not None and self._challenge == self._authed_challenge

    # --- inputs from the caller -----------------------------------------------------------------

    def subscribe(
        self, subscription_id: str, filters: Sequence[Filter], now: float
    ) -> list[SessionOutput]:
        """Open (or replace) a subscription: its ``REQ``, after closing the old one's pages.

        Raises:
            ClientMessageError: a bad subscription id or no filter (nothing is registered).
        """
        message = ReqMessage(subscription_id, tuple(filters))
        serialize_client_message(message)  # the wire's own checks, before anything is kept
        outputs = self._close_pages(subscription_id)
        self._subscriptions[subscription_id] = _Subscription(
            message.filters, Backlog(message.filters), deadline=now + self._eose_timeout
        )
        outputs.append(SendMessage(message))
        return outputs

    def unsubscribe(self, subscription_id: str) -> list[SessionOutput]:
        """Close one of the caller's subscriptions (and its pages); unknown ids: nothing."""
        subscription = self._subscriptions.get(subscription_id)
        if subscription is None or subscription.parent is not None:
            return []
        del self._subscriptions[subscription_id]
        outputs: list[SessionOutput] = [SendMessage(CloseMessage(subscription_id))]
        return outputs + self._close_pages(subscription_id)

    def expect_ok(self, event_id: str) -> None:
        """A publish of ``event_id`` waits for its ``OK`` (once per waiter)."""
        self._awaiting_ok[event_id] = self._awaiting_ok.get(event_id, 0) + 1

    def release_ok(self, event_id: str) -> bool:
        """One waiter of ``event_id`` is done; True when it was the last."""
        left = self._awaiting_ok.get(event_id, 0) - 1
        if left > 0:
            self._awaiting_ok[event_id] = left
            return False
        self._awaiting_ok.pop(event_id, None)
        return True

    def authenticate(self, now: float, *, timeout: float | None = None) -> list[SessionOutput]:
        """Answer the relay's challenge (a publish got ``OK false "auth-required: …"``).

        Returns :class:`AuthFinished` at once when the latest challenge was already accepted;
        nothing when an attempt is under way (its :class:`AuthFinished` answers this call
        too); else :class:`SignAuth`, or nothing until the relay sends a challenge.

        Args:
            now: monotonic seconds.
            timeout: seconds for each step (challenge, OK); defaults to ``auth_timeout``.
        """
        if self._auth is not None:
            return []
        if self.authenticated:
            return self._auth_succeeded(now)
        wait = self._auth_timeout if timeout is None else timeout
        self._auth = _AuthAttempt(self._challenge, deadline=now + wait, timeout=wait)
        return [] if self._challenge is None else [SignAuth(self._challenge)]

    def auth_signed(self, event: VerifiedEvent, now: float) -> list[SessionOutput]:
        """The event :class:`SignAuth` asked for: its ``AUTH`` frame.

        Raises:
            RuntimeError: no :class:`SignAuth` is waiting for its event (a caller bug).
            ValueError: ``event`` does not answer the challenge being answered.
        """
        auth = self._auth
        if auth is None or auth.challenge is None or auth.event_id is not None:
            raise RuntimeError("no AUTH event was asked for")
        if ("challenge", auth.challenge) not in event.tags:
            raise ValueError("the AUTH event does not answer the pending challenge")
        auth.event_id = event.id
        auth.deadline = now + auth.timeout
        return [SendMessage(AuthResponse(event))]

    # --- inputs from the relay and the clock ----------------------------------------------------

    def receive(self, frame: str | bytes, now: float, now_unix: float) -> list[SessionOutput]:
        """One frame from the relay. Never raises for what the relay sent."""
        try:
            message = parse_relay_message(frame, max_size=self._max_message_size)
        except RelayMessageError as exc:
            return [_warning("!", "dropped frame: %s", str(exc))]
        match message:
            case EventMessage():
                return self._event(message, now_unix)
            case OkMessage():
                return self._ok(message, now, now_unix)
            case EoseMessage(subscription_id):
                return self._eose(subscription_id, now, now_unix)
            case ClosedMessage():
                return self._closed(message, now, now_unix)
            case AuthChallenge(challenge):
                return self._challenge_received(challenge)
            case NoticeMessage(text):
                return [_info("<", "NOTICE %s", text[:_NOTICE_LOG_CHARS])]
            case CountMessage(subscription_id):
                return [_debug("<", "COUNT %s ignored", subscription_id)]
            case _:
                assert_never(message)

    def next_deadline(self) -> float | None:
        """When :meth:`tick` has something to do (monotonic seconds); None: nothing pending."""
        deadlines = [s.deadline for s in self._subscriptions.values() if s.deadline is not None]
        if self._auth is not None:
            deadlines.append(self._auth.deadline)
        return min(deadlines, default=None)

    def tick(self, now: float, now_unix: float) -> list[SessionOutput]:
        """Time passed: end what is overdue at ``now`` (nothing happens before a deadline)."""
        outputs: list[SessionOutput] = []
        for subscription_id, subscription in list(self._subscriptions.items()):
            deadline = subscription.deadline
            if deadline is None or now < deadline:
                continue
            if self._subscriptions.get(subscription_id) is not subscription:
                continue  # ended by an earlier step of this tick
            outputs.append(
                _warning(
                    "-",
                    "%s: no EOSE after %g s; going on without the rest of that answer",
                    subscription_id,
                    self._eose_timeout,
                )
            )
            subscription.eose = True
            subscription.deadline = None
            if subscription.parent is not None:
                outputs += self._close_page(subscription_id)
            parent_id = subscription.parent or subscription_id
            outputs += self._next_page(parent_id, now, now_unix, refused=True)
        auth = self._auth
        if auth is not None and now >= auth.deadline:
            if auth.event_id is None:
                outputs.append(_warning("!", "asked for AUTH but sent no challenge"))
            else:
                outputs.append(
                    _warning("-", "no OK for AUTH %s within %g s", auth.event_id[:8], auth.timeout)
                )
            outputs += self._auth_failed(now, now_unix)
        return outputs

    # --- internals: frames ----------------------------------------------------------------------

    def _event(self, message: EventMessage, now_unix: float) -> list[SessionOutput]:
        event, subscription_id = message.event, message.subscription_id
        subscription = self._subscriptions.get(subscription_id)
        if subscription is None:
            # Normal right after a CLOSE: the relay may have had events in flight.
            return [_debug("<", "EVENT %s for no open subscription", event.id[:8])]
        if not matches_any(subscription.filters, event):
            return [
                _warning(
                    "!",
                    "dropped event %s: does not match subscription %s",
                    event.id[:8],
                    subscription_id,
                )
            ]
        try:
            verified = check_event(event)
        except InvalidEventError as exc:
            return [_warning("!", "dropped event %s: %s", event.id[:8], str(exc))]
        self.last_event_at = now_unix
        outputs: list[SessionOutput] = [
            _debug("<", "EVENT %s %s kind %d", subscription_id, event.id[:8], event.kind)
        ]
        if subscription.backlog is not None:
            subscription.backlog.hold(verified, stored=not subscription.eose)
        else:
            parent_id = subscription.parent or subscription_id
            outputs.append(RelayEventReceived(self.url, parent_id, verified))
        return outputs

    def _ok(self, message: OkMessage, now: float, now_unix: float) -> list[SessionOutput]:
        auth = self._auth
        if auth is not None and auth.event_id == message.event_id:
            if message.accepted:
                self._authed_challenge = auth.challenge
                outputs: list[SessionOutput] = [_info("=", "authenticated (NIP-42)")]
                return outputs + self._auth_succeeded(now)
            outputs = [_warning("!", "AUTH rejected: %s", message.message[:_NOTICE_LOG_CHARS])]
            return outputs + self._auth_failed(now, now_unix)
        if message.event_id in self._awaiting_ok:
            return [OkReceived(message)]
        return [_debug("<", "OK for unknown %s", message.event_id[:8])]

    def _eose(self, subscription_id: str, now: float, now_unix: float) -> list[SessionOutput]:
        subscription = self._subscriptions.get(subscription_id)
        if subscription is None or subscription.eose:
            return []
        subscription.eose = True
        subscription.deadline = None
        outputs: list[SessionOutput] = [_debug("<", "EOSE %s", subscription_id)]
        parent_id = subscription.parent
        if parent_id is None:
            return outputs + self._next_page(subscription_id, now, now_unix, refused=False)
        outputs += self._close_page(subscription_id)
        return outputs + self._next_page(parent_id, now, now_unix, refused=False)

    def _closed(self, message: ClosedMessage, now: float, now_unix: float) -> list[SessionOutput]:
        subscription_id = message.subscription_id
        subscription = self._subscriptions.get(subscription_id)
        if subscription is None:
            return []
        if is_auth_required(message.message) and not subscription.auth_retried:
            subscription.auth_retried = True
            subscription.auth_closed = message.message
            subscription.deadline = None  # the AUTH has its own; the answer's restarts with it
            outputs: list[SessionOutput] = [
                _info("<", "CLOSED %s: auth-required, authenticating", subscription_id)
            ]
            return outputs + self.authenticate(now)
        outputs = [
            _warning("<", "CLOSED %s: %s", subscription_id, message.message[:_NOTICE_LOG_CHARS])
        ]
        return outputs + self._ended(subscription_id, message.message, now, now_unix)

    def _challenge_received(self, challenge: str) -> list[SessionOutput]:
        self._challenge = challenge
        outputs: list[SessionOutput] = [_debug("<", "AUTH challenge")]
        auth = self._auth
        if auth is not None and auth.challenge is None:
            auth.challenge = challenge
            outputs.append(SignAuth(challenge))
        return outputs

    # --- internals: subscriptions and backlogs --------------------------------------------------

    def _ended(
        self, subscription_id: str, message: str, now: float, now_unix: float
    ) -> list[SessionOutput]:
        """The relay ended a subscription (it needs no CLOSE from us)."""
        subscription = self._subscriptions.pop(subscription_id)
        if subscription.parent is not None:
            # A page refused: its window is skipped (logged by the caller), the backlog goes on.
            return self._next_page(subscription.parent, now, now_unix, refused=True)
        outputs = self._close_pages(subscription_id)
        outputs.append(SubscriptionClosed(subscription_id, message))
        return outputs

    def _next_page(
        self, parent_id: str, now: float, now_unix: float, *, refused: bool
    ) -> list[SessionOutput]:
        """A stored answer of ``parent_id`` ended (``refused``: by the relay, or by its deadline).

        Asks for the next page, or releases the backlog whole, oldest first, then EOSE. Pages
        go one at a time; see :mod:`bridge.nostr.backlog` for which windows they ask.
        """
        parent = self._subscriptions.get(parent_id)
        if parent is None or parent.backlog is None:
            return []
        backlog = parent.backlog
        self._largest_answer = max(self._largest_answer, backlog.answer_size)
        # An answer is judged by the relay's known cap, else by the largest it gave, itself
        # included; a refused one is not judged at all (cap 0): its window is skipped.
        cap = self._known_cap if self._known_cap is not None else self._largest_answer
        filters = backlog.answer_ended(0 if refused else cap, int(now_unix))
        outputs: list[SessionOutput] = [
            _warning("!", "%s: %s", parent_id, warning) for warning in backlog.take_warnings()
        ]
        if filters is not None:
            page_id = f"{parent_id[: MAX_SUBSCRIPTION_ID_LENGTH - 8]}~p{backlog.pages}"
            outputs.append(
                _info("=", "%s: fetching stored events, page %d", parent_id, backlog.pages)
            )
            self._subscriptions[page_id] = _Subscription(
                filters, backlog, deadline=now + self._eose_timeout, parent=parent_id
            )
            outputs.append(SendMessage(ReqMessage(page_id, filters)))
            return outputs
        parent.backlog = None
        outputs += [RelayEventReceived(self.url, parent_id, e) for e in backlog.release()]
        outputs.append(EndOfStoredEvents(parent_id))
        return outputs

    def _close_page(self, page_id: str) -> list[SessionOutput]:
        if self._subscriptions.pop(page_id, None) is None:
            return []
        return [SendMessage(CloseMessage(page_id))]

    def _close_pages(self, parent_id: str) -> list[SessionOutput]:
        """CLOSE the pages of a subscription that ended or is replaced: they serve no one."""
        pages = [sid for sid, sub in self._subscriptions.items() if sub.parent == parent_id]
        outputs: list[SessionOutput] = []
        for page_id in pages:
            outputs += self._close_page(page_id)
        return outputs

    # --- internals: NIP-42 ----------------------------------------------------------------------

    def _auth_succeeded(self, now: float) -> list[SessionOutput]:
        """The attempt (if any) succeeded: the REQs that waited for it go out again."""
        self._auth = None
        outputs: list[SessionOutput] = [AuthFinished(True)]
        for subscription_id, subscription in self._subscriptions.items():
            if subscription.auth_closed is None:
                continue
            subscription.auth_closed = None
            subscription.deadline = now + self._eose_timeout
            outputs.append(SendMessage(ReqMessage(subscription_id, subscription.filters)))
        return outputs

    def _auth_failed(self, now: float, now_unix: float) -> list[SessionOutput]:
        """The attempt failed: the subscriptions that waited for it stay closed."""
        self._auth = None
        outputs: list[SessionOutput] = [AuthFinished(False)]
        waiting = [
            (sid, sub.auth_closed)
            for sid, sub in self._subscriptions.items()
            if sub.auth_closed is not None
        ]
        for subscription_id, message in waiting:
            if subscription_id in self._subscriptions:
                outputs += self._ended(subscription_id, message, now, now_unix)
        return outputs
