"""The control connection state machines and every method's params, no I/O."""

from __future__ import annotations

import json
from typing import Any

import pytest

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
from bridge.control.framing import FrameDecoder, FramingError, encode_frame
from bridge.control.methods import CONTROL_PROTOCOL_VERSION, METHODS
from bridge.control.rpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    NOT_INITIALIZED,
    PARSE_ERROR,
    PROTOCOL_MISMATCH,
    ErrorResponse,
    Response,
    ResponseError,
)
from bridge.nostr.keys import Keypair

PHONE = Keypair.from_secret("02" * 32)
INIT = {"protocolVersion": CONTROL_PROTOCOL_VERSION, "client": {"name": "test", "version": "1"}}


def frame(message: Any) -> bytes:
    return encode_frame(json.dumps(message).encode())


def request(method: str, params: Any = None, request_id: Any = 1) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return frame(message)


def answers(events: list[ServerEvent]) -> list[dict[str, Any]]:
    """The JSON bodies of Reply/Close events."""
    out = []
    for event in events:
        data = event.data if isinstance(event, Reply | Close) else None
        if data:
            out += [json.loads(body) for body in FrameDecoder().feed(data)]
    return out


def server() -> ServerConnection:
    return ServerConnection(server_name="codedeck-bridge", server_version="9.9.9")


def ready() -> ServerConnection:
    conn = server()
    conn.receive_data(request("initialize", INIT, 0))
    assert conn.state is ConnectionState.READY
    return conn


def test_initialize_answers_the_version_and_the_server() -> None:
    conn = server()
    [reply] = answers(conn.receive_data(request("initialize", INIT, "i")))
    assert reply == {
        "jsonrpc": "2.0",
        "id": "i",
        "result": {
            "protocolVersion": CONTROL_PROTOCOL_VERSION,
            "server": {"name": "codedeck-bridge", "version": "9.9.9"},
        },
    }
    assert conn.client == {"name": "test", "version": "1"}


def test_a_newer_minor_is_accepted() -> None:
    conn = server()
    params = {**INIT, "protocolVersion": "1.7.3"}
    [reply] = answers(conn.receive_data(request("initialize", params)))
    assert "result" in reply
    assert conn.state is ConnectionState.READY


@pytest.mark.parametrize("version", ["2.0.0", "0.9.0"])
def test_another_major_is_a_protocol_mismatch_that_says_what_to_do(version: str) -> None:
    conn = server()
    [reply] = answers(
        conn.receive_data(request("initialize", {**INIT, "protocolVersion": version}))
    )
    assert reply["error"]["code"] == PROTOCOL_MISMATCH
    assert reply["error"]["message"] == mismatch_message(CONTROL_PROTOCOL_VERSION, version)
    assert "update codedeck-bridge" in reply["error"]["message"]
    assert conn.state is ConnectionState.AWAITING_INITIALIZE
    # the client may retry with a version the daemon speaks
    [retry] = answers(conn.receive_data(request("initialize", INIT, 2)))
    assert "result" in retry


BAD_INIT = [
    ([], "params must be an object"),
    ({"client": INIT["client"]}, "protocolVersion must be MAJOR.MINOR.PATCH"),
    ({**INIT, "protocolVersion": 1}, "protocolVersion must be MAJOR.MINOR.PATCH"),
    ({**INIT, "protocolVersion": "1.0"}, "protocolVersion must be MAJOR.MINOR.PATCH"),
    ({**INIT, "protocolVersion": "01.0.0"}, "protocolVersion must be MAJOR.MINOR.PATCH"),
    ({**INIT, "protocolVersion": "1.0.0-beta"}, "protocolVersion must be MAJOR.MINOR.PATCH"),
    ({"protocolVersion": CONTROL_PROTOCOL_VERSION}, "client must be"),
    ({**INIT, "client": "cli"}, "client must be"),
    ({**INIT, "client": {"name": "cli"}}, "client must be"),
    ({**INIT, "client": {"name": "", "version": "1"}}, "client must be"),
    ({**INIT, "client": {"name": "x" * 101, "version": "1"}}, "client must be"),
    ({**INIT, "client": {"name": "c", "version": "1", "pid": 4}}, "client must be"),
    ({**INIT, "workspaceRoots": []}, "unknown param"),
]


