"""NIP-01 (+ NIP-42, NIP-45) frames between a client and a relay, as frozen dataclasses.

Relay → client: ``EVENT``, ``OK``, ``EOSE``, ``CLOSED``, ``NOTICE``, ``AUTH``, ``COUNT``.
Client → relay: ``EVENT``, ``REQ``, ``CLOSE``, ``AUTH``. Both directions parse and serialize,
so the client and the scripted relays in the tests share one definition of the wire.

Parsing is strict and total: any text either becomes one message or raises
:class:`RelayMessageError` / :class:`ClientMessageError` (both ``ValueError``) whose text says
what is wrong without echoing the payload. Arity is exact as NIP-01 states it: an ``OK`` with
three elements is as wrong as one with five, because guessing at a broken relay's intent is
how events get marked delivered when they were not. An ``EVENT`` payload is checked for shape
only (:func:`~bridge.nostr.event.parse_event`); the id and signature are checked by the
connection before delivery, where a failure can be logged with the relay it came from.

No I/O, clock or logging here (sans-I/O): the connection decides what to do with a bad frame.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, TypeAlias, assert_never

import orjson

from bridge.nostr.event import Event, InvalidEventError, parse_event
from bridge.nostr.filters import Filter, FilterError, parse_filter
from bridge.records import record

__all__ = [
    "MAX_MESSAGE_SIZE",
    "MAX_SUBSCRIPTION_ID_LENGTH",
    "AuthChallenge",
    "AuthResponse",
    "ClientMessage",
    "ClientMessageError",
    "CloseMessage",
    "ClosedMessage",
    "CountMessage",
    "EoseMessage",
    "EventMessage",
    "NoticeMessage",
    "OkMessage",
    "PublishMessage",
    "RelayMessage",
    "RelayMessageError",
    "ReqMessage",
    "message_prefix",
    "parse_client_message",
    "parse_relay_message",
    "serialize_client_message",
    "serialize_relay_message",
]

MAX_MESSAGE_SIZE = 512 * 1024
"""Default bound on one frame, in bytes. Relays cap events at 64 KiB; this leaves room for
a large COUNT/NOTICE while keeping a hostile relay from making us parse megabytes."""

MAX_SUBSCRIPTION_ID_LENGTH = 64
"""NIP-01: subscription ids are non-empty strings of at most 64 chars."""

_HEX64 = re.compile(r"[0-9a-f]{64}")
_PREFIX = re.compile(r"([a-z][a-z-]*): ")


class RelayMessageError(ValueError):
    """A frame from a relay is malformed (bad JSON, shape, arity, type or size)."""


class ClientMessageError(ValueError):
    """A client frame is malformed, or a message cannot be serialized (bad subscription id)."""


# --- relay → client ------------------------------------------------------------------------------


@record
class EventMessage:
    """``["EVENT", <subscription_id>, <event>]``: the event's shape is checked, not its signature."""

    subscription_id: str
    event: Event


@record
class OkMessage:
    """``["OK", <event_id>, <accepted>, <message>]`` (NIP-01)."""

    event_id: str
    accepted: bool
    message: str

    @property
    def prefix(self) -> str | None:
        """The machine-readable prefix of ``message`` (``"duplicate"``, ``"auth-required"``…)."""
        return message_prefix(self.message)


@record
class EoseMessage:
    """``["EOSE", <subscription_id>]``: stored events done, live events follow."""

    subscription_id: str


@record
class ClosedMessage:
    """``["CLOSED", <subscription_id>, <message>]``: the relay ended a subscription."""

    subscription_id: str
    message: str

    @property
    def prefix(self) -> str | None:
        """The machine-readable prefix of ``message``."""
        return message_prefix(self.message)


@record
class NoticeMessage:
    """``["NOTICE", <message>]``: human-readable, for logs only."""

    message: str


@record
class AuthChallenge:
    """``["AUTH", <challenge>]`` (NIP-42): the string our AUTH event must carry."""

    challenge: str


@record
class CountMessage:
    """``["COUNT", <subscription_id>, {"count": n, "approximate"?: bool}]`` (NIP-45)."""

    subscription_id: str
    count: int
    approximate: bool | None = None


RelayMessage: TypeAlias = (
    EventMessage
    | OkMessage
    | EoseMessage
    | ClosedMessage
    | NoticeMessage
    | AuthChallenge
    | CountMessage
)

