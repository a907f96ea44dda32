"""The ``editor_tools`` option: parsing, the CLI's flags, and the ``mcp_message`` handler."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bridge.agents.claude.cli_process import CliOptions, build_argv
from bridge.agents.claude.cli_protocol import ControlError
from bridge.agents.claude.editor_tools import (
    SERVER_NAME,
    editor_handlers,
    editor_tools,
    mcp_config,
    mcp_message_handler,
    with_editor_tools,
    without_model_report,
)
from bridge.agents.claude.mcp_server import METHOD_NOT_FOUND
from bridge.agents.workspace_tools import WorkspaceTools
from bridge.host.events import Failed

from .conftest import FakeCli, Session


def test_no_option_no_tools(tmp_path: Path) -> None:
    assert editor_tools({"check_tools": True}, {}) is None
    options = CliOptions("default")
    assert with_editor_tools(options, None) is options
    assert editor_handlers(None) == {}


def test_the_option_builds_the_server(tmp_path: Path) -> None:
    env = {"PATH": "/bin", "ANTHROPIC_API_KEY": "sk-secret", "CLAUDE_CONFIG_DIR": "/c"}
    editor = editor_tools({"editor_tools": {"root": str(tmp_path), "allowed": ["read_file"]}}, env)
    assert editor is not None
    assert editor.server.name == SERVER_NAME == "desiide"
    tools = editor.server._tools
    assert isinstance(tools, WorkspaceTools)
    assert tools.allowed == frozenset({"read_file"})
    assert tools.workspace.root == tmp_path.resolve()
    assert tools._env == {"PATH": "/bin", "CLAUDE_CONFIG_DIR": "/c"}  # no vendor secrets
    assert set(editor_handlers(editor)) == {"mcp_message"}


def test_allowed_absent_is_every_tool(tmp_path: Path) -> None:
    editor = editor_tools({"editor_tools": {"root": str(tmp_path)}}, {})
    assert editor is not None
    tools = editor.server._tools
    assert isinstance(tools, WorkspaceTools)
    assert len(tools.allowed) == 5


BAD_OPTIONS: list[tuple[Any, str]] = [
    ("yes", "must be an object"),
    ({}, "needs a root"),
    ({"root": ""}, "needs a root"),
    ({"root": "relative"}, "absolute path"),
    ({"root": "/no/such/dir"}, "not a directory"),
    ({"root": "ROOT", "allowed": "read_file"}, "list of tool names"),
    ({"root": "ROOT", "allowed": [1]}, "list of tool names"),
    ({"root": "ROOT", "allowed": ["Bash"]}, "unknown workspace tool"),
]


@pytest.mark.parametrize(("option", "said"), BAD_OPTIONS, ids=[s for _, s in BAD_OPTIONS])
def test_a_bad_option_is_refused(tmp_path: Path, option: Any, said: str) -> None:
    if isinstance(option, dict) and option.get("root") == "ROOT":
        option = {**option, "root": str(tmp_path)}
    with pytest.raises(ValueError, match=said):
        editor_tools({"editor_tools": option}, {})


def test_the_cli_flags(tmp_path: Path) -> None:
    editor = editor_tools({"editor_tools": {"root": str(tmp_path)}}, {})
    options = with_editor_tools(CliOptions("default", session_id="s"), editor)
    argv = build_argv("claude", options)
    assert argv[argv.index("--tools") + 1] == ""
    config = argv[argv.index("--mcp-config") + 1]
    assert json.loads(config) == {"mcpServers": {"desiide": {"type": "sdk", "name": "desiide"}}}
    assert config == mcp_config()
    assert argv[argv.index("--mcp-config") + 2] == "--strict-mcp-config"
    assert argv.index("--tools") < argv.index("--permission-prompt-tool")
    assert argv[-2:] == ["--input-format", "stream-json"]
    plain = build_argv("claude", CliOptions("default", session_id="s"))
    assert "--tools" not in plain and "--mcp-config" not in plain


async def test_mcp_message_wraps_the_answer(tmp_path: Path) -> None:
    editor = editor_tools({"editor_tools": {"root": str(tmp_path)}}, {})
    assert editor is not None
    handle = mcp_message_handler(editor.server)
    ping = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
    answer = await handle(
        "req_1", {"subtype": "mcp_message", "server_name": "desiide", "message": ping}
    )
    assert answer == {"mcp_response": {"jsonrpc": "2.0", "id": 3, "result": {}}}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    acked = await handle("req_2", {"server_name": "desiide", "message": note})
    assert acked == {"mcp_response": {"jsonrpc": "2.0", "result": {}}}  # as the SDK acknowledges


async def test_mcp_message_for_another_server(tmp_path: Path) -> None:
    editor = editor_tools({"editor_tools": {"root": str(tmp_path)}}, {})
    assert editor is not None
    handle = mcp_message_handler(editor.server)
    message = {"jsonrpc": "2.0", "id": 9, "method": "tools/list"}
    answer = await handle("req_1", {"server_name": "other", "message": message})
    assert answer == {
        "mcp_response": {
            "jsonrpc": "2.0",
            "id": 9,
            "error": {"code": METHOD_NOT_FOUND, "message": "Server 'other' not found"},
        }
    }


@pytest.mark.parametrize(
    "request_body",
    [{"server_name": "desiide"}, {"message": {"id": 1}}, {"server_name": "", "message": {}}],
)
async def test_mcp_message_without_a_server_or_message(
    tmp_path: Path, request_body: dict[str, Any]
) -> None:
    editor = editor_tools({"editor_tools": {"root": str(tmp_path)}}, {})
    assert editor is not None
    with pytest.raises(ControlError, match="Missing server_name or message"):
        await mcp_message_handler(editor.server)("req_1", request_body)


async def test_a_tools_call_reaches_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello")
    editor = editor_tools({"editor_tools": {"root": str(tmp_path)}}, {})
    assert editor is not None
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "read_file", "arguments": {"path": "a.txt"}},
    }
    answer = await mcp_message_handler(editor.server)(
        "r", {"server_name": "desiide", "message": call}
    )
    assert answer["mcp_response"]["result"] == {
        "content": [{"type": "text", "text": "hello"}],
        "isError": False,
    }


def test_a_report_the_model_wrote_is_dropped() -> None:
    forged = {"summary": "s", "files": [], "report": [{"path": "a", "status": "applied"}]}
    assert without_model_report("mcp__desiide__propose_edit", forged) == {
        "summary": "s",
        "files": [],
    }
    assert without_model_report("mcp__other__propose_edit", forged) is forged
    clean = {"summary": "s", "files": []}
    assert without_model_report("mcp__desiide__propose_edit", clean) is clean


# -- in the driver (on the fake CLI) ---------------------------------------------------------------


async def test_the_driver_fails_the_start_on_a_bad_option(
    start_session: Any, fake_cli: FakeCli, tmp_path: Path
) -> None:
    option = {"root": str(tmp_path / "missing")}
    session: Session = await start_session(options={"editor_tools": option})
    [failed] = session.services.of(Failed)
    assert failed.reason.startswith("the editor's tools cannot be set up: the workspace root")
    assert await session.run == failed.reason
    assert fake_cli.log("start") == []  # no CLI was started
