"""The recording ACP client (answers by option kind, holds asks) and the /proc descendant walk."""

from __future__ import annotations

import asyncio

import pytest
from acp import schema

from tests.support.acp_recorder import RecordingClient

OPTIONS = [
    schema.PermissionOption(option_id="proceed_once", name="Allow", kind="allow_once"),
    schema.PermissionOption(option_id="cancel", name="Reject", kind="reject_once"),
]
CALL = schema.ToolCallUpdate(tool_call_id="t1", title="ls", kind="execute", status="pending")


async def test_answers_by_kind_and_records_the_wire_shape() -> None:
    client = RecordingClient(choose="reject_once")
    response = await client.request_permission(session_id="s", tool_call=CALL, options=OPTIONS)
    assert response.outcome == schema.AllowedOutcome(outcome="selected", option_id="cancel")
    (ask,) = client.asks
    assert ask.tool_call == {
        "toolCallId": "t1",
        "title": "ls",
        "kind": "execute",
        "status": "pending",
    }
    assert ask.option("allow_once") == "proceed_once"
    with pytest.raises(LookupError):
        ask.option("allow_always")


async def test_a_held_ask_waits_for_the_test_and_can_be_cancelled() -> None:
    client = RecordingClient(choose=None)
    pending = asyncio.create_task(
        client.request_permission(session_id="s", tool_call=CALL, options=OPTIONS)
    )
    await client.wait_for(lambda: bool(client.asks), timeout=5)
    assert not pending.done()
    client.answer(client.asks[0], None)
    assert (await pending).outcome == schema.DeniedOutcome(outcome="cancelled")


async def test_updates_are_kept_as_wire_json() -> None:
    client = RecordingClient()
    chunk = schema.AgentMessageChunk(
        session_update="agent_message_chunk",
        content=schema.TextContentBlock(type="text", text="hi"),
        message_id="m1",
    )
    await client.session_update(session_id="s", update=chunk)
    assert client.of("agent_message_chunk") == [
        {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "hi"},
            "messageId": "m1",
        }
    ]
    assert client.text() == "hi"
