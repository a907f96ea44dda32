"""The JSON-RPC 2.0 server connection core both of our wires share, sans-I/O: bytes in, events out.

The control socket (`bridge.control.connection.ServerConnection`) and the Desiide stdio surface
(`bridge.desiide.connection.DesiideConnection`) speak the same JSON-RPC 2.0 dialect over the same
``Content-Length`` framing (`bridge.control.framing`, `bridge.control.rpc`) with the same
handshake. This class is that common part, once; a protocol subclasses it and says only what
differs: its method table, its ``initialize``, its event types and its vocabulary::

    AWAITING_INITIALIZE --initialize accepted--> READY
    AWAITING_INITIALIZE --anything else--------> (answered, state kept)
    any --framing error / EOF------------------> CLOSED

- Bytes go through a `FrameDecoder`; each body is parsed as a request.
- ``initialize`` is answered here, synchronously, so that a client that pipelines it with its
  first call in one write is served in order; a second one is an invalid request. Until it
  succeeds, every other request is answered ``NOT_INITIALIZED``.
- A request of the ready connection goes to `_dispatch`, which returns the protocol's call
  event or raises `RpcError` (answered with the request's id).
- Notifications are never answered (JSON-RPC 2.0 §4.1): no protocol of ours takes any.
- A body that is not a request may be the peer's answer to one of our requests: when
  `accepts_responses`, it goes to `_response`; otherwise it is answered as an invalid request.
- A framing error answers the bodies before it, then once more (``PARSE_ERROR``, or
  ``INVALID_REQUEST`` for an oversize frame) and closes: a desynchronised stream cannot be
  trusted further. EOF closes too, once; after that, input yields nothing.

It owns no socket, clock or log: the I/O layer feeds bytes, acts on the events, and asks for the
bytes of its answers (`result`, `error`, `internal_error`), as with h11.
"""

from __future__ import annotations

import abc
import enum
import re
from typing import Any, ClassVar, Final, Generic, TypeVar

from bridge.control.framing import MAX_BODY_BYTES, FrameDecoder, FramingError, encode_frame
from bridge.control.rpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    NOT_INITIALIZED,
    PARSE_ERROR,
    ErrorResponse,
    JsonId,
    Request,
    Response,
    ResponseError,
    RpcError,
    parse_request,
    parse_response,
    serialize_error,
    serialize_result,
)

__all__ = [
    "ConnectionState",
    "RpcServerConnection",
    "method_not_found",
    "params_object",
    "version_major",
]

EventT = TypeVar("EventT")

_VERSION: Final = re.compile(r"(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})")


class ConnectionState(enum.Enum):
    AWAITING_INITIALIZE = "awaiting-initialize"
    READY = "ready"
    CLOSED = "closed"


def version_major(version: str) -> int | None:
    """The major number of a ``MAJOR.MINOR.PATCH`` version, or None when it is not one."""
    match = _VERSION.fullmatch(version)
    return int(match.group(1)) if match else None


def method_not_found(method: str) -> RpcError:
    """The error for a method the table does not hold (the name cut short: it is the peer's)."""
    return RpcError(METHOD_NOT_FOUND, f"method not found: {method[:64]!r}")


def params_object(params: dict[str, Any] | list[Any]) -> dict[str, Any]:
    """Named params, as every method of ours takes them.

    Raises:
        RpcError: ``INVALID_PARAMS`` for positional (array) params.
    """
    if not isinstance(params, dict):
        raise RpcError(INVALID_PARAMS, "invalid params: params must be an object")
    return params


