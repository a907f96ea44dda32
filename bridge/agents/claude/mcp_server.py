"""A small MCP server, transport-free: one JSON-RPC 2.0 message in, its answer (or None) out.

Claude Code talks to an in-process ("sdk") MCP server over its control protocol: each MCP message
arrives in an ``mcp_message`` control request and the answer goes back in the control response
(:mod:`.editor_tools` does that wrapping). This module is the MCP side only, written for the
Desiide tools rather than taken from the ``mcp`` package (which a session host must not load:
it pulls anyio and pydantic in, see ``test_lean``). What Claude Code 2.1.332 sends, measured:

1. ``initialize`` (``protocolVersion`` ``2025-11-25``, ``clientInfo``): answered with the same
   ``protocolVersion`` (the CLI's own; this server speaks only the tools part, unchanged across
   versions), ``capabilities.tools`` and ``serverInfo``, and short ``instructions``;
2. ``notifications/initialized``: a notification, no answer (the control response still carries
   an empty acknowledgement, as the SDK sends);
3. ``tools/list``: every tool with its JSON Schema (``inputSchema``); no paging;
4. ``tools/call`` (``name``, ``arguments``, ``_meta`` with ``claudecode/toolUseId``), only after
   the call was allowed through the permission prompt, with the *answer's* ``updatedInput`` as
   ``arguments``. Answered with one text content block and ``isError``; an unknown tool is an
   error result, not a JSON-RPC error (the model reads it);
5. ``notifications/cancelled`` (``requestId``) when the turn is interrupted during a call
   (measured: the CLI cancels at the MCP level, not with a ``control_cancel_request``). The
   call runs in a task of its own, which this cancels (``run_command`` kills its process
   group); the request is then answered with ``-32800`` "Request cancelled", so the CLI's
   ``mcp_message`` control request does not stay open for the rest of the session (the SDK
   leaves it unanswered; measured: the CLI ignores the late answer and the next call works).

``ping`` is answered with ``{}``. Any other method is JSON-RPC ``-32601``; malformed params
``-32602``; a message that is not JSON-RPC 2.0 ``-32600``. A message without an ``id`` is a
notification and is never answered; a message without a ``method`` (a response: this server asks
nothing) is dropped. A tool host that raises (it should not: see
:class:`~bridge.agents.workspace_tools.WorkspaceTools`) gets ``-32603`` with no detail.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, Protocol

from bridge.agents.workspace_tools import ToolResult, ToolSpec

__all__ = [
    "DEFAULT_PROTOCOL_VERSION",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "REQUEST_CANCELLED",
    "McpServer",
    "ToolHost",
]

logger = logging.getLogger(__name__)

DEFAULT_PROTOCOL_VERSION: Final = "2025-06-18"
"""Answered to an ``initialize`` that names no version."""
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
REQUEST_CANCELLED: Final = -32800
"""The answer to a ``tools/call`` the client cancelled (LSP's code; see the module docstring)."""


class ToolHost(Protocol):
    """What the server serves (:class:`~bridge.agents.workspace_tools.WorkspaceTools`)."""

    @property
    def specs(self) -> Sequence[ToolSpec]: ...

    def call(self, name: str, arguments: Mapping[str, object]) -> Awaitable[ToolResult]: ...


class McpServer:
    """The MCP server of one session's tools (see the module docstring).

    Args:
        name: the server's name (``serverInfo.name``; the CLI's ``mcp__<name>__`` prefix).
        version: ``serverInfo.version``.
        tools: the tools it lists and calls.
        instructions: told to the client at ``initialize`` (Claude Code shows the model).
    """

    def __init__(self, name: str, version: str, tools: ToolHost, instructions: str = "") -> None:
        self.name = name
        self._version = version
        self._tools = tools
        self._instructions = instructions
        self._calls: dict[tuple[str, object], asyncio.Future[dict[str, Any]]] = {}
        self._methods: dict[str, Callable[[Mapping[str, Any]], Awaitable[dict[str, Any]]]] = {
            "initialize": self._initialize,
            "ping": self._ping,
            "tools/list": self._list,
            "tools/call": self._call,
        }

    async def handle(self, message: Mapping[str, Any]) -> dict[str, Any] | None:
        """Answer one JSON-RPC message; None for a notification or a response.

        Cancel-safe (a cancelled ``tools/call`` cancels the tool, which cleans up).
        """
        method = message.get("method")
        has_id = "id" in message
        request_id = message.get("id")
        if not has_id:
            if isinstance(method, str):
                logger.debug("< %s notification %s", self.name, method[:60])
            if method == "notifications/cancelled":
                self._cancel(message.get("params"))
            return None
        if method is None and ("result" in message or "error" in message):
            return None  # a response: this server sends no requests
        if (
            message.get("jsonrpc") != "2.0"
            or not isinstance(method, str)
            or isinstance(request_id, bool)
            or not isinstance(request_id, str | int)
        ):
            return _error(_safe_id(request_id), INVALID_REQUEST, "Invalid Request")
        params = message.get("params", {})
        if params is None:
            params = {}
        if not isinstance(params, Mapping):
            return _error(request_id, INVALID_PARAMS, "params must be an object")
        handler = self._methods.get(method)
        if handler is None:
            return _error(request_id, METHOD_NOT_FOUND, f"Method not found: {method[:80]}")
        try:
            if method == "tools/call":
                result = await self._call_cancellable(request_id, params)
            else:
                result = await handler(params)
        except _InvalidParams as exc:
            return _error(request_id, INVALID_PARAMS, str(exc))
        except _Cancelled:
            return _error(request_id, REQUEST_CANCELLED, "Request cancelled")
        except Exception:
            logger.exception("x %s: %s failed", self.name, method)
            return _error(request_id, INTERNAL_ERROR, "Internal error")
        return {"jsonrpc": "2.0", "id": request_id, "result": result}

    async def _call_cancellable(
        self, request_id: str | int, params: Mapping[str, Any]
    ) -> dict[str, Any]:
        """``tools/call`` in a task of its own, which ``notifications/cancelled`` cancels."""
        key = _key(request_id)
        if key in self._calls:
            raise _InvalidParams(f"request id {request_id!r} is already in flight")
        call = asyncio.ensure_future(self._call(params))
        self._calls[key] = call
        try:
            await asyncio.wait({call})
        except asyncio.CancelledError:  # our caller went away: the call goes with it
            call.cancel()
            await asyncio.wait({call})
            raise
        finally:
            self._calls.pop(key, None)
        if call.cancelled():
            raise _Cancelled
        return call.result()

    def _cancel(self, params: object) -> None:
        request_id = params.get("requestId") if isinstance(params, Mapping) else None
        call = self._calls.get(_key(request_id)) if isinstance(request_id, str | int) else None
        if call is not None:
            logger.debug("< %s: the client cancelled %s", self.name, str(request_id)[:16])
            call.cancel()

    async def _initialize(self, params: Mapping[str, Any]) -> dict[str, Any]:
        version = params.get("protocolVersion")
        if not isinstance(version, str) or not version:
            version = DEFAULT_PROTOCOL_VERSION
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": self.name, "version": self._version},
        }
        if self._instructions:
            result["instructions"] = self._instructions
        return result

    async def _ping(self, params: Mapping[str, Any]) -> dict[str, Any]:
        return {}

    async def _list(self, params: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "tools": [
                {"name": s.name, "description": s.description, "inputSchema": s.input_schema}
                for s in self._tools.specs
            ]
        }

    async def _call(self, params: Mapping[str, Any]) -> dict[str, Any]:
        name = params.get("name")
        if not isinstance(name, str) or not name:
            raise _InvalidParams("tools/call needs a tool name")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            raise _InvalidParams("tools/call arguments must be an object")
        meta = params.get("_meta")
        use_id = meta.get("claudecode/toolUseId") if isinstance(meta, Mapping) else None
        logger.debug("< %s tools/call %s (%s)", self.name, name[:60], str(use_id)[:16])
        result = await self._tools.call(name, arguments)
        logger.debug(
            "> %s %s: %d chars, error=%s", self.name, name[:60], len(result.text), result.is_error
        )
        return {"content": [{"type": "text", "text": result.text}], "isError": result.is_error}


class _InvalidParams(Exception):
    """The request's params are not what the method takes (``-32602``)."""


class _Cancelled(Exception):
    """The client cancelled the request (``notifications/cancelled``)."""


def _key(request_id: object) -> tuple[str, object]:
    """A request id as a key: ``1`` and ``"1"`` are different ids."""
    return (type(request_id).__name__, request_id)


def _safe_id(value: object) -> str | int | None:
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None


def _error(request_id: str | int | None, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
