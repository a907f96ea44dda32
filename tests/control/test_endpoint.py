"""The JSON-RPC core both wires share, through the smallest protocol built on it."""

from __future__ import annotations

import json
from typing import Any

from bridge.control.endpoint import ConnectionState, RpcServerConnection, params_object
from bridge.control.framing import FrameDecoder, encode_frame
from bridge.control.rpc import (
    INVALID_REQUEST,
    ErrorResponse,
    JsonId,
    Request,
    Response,
    serialize_error,
)
from bridge.records import record


@record
class Echo:
    request_id: JsonId
    params: dict[str, Any]


@record
class Wrote:
    data: bytes


@record
class Ended:
    reason: str


@record
class Answered:
    response: Response | ErrorResponse


Event = Echo | Wrote | Ended | Answered


class EchoConnection(RpcServerConnection[Event]):
    """Initialize takes anything; every call is echoed; it sends no requests of its own."""

    def _answered(self, data: bytes) -> Event:
        return Wrote(data)

    def _failed(self, data: bytes, reason: str) -> list[Event]:
        return [Wrote(data), Ended(reason)]

    def _ended(self, reason: str) -> list[Event]:
        return [Ended(reason)]

    def _initialize(self, params: dict[str, Any] | list[Any]) -> Any:
        return {"ok": True}

    def _dispatch(self, request: Request, request_id: JsonId) -> Event:
        return Echo(request_id, params_object(request.params))

    def _response(self, response: Response | ErrorResponse) -> Event | None:
        return Answered(response)


class RequestingEcho(EchoConnection):
    """The same, for a protocol that sends requests: their answers are handed on."""

    accepts_responses = True


def frame(message: Any) -> bytes:
    return encode_frame(json.dumps(message).encode())


def body(event: Event) -> Any:
    assert isinstance(event, Wrote)
    [data] = FrameDecoder().feed(event.data)
    return json.loads(data)


RESPONSE = {"jsonrpc": "2.0", "id": 7, "result": {"value": 1}}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}


def test_a_response_is_routed_only_where_the_protocol_sends_requests() -> None:
    plain = EchoConnection()
    [refused] = plain._feed(frame(RESPONSE))
    assert body(refused)["error"]["code"] == INVALID_REQUEST
    routed = RequestingEcho()
    assert routed._feed(frame(RESPONSE)) == [Answered(Response(7, {"value": 1}))]


def test_the_handshake_order_then_calls_then_eof_once() -> None:
    conn = EchoConnection()
    call = {"jsonrpc": "2.0", "id": 2, "method": "echo", "params": {"a": 1}}
    [early] = conn._feed(frame(call))
    assert body(early)["error"]["message"].startswith("not initialized")
    [init, echo] = conn._feed(frame(INITIALIZE) + frame(call))
    assert body(init) == {"jsonrpc": "2.0", "id": 1, "result": {"ok": True}}
    assert echo == Echo(2, {"a": 1})
    assert conn.state is ConnectionState.READY
    [again] = conn._feed(frame(INITIALIZE))
    assert body(again)["error"]["message"] == "invalid request: already initialized"
    assert conn._feed_eof() == [Ended("eof")]
    assert conn._feed_eof() == []
    assert conn._feed(frame(call)) == []


def test_an_error_body_carries_data_only_when_given() -> None:
    assert json.loads(serialize_error(1, -1, "m")) == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": -1, "message": "m"},
    }
    assert json.loads(serialize_error(None, -1, "m", {"k": 1}))["error"]["data"] == {"k": 1}
