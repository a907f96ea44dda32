"""One client of the relay, sans-I/O: frames in, typed requests out, and the frames to answer.

:meth:`ClientSession.receive` turns one text frame into a :data:`Request`. Anything wrong with
the frame (not JSON, unknown type, bad filter, too many subscriptions, an event over the size
limit) becomes a :class:`Reply` carrying the NIP-01 answer — ``OK false`` for an event,
``CLOSED`` for a subscription, ``NOTICE`` otherwise — so the server never has to think about
bad input: it sends the reply and reads the next frame. Signatures are *not* checked here; the
server checks them after the cheap checks, where the cost is worth paying.

The session also holds the client's subscriptions, and answers which of them an event matches.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias, assert_never

import orjson

from bridge.nostr.event import Event
from bridge.nostr.filters import Filter
from bridge.nostr.messages import (
    AuthResponse,
    ClientMessageError,
    CloseMessage,
    PublishMessage,
    ReqMessage,
    parse_client_message,
)
from bridge.records import record
from bridge.relay.nip11 import RelayLimits

__all__ = [
    "ClientSession",
    "Publish",
    "Reply",
    "Request",
    "Subscribe",
    "Unsubscribe",
    "closed_frame",
    "eose_frame",
    "event_frame",
    "notice_frame",
    "ok_frame",
]


@record
class Publish:
    """A well-formed event within the limits; not yet verified, admitted or stored."""

    event: Event
    event_json: str


@record
class Subscribe:
    """A REQ the session took: the subscription is registered; send stored events, then EOSE."""

    subscription_id: str
    filters: tuple[Filter, ...]


@record
class Unsubscribe:
    """A CLOSE (the subscription is gone already; NIP-01 sends nothing back)."""

    subscription_id: str


@record
class Reply:
    """Bad input: send ``frame`` back and go on."""

    frame: str


Request: TypeAlias = Publish | Subscribe | Unsubscribe | Reply


def _quote(text: str) -> str:
    return orjson.dumps(text).decode()


def ok_frame(event_id: str, accepted: bool, message: str) -> str:
    return f'["OK",{_quote(event_id)},{"true" if accepted else "false"},{_quote(message)}]'


def event_frame(subscription_id: str, event_json: str) -> str:
    return f'["EVENT",{_quote(subscription_id)},{event_json}]'


def eose_frame(subscription_id: str) -> str:
    return f'["EOSE",{_quote(subscription_id)}]'


def closed_frame(subscription_id: str, message: str) -> str:
    return f'["CLOSED",{_quote(subscription_id)},{_quote(message)}]'


def notice_frame(message: str) -> str:
    return f'["NOTICE",{_quote(message)}]'


def _reply_to_unparsable(data: str | bytes, problem: str) -> Reply:
    """The most specific answer to a frame that did not parse: OK, CLOSED or NOTICE."""
    message = f"invalid: {problem}"
    try:
        frame = orjson.loads(data)
    except orjson.JSONDecodeError:
        return Reply(notice_frame(message))
    if isinstance(frame, list) and len(frame) >= 2:
        head, second = frame[0], frame[1]
        if head == "EVENT" and isinstance(second, Mapping):
            event_id = second.get("id")
            if isinstance(event_id, str) and len(event_id) == 64:
                return Reply(ok_frame(event_id, False, message))
        if head == "REQ" and isinstance(second, str) and 0 < len(second) <= 64:
            return Reply(closed_frame(second, message))
    return Reply(notice_frame(message))


class ClientSession:
    """The protocol state of one connected client."""

    def __init__(self, limits: RelayLimits) -> None:
        self._limits = limits
        self.subscriptions: dict[str, tuple[Filter, ...]] = {}

    def receive(self, data: str | bytes) -> Request:
        """Parse one frame and apply what it asks to the session's own state."""
        try:
            message = parse_client_message(data, max_size=self._limits.max_message_length)
        except ClientMessageError as exc:
            return _reply_to_unparsable(data, str(exc))
        match message:
            case PublishMessage(event=event):
                return self._publish(event)
            case ReqMessage(subscription_id=subscription_id, filters=filters):
                return self._subscribe(subscription_id, filters)
            case CloseMessage(subscription_id=subscription_id):
                self.subscriptions.pop(subscription_id, None)
                return Unsubscribe(subscription_id)
            case AuthResponse(event=event):
                return Reply(ok_frame(event.id, False, "restricted: this relay does not use AUTH"))
            case _:
                assert_never(message)

    def _publish(self, event: Event) -> Request:
        limits = self._limits
        if len(event.tags) > limits.max_event_tags:
            return Reply(ok_frame(event.id, False, "invalid: too many tags"))
        event_json = event.to_json()
        if len(event_json) > limits.max_event_length:
            size = len(event_json.encode("utf-8", "surrogatepass"))
            if size > limits.max_event_length:
                return Reply(ok_frame(event.id, False, "invalid: event too large"))
        return Publish(event, event_json)

    def _subscribe(self, subscription_id: str, filters: tuple[Filter, ...]) -> Request:
        limits = self._limits
        if len(filters) > limits.max_filters:
            return Reply(closed_frame(subscription_id, "invalid: too many filters"))
        if (
            subscription_id not in self.subscriptions
            and len(self.subscriptions) >= limits.max_subscriptions
        ):
            return Reply(closed_frame(subscription_id, "restricted: too many subscriptions"))
        self.subscriptions[subscription_id] = filters
        return Subscribe(subscription_id, filters)

    def matching(self, event: Event) -> list[str]:
        """The subscriptions ``event`` is for (NIP-01: the filters of one REQ are OR-ed)."""
        return [
            subscription_id
            for subscription_id, filters in self.subscriptions.items()
            if any(one.matches(event) for one in filters)
        ]
