"""The local control socket: how the CLI and the editor talk to a running daemon.

``<home>/control.sock`` (mode 0600) carries JSON-RPC 2.0 framed with ``Content-Length`` headers;
the first request is ``initialize`` with the control protocol version. The layers, inside out:

- `framing` — ``Content-Length`` frames, sans-I/O;
- `rpc` — JSON-RPC 2.0 messages and error codes;
- `methods` and `task_methods` — the API: methods, params validation, result shapes, the
  `ControlHandler` protocol the daemon implements;
- `connection` — the server and client state machines (the ``initialize`` handshake), sans-I/O;
- `server` / `client` — the asyncio I/O around them;
- `hosts` — the session hosts as ``host.json`` and ``/proc`` tell them (``status``);
- `terminal_text` — daemon and phone text made safe to print.

The commands that use it live on the CLI's side (:mod:`bridge.cli`); the daemon's answers on the
runtime's (:mod:`bridge.runtime.edges.control_handler`). This package imports neither.
"""

from bridge.control.client import (
    CONNECT_TIMEOUT,
    DEFAULT_CALL_TIMEOUT,
    ControlClient,
    ControlError,
    DaemonNotRunning,
    ProtocolMismatchError,
    RemoteError,
    not_running_message,
)
from bridge.control.connection import (
    Call,
    ClientConnection,
    Close,
    ConnectionState,
    Reply,
    ServerConnection,
    ServerEvent,
    mismatch_message,
    version_major,
)
from bridge.control.framing import (
    MAX_BODY_BYTES,
    MAX_HEADER_BYTES,
    FrameDecoder,
    FramingError,
    encode_frame,
)
from bridge.control.hosts import live_host_pids, running_hosts, session_host
from bridge.control.methods import (
    CONTROL_PROTOCOL_VERSION,
    DEFAULT_PAIR_WINDOW,
    MAX_LABEL_LENGTH,
    MAX_SESSION_ID_LENGTH,
    MAX_WAIT,
    METHODS,
    ControlHandler,
    HandlerError,
    HostsSummary,
    HostStatus,
    MethodSpec,
    PairNpubResult,
    PairOpenResult,
    PairWaitResult,
    PhoneInfo,
    RelayInfo,
    SessionInfo,
    SessionsCloseResult,
    StatusResult,
    UnpairResult,
    iso_timestamp,
    parse_timestamp,
)
from bridge.control.rpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    NOT_INITIALIZED,
    PARSE_ERROR,
    PROTOCOL_MISMATCH,
    REQUEST_FAILED,
    ErrorResponse,
    JsonId,
    Request,
    Response,
    ResponseError,
    RpcError,
    dumps,
    parse_request,
    parse_response,
    serialize_error,
    serialize_request,
    serialize_result,
)
from bridge.control.server import (
    CONTROL_SOCKET_NAME,
    SOCKET_MODE,
    ControlServer,
    ControlSocketError,
    control_socket_path,
)
from bridge.control.terminal_text import safe_text

__all__ = [
    "CONNECT_TIMEOUT",
    "CONTROL_PROTOCOL_VERSION",
    "CONTROL_SOCKET_NAME",
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_PAIR_WINDOW",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "MAX_BODY_BYTES",
    "MAX_HEADER_BYTES",
    "MAX_LABEL_LENGTH",
    "MAX_SESSION_ID_LENGTH",
    "MAX_WAIT",
    "METHODS",
    "METHOD_NOT_FOUND",
    "NOT_INITIALIZED",
    "PARSE_ERROR",
    "PROTOCOL_MISMATCH",
    "REQUEST_FAILED",
    "SOCKET_MODE",
    "Call",
    "ClientConnection",
    "Close",
    "ConnectionState",
    "ControlClient",
    "ControlError",
    "ControlHandler",
    "ControlServer",
    "ControlSocketError",
    "DaemonNotRunning",
    "ErrorResponse",
    "FrameDecoder",
    "FramingError",
    "HandlerError",
    "HostStatus",
    "HostsSummary",
    "JsonId",
    "MethodSpec",
    "PairNpubResult",
    "PairOpenResult",
    "PairWaitResult",
    "PhoneInfo",
    "ProtocolMismatchError",
    "RelayInfo",
    "RemoteError",
    "Reply",
    "Request",
    "Response",
    "ResponseError",
    "RpcError",
    "ServerConnection",
    "ServerEvent",
    "SessionInfo",
    "SessionsCloseResult",
    "StatusResult",
    "UnpairResult",
    "control_socket_path",
    "dumps",
    "encode_frame",
    "iso_timestamp",
    "live_host_pids",
    "mismatch_message",
    "not_running_message",
    "parse_request",
    "parse_response",
    "parse_timestamp",
    "running_hosts",
    "safe_text",
    "serialize_error",
    "serialize_request",
    "serialize_result",
    "session_host",
    "version_major",
]
