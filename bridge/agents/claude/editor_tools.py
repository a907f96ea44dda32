"""The Desiide tools in a Claude Code session: the ``editor_tools`` option, the CLI's flags, and
the ``mcp_message`` handler that serves the in-process MCP server ``desiide``.

A session started for an editor's task has ``options["editor_tools"] = {"root": <absolute
workspace root>, "allowed": [<tool>, ...]}`` (``allowed`` absent: all five). Then the agent works
*only* through the five Desiide tools (:mod:`bridge.agents.workspace_tools`), which the CLI calls
``mcp__desiide__<tool>``, served in this process by :class:`~.mcp_server.McpServer`.

What Claude Code 2.1.332 (the SDK 0.2.189's bundled CLI) does, measured against the tests' mock
API (the ``tools`` of its ``/v1/messages`` requests, its ``init`` frame, the control requests):

- ``--mcp-config '{"mcpServers":{"desiide":{"type":"sdk","name":"desiide"}}}'`` (the SDK's own form
  for an in-process server): the CLI sends ``mcp_message`` control requests (``server_name``,
  ``message``) and reads the JSON-RPC answer from ``{"mcp_response": …}``. A notification is
  acknowledged with ``{"jsonrpc":"2.0","result":{}}``, as the SDK does. A ``tools/call`` is waited
  for without a time limit of the CLI's (a call of minutes still completes), so ``run_command``'s
  own timeout rules.
- ``--tools ""`` turns every built-in tool off: the requests offer the five ``mcp__desiide__*``
  tools and the CLI's never-callable ``DeferredToolPlaceholder``, nothing else. The plan's
  ``--disallowedTools Bash,Edit,…`` was measured too and is worse: it leaves ``Workflow``,
  ``Skill``, ``Monitor``, ``Cron*``, ``EnterWorktree``, ``SendMessage``, ``ToolSearch``… and with
  ``ToolSearch`` present the CLI *defers* the MCP tools (the model sees none of them until it
  searches).
- ``--strict-mcp-config``: no MCP server of the user's or the project's configuration joins in
  (each would bring tools nobody reviewed).
- Every call of an MCP tool goes through the permission prompt (``can_use_tool``, with
  ``mcp_server: {"name": "desiide", "source": "sdk"}``) in the ``default``, ``acceptEdits`` and
  ``plan`` modes alike, and the ``PreToolUse`` hook sees it first (``check_tools``). The allow's
  ``updatedInput`` is what ``tools/call`` gets as ``arguments``: that is how ``propose_edit``
  receives the editor's ``report``. Two ways around the prompt were seen, and the gate's hook
  closes both: an allow rule in the user's settings (``permissions.allow``) or ``--allowedTools``
  skips the prompt, but a hook answer ``ask`` still forces it. The tools declare no
  ``readOnlyHint``: with one, ``plan`` mode sends the call to the CLI's auto-mode classifier
  instead of asking (measured: refused as "Auto mode is unavailable").
- A ``report`` the model put into a ``propose_edit`` call itself is dropped before the permission
  card is asked (:func:`without_model_report`): only the editor's answer carries one.

The tools run with the session's environment less the model vendors' variables
(:func:`~.environment.scrub_vendor_env`): a command the model runs gets no API key.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

import orjson

from bridge.agents.workspace_tools import WorkspaceTools, leftovers
from bridge.records import record
from bridge.sandbox import SandboxPolicy

from .cli_process import CliOptions, sdk_version
from .cli_protocol import ControlError, Handler
from .environment import scrub_vendor_env
from .mcp_server import METHOD_NOT_FOUND, McpServer

__all__ = [
    "EDITOR_TOOLS_OPTION",
    "INSTRUCTIONS",
    "PROPOSE_EDIT_TOOL",
    "SERVER_NAME",
    "EditorTools",
    "editor_handlers",
    "editor_tools",
    "mcp_config",
    "mcp_message_handler",
    "with_editor_tools",
    "without_model_report",
]

logger = logging.getLogger(__name__)

EDITOR_TOOLS_OPTION: Final = "editor_tools"
SERVER_NAME: Final = "desiide"
PROPOSE_EDIT_TOOL: Final = f"mcp__{SERVER_NAME}__propose_edit"
INSTRUCTIONS: Final = (
    "These are your only tools. Paths are relative to the workspace root. You never write files "
    "yourself: propose_edit sends the full new text to the user, who applies or rejects each file, "
    "and its result tells you which. The user may refuse any call; read the reason and adapt."
)


@record
class EditorTools:
    """The MCP server of one session's Desiide tools."""

    server: McpServer


