"""The in-process MCP server: JSON-RPC 2.0 in, the answer out, with a fake tool host.

The messages are the ones Claude Code 2.1.332 sends (recorded in
:mod:`bridge.agents.claude.editor_tools`); the answers are checked whole.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from bridge.agents.claude.mcp_server import (
    DEFAULT_PROTOCOL_VERSION,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    REQUEST_CANCELLED,
    McpServer,
)
from bridge.agents.workspace_tools import TOOL_SPECS, ToolResult, ToolSpec

SPEC = ToolSpec("echo", "Echo the input.", {"type": "object", "properties": {}})


@dataclass
class FakeTools:
    specs: Sequence[ToolSpec] = (SPEC,)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    fail: bool = False

    async def call(self, name: str, arguments: Mapping[str, object]) -> ToolResult:
        self.calls.append((name, dict(arguments)))
        if self.fail:
            raise RuntimeError("a bug")
        if name != "echo":
            return ToolResult(f"unknown_tool: {name}", is_error=True)
        return ToolResult(f"echo {dict(arguments)}")


def make_server(tools: FakeTools | None = None, instructions: str = "") -> McpServer:
    return McpServer("desiide", "1.2.3", tools or FakeTools(), instructions)


def request(method: str, params: Any = None, request_id: Any = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


CLAUDE_INITIALIZE = {
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "claude-code", "title": "Claude Code", "version": "2.1.332"},
    },
    "jsonrpc": "2.0",
    "id": 0,
}


async def test_initialize_answers_the_clients_version() -> None:
    answer = await make_server(instructions="Use these.").handle(CLAUDE_INITIALIZE)
    assert answer == {
        "jsonrpc": "2.0",
        "id": 0,
        "result": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "desiide", "version": "1.2.3"},
            "instructions": "Use these.",
        },
    }


async def test_initialize_without_a_version_or_instructions() -> None:
    answer = await make_server().handle(request("initialize", {}))
    assert answer is not None
    assert answer["result"]["protocolVersion"] == DEFAULT_PROTOCOL_VERSION
    assert "instructions" not in answer["result"]


NOT_ANSWERED = [
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}},
    {"jsonrpc": "2.0", "method": "anything/else"},  # a notification of any method
    {"jsonrpc": "2.0", "id": 7, "result": {}},  # a response: this server asks nothing
    {"jsonrpc": "2.0", "id": 7, "error": {"code": 1, "message": "x"}},
    {},
]


@pytest.mark.parametrize("message", NOT_ANSWERED, ids=[str(m)[:40] for m in NOT_ANSWERED])
async def test_notifications_and_responses_get_no_answer(message: dict[str, Any]) -> None:
    assert await make_server().handle(message) is None


async def test_tools_list_gives_every_tool_with_its_schema() -> None:
    answer = await make_server().handle(request("tools/list", {"cursor": None}, "a"))
    assert answer == {
        "jsonrpc": "2.0",
        "id": "a",
        "result": {
            "tools": [
                {
                    "name": "echo",
                    "description": "Echo the input.",
                    "inputSchema": {"type": "object", "properties": {}},
                }
            ]
        },
    }


async def test_tools_list_of_the_desiide_tools() -> None:
    answer = await make_server(FakeTools(specs=TOOL_SPECS)).handle(request("tools/list"))
    assert answer is not None
    listed = answer["result"]["tools"]
    assert [t["name"] for t in listed] == [
        "read_file",
        "list_files",
        "search",
        "propose_edit",
        "run_command",
    ]
    propose = listed[3]["inputSchema"]
    assert propose["required"] == ["summary", "files"]
    assert "editor" in propose["properties"]["report"]["description"]


async def test_tools_call_dispatches_and_wraps_the_result() -> None:
    tools = FakeTools()
    params = {
        "name": "echo",
        "arguments": {"path": "a.txt", "report": [{"path": "a.txt", "status": "applied"}]},
        "_meta": {"claudecode/toolUseId": "toolu_1", "progressToken": 2},
    }
    answer = await make_server(tools).handle(request("tools/call", params, 2))
    assert tools.calls == [("echo", params["arguments"])]
    assert answer == {
        "jsonrpc": "2.0",
        "id": 2,
        "result": {
            "content": [{"type": "text", "text": f"echo {params['arguments']}"}],
            "isError": False,
        },
    }


async def test_an_unknown_tool_is_an_error_result_not_a_jsonrpc_error() -> None:
    answer = await make_server().handle(request("tools/call", {"name": "nope"}))
    assert answer == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"content": [{"type": "text", "text": "unknown_tool: nope"}], "isError": True},
    }


async def test_tools_call_without_arguments_passes_none() -> None:
    tools = FakeTools()
    await make_server(tools).handle(request("tools/call", {"name": "echo", "arguments": None}))
    assert tools.calls == [("echo", {})]


async def test_ping() -> None:
    assert await make_server().handle(request("ping")) == {"jsonrpc": "2.0", "id": 1, "result": {}}


ERRORS: list[tuple[dict[str, Any], Any, int]] = [
    (request("resources/list"), 1, METHOD_NOT_FOUND),
    (request("tools/call", {"arguments": {}}), 1, INVALID_PARAMS),
    (request("tools/call", {"name": ""}), 1, INVALID_PARAMS),
    (request("tools/call", {"name": "echo", "arguments": [1]}), 1, INVALID_PARAMS),
    (request("tools/list", [1, 2]), 1, INVALID_PARAMS),
    ({"id": 4, "method": "ping"}, 4, INVALID_REQUEST),  # no "jsonrpc": "2.0"
    ({"jsonrpc": "1.0", "id": 4, "method": "ping"}, 4, INVALID_REQUEST),
    ({"jsonrpc": "2.0", "id": 4, "method": 5}, 4, INVALID_REQUEST),
    ({"jsonrpc": "2.0", "id": True, "method": "ping"}, None, INVALID_REQUEST),
    ({"jsonrpc": "2.0", "id": [1], "method": "ping"}, None, INVALID_REQUEST),
    ({"jsonrpc": "2.0", "id": None, "method": "ping"}, None, INVALID_REQUEST),
]


@pytest.mark.parametrize(
    ("message", "answer_id", "code"), ERRORS, ids=[str(e[0])[:60] for e in ERRORS]
)
async def test_errors(message: dict[str, Any], answer_id: Any, code: int) -> None:
    answer = await make_server().handle(message)
    assert answer is not None
    assert answer["jsonrpc"] == "2.0" and answer["id"] == answer_id
    assert answer["error"]["code"] == code and answer["error"]["message"]
    assert "result" not in answer


async def test_a_failing_tool_host_is_internal_error_without_detail() -> None:
    answer = await make_server(FakeTools(fail=True)).handle(request("tools/call", {"name": "echo"}))
    assert answer == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": INTERNAL_ERROR, "message": "Internal error"},
    }


async def test_null_params_are_no_params() -> None:
    answer = await make_server().handle(
        {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": None}
    )
    assert answer == {"jsonrpc": "2.0", "id": 1, "result": {}}


# -- cancellation ----------------------------------------------------------------------------------


@dataclass
class BlockingTools:
    """A tool host whose calls wait until released (or cancelled)."""

    specs: Sequence[ToolSpec] = (SPEC,)
    started: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: int = 0

    async def call(self, name: str, arguments: Mapping[str, object]) -> ToolResult:
        self.started.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return ToolResult("done")


def cancelled(request_id: Any) -> dict[str, Any]:
    params = {"requestId": request_id, "reason": "interrupted"}
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}


async def test_a_cancelled_call_is_cancelled_and_answered() -> None:
    tools = BlockingTools()
    server = McpServer("desiide", "1", tools)
    call = asyncio.ensure_future(server.handle(request("tools/call", {"name": "echo"}, 5)))
    await tools.started.wait()
    assert await server.handle(cancelled("5")) is None  # another id: "5" is not 5
    assert await server.handle(cancelled(5)) is None
    assert await call == {
        "jsonrpc": "2.0",
        "id": 5,
        "error": {"code": REQUEST_CANCELLED, "message": "Request cancelled"},
    }
    assert tools.cancelled == 1
    assert await server.handle(cancelled(5)) is None  # too late: nothing happens


async def test_a_call_cancelled_from_outside_cancels_the_tool() -> None:
    tools = BlockingTools()
    server = McpServer("desiide", "1", tools)
    call = asyncio.ensure_future(server.handle(request("tools/call", {"name": "echo"}, 6)))
    await tools.started.wait()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert tools.cancelled == 1
    tools.release.set()  # the id is free again
    assert await server.handle(request("tools/call", {"name": "echo"}, 6)) == {
        "jsonrpc": "2.0",
        "id": 6,
        "result": {"content": [{"type": "text", "text": "done"}], "isError": False},
    }


async def test_an_id_already_in_flight_is_refused() -> None:
    tools = BlockingTools()
    server = McpServer("desiide", "1", tools)
    first = asyncio.ensure_future(server.handle(request("tools/call", {"name": "echo"}, 7)))
    await tools.started.wait()
    second = await server.handle(request("tools/call", {"name": "echo"}, 7))
    assert second is not None and second["error"]["code"] == INVALID_PARAMS
    tools.release.set()
    answer = await first
    assert answer is not None and answer["result"]["content"][0]["text"] == "done"


@pytest.mark.parametrize("params", [None, [], {"requestId": None}, {"requestId": True}, {}])
async def test_a_malformed_cancellation_is_ignored(params: Any) -> None:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": "notifications/cancelled"}
    if params is not None:
        message["params"] = params
    assert await make_server().handle(message) is None
