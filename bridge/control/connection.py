"""The control protocol's connection state machines, sans-I/O: bytes in, decisions out.

Server side (`ServerConnection`): the shared JSON-RPC core (`bridge.control.endpoint`, which has
the state machine, framing errors, parsing and the handshake's order) with the control socket's
own parts:

- ``initialize`` takes ``{protocolVersion, client: {name, version}}``. A different major version
  is answered ``ProtocolMismatch`` with a message that tells the user what to update; the
  connection stays open and uninitialised (the client may retry with another version).
- A valid call becomes a `Call` event with validated keyword arguments; the I/O layer awaits the
  handler and encodes its outcome with `result` / `error`. Answers produced by the connection
  become `Reply` events, which the I/O layer writes *in order* with the calls' answers, so a
  connection's answers come out in the order of its requests.
- A framing error yields the answers for the bodies before it, then a `Close` carrying one last
  error answer. A handshake that does not come in time is closed the same way.

Client side (`ClientConnection`) numbers requests and turns bytes into responses; the I/O layer
(`bridge.control.client`) matches them to requests.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from bridge.control.endpoint import (
    ConnectionState,
    RpcServerConnection,
    method_not_found,
    params_object,
    version_major,
)
from bridge.control.framing import MAX_BODY_BYTES, FrameDecoder, encode_frame
from bridge.control.methods import CONTROL_PROTOCOL_VERSION, METHODS, MethodSpec
from bridge.control.rpc import (
    INVALID_PARAMS,
    NOT_INITIALIZED,
    PROTOCOL_MISMATCH,
    ErrorResponse,
    JsonId,
    Request,
    Response,
    RpcError,
    parse_response,
    serialize_request,
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

_MAX_INFO_LENGTH: Final = 100


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


class ServerConnection(RpcServerConnection[ServerEvent]):
    """One client connection's protocol state (see the module docstring)."""

    def __init__(
        self,
        *,
        server_name: str,
        server_version: str,
        max_body: int = MAX_BODY_BYTES,
    ) -> None:
        super().__init__(max_body=max_body)
        self._server = {"name": server_name, "version": server_version}
        self.client: Mapping[str, str] | None = None
        """The client's ``{name, version}`` once initialised (for logs)."""

    def receive_data(self, data: bytes) -> list[ServerEvent]:
        """Feed received bytes; return what to do, in order."""
        return self._feed(data)

    def receive_eof(self) -> list[ServerEvent]:
        """The client closed its side: nothing more can be answered."""
        return self._feed_eof()

    def handshake_timeout(self) -> list[ServerEvent]:
        """The I/O layer's handshake deadline passed; close unless initialised."""
        if self.state is not ConnectionState.AWAITING_INITIALIZE:
            return []
        self.state = ConnectionState.CLOSED
        return [Close(self.error(None, NOT_INITIALIZED, "not initialized: initialize timed out"))]

    def _answered(self, data: bytes) -> ServerEvent:
        return Reply(data)

    def _failed(self, data: bytes, reason: str) -> list[ServerEvent]:
        return [Close(data)]

    def _ended(self, reason: str) -> list[ServerEvent]:
        return [Close()]

    def _dispatch(self, request: Request, request_id: JsonId) -> ServerEvent:
        spec = METHODS.get(request.method)
        if spec is None:
            raise method_not_found(request.method)
        return Call(request_id, spec, spec.validate(params_object(request.params)))

    def _initialize(self, params: dict[str, Any] | list[Any]) -> dict[str, Any]:
        params = params_object(params)
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