def editor_tools(
    options: Mapping[str, Any], env: Mapping[str, str], sandbox: SandboxPolicy | None = None
) -> EditorTools | None:
    """The Desiide tools `options` ask for, or None (no ``editor_tools`` option).

    Args:
        options: the session's ``DriverSpec.options``.
        env: the session's environment (the tools get it less the vendors' variables).
        sandbox: the session's sandbox, where ``run_command`` runs (None: unconfined).

    Raises:
        ValueError: the option is malformed, names an unknown tool, or its root is not an
            existing absolute directory (the message says which).
    """
    raw = options.get(EDITOR_TOOLS_OPTION)
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ValueError("the editor_tools option must be an object {root, allowed}")
    root = raw.get("root")
    if not isinstance(root, str) or not root:
        raise ValueError("the editor_tools option needs a root (the workspace's absolute path)")
    allowed = raw.get("allowed")
    if allowed is not None and (
        not isinstance(allowed, list) or not all(isinstance(name, str) for name in allowed)
    ):
        raise ValueError("the editor_tools option's allowed must be a list of tool names")
    state_dir = raw.get("state_dir")
    commands: Path | None = None
    if isinstance(state_dir, str) and state_dir:
        commands = Path(state_dir) / leftovers.COMMANDS_DIR
        # A host killed before this one may have left commands running: end them first.
        leftovers.reap(commands)
    tools = WorkspaceTools(root, scrub_vendor_env(env), allowed, commands, sandbox)
    return EditorTools(McpServer(SERVER_NAME, sdk_version(), tools, INSTRUCTIONS))


def without_model_report(tool_name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    """A ``propose_edit`` call's input without a ``report`` the model wrote itself.

    Only the editor's answer may carry one (the allow's ``updated_input``). Stripped before the
    permission card is asked, an allow that gives no input of its own runs the call without a
    report, which the tool answers with ``not_reviewed``: a model cannot forge "applied".
    """
    if tool_name == PROPOSE_EDIT_TOOL and "report" in tool_input:
        return {name: value for name, value in tool_input.items() if name != "report"}
    return tool_input


def mcp_config() -> str:
    """The ``--mcp-config`` value naming the in-process server (the SDK's form)."""
    servers = {"mcpServers": {SERVER_NAME: {"type": "sdk", "name": SERVER_NAME}}}
    return orjson.dumps(servers).decode()


def with_editor_tools(options: CliOptions, editor: EditorTools | None) -> CliOptions:
    """`options` with the flags of the editor's tools (see the module docstring), if any."""
    if editor is None:
        return options
    return replace(options, tools="", mcp_config=mcp_config())


def editor_handlers(editor: EditorTools | None) -> dict[str, Handler]:
    """The control-request handlers the editor's tools add (``mcp_message``), if any."""
    return {} if editor is None else {"mcp_message": mcp_message_handler(editor.server)}


def mcp_message_handler(server: McpServer) -> Handler:
    """The ``mcp_message`` handler of `server` (cancel-safe: a cancelled call cancels the tool).

    A message for another server gets a JSON-RPC ``-32601`` (the CLI fails that one request); a
    request without a message is a control error, as the SDK answers it.
    """

    async def handle(cli_request_id: str, request: Mapping[str, Any]) -> dict[str, Any]:
        name = request.get("server_name")
        message = request.get("message")
        if not isinstance(name, str) or not name or not isinstance(message, Mapping):
            raise ControlError("Missing server_name or message for MCP request")
        if name != server.name:
            logger.warning("! an MCP message for an unknown server %r", name[:40])
            message_id = message.get("id")
            return {
                "mcp_response": {
                    "jsonrpc": "2.0",
                    "id": message_id if isinstance(message_id, str | int) else None,
                    "error": {"code": METHOD_NOT_FOUND, "message": f"Server '{name}' not found"},
                }
            }
        answer = await server.handle(message)
        return {"mcp_response": answer if answer is not None else {"jsonrpc": "2.0", "result": {}}}

    return handle
