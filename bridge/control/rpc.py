"""JSON-RPC 2.0 messages for the control socket: parse, serialize, error codes. Sans-I/O.

Scope, decided here:

- **Requests and notifications.** A request without an ``id`` member is a notification: it is
  never answered, not even with an error (JSON-RPC 2.0 §4.1). The control API has no
  notification methods, so notifications are parsed and then ignored.
- **Ids** are strings (at most 128 characters) or integers. ``null``, fractional numbers and
  booleans are refused as "invalid request": a ``null`` id would be indistinguishable from the
  id of an error about an unreadable request.
- **Batches are not supported.** A JSON array is answered with one "invalid request" error
  (id ``null``). The CLI never batches, and a batch would let one frame hold the connection's
  sequential worker for an unbounded list of calls.
- **Params** must be an object (named parameters); positional arrays get "invalid params".
- JSON is strict: ``NaN``/``Infinity`` are refused, bodies must be UTF-8, and a nesting so deep
  that the parser gives up is a parse error rather than a crash.

Error messages produced here are safe to send: they describe the request's shape, never echo
values from it.
"""

from __future__ import annotations

import json
from typing import Any, Final, TypeAlias

from bridge.records import record

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "NOT_INITIALIZED",
    "PARSE_ERROR",
    "PROTOCOL_MISMATCH",
    "REQUEST_FAILED",
    "ErrorResponse",
    "JsonId",
    "Request",
    "Response",
    "ResponseError",
    "RpcError",
    "dumps",
    "parse_request",
    "parse_response",
    "serialize_error",
    "serialize_request",
    "serialize_result",
]

JsonId: TypeAlias = int | str

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
REQUEST_FAILED: Final = -32000
"""The daemon understood the request but could not do it; the message says why."""
PROTOCOL_MISMATCH: Final = -32001
NOT_INITIALIZED: Final = -32002

_MAX_ID_LENGTH: Final = 128


class RpcError(Exception):
    """An error to answer with: a JSON-RPC code and a message safe to show the client.

    Attributes:
        code: the JSON-RPC error code.
        message: the client-facing message (never holds secrets or exception text).
        request_id: the id of the request it answers, when known.
    """

    def __init__(self, code: int, message: str, *, request_id: JsonId | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id


class ResponseError(ValueError):
    """A peer's response is not valid JSON-RPC 2.0 (client side)."""


@record
class Request:
    """A parsed request, or a notification when ``id`` is None.

    ``params`` is exactly what the peer sent (an object or an array); the method table validates
    it.
    """

    method: str
    params: dict[str, Any] | list[Any]
    id: JsonId | None = None

    @property
    def is_notification(self) -> bool:
        return self.id is None


@record
class Response:
    """A successful response."""

    id: JsonId
    result: Any


@record
class ErrorResponse:
    """An error response; ``id`` is None when the request could not be read."""

    id: JsonId | None
    code: int
    message: str
    data: Any = None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _loads(body: bytes) -> Any:
    """Strict UTF-8 JSON. Raises ValueError (and subclasses) on any defect."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("body is not UTF-8") from None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON; refuses NaN/Infinity and non-JSON types (TypeError/ValueError)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def _valid_id(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, str) and len(value) <= _MAX_ID_LENGTH


def parse_request(body: bytes) -> Request:
    """Parse one request or notification body.

    Raises:
        RpcError: ``PARSE_ERROR`` for bytes that are not JSON, ``INVALID_REQUEST`` for JSON that
            is not a JSON-RPC 2.0 request (``request_id`` is set when the id itself was valid).
    """
    try:
        message = _loads(body)
    except ValueError:
        raise RpcError(PARSE_ERROR, "parse error: the body is not valid UTF-8 JSON") from None
    if isinstance(message, list):
        raise RpcError(INVALID_REQUEST, "invalid request: batch requests are not supported")
    if not isinstance(message, dict):
        raise RpcError(INVALID_REQUEST, "invalid request: expected a JSON object")
    has_id = "id" in message
    raw_id = message.get("id")
    if has_id and not _valid_id(raw_id):
        raise RpcError(INVALID_REQUEST, "invalid request: id must be a string or an integer")
    request_id: JsonId | None = raw_id if has_id else None
    if message.get("jsonrpc") != "2.0":
        raise RpcError(
            INVALID_REQUEST, 'invalid request: "jsonrpc" must be "2.0"', request_id=request_id
        )
    method = message.get("method")
    if not isinstance(method, str) or not method:
        raise RpcError(
            INVALID_REQUEST, "invalid request: method must be a string", request_id=request_id
        )
    unknown = set(message) - {"jsonrpc", "id", "method", "params"}
    if unknown:
        raise RpcError(
            INVALID_REQUEST,
            f"invalid request: unknown member(s) {', '.join(sorted(unknown))[:100]}",
            request_id=request_id,
        )
    params = message.get("params", {})
    if not isinstance(params, dict | list):
        raise RpcError(
            INVALID_REQUEST,
            "invalid request: params must be an object or an array",
            request_id=request_id,
        )
    return Request(method=method, params=params, id=request_id)


def parse_response(body: bytes) -> Response | ErrorResponse:
    """Parse one response body (client side).

    Raises:
        ResponseError: not JSON, or not a JSON-RPC 2.0 response.
    """
    try:
        message = _loads(body)
    except ValueError as exc:
        raise ResponseError(f"response is not valid JSON ({exc})") from None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        raise ResponseError("response is not a JSON-RPC 2.0 object")
    if "id" not in message:
        raise ResponseError("response has no id")
    raw_id = message["id"]
    if raw_id is not None and not _valid_id(raw_id):
        raise ResponseError("response id is not a string, an integer or null")
    has_result, has_error = "result" in message, "error" in message
    if has_result == has_error:
        raise ResponseError("response must have exactly one of result and error")
    if has_result:
        if raw_id is None:
            raise ResponseError("a result response needs an id")
        return Response(id=raw_id, result=message["result"])
    error = message["error"]
    if (
        not isinstance(error, dict)
        or not isinstance(error.get("code"), int)
        or isinstance(error.get("code"), bool)
        or not isinstance(error.get("message"), str)
    ):
        raise ResponseError("response error must be an object with an integer code and a message")
    return ErrorResponse(
        id=raw_id, code=error["code"], message=error["message"], data=error.get("data")
    )


def serialize_request(method: str, params: dict[str, Any], request_id: JsonId | None) -> bytes:
    """A request body (a notification when ``request_id`` is None)."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if request_id is not None:
        message["id"] = request_id
    return dumps(message)


def serialize_result(request_id: JsonId, result: Any) -> bytes:
    """A success body.

    Raises:
        TypeError, ValueError: ``result`` is not JSON-able (a handler bug).
    """
    return dumps({"jsonrpc": "2.0", "id": request_id, "result": result})


def serialize_error(request_id: JsonId | None, code: int, message: str, data: Any = None) -> bytes:
    """An error body; ``request_id`` None when the request could not be read, ``data`` (the
    optional ``error.data`` member) left out when None.

    Raises:
        TypeError, ValueError: ``data`` is not JSON-able.
    """
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return dumps({"jsonrpc": "2.0", "id": request_id, "error": error})
