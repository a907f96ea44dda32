"""The reader and the writer of one connected Claude Code process.

The session task (:mod:`.lifecycle`) runs both next to the control channel while the CLI is
connected, and treats the first to stop as the end of the connection:

- The **writer** (:func:`write_inputs`) takes inputs, in order, from
  :class:`~bridge.agents.claude.handoff.InputHandoff` and writes each as a user message whose
  ``uuid`` is :func:`~bridge.agents.claude.transcript.input_uuid` (uid), which Claude Code records
  in its transcript (the exactly-once record). ``AgentStateChanged(running)`` goes out *before*
  the write: the answer can come at once.
- The **reader** (:func:`read_messages`) turns SDK messages into agent events through
  :class:`~bridge.agents.claude.adapter.Adapter`. ``running`` when the main thread speaks while
  idle; ``idle`` when a result has answered every input written (``ResultMessage
  .user_message_uuids``: Claude Code may answer several queued inputs in one turn) and no tool
  call waits for the phone, emitted before the turn's ``stream_end`` entry. Each ``tool_use`` it
  emitted is reported to :class:`~bridge.agents.claude.permissions.ToolOrder`, which holds the
  call's permission card until then.
- **Mode changes Claude Code makes itself** (ExitPlanMode approved → ``default``, EnterPlanMode →
  ``plan``) show in its ``status`` / ``init`` frames and are reported as
  ``AgentOptionSet("mode", …)``, which the engine confirms to phones; a change the runner asked
  for itself is not (the runtime reports what ``set_option`` returned).

Both raise :class:`StreamFailed` when the CLI dies or its stream breaks; a message the reader
cannot handle is logged and skipped (one bad frame must not end the session).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from claude_agent_sdk import (
    AssistantMessage,
    ClaudeSDKClient,
    ResultMessage,
    SystemMessage,
    ToolUseBlock,
)

from bridge.engine.inputs import AgentEntry, AgentOptionSet
from bridge.protocol.enums import PERMISSION_MODES

from .process import crash_reason
from .runner_state import RunnerState, iso_timestamp

__all__ = ["StreamFailed", "read_messages", "write_inputs"]

logger = logging.getLogger(__name__)


class StreamFailed(Exception):
    """The CLI died or its stream broke; the text says how (exit code or type, no output)."""


async def read_messages(state: RunnerState, client: ClaudeSDKClient) -> None:
    """Turn the CLI's messages into agent events until its stream ends (cancel-safe).

    Raises:
        StreamFailed: the CLI exited or its stream failed.
    """
    stream: AsyncIterator[object] = client.receive_messages()
    while True:
        try:
            message = await anext(stream)
        except StopAsyncIteration:
            raise StreamFailed("Claude Code exited") from None
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise StreamFailed(crash_reason(exc)) from exc
        try:
            _on_message(state, message)
        except Exception:
            logger.exception("x Claude session %s: a message could not be handled", state.sid)


async def write_inputs(state: RunnerState, client: ClaudeSDKClient) -> None:
    """Write queued inputs to the CLI, in order, until cancelled.

    Cancel-safe: an input taken and not yet written counts as written, so a restart considers it
    (:meth:`~bridge.agents.claude.handoff.InputHandoff.requeue`).

    Raises:
        StreamFailed: the write failed (the CLI is gone).
    """
    while True:
        key, text = await state.inputs.take()
        message = {
            "type": "user",
            "message": {"role": "user", "content": text},
            "parent_tool_use_id": None,
            "session_id": "default",
            "uuid": key,
        }
        state.set_state("running")  # before the write: the answer can come at once
        try:
            await client.query(_one(message))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise StreamFailed(crash_reason(exc)) from exc


def _on_message(state: RunnerState, message: object) -> None:
    main_thread = isinstance(message, AssistantMessage) and not message.parent_tool_use_id
    if main_thread and state.state == "idle":
        state.set_state("running")
    entries = state.adapter.convert(message, iso_timestamp(state.clock()))
    if isinstance(message, ResultMessage):
        answered = list(message.user_message_uuids or [])
        if message.user_message_uuid and message.user_message_uuid not in answered:
            answered.append(message.user_message_uuid)
        state.inputs.answered(answered)
        state.turn_completed = True
        for entry in entries[:-1]:
            state.emit(AgentEntry(state.session_id, entry))
        if not state.inputs.waiting and not state.broker.pending:
            state.set_state("idle")
        entries = entries[-1:]  # the turn's stream_end comes after the state
    for entry in entries:
        state.emit(AgentEntry(state.session_id, entry))
    if isinstance(message, AssistantMessage):
        for block in message.content:
            if isinstance(block, ToolUseBlock):
                state.tool_order.seen(block.id)
    elif isinstance(message, SystemMessage):
        _mode_reported(state, message.data.get("permissionMode"))


def _mode_reported(state: RunnerState, mode: object) -> None:
    """A permission mode in a ``status`` / ``init`` frame: report changes the CLI made."""
    if not isinstance(mode, str) or mode == state.mode:
        return
    state.mode = mode
    if mode == state.expected_mode:
        state.expected_mode = None
        return  # our own change: the runtime reports what `set_option` returned
    if mode in PERMISSION_MODES:
        state.emit(AgentOptionSet(state.session_id, "mode", mode, mode))


async def _one(message: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    yield message