@pytest.mark.parametrize(("params", "message"), BAD_INIT, ids=[m for _, m in BAD_INIT])
def test_bad_initialize_params(params: Any, message: str) -> None:
    conn = server()
    [reply] = answers(conn.receive_data(request("initialize", params)))
    assert reply["error"]["code"] == INVALID_PARAMS
    assert message in reply["error"]["message"]
    assert conn.state is ConnectionState.AWAITING_INITIALIZE


@pytest.mark.parametrize("method", [*METHODS, "nope"])
def test_every_method_before_initialize_is_not_initialized(method: str) -> None:
    conn = server()
    [reply] = answers(conn.receive_data(request(method, {}, 5)))
    assert reply["id"] == 5
    assert reply["error"]["code"] == NOT_INITIALIZED
    assert "initialize" in reply["error"]["message"]


def test_initialize_twice_is_refused() -> None:
    conn = ready()
    [reply] = answers(conn.receive_data(request("initialize", INIT, 3)))
    assert reply["error"] == {
        "code": INVALID_REQUEST,
        "message": "invalid request: already initialized",
    }


def test_initialize_and_a_call_in_one_read_are_served_in_order() -> None:
    conn = server()
    events = conn.receive_data(request("initialize", INIT, 1) + request("status", {}, 2))
    assert isinstance(events[0], Reply)
    assert events[1] == Call(2, METHODS["status"], {})


def test_unknown_method() -> None:
    [reply] = answers(ready().receive_data(request("shutdown", {}, 9)))
    assert reply["error"]["code"] == METHOD_NOT_FOUND
    assert "'shutdown'" in reply["error"]["message"]


def test_notifications_are_never_answered() -> None:
    conn = server()
    note = frame({"jsonrpc": "2.0", "method": "status"})
    assert conn.receive_data(note) == []
    assert ready().receive_data(note) == []
    assert ready().receive_data(frame({"jsonrpc": "2.0", "method": "nope", "params": 3})) == [
        Reply(
            conn.error(
                None, INVALID_REQUEST, "invalid request: params must be an object or an array"
            )
        )
    ]


def test_a_body_that_is_not_json_is_answered_and_the_connection_goes_on() -> None:
    conn = ready()
    events = conn.receive_data(encode_frame(b"{oops") + request("status", {}, 2))
    [reply] = answers(events[:1])
    assert reply == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": PARSE_ERROR, "message": reply["error"]["message"]},
    }
    assert events[1] == Call(2, METHODS["status"], {})


def test_a_batch_is_refused_with_one_error() -> None:
    [reply] = answers(
        ready().receive_data(frame([{"jsonrpc": "2.0", "id": 1, "method": "status"}]))
    )
    assert reply["id"] is None
    assert reply["error"]["code"] == INVALID_REQUEST
    assert "batch" in reply["error"]["message"]


def test_a_framing_error_answers_earlier_requests_then_closes() -> None:
    conn = ready()
    events = conn.receive_data(
        request("status", {}, 2) + b"Garbage\r\n\r\n" + request("status", {}, 3)
    )
    assert events[0] == Call(2, METHODS["status"], {})
    assert isinstance(events[1], Close)
    [reply] = answers(events[1:])
    assert reply["error"]["code"] == PARSE_ERROR
    assert conn.state is ConnectionState.CLOSED
    assert conn.receive_data(request("status", {}, 4)) == []