# --- client → relay ------------------------------------------------------------------------------


@record
class PublishMessage:
    """``["EVENT", <event>]``: publish an event."""

    event: Event


@record
class ReqMessage:
    """``["REQ", <subscription_id>, <filter>...]``: open (or replace) a subscription."""

    subscription_id: str
    filters: tuple[Filter, ...]


@record
class CloseMessage:
    """``["CLOSE", <subscription_id>]``: end a subscription."""

    subscription_id: str


@record
class AuthResponse:
    """``["AUTH", <signed kind-22242 event>]`` (NIP-42)."""

    event: Event


ClientMessage: TypeAlias = PublishMessage | ReqMessage | CloseMessage | AuthResponse


# --- helpers -------------------------------------------------------------------------------------


def message_prefix(message: str) -> str | None:
    """NIP-01 machine-readable prefix of an OK/CLOSED message: ``"blocked: x"`` → ``"blocked"``."""
    found = _PREFIX.match(message)
    return found.group(1) if found else None


def _load(data: str | bytes, max_size: int, error: type[ValueError]) -> list[Any]:
    # len(str) <= its UTF-8 length <= 4 * len(str): encode only when the cheap bounds disagree.
    size = len(data)
    if isinstance(data, str) and size <= max_size < 4 * size:
        size = len(data.encode("utf-8", "surrogatepass"))
    if size > max_size:
        raise error(f"frame of {size} bytes exceeds the {max_size}-byte limit")
    try:
        decoded = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise error(f"frame is not valid JSON ({str(exc).split(':', 1)[0]})") from None
    if not isinstance(decoded, list) or not decoded:
        raise error("frame is not a non-empty JSON array")
    if not isinstance(decoded[0], str):
        raise error("frame type is not a string")
    return decoded


def _arity(frame: Sequence[Any], expected: int, error: type[ValueError]) -> None:
    if len(frame) != expected:
        raise error(f"{frame[0]} frame has {len(frame)} elements, expected {expected}")


def _text(frame: Sequence[Any], index: int, what: str, error: type[ValueError]) -> str:
    value = frame[index]
    if not isinstance(value, str):
        raise error(f"{frame[0]} {what} is not a string")
    return value


def _subscription_id(frame: Sequence[Any], error: type[ValueError]) -> str:
    value = _text(frame, 1, "subscription id", error)
    if not value:
        raise error(f"{frame[0]} subscription id is empty")
    return value


def _event(frame: Sequence[Any], index: int, error: type[ValueError]) -> Event:
    try:
        return parse_event(frame[index])
    except InvalidEventError as exc:
        raise error(f"{frame[0]} carries a malformed event: {exc}") from None


# --- relay → client: parse / serialize -----------------------------------------------------------


def parse_relay_message(data: str | bytes, *, max_size: int = MAX_MESSAGE_SIZE) -> RelayMessage:
    """Parse one frame a relay sent.

    Args:
        data: the websocket message (text; bytes are accepted as UTF-8 JSON).
        max_size: frames longer than this many bytes are refused before decoding.

    Raises:
        RelayMessageError: the frame is oversize, not JSON, not an array, of an unknown type,
            of the wrong arity, or carries a wrongly typed element. The text names the problem
            and never contains the payload.
    """
    err = RelayMessageError
    frame = _load(data, max_size, err)
    kind = frame[0]
    if kind == "EVENT":
        _arity(frame, 3, err)
        return EventMessage(_subscription_id(frame, err), _event(frame, 2, err))
    if kind == "OK":
        _arity(frame, 4, err)
        event_id = _text(frame, 1, "event id", err)
        if not _HEX64.fullmatch(event_id):
            raise err("OK event id is not 64 lowercase hex chars")
        if not isinstance(frame[2], bool):
            raise err("OK status is not a boolean")
        return OkMessage(event_id, frame[2], _text(frame, 3, "message", err))
    if kind == "EOSE":
        _arity(frame, 2, err)
        return EoseMessage(_subscription_id(frame, err))
    if kind == "CLOSED":
        _arity(frame, 3, err)
        return ClosedMessage(_subscription_id(frame, err), _text(frame, 2, "message", err))
    if kind == "NOTICE":
        _arity(frame, 2, err)
        return NoticeMessage(_text(frame, 1, "message", err))
    if kind == "AUTH":
        _arity(frame, 2, err)
        challenge = _text(frame, 1, "challenge", err)
        if not challenge:
            raise err("AUTH challenge is empty")
        return AuthChallenge(challenge)
    if kind == "COUNT":
        _arity(frame, 3, err)
        payload = frame[2]
        if not isinstance(payload, dict):
            raise err("COUNT payload is not an object")
        count = payload.get("count")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise err("COUNT count is not a non-negative integer")
        approximate = payload.get("approximate")
        if approximate is not None and not isinstance(approximate, bool):
            raise err("COUNT approximate is not a boolean")
        return CountMessage(_subscription_id(frame, err), count, approximate)
    raise err(f"unknown frame type {kind!r:.40}")