class RpcServerConnection(abc.ABC, Generic[EventT]):
    """One peer's connection to a JSON-RPC server of ours (see the module docstring).

    Attributes:
        state: where the handshake is.
    """

    internal_error_message: ClassVar[str] = "internal error (details are in the log)"
    """What a peer is told when a handler failed unexpectedly (the details go to the log)."""
    accepts_responses: ClassVar[bool] = False
    """True when the server sends requests of its own, whose answers come back on this wire."""

    def __init__(self, *, max_body: int = MAX_BODY_BYTES) -> None:
        self._decoder = FrameDecoder(max_body=max_body)
        self.state = ConnectionState.AWAITING_INITIALIZE

    # --- what a protocol says ------------------------------------------------------------------

    @abc.abstractmethod
    def _answered(self, data: bytes) -> EventT:
        """The event for an answer the connection wrote by itself (framed ``data``)."""

    @abc.abstractmethod
    def _failed(self, data: bytes, reason: str) -> list[EventT]:
        """The events for a framing error: write ``data`` (the last answer), then close."""

    @abc.abstractmethod
    def _ended(self, reason: str) -> list[EventT]:
        """The events for the peer's EOF (``reason`` says whether a frame was cut off)."""

    @abc.abstractmethod
    def _initialize(self, params: dict[str, Any] | list[Any]) -> Any:
        """Check ``initialize``'s params and return its result (then the connection is ready).

        Raises:
            RpcError: the answer instead (the connection stays uninitialised).
        """

    @abc.abstractmethod
    def _dispatch(self, request: Request, request_id: JsonId) -> EventT:
        """The call event for a request of the ready connection.

        Raises:
            RpcError: the answer instead (unknown method, bad params, ...).
        """

    def _response(self, response: Response | ErrorResponse) -> EventT | None:
        """The event for the peer's answer to one of our requests; None to drop it."""
        return None

    def _to_json(self, value: Any) -> Any:
        """A result as plain JSON values (a protocol with typed results converts them here)."""
        return value

    # --- input ---------------------------------------------------------------------------------

    def _feed(self, data: bytes) -> list[EventT]:
        """Feed received bytes; return what to do, in order."""
        if self.state is ConnectionState.CLOSED:
            return []
        try:
            bodies = self._decoder.feed(data)
        except FramingError as exc:
            events = self._bodies(exc.bodies)
            code = INVALID_REQUEST if exc.too_large else PARSE_ERROR
            prefix = "invalid request" if exc.too_large else "parse error"
            events += self._failed(self.error(None, code, f"{prefix}: {exc}"), str(exc))
            self.state = ConnectionState.CLOSED
            return events
        return self._bodies(bodies)

    def _feed_eof(self) -> list[EventT]:
        """The peer closed its side: the connection is over (once)."""
        if self.state is ConnectionState.CLOSED:
            return []
        self.state = ConnectionState.CLOSED
        return self._ended("eof inside a frame" if self._decoder.in_frame else "eof")

    # --- output --------------------------------------------------------------------------------

    def result(self, request_id: JsonId, value: Any) -> bytes:
        """The framed answer for a call's result.

        Raises:
            TypeError, ValueError: the value is not JSON-able or over the frame limit (a handler
                bug: answer `internal_error` instead).
        """
        return encode_frame(serialize_result(request_id, self._to_json(value)))

    def error(self, request_id: JsonId | None, code: int, message: str, data: Any = None) -> bytes:
        """A framed error answer (``request_id`` None when the request could not be read)."""
        return encode_frame(serialize_error(request_id, code, message, data))

    def internal_error(self, request_id: JsonId) -> bytes:
        """The answer for a handler that failed unexpectedly (details stay in the log)."""
        return self.error(request_id, INTERNAL_ERROR, self.internal_error_message)

    # --- dispatch ------------------------------------------------------------------------------

    def _bodies(self, bodies: list[bytes]) -> list[EventT]:
        return [event for body in bodies if (event := self._body(body)) is not None]

    def _body(self, body: bytes) -> EventT | None:
        try:
            request = parse_request(body)
        except RpcError as exc:
            if exc.code == INVALID_REQUEST and self.accepts_responses:
                try:
                    response = parse_response(body)
                except ResponseError:
                    pass
                else:
                    return self._response(response)
            return self._answered(self.error(exc.request_id, exc.code, exc.message))
        if request.id is None:
            return None
        try:
            return self._request(request, request.id)
        except RpcError as exc:
            return self._answered(self.error(request.id, exc.code, exc.message))

    def _request(self, request: Request, request_id: JsonId) -> EventT:
        if request.method == "initialize":
            if self.state is ConnectionState.READY:
                raise RpcError(INVALID_REQUEST, "invalid request: already initialized")
            result = self._initialize(request.params)
            self.state = ConnectionState.READY
            return self._answered(self.result(request_id, result))
        if self.state is not ConnectionState.READY:
            raise RpcError(NOT_INITIALIZED, "not initialized: the first request must be initialize")
        return self._dispatch(request, request_id)
