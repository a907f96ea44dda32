"""The fake ACP agent does what its docstring says, driven by the SDK's client side."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import acp
from acp import schema

from tests.support.fake_acp_agent import fake_agent_command


class Client:
    """Records every update; answers permission asks with the option of kind `allow`."""

    def __init__(self, allow: str = "allow_once") -> None:
        self.allow = allow
        self.updates: list[Any] = []
        self.asked: list[list[str]] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> schema.RequestPermissionResponse:
        self.asked.append([option.kind for option in options])
        chosen = next(o.option_id for o in options if o.kind == self.allow)
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(outcome="selected", option_id=chosen)
        )

    def on_connect(self, conn: Any) -> None:
        return None


def texts(client: Client, kind: str) -> list[str]:
    return [
        u.content.text
        for u in client.updates
        if getattr(u, "session_update", None) == kind and hasattr(u.content, "text")
    ]


async def test_echo_permission_and_load_in_a_new_process(tmp_path: Path) -> None:
    env = {**os.environ}
    command = fake_agent_command("--state", str(tmp_path / "state"))
    client = Client()
    async with acp.spawn_agent_process(client, *command, env=env) as (conn, _):  # type: ignore[arg-type]
        init = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        assert init.agent_capabilities is not None and init.agent_capabilities.load_session
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        ask = await conn.prompt(
            session_id=session.session_id, prompt=[acp.text_block("permission ls")]
        )
        echo = await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("hi")])
    assert (ask.stop_reason, echo.stop_reason) == ("end_turn", "end_turn")
    assert client.asked == [["allow_once", "allow_always", "reject_once"]]
    progress = [u for u in client.updates if getattr(u, "session_update", "") == "tool_call_update"]
    assert progress[0].status == "completed" and progress[0].raw_output == {"output": "ran: ls"}
    assert "".join(texts(client, "agent_message_chunk")) == "echo: hi"

    again = Client()
    async with acp.spawn_agent_process(again, *command, env=env) as (conn, _):  # type: ignore[arg-type]
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        await conn.load_session(cwd=str(tmp_path), session_id=session.session_id, mcp_servers=[])
    assert texts(again, "user_message_chunk") == ["permission ls", "hi"]
    assert texts(again, "agent_message_chunk") == ["ran: ls", "echo: hi"]
