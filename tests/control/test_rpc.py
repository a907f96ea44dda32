"""JSON-RPC 2.0 message parsing and serialisation, no I/O."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.control.rpc import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorResponse,
    Request,
    Response,
    ResponseError,
    RpcError,
    parse_request,
    parse_response,
    serialize_error,
    serialize_request,
    serialize_result,
)


def test_a_request_round_trips() -> None:
    body = serialize_request("pair.open", {"duration": 60}, 7)
    assert parse_request(body) == Request("pair.open", {"duration": 60}, 7)


def test_a_request_without_id_is_a_notification() -> None:
    request = parse_request(serialize_request("status", {}, None))
    assert request.is_notification
    assert request.id is None


def test_params_default_to_an_empty_object() -> None:
    assert parse_request(b'{"jsonrpc":"2.0","id":"a","method":"status"}').params == {}


def test_positional_params_are_kept_for_the_method_layer_to_refuse() -> None:
    assert parse_request(b'{"jsonrpc":"2.0","id":1,"method":"m","params":[1]}').params == [1]


BAD_REQUESTS = [
    (b"{", PARSE_ERROR, None, "not valid UTF-8 JSON"),
    (b"\xff\xfe{}", PARSE_ERROR, None, "not valid UTF-8 JSON"),
    (b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"x":NaN}}', PARSE_ERROR, None, "JSON"),
    (b"[" * 100_000, PARSE_ERROR, None, "JSON"),
    (b"42", INVALID_REQUEST, None, "expected a JSON object"),
    (b'"status"', INVALID_REQUEST, None, "expected a JSON object"),
    (b"null", INVALID_REQUEST, None, "expected a JSON object"),
    (b"[]", INVALID_REQUEST, None, "batch requests are not supported"),
    (
        b'[{"jsonrpc":"2.0","id":1,"method":"status"}]',
        INVALID_REQUEST,
        None,
        "batch requests are not supported",
    ),
    (b'{"jsonrpc":"2.0","id":null,"method":"m"}', INVALID_REQUEST, None, "id must be"),
    (b'{"jsonrpc":"2.0","id":1.5,"method":"m"}', INVALID_REQUEST, None, "id must be"),
    (b'{"jsonrpc":"2.0","id":true,"method":"m"}', INVALID_REQUEST, None, "id must be"),
    (b'{"jsonrpc":"2.0","id":{},"method":"m"}', INVALID_REQUEST, None, "id must be"),
    (
        b'{"jsonrpc":"2.0","id":"' + b"x" * 129 + b'","method":"m"}',
        INVALID_REQUEST,
        None,
        "id must be",
    ),
    (b'{"id":3,"method":"m"}', INVALID_REQUEST, 3, '"jsonrpc" must be "2.0"'),
    (b'{"jsonrpc":"1.0","id":3,"method":"m"}', INVALID_REQUEST, 3, '"jsonrpc" must be'),
    (b'{"jsonrpc":"2.0","id":3}', INVALID_REQUEST, 3, "method must be a string"),
    (b'{"jsonrpc":"2.0","id":3,"method":""}', INVALID_REQUEST, 3, "method must be a string"),
    (b'{"jsonrpc":"2.0","id":3,"method":7}', INVALID_REQUEST, 3, "method must be a string"),
    (b'{"jsonrpc":"2.0","id":"q","method":"m","x":1}', INVALID_REQUEST, "q", "unknown member"),
    (b'{"jsonrpc":"2.0","id":3,"method":"m","params":5}', INVALID_REQUEST, 3, "params must"),
]


@pytest.mark.parametrize(
    ("body", "code", "request_id", "message"),
    BAD_REQUESTS,
    ids=[repr(c[0][:30]) for c in BAD_REQUESTS],
)
def test_bad_requests(body: bytes, code: int, request_id: object, message: str) -> None:
    with pytest.raises(RpcError, match=message) as info:
        parse_request(body)
    assert info.value.code == code
    assert info.value.request_id == request_id


def test_error_messages_do_not_echo_values() -> None:
    with pytest.raises(RpcError) as info:
        parse_request(b'{"jsonrpc":"2.0","id":{"secret":"nsec1zzz"},"method":"m"}')
    assert "nsec1zzz" not in info.value.message


def test_results_and_errors_round_trip() -> None:
    assert parse_response(serialize_result(4, {"a": [1, "é"]})) == Response(4, {"a": [1, "é"]})
    assert parse_response(serialize_error(None, -32700, "parse error")) == ErrorResponse(
        None, -32700, "parse error"
    )


def test_serialize_result_refuses_what_json_cannot_carry() -> None:
    with pytest.raises(TypeError):
        serialize_result(1, {"when": object()})
    with pytest.raises(ValueError):
        serialize_result(1, float("nan"))


def test_serialized_bodies_are_compact_utf8() -> None:
    body = serialize_result("x", "café")
    assert body == '{"jsonrpc":"2.0","id":"x","result":"café"}'.encode()


BAD_RESPONSES = [
    (b"nope", "not valid JSON"),
    (b"[]", "not a JSON-RPC 2.0 object"),
    (b'{"jsonrpc":"2.0","result":1}', "no id"),
    (b'{"jsonrpc":"2.0","id":1.5,"result":1}', "id is not"),
    (b'{"jsonrpc":"2.0","id":1}', "exactly one of"),
    (b'{"jsonrpc":"2.0","id":1,"result":1,"error":{}}', "exactly one of"),
    (b'{"jsonrpc":"2.0","id":null,"result":1}', "needs an id"),
    (b'{"jsonrpc":"2.0","id":1,"error":"bad"}', "integer code and a message"),
    (b'{"jsonrpc":"2.0","id":1,"error":{"code":true,"message":"m"}}', "integer code"),
    (b'{"jsonrpc":"2.0","id":1,"error":{"code":1}}', "integer code and a message"),
]


@pytest.mark.parametrize(("body", "message"), BAD_RESPONSES, ids=[m for _, m in BAD_RESPONSES])
def test_bad_responses(body: bytes, message: str) -> None:
    with pytest.raises(ResponseError, match=message):
        parse_response(body)


@given(st.binary(max_size=200))
def test_any_body_parses_or_raises_rpc_error(body: bytes) -> None:
    try:
        request = parse_request(body)
    except RpcError as exc:
        assert exc.code in (PARSE_ERROR, INVALID_REQUEST)
    else:
        assert isinstance(request.method, str)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(), st.lists, max_leaves=8))
def test_any_json_value_parses_or_raises_rpc_error(value: object) -> None:
    try:
        parse_request(json.dumps(value).encode())
    except RpcError as exc:
        assert exc.code == INVALID_REQUEST
