"""The sans-I/O Desiide connection: handshake, every error code, split frames, reverse requests."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge import __version__
from bridge.control.framing import FrameDecoder, encode_frame
from bridge.control.rpc import ErrorResponse
from bridge.desiide.connection import (
    Answer,
    Call,
    Closed,
    ConnectionState,
    DesiideConnection,
    Event,
    ReverseResult,
    mismatch_message,
)
from bridge.desiide.errors import (
    APPROVAL_NOT_FOUND,
    ERROR_NAMES,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    NOT_IMPLEMENTED,
    NOT_INITIALIZED,
    PARSE_ERROR,
    PROTOCOL_MISMATCH,
    SECRET_MISSING,
    TASK_NOT_FOUND,
    DesiideError,
)
from bridge.desiide.schema.methods import (
    METHODS,
    ClientInfo,
    OkResult,
    SecretsGetParams,
    SecretsGetResult,
    StateChangedEvent,
    TaskCancelParams,
    TaskInput,
    TaskState,
)

INIT_PARAMS: dict[str, Any] = {
    "protocolVersion": "1.0.0",
    "client": {"name": "desiide", "version": "0.3.0"},
    "workspaceRoots": ["file:///home/me/proj"],
}
INIT_RESULT = {
    "protocolVersion": "1.0.0",
    "server": {"name": "codedeck-bridge", "version": __version__},
}


def frame(message: Any) -> bytes:
    return encode_frame(json.dumps(message).encode())


def req(request_id: int | str, method: str, params: Any = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return frame(message)


def decode(data: bytes) -> Any:
    bodies = FrameDecoder().feed(data)
    assert len(bodies) == 1
    return json.loads(bodies[0])


def answers(events: list[Event]) -> list[Any]:
    return [decode(event.data) for event in events if isinstance(event, Answer)]


def one_answer(events: list[Event]) -> Any:
    assert len(events) == 1 and isinstance(events[0], Answer), events
    return decode(events[0].data)


def error_code(events: list[Event]) -> int:
    return int(one_answer(events)["error"]["code"])


def ready(**kwargs: Any) -> DesiideConnection:
    conn = DesiideConnection(**kwargs)
    assert one_answer(conn.feed(req(0, "initialize", INIT_PARAMS)))["result"] == INIT_RESULT
    return conn


# --- the handshake --------------------------------------------------------------------------------


def test_initialize_answers_and_records_the_client() -> None:
    conn = DesiideConnection()
    assert (conn.client, conn.workspace_roots) == (None, ())
    params = {**INIT_PARAMS, "workspaceRoots": ["file:///home/me/proj/", "/home/me/proj", "/srv/b"]}
    assert one_answer(conn.feed(req(1, "initialize", params))) == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": INIT_RESULT,
    }
    assert conn.state is ConnectionState.READY
    assert conn.client == ClientInfo(name="desiide", version="0.3.0")
    assert conn.client_protocol_version == "1.0.0"
    assert conn.workspace_roots == ("/home/me/proj", "/srv/b")


def test_a_newer_minor_is_accepted() -> None:
    conn = DesiideConnection()
    result = one_answer(
        conn.feed(req(1, "initialize", {**INIT_PARAMS, "protocolVersion": "1.7.2"}))
    )
    assert result["result"]["protocolVersion"] == "1.0.0"
    assert conn.client_protocol_version == "1.7.2"


def test_no_workspace_is_allowed_at_the_handshake() -> None:
    conn = DesiideConnection()
    conn.feed(req(1, "initialize", {**INIT_PARAMS, "workspaceRoots": []}))
    assert conn.state is ConnectionState.READY and conn.workspace_roots == ()


@pytest.mark.parametrize(
    ("version", "advice"),
    [("2.0.0", "update codedeck-bridge"), ("0.9.1", "update the Desiide extension")],
)
def test_another_major_is_a_mismatch_and_may_retry(version: str, advice: str) -> None:
    conn = DesiideConnection()
    # Extra params of a future major do not turn the mismatch into "unknown param".
    params = {**INIT_PARAMS, "protocolVersion": version, "capabilities": {}}
    error = one_answer(conn.feed(req(1, "initialize", params)))["error"]
    assert error == {"code": PROTOCOL_MISMATCH, "message": mismatch_message(version)}
    assert advice in error["message"] and version in error["message"]
    assert conn.state is ConnectionState.AWAITING_INITIALIZE
    assert error_code(conn.feed(req(2, "task.list", {}))) == NOT_INITIALIZED
    assert "result" in one_answer(conn.feed(req(3, "initialize", INIT_PARAMS)))


BAD_INITIALIZE = [
    ({**INIT_PARAMS, "protocolVersion": "1.0"}, "protocolVersion: String should match pattern"),
    ({**INIT_PARAMS, "protocolVersion": 1}, "protocolVersion: Input should be a valid string"),
    ({k: v for k, v in INIT_PARAMS.items() if k != "workspaceRoots"}, "workspaceRoots: required"),
    ({**INIT_PARAMS, "workspaceRoots": ["proj"]}, "workspaceRoots[0]: must be an absolute path"),
    ({**INIT_PARAMS, "client": {"name": "x"}}, "client.version: required"),
    ({**INIT_PARAMS, "trace": "off"}, "trace: unknown param"),
    (["1.0.0"], "params must be an object"),
]


@pytest.mark.parametrize(("params", "message"), BAD_INITIALIZE, ids=[m for _, m in BAD_INITIALIZE])
def test_bad_initialize_params(params: Any, message: str) -> None:
    conn = DesiideConnection()
    error = one_answer(conn.feed(req(1, "initialize", params)))["error"]
    assert error["code"] == INVALID_PARAMS and message in error["message"]
    assert conn.state is ConnectionState.AWAITING_INITIALIZE


def test_initialize_twice_is_an_invalid_request() -> None:
    conn = ready()
    error = one_answer(conn.feed(req(9, "initialize", INIT_PARAMS)))
    assert error == {
        "jsonrpc": "2.0",
        "id": 9,
        "error": {"code": INVALID_REQUEST, "message": "invalid request: already initialized"},
    }


@pytest.mark.parametrize("method", ["task.list", "health.ping", "no.such.method"])
def test_everything_before_initialize_is_not_initialized(method: str) -> None:
    conn = DesiideConnection()
    error = one_answer(conn.feed(req("a", method, {})))
    assert error == {
        "jsonrpc": "2.0",
        "id": "a",
        "error": {
            "code": NOT_INITIALIZED,
            "message": "not initialized: the first request must be initialize",
        },
    }


# --- calls ----------------------------------------------------------------------------------------

MINIMAL_PARAMS: dict[str, dict[str, Any]] = {
    "task.create": {"kind": "ask", "instruction": "what does main do?"},
    "task.cancel": {"taskId": "task-1"},
    "task.list": {},
    "task.approve": {"taskId": "t", "approvalId": "a"},
    "task.reject": {"taskId": "t", "approvalId": "a"},
    "edits.report": {
        "taskId": "t",
        "proposalId": "p",
        "files": [{"path": "a", "status": "applied"}],
    },
    "models.list": {},
    "models.test": {"modelId": "m"},
    "jev.test": {},
    "jev.preview": {"pack": "workflow_select@1"},
    "decisions.list": {},
    "decisions.replay": {"id": 1},
    "config.update": {},
    "health.ping": {},
}


@pytest.mark.parametrize("method", sorted(MINIMAL_PARAMS))
def test_a_valid_request_is_a_call_with_its_model(method: str) -> None:
    assert set(MINIMAL_PARAMS) == set(METHODS) - {"initialize"}
    conn = ready()
    [event] = conn.feed(req(5, method, MINIMAL_PARAMS[method]))
    assert isinstance(event, Call)
    assert (event.request_id, event.method) == (5, method)
    assert type(event.params) is METHODS[method]


def test_absent_params_are_an_empty_object() -> None:
    conn = ready()
    [event] = conn.feed(req(5, "task.list"))
    assert isinstance(event, Call) and event.method == "task.list"


def test_the_handler_gets_validated_values() -> None:
    conn = ready()
    [event] = conn.feed(
        req(5, "task.create", {"kind": "fix", "instruction": "x", "budget": {"maxIterations": 3}})
    )
    assert isinstance(event, Call) and isinstance(event.params, TaskInput)
    assert event.params.budget.maxIterations == 3 and event.params.budget.maxToolCalls == 40


def test_bad_params_are_answered_with_the_validation_message() -> None:
    conn = ready()
    error = one_answer(conn.feed(req(5, "task.cancel", {"taskId": "t", "force": True})))["error"]
    assert error == {"code": INVALID_PARAMS, "message": "invalid params: force: unknown param"}
    error = one_answer(conn.feed(req(6, "task.cancel", ["t"])))["error"]
    assert error == {"code": INVALID_PARAMS, "message": "invalid params: params must be an object"}


def test_a_raw_key_is_refused_without_being_echoed() -> None:
    conn = ready()
    key = "sk-ant-api03-abcdefghijklmnop"
    params = {
        "models": [
            {
                "id": "m",
                "provider": "anthropic",
                "baseUrl": "https://x",
                "model": "y",
                "apiKey": key,
            }
        ]
    }
    [event] = conn.feed(req(5, "config.update", params))
    assert isinstance(event, Answer) and key.encode() not in event.data
    assert decode(event.data)["error"]["code"] == INVALID_PARAMS


def test_an_unknown_method_is_method_not_found() -> None:
    conn = ready()
    assert one_answer(conn.feed(req(5, "workspace.applyEdit", {})))["error"] == {
        "code": METHOD_NOT_FOUND,
        "message": "method not found: 'workspace.applyEdit'",
    }


def test_unregistered_methods_are_not_implemented() -> None:
    conn = ready(implemented={"health.ping"})
    assert one_answer(conn.feed(req(5, "task.list", {})))["error"] == {
        "code": NOT_IMPLEMENTED,
        "message": "not implemented yet: task.list",
    }
    assert isinstance(conn.feed(req(6, "health.ping", {}))[0], Call)


def test_notifications_from_the_extension_are_ignored() -> None:
    conn = DesiideConnection()
    assert conn.feed(frame({"jsonrpc": "2.0", "method": "task.list"})) == []
    conn = ready()
    assert (
        conn.feed(frame({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 1}})) == []
    )
    assert conn.feed(frame({"jsonrpc": "2.0", "method": "task.create", "params": {"bad": 1}})) == []


# --- malformed input ------------------------------------------------------------------------------

MALFORMED = [
    (encode_frame(b"{not json"), None, PARSE_ERROR),
    (encode_frame(b"\xff\xfe"), None, PARSE_ERROR),
    (encode_frame(b'{"a": NaN}'), None, PARSE_ERROR),
    (frame([{"jsonrpc": "2.0", "id": 1, "method": "task.list"}]), None, INVALID_REQUEST),
    (frame("hello"), None, INVALID_REQUEST),
    (frame({"id": 4, "method": "task.list"}), 4, INVALID_REQUEST),
    (frame({"jsonrpc": "2.0", "id": 4}), 4, INVALID_REQUEST),
    (frame({"jsonrpc": "2.0", "id": None, "method": "task.list"}), None, INVALID_REQUEST),
    (frame({"jsonrpc": "2.0", "id": 1.5, "method": "task.list"}), None, INVALID_REQUEST),
    (frame({"jsonrpc": "2.0", "id": 4, "method": "task.list", "extra": 1}), 4, INVALID_REQUEST),
    (frame({"jsonrpc": "2.0", "id": 4, "method": "task.list", "params": 3}), 4, INVALID_REQUEST),
]


@pytest.mark.parametrize(("data", "request_id", "code"), MALFORMED)
def test_malformed_messages_are_answered_and_the_connection_goes_on(
    data: bytes, request_id: Any, code: int
) -> None:
    conn = ready()
    answer = one_answer(conn.feed(data))
    assert answer["id"] == request_id and answer["error"]["code"] == code
    assert isinstance(conn.feed(req(8, "health.ping", {}))[0], Call)


def test_a_framing_error_is_answered_once_then_closes() -> None:
    conn = ready()
    events = conn.feed(req(1, "health.ping", {}) + b"Content-Length: x\r\n\r\n{}")
    assert isinstance(events[0], Call)
    assert decode(events[1].data)["error"]["code"] == PARSE_ERROR  # type: ignore[union-attr]
    assert isinstance(events[2], Closed) and events[2].reason.startswith("framing error")
    assert conn.state is ConnectionState.CLOSED
    assert conn.feed(req(2, "health.ping", {})) == []
    assert conn.feed_eof() == []


def test_an_oversize_frame_is_an_invalid_request_then_closes() -> None:
    conn = DesiideConnection(max_body=100)
    events = conn.feed(b"Content-Length: 101\r\n\r\n")
    assert len(events) == 2
    assert decode(events[0].data)["error"]["code"] == INVALID_REQUEST  # type: ignore[union-attr]
    assert isinstance(events[1], Closed)


def test_eof() -> None:
    conn = ready()
    assert conn.feed_eof() == [Closed("eof")]
    assert conn.feed_eof() == []
    assert conn.feed(req(1, "health.ping")) == []
    conn = ready()
    assert conn.feed(b"Content-Length: 10\r\n\r\n{}") == []
    assert conn.feed_eof() == [Closed("eof inside a frame")]


# --- split and pipelined frames -------------------------------------------------------------------


def stream() -> bytes:
    return (
        req(1, "initialize", INIT_PARAMS)
        + req(2, "task.create", {"kind": "ask", "instruction": "hi"})
        + frame({"jsonrpc": "2.0", "method": "ignored"})
        + req(3, "nope", {})
        + req(4, "task.cancel", {"taskId": "t"})
    )


def summarize(events: list[Event]) -> list[Any]:
    out: list[Any] = []
    for event in events:
        if isinstance(event, Answer):
            out.append(decode(event.data))
        elif isinstance(event, Call):
            out.append((event.request_id, event.method, event.params))
        else:
            out.append(event)
    return out


def test_pipelined_requests_come_out_in_order() -> None:
    events = DesiideConnection().feed(stream())
    assert [type(e).__name__ for e in events] == ["Answer", "Call", "Answer", "Call"]
    summary = summarize(events)
    assert summary[0]["result"] == INIT_RESULT
    assert summary[2]["error"]["code"] == METHOD_NOT_FOUND
    assert summary[3] == (4, "task.cancel", TaskCancelParams(taskId="t"))


@pytest.mark.parametrize("size", [1, 2, 7, 64])
def test_split_frames_give_the_same_events(size: int) -> None:
    data = stream()
    conn = DesiideConnection()
    events: list[Event] = []
    for start in range(0, len(data), size):
        events += conn.feed(data[start : start + size])
    assert summarize(events) == summarize(DesiideConnection().feed(data))


@given(st.binary(max_size=300))
def test_any_bytes_give_events_never_an_exception(data: bytes) -> None:
    conn = ready()
    events = conn.feed(data)
    assert all(isinstance(e, Answer | Call | ReverseResult | Closed) for e in events)


# --- answers and notifications we write -----------------------------------------------------------


def test_result_dumps_models_without_absent_fields() -> None:
    conn = ready()
    assert decode(conn.result(3, OkResult())) == {"jsonrpc": "2.0", "id": 3, "result": {"ok": True}}
    assert decode(conn.result("x", {"cancelled": False})) == {
        "jsonrpc": "2.0",
        "id": "x",
        "result": {"cancelled": False},
    }


HANDLER_ERRORS = [
    DesiideError(NOT_IMPLEMENTED, "jev.preview is not available yet"),
    DesiideError(TASK_NOT_FOUND, "no task task-x"),
    DesiideError(APPROVAL_NOT_FOUND, "approval a1 is no longer pending (answered on the phone)"),
    DesiideError(
        SECRET_MISSING, "the secret secret:anthropic is not set", {"ref": "secret:anthropic"}
    ),
    DesiideError(INVALID_PARAMS, "b.py is not part of proposal p1"),
]


@pytest.mark.parametrize("exc", HANDLER_ERRORS, ids=[ERROR_NAMES[e.code] for e in HANDLER_ERRORS])
def test_handler_errors_are_encoded_with_their_code(exc: DesiideError) -> None:
    error: dict[str, Any] = {"code": exc.code, "message": exc.message}
    if exc.data is not None:
        error["data"] = exc.data
    assert decode(ready().error_for(7, exc)) == {"jsonrpc": "2.0", "id": 7, "error": error}


def test_internal_error_says_nothing_about_the_cause() -> None:
    assert decode(ready().internal_error(7))["error"] == {
        "code": INTERNAL_ERROR,
        "message": "internal error (details are in the orchestrator log)",
    }


def test_notifications() -> None:
    conn = ready()
    event = StateChangedEvent(
        taskId="t", seq=0, ts="2025-01-01T00:00:00Z", from_=None, to=TaskState.QUEUED
    )
    assert decode(conn.notify("task.event", event)) == {
        "jsonrpc": "2.0",
        "method": "task.event",
        "params": {
            "taskId": "t",
            "seq": 0,
            "ts": "2025-01-01T00:00:00Z",
            "type": "state_changed",
            "from": None,
            "to": "queued",
        },
    }
    assert (
        decode(conn.notify("log", {"level": "info", "message": "m", "ts": "t"}))["method"] == "log"
    )
    with pytest.raises(ValueError, match="not a Desiide notification"):
        conn.notify("task.progress", {})


def test_every_error_code_is_produced() -> None:
    """Each code of ERROR_NAMES comes out of the connection by some path (the cases above)."""
    seen: set[int] = set()
    conn = DesiideConnection(implemented=set(METHODS) - {"jev.test"})
    seen.add(error_code(conn.feed(encode_frame(b"{"))))
    seen.add(error_code(conn.feed(frame([]))))
    seen.add(error_code(conn.feed(req(1, "task.list"))))
    seen.add(
        error_code(conn.feed(req(2, "initialize", {**INIT_PARAMS, "protocolVersion": "3.0.0"})))
    )
    seen.add(error_code(conn.feed(req(3, "initialize", {}))))
    conn.feed(req(4, "initialize", INIT_PARAMS))
    seen.add(error_code(conn.feed(req(5, "nope"))))
    seen.add(error_code(conn.feed(req(6, "jev.test"))))
    seen.add(decode(conn.internal_error(7))["error"]["code"])
    for exc in HANDLER_ERRORS:
        seen.add(decode(conn.error_for(8, exc))["error"]["code"])
    assert seen == set(ERROR_NAMES)


# --- the reverse request --------------------------------------------------------------------------


def response(request_id: Any, **member: Any) -> bytes:
    return frame({"jsonrpc": "2.0", "id": request_id, **member})


def test_secrets_get_round_trip() -> None:
    conn = ready()
    request_id, data = conn.request("secrets.get", SecretsGetParams(ref="secret:anthropic"))
    assert decode(data) == {
        "jsonrpc": "2.0",
        "method": "secrets.get",
        "params": {"ref": "secret:anthropic"},
        "id": request_id,
    }
    assert conn.pending_requests == {request_id: "secrets.get"}
    [event] = conn.feed(response(request_id, result={"value": "sk-1", "extra": True}))
    assert isinstance(event, ReverseResult)
    assert (event.request_id, event.method, event.error) == (request_id, "secrets.get", None)
    assert isinstance(event.result, SecretsGetResult)
    assert event.result.value is not None and event.result.value.get_secret_value() == "sk-1"
    assert conn.pending_requests == {}
    assert conn.feed(response(request_id, result={"value": "again"})) == []  # answered once


def test_a_secret_that_is_not_set() -> None:
    conn = ready()
    request_id, _ = conn.request("secrets.get", SecretsGetParams(ref="secret:x"))
    [event] = conn.feed(response(request_id, result={"value": None}))
    assert isinstance(event, ReverseResult) and isinstance(event.result, SecretsGetResult)
    assert event.result.value is None


def test_answers_are_matched_by_id_whatever_their_order() -> None:
    conn = ready()
    first, _ = conn.request("secrets.get", SecretsGetParams(ref="secret:a"))
    second, _ = conn.request("secrets.get", SecretsGetParams(ref="secret:b"))
    assert first != second
    events = conn.feed(
        response(second, error={"code": -32000, "message": "storage locked"})
        + req(9, "health.ping")
        + response(first, result={"value": "A"})
    )
    assert [type(e).__name__ for e in events] == ["ReverseResult", "Call", "ReverseResult"]
    assert events[0] == ReverseResult(
        second, "secrets.get", error=ErrorResponse(second, -32000, "storage locked")
    )
    assert isinstance(events[2], ReverseResult) and events[2].request_id == first


def test_a_malformed_result_becomes_an_error_without_the_value() -> None:
    conn = ready()
    request_id, _ = conn.request("secrets.get", SecretsGetParams(ref="secret:a"))
    [event] = conn.feed(response(request_id, result={"val": "sk-leak"}))
    assert isinstance(event, ReverseResult) and event.result is None and event.error is not None
    assert event.error.code == INTERNAL_ERROR
    assert event.error.message == "malformed secrets.get result: invalid params: value: required"
    [event] = conn.feed(
        response(
            conn.request("secrets.get", SecretsGetParams(ref="secret:a"))[0],
            result={"value": 12345},
        )
    )
    assert (
        isinstance(event, ReverseResult)
        and event.error is not None
        and "12345" not in event.error.message
    )


@pytest.mark.parametrize(
    "data",
    [
        response(99, result={"value": "x"}),
        response("1", result={"value": "x"}),
        response(None, error={"code": -32700, "message": "parse error"}),
    ],
)
def test_answers_nobody_waits_for_are_dropped(data: bytes) -> None:
    conn = ready()
    conn.request("secrets.get", SecretsGetParams(ref="secret:a"))
    assert conn.feed(data) == []
    assert len(conn.pending_requests) == 1


def test_a_response_without_result_or_error_is_an_invalid_request() -> None:
    conn = ready()
    request_id, _ = conn.request("secrets.get", SecretsGetParams(ref="secret:a"))
    assert error_code(conn.feed(response(request_id))) == INVALID_REQUEST


def test_request_refuses_what_the_protocol_does_not_have() -> None:
    conn = ready()
    with pytest.raises(ValueError, match="not a Desiide reverse request"):
        conn.request("workspace.applyEdit", SecretsGetParams(ref="secret:a"))
    with pytest.raises(ValueError, match="takes SecretsGetParams"):
        conn.request("secrets.get", TaskCancelParams(taskId="t"))
    assert conn.pending_requests == {}
