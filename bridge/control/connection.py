"""The control protocol's connection state machines, sans-I/O: bytes in, decisions out.

Server side (`ServerConnection`), theory of operation:

    AWAITING_INITIALIZE --initialize (same major)--> READY
    AWAITING_INITIALIZE --anything else------------> (answered NotInitialized, state kept)
    any --framing error / handshake timeout / EOF---> CLOSED

- Bytes go through the `FrameDecoder`; each body is parsed as a JSON-RPC request.
- ``initialize`` is answered here, synchronously, so that a client that pipelines ``initialize``
  and its first call in one write is served in order. A different major version is answered
  ``ProtocolMismatch`` with a message that tells the user what to update; the connection stays
  open and uninitialised (the client may retry with another version).
- Before ``initialize`` every other request is answered ``NotInitialized``.
- A valid call becomes a `Call` event with validated keyword arguments; the I/O layer awaits the
  handler and encodes its outcome with `result` / `error`. Error answers produced here become
  `Reply` events, which the I/O layer writes *in order* with the calls' answers, so a
  connection's answers come out in the order of its requests.
- A framing error yields the answers for the bodies before it, then a `Close` carrying one last
  error answer: a desynchronised stream cannot be trusted further.
- Notifications are never answered (JSON-RPC 2.0 §4.1) and the API defines none: they are
  dropped.

Client side (`ClientConnection`) numbers requests and turns bytes into responses; the I/O layer
(`bridge.control.client`) matches them to requests.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from typing import Any, Final

from bridge.control.framing import MAX_BODY_BYTES, FrameDecoder, FramingError, encode_frame
from bridge.control.methods import CONTROL_PROTOCOL_VERSION, METHODS, MethodSpec
from bridge.control.rpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    NOT_INITIALIZED,
    PARSE_ERROR,
    PROTOCOL_MISMATCH,
    ErrorResponse,
    JsonId,
    Request,
    Response,
    RpcError,
    parse_request,
    parse_response,
    serialize_error,
    serialize_request,
    serialize_result,
)
from bridge.records import record

__all__ = [
    "Call",
    "ClientConnection",
    "Close",
    "ConnectionState",
    "Reply",
    "ServerConnection",
    "ServerEvent",
    "mismatch_message",
    "version_major",
]

_VERSION: Final = re.compile(r"(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})")
_MAX_INFO_LENGTH: Final = 100


class ConnectionState(enum.Enum):
    AWAITING_INITIALIZE = "awaiting-initialize"
    READY = "ready"
    CLOSED = "closed"


@record
class Call:
    """Call the handler: ``await spec.bind(handler)(**kwargs)``, then answer ``request_id``."""

    request_id: JsonId
    spec: MethodSpec
    kwargs: dict[str, Any]


@record
class Reply:
    """Send these framed bytes (after the answers of earlier events)."""

    data: bytes


@record
class Close:
    """Send ``data`` if any, then close the connection."""

    data: bytes | None = None


ServerEvent = Call | Reply | Close


def version_major(version: str) -> int | None:
    """The major number of a ``MAJOR.MINOR.PATCH`` version, or None when it is not one."""
    match = _VERSION.fullmatch(version)
    return int(match.group(1)) if match else None


def mismatch_message(daemon_version: str, client_version: str) -> str:
    """The one message both sides show for a major-version mismatch: what happened, what to do."""
    return (
        f"the running codedeck-bridge daemon speaks control protocol {daemon_version}, this "
        f"command speaks {client_version}: update codedeck-bridge so that the command and the "
        "daemon are the same version, then restart the daemon "
        "(systemctl --user restart codedeck-bridge, or stop and rerun `codedeck-bridge run`)"
    )


def _info_string(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= _MAX_INFO_LENGTH


class ServerConnection:
    """One client connection's protocol state (see the module docstring)."""

    def __init__(
        self,
        *,
        server_name: str,
        server_version: str,
        max_body: int = MAX_BODY_BYTES,
    ) -> None:
        self._decoder = FrameDecoder(max_body=max_body)
        self._server = {"name": server_name, "version": server_version}
        self.state = ConnectionState.AWAITING_INITIALIZE
        self.client: Mapping[str, str] | None = None
        """The client's ``{name, version}`` once initialised (for logs)."""

    def receive_data(self, data: bytes) -> list[ServerEvent]:
        """Feed received bytes; return what to do, in order."""
        if self.state is ConnectionState.CLOSED:
            return []
        try:
            bodies = self._decoder.feed(data)
        except FramingError as exc:
            events = [event for body in exc.bodies if (event := self._body(body)) is not None]
            code = INVALID_REQUEST if exc.too_large else PARSE_ERROR
            prefix = "invalid request" if exc.too_large else "parse error"
            events.append(Close(self.error(None, code, f"{prefix}: {exc}")))
            self.state = ConnectionState.CLOSED
            return events
        return [event for body in bodies if (event := self._body(body)) is not None]

    def receive_eof(self) -> list[ServerEvent]:
        """The client closed its side: nothing more can be answered."""
        self.state = ConnectionState.CLOSED
        return [Close()]

    def handshake_timeout(self) -> list[ServerEvent]:
        """The I/O layer's handshake deadline passed; close unless initialised."""
        if self.state is not ConnectionState.AWAITING_INITIALIZE:
            return []
        self.state = ConnectionState.CLOSED
        return [Close(self.error(None, NOT_INITIALIZED, "not initialized: initialize timed out"))]

    def result(self, request_id: JsonId, value: Any) -> bytes:
        """The framed answer for a call's result.

        Raises:
            TypeError, ValueError: the value is not JSON-able or too large (a handler bug; answer
                `internal_error` instead).
        """
        return encode_frame(serialize_result(request_id, value))

    def error(self, request_id: JsonId | None, code: int, message: str) -> bytes:
        """A framed error answer."""
        return encode_frame(serialize_error(request_id, code, message))

    def internal_error(self, request_id: JsonId) -> bytes:
        """The answer for a handler that failed unexpectedly (details stay in the daemon's log)."""
        return self.error(request_id, INTERNAL_ERROR, "internal error (details are in the log)")

    def _body(self, body: bytes) -> ServerEvent | None:
        try:
            request = parse_request(body)
        except RpcError as exc:
            return Reply(self.error(exc.request_id, exc.code, exc.message))
        if request.id is None:
            return None
        try:
            return self._request(request, request.id)
        except RpcError as exc:
            return Reply(self.error(request.id, exc.code, exc.message))

    def _request(self, request: Request, request_id: JsonId) -> ServerEvent:
        if request.method == "initialize":
            return Reply(self.result(request_id, self._initialize(request.params)))
        if self.state is not ConnectionState.READY:
            raise RpcError(NOT_INITIALIZED, "not initialized: the first request must be initialize")
        spec = METHODS.get(request.method)
        if spec is None:
            raise RpcError(METHOD_NOT_FOUND, f"method not found: {request.method[:64]!r}")
        if not isinstance(request.params, dict):
            raise RpcError(INVALID_PARAMS, "invalid params: params must be an object")
        return Call(request_id, spec, spec.validate(request.params))

    def _initialize(self, params: dict[str, Any] | list[Any]) -> dict[str, Any]:
        if self.state is ConnectionState.READY:
            raise RpcError(INVALID_REQUEST, "invalid request: already initialized")
        if not isinstance(params, dict):
            raise RpcError(INVALID_PARAMS, "invalid params: params must be an object")
        unknown = sorted(set(params) - {"protocolVersion", "client"})
        if unknown:
            raise RpcError(INVALID_PARAMS, f"invalid params: unknown param(s) {unknown!r:.100}")
        version = params.get("protocolVersion")
        if not isinstance(version, str) or (major := version_major(version)) is None:
            raise RpcError(
                INVALID_PARAMS, "invalid params: protocolVersion must be MAJOR.MINOR.PATCH"
            )
        client = params.get("client")
        if (
            not isinstance(client, dict)
            or set(client) != {"name", "version"}
            or not all(_info_string(client[key]) for key in ("name", "version"))
        ):
            raise RpcError(
                INVALID_PARAMS,
                "invalid params: client must be {name, version} (non-empty strings, "
                f"at most {_MAX_INFO_LENGTH} characters)",
            )
        if major != version_major(CONTROL_PROTOCOL_VERSION):
            raise RpcError(PROTOCOL_MISMATCH, mismatch_message(CONTROL_PROTOCOL_VERSION, version))
        self.state = ConnectionState.READY
        self.client = {"name": client["name"], "version": client["version"]}
        return {"protocolVersion": CONTROL_PROTOCOL_VERSION, "server": dict(self._server)}


class ClientConnection:
    """The client's side: numbered requests out, parsed responses in."""

    def __init__(self, *, max_body: int = MAX_BODY_BYTES) -> None:
        self._decoder = FrameDecoder(max_body=max_body)
        self._next_id = 1

    def request(self, method: str, params: Mapping[str, Any]) -> tuple[int, bytes]:
        """A new request's id and its framed bytes."""
        request_id = self._next_id
        self._next_id += 1
        return request_id, encode_frame(serialize_request(method, dict(params), request_id))

    def receive_data(self, data: bytes) -> list[Response | ErrorResponse]:
        """Feed received bytes; return the responses they complete.

        Raises:
            FramingError: the daemon's byte stream is malformed.
            ResponseError: a body is not a JSON-RPC response.
        """
        return [parse_response(body) for body in self._decoder.feed(data)]

    @property
    def in_frame(self) -> bool:
        """True when a response was cut off (EOF now means a truncated answer)."""
        return self._decoder.in_frame