def test_an_oversize_frame_is_an_invalid_request_then_close() -> None:
    conn = ServerConnection(server_name="s", server_version="1", max_body=100)
    events = conn.receive_data(b"Content-Length: 101\r\n\r\n")
    [reply] = answers(events)
    assert isinstance(events[0], Close)
    assert reply["error"]["code"] == INVALID_REQUEST
    assert "exceeds the 100-byte limit" in reply["error"]["message"]


def test_eof_and_handshake_timeout() -> None:
    assert ready().receive_eof() == [Close()]
    assert ready().handshake_timeout() == []
    conn = server()
    [close] = conn.handshake_timeout()
    assert isinstance(close, Close)
    [reply] = answers([close])
    assert reply["error"]["code"] == NOT_INITIALIZED
    assert conn.state is ConnectionState.CLOSED


def test_result_and_internal_error_encoding() -> None:
    conn = ready()
    [body] = FrameDecoder().feed(conn.result(3, {"ok": True}))
    assert json.loads(body)["result"] == {"ok": True}
    with pytest.raises(TypeError):
        conn.result(3, {1, 2})
    [body] = FrameDecoder().feed(conn.internal_error(3))
    assert json.loads(body)["error"] == {
        "code": INTERNAL_ERROR,
        "message": "internal error (details are in the log)",
    }


# --- every method's params ----------------------------------------------------------------------

VALID = [
    ("status", {}, {}),
    ("status", None, {}),
    ("pair.open", {}, {"duration": 600.0}),
    ("pair.open", {"duration": 30}, {"duration": 30.0}),
    ("pair.open", {"duration": 3600}, {"duration": 3600.0}),
    ("pair.wait", {"timeout": 0}, {"timeout": 0.0}),
    ("pair.wait", {"timeout": 12.5}, {"timeout": 12.5}),
    ("pair.npub", {"npub": PHONE.npub}, {"pubkey": PHONE.public_hex, "label": ""}),
    (
        "pair.npub",
        {"npub": PHONE.public_hex.upper(), "label": "  Pixel 8  "},
        {"pubkey": PHONE.public_hex, "label": "Pixel 8"},
    ),
    (
        "pair.npub",
        {"npub": PHONE.npub, "label": "Téléphone 📱"},
        {"pubkey": PHONE.public_hex, "label": "Téléphone 📱"},
    ),
    ("phones.list", {}, {}),
    ("phones.unpair", {"npub": f" {PHONE.npub} "}, {"pubkey": PHONE.public_hex}),
    ("sessions.list", {}, {}),
]


@pytest.mark.parametrize(
    ("method", "params", "kwargs"), VALID, ids=[f"{m}-{i}" for i, (m, _, _) in enumerate(VALID)]
)
def test_valid_params_become_handler_arguments(
    method: str, params: Any, kwargs: dict[str, Any]
) -> None:
    [event] = ready().receive_data(request(method, params, 8))
    assert event == Call(8, METHODS[method], kwargs)


INVALID = [
    ("status", {"verbose": True}, "unknown param(s) verbose"),
    ("status", [], "params must be an object"),
    ("phones.list", {"x": 1}, "unknown param(s) x"),
    ("sessions.list", {"all": 1}, "unknown param(s) all"),
    ("pair.open", {"duration": "600"}, "duration must be a number of seconds"),
    ("pair.open", {"duration": True}, "duration must be a number of seconds"),
    ("pair.open", {"duration": 0}, "duration must be between 1 and 3600 seconds"),
    ("pair.open", {"duration": 3601}, "duration must be between 1 and 3600 seconds"),
    ("pair.open", {"duration": -5}, "duration must be between"),
    ("pair.open", {"window": 5}, "unknown param(s) window; allowed: duration"),
    ("pair.wait", {}, "timeout is required"),
    ("pair.wait", {"timeout": None}, "timeout must be a number"),
    ("pair.wait", {"timeout": -1}, "timeout must be between 0 and 3600"),
    ("pair.npub", {}, "npub is required"),
    ("pair.npub", {"npub": 5}, "npub must be a string"),
    ("pair.npub", {"npub": "npub1qqqq"}, "npub is not a valid public key"),
    ("pair.npub", {"npub": Keypair.from_secret("03" * 32).nsec}, "npub is not a valid public key"),
    ("pair.npub", {"npub": "ff" * 32}, "npub is not a valid public key"),
    ("pair.npub", {"npub": PHONE.npub, "label": 3}, "label must be a string"),
    ("pair.npub", {"npub": PHONE.npub, "label": "x" * 65}, "longer than 64"),
    ("pair.npub", {"npub": PHONE.npub, "label": "a\x1b[2Jb"}, "control characters"),
    ("pair.npub", {"npub": PHONE.npub, "label": "a\u0085b"}, "control characters"),
    ("pair.npub", {"npub": PHONE.npub, "lable": "x"}, "unknown param(s) lable"),
    ("phones.unpair", {}, "npub is required"),
    ("phones.unpair", {"npub": ""}, "npub is not a valid public key"),
    ("phones.unpair", {"npub": PHONE.npub, "force": True}, "unknown param(s) force"),
]