def serialize_relay_message(message: RelayMessage) -> str:
    """The compact JSON text of a relay → client frame (used by test relays)."""
    frame: list[Any]
    match message:
        case EventMessage(subscription_id, event):
            frame = ["EVENT", subscription_id, event.to_dict()]
        case OkMessage(event_id, accepted, text):
            frame = ["OK", event_id, accepted, text]
        case EoseMessage(subscription_id):
            frame = ["EOSE", subscription_id]
        case ClosedMessage(subscription_id, text):
            frame = ["CLOSED", subscription_id, text]
        case NoticeMessage(text):
            frame = ["NOTICE", text]
        case AuthChallenge(challenge):
            frame = ["AUTH", challenge]
        case CountMessage(subscription_id, count, approximate):
            payload: dict[str, Any] = {"count": count}
            if approximate is not None:
                payload["approximate"] = approximate
            frame = ["COUNT", subscription_id, payload]
        case _:
            assert_never(message)
    return orjson.dumps(frame).decode()


# --- client → relay: parse / serialize -----------------------------------------------------------


def _check_subscription_id(subscription_id: object) -> str:
    if (
        not isinstance(subscription_id, str)
        or not subscription_id
        or len(subscription_id) > MAX_SUBSCRIPTION_ID_LENGTH
    ):
        raise ClientMessageError(
            f"subscription id must be a non-empty string of at most "
            f"{MAX_SUBSCRIPTION_ID_LENGTH} chars"
        )
    return subscription_id


def serialize_client_message(message: ClientMessage) -> str:
    """The compact JSON text of a client → relay frame.

    Raises:
        ClientMessageError: a subscription id is empty or longer than 64 chars, or a REQ has
            no filter (NIP-01 requires at least one).
    """
    frame: list[Any]
    match message:
        case PublishMessage(event):
            frame = ["EVENT", event.to_dict()]
        case ReqMessage(subscription_id, filters):
            if not filters:
                raise ClientMessageError("REQ needs at least one filter")
            frame = ["REQ", _check_subscription_id(subscription_id)]
            frame.extend(one.to_dict() for one in filters)
        case CloseMessage(subscription_id):
            frame = ["CLOSE", _check_subscription_id(subscription_id)]
        case AuthResponse(event):
            frame = ["AUTH", event.to_dict()]
        case _:
            assert_never(message)
    try:
        return orjson.dumps(frame).decode()
    except orjson.JSONEncodeError:
        raise ClientMessageError("message is not serializable (lone surrogate?)") from None


def parse_client_message(data: str | bytes, *, max_size: int = MAX_MESSAGE_SIZE) -> ClientMessage:
    """Parse one frame a client sent (for relays written in Python, e.g. test servers).

    Raises:
        ClientMessageError: as :func:`parse_relay_message`, for the client vocabulary.
    """
    err = ClientMessageError
    frame = _load(data, max_size, err)
    kind = frame[0]
    if kind == "EVENT":
        _arity(frame, 2, err)
        return PublishMessage(_event(frame, 1, err))
    if kind == "REQ":
        if len(frame) < 3:
            raise err("REQ frame needs a subscription id and at least one filter")
        subscription_id = _check_subscription_id(frame[1])
        try:
            filters = tuple(parse_filter(one) for one in frame[2:])
        except FilterError as exc:
            raise err(f"REQ carries a bad filter: {exc}") from None
        return ReqMessage(subscription_id, filters)
    if kind == "CLOSE":
        _arity(frame, 2, err)
        return CloseMessage(_check_subscription_id(frame[1]))
    if kind == "AUTH":
        _arity(frame, 2, err)
        return AuthResponse(_event(frame, 1, err))
    raise err(f"unknown frame type {kind!r:.40}")