@pytest.mark.parametrize(
    ("method", "params", "message"), INVALID, ids=[f"{m}-{msg[:20]}" for m, _, msg in INVALID]
)
def test_invalid_params_are_refused_with_a_clear_message(
    method: str, params: Any, message: str
) -> None:
    [reply] = answers(ready().receive_data(request(method, params, 4)))
    assert reply["id"] == 4
    assert reply["error"]["code"] == INVALID_PARAMS
    assert message in reply["error"]["message"]


def test_a_number_that_overflows_to_infinity_is_refused() -> None:
    body = b'{"jsonrpc":"2.0","id":4,"method":"pair.open","params":{"duration":1e400}}'
    [reply] = answers(ready().receive_data(encode_frame(body)))
    assert reply["error"]["code"] == INVALID_PARAMS
    assert "duration must be between 1 and 3600 seconds" in reply["error"]["message"]


def test_a_secret_key_given_as_npub_is_never_echoed() -> None:
    nsec = Keypair.from_secret("03" * 32).nsec
    [reply] = answers(ready().receive_data(request("pair.npub", {"npub": nsec}, 4)))
    assert nsec not in json.dumps(reply)


def test_method_table_names_match_handler_methods() -> None:
    from bridge.control.methods import ControlHandler

    for spec in METHODS.values():
        assert spec.attribute == spec.name.replace(".", "_")
        assert callable(getattr(ControlHandler, spec.attribute))
    assert [s.name for s in METHODS.values() if s.cancel_on_disconnect] == [
        "pair.wait",
        "tasks.watch",
    ]


def test_version_major() -> None:
    assert version_major("1.0.0") == 1
    assert version_major("12.3.4") == 12
    for bad in ("1", "1.0", "v1.0.0", "1.0.0.0", "1.0.0 ", ""):
        assert version_major(bad) is None


# --- client side --------------------------------------------------------------------------------


def test_client_numbers_requests_and_parses_answers() -> None:
    client = ClientConnection()
    first, data = client.request("status", {})
    second, _ = client.request("status", {})
    assert (first, second) == (1, 2)
    assert json.loads(FrameDecoder().feed(data)[0]) == {
        "jsonrpc": "2.0",
        "method": "status",
        "params": {},
        "id": 1,
    }
    conn = ready()
    answer = conn.result(1, {"a": 1}) + conn.error(2, -32000, "no")
    assert client.receive_data(answer[:10]) == []
    assert client.in_frame
    assert client.receive_data(answer[10:]) == [
        Response(1, {"a": 1}),
        ErrorResponse(2, -32000, "no"),
    ]


def test_client_refuses_garbage() -> None:
    with pytest.raises(FramingError):
        ClientConnection().receive_data(b"HTTP/1.1 200 OK\r\n\r\n")
    with pytest.raises(ResponseError):
        ClientConnection().receive_data(encode_frame(b'{"jsonrpc":"2.0"}'))
