"""The runner's helpers: input hand-off, control channel, card ordering, process, options."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest

from bridge.agents.base import RunnerError
from bridge.agents.claude import (
    ControlChannel,
    InputHandoff,
    ToolOrder,
    change_effort,
    change_model,
    crash_reason,
    input_uuid,
    kill_child,
    session_options,
)

# -- InputHandoff -----------------------------------------------------------------------------


async def test_handoff_takes_in_order_and_tracks_answers() -> None:
    handoff = InputHandoff()
    a, b, c = (str(uuid.uuid4()) for _ in range(3))
    for uid in (a, b, c):
        handoff.put(uid, f"text {uid[:4]}")
    taken = [await handoff.take() for _ in range(3)]
    assert [key for key, _ in taken] == [a, b, c]
    assert handoff.waiting and handoff.unanswered == [a, b, c]
    handoff.answered([b, c])  # one result answered two queued inputs
    assert handoff.unanswered == [a]
    handoff.answered([])  # a result that lists nothing answers the oldest
    assert not handoff.waiting and handoff.unanswered == []


async def test_handoff_requeues_what_the_transcript_missed_first_and_in_order() -> None:
    handoff = InputHandoff()
    for uid in ("row-1", "row-2", "row-3", "row-4"):
        handoff.put(uid, uid)
    for _ in range(3):
        await handoff.take()
    assert handoff.requeue({input_uuid("row-1")}) == 2
    assert not handoff.waiting
    again = [await handoff.take() for _ in range(3)]
    assert [text for _, text in again] == ["row-2", "row-3", "row-4"]
    assert again[0][0] == input_uuid("row-2")  # a non-UUID uid travels as its uuid5


async def test_handoff_take_waits_for_input() -> None:
    handoff = InputHandoff()
    waiter = asyncio.create_task(handoff.take())
    await asyncio.sleep(0)
    assert not waiter.done()
    handoff.put(str(uuid.UUID(int=7)), "late")
    assert (await waiter)[1] == "late"


# -- ControlChannel ---------------------------------------------------------------------------


class _Client:
    def __init__(self) -> None:
        self.calls: list[Any] = []
        self.gate = asyncio.Event()

    async def ok(self) -> str:
        return "done"

    async def slow(self) -> None:
        await self.gate.wait()

    async def bad(self) -> None:
        raise ValueError("refused by the CLI")


async def test_channel_runs_operations_on_the_served_client() -> None:
    channel: Any = ControlChannel()  # driven with a fake client
    client = _Client()
    server = asyncio.create_task(channel.serve(client))
    try:
        assert await channel.call(lambda c: c.ok(), timeout=5) == "done"
        with pytest.raises(ValueError, match="refused"):
            await channel.call(lambda c: c.bad(), timeout=5)
        with pytest.raises(RunnerError, match="did not answer in time"):
            await channel.call(lambda c: c.slow(), timeout=0.05)
        pending = asyncio.create_task(channel.call(lambda c: c.slow(), timeout=5))
        await asyncio.sleep(0.05)
    finally:
        server.cancel()
        await asyncio.gather(server, return_exceptions=True)
    with pytest.raises(RunnerError, match="restarted before answering"):
        await pending


async def test_channel_operations_wait_for_a_client_or_fail_when_the_session_ends() -> None:
    channel: Any = ControlChannel()
    queued = asyncio.create_task(channel.call(lambda c: c.ok(), timeout=5))
    await asyncio.sleep(0)
    channel.fail_pending("the Claude Code session has ended")
    with pytest.raises(RunnerError, match="has ended"):
        await queued


# -- ToolOrder --------------------------------------------------------------------------------


async def test_tool_order() -> None:
    order = ToolOrder()
    order.seen("toolu_a")
    assert await order.wait("toolu_a", timeout=0.01)
    waiting = asyncio.create_task(order.wait("toolu_b", timeout=5))
    await asyncio.sleep(0)
    order.seen("toolu_b")
    assert await waiting
    assert not await order.wait("toolu_never", timeout=0.01)


# -- process ----------------------------------------------------------------------------------


class _ExitError(Exception):
    exit_code = -9


def test_crash_reason_never_quotes_output() -> None:
    assert crash_reason(_ExitError("stderr: secret-ish output")) == "exit code -9"
    assert crash_reason(ConnectionResetError("x")) == "ConnectionResetError"


async def test_kill_child_only_kills_children() -> None:
    kill_child(None)
    kill_child(1)  # init is not our child: untouched, no error
    child = await asyncio.create_subprocess_exec("sleep", "30")
    kill_child(child.pid)
    assert await asyncio.wait_for(child.wait(), 10) == -signal.SIGKILL


async def _allow(*_: Any) -> Any:
    raise AssertionError("not called")


def test_session_options(tmp_path: Path) -> None:
    os.environ.setdefault("HOME", "/root")
    fresh = session_options(
        cwd=tmp_path,
        cli_path=None,
        env={"PATH": "/bin"},
        mode="plan",
        model=None,
        effort="auto",
        can_use_tool=_allow,
        stderr=print,
        resume=None,
        session_id="11111111-2222-3333-4444-555555555555",
    )
    assert fresh.session_id == "11111111-2222-3333-4444-555555555555" and fresh.resume is None
    assert fresh.effort is None and fresh.permission_mode == "plan"
    assert fresh.system_prompt == {"type": "preset", "preset": "claude_code"}
    assert fresh.setting_sources == ["user", "project"]
    assert fresh.env["HOME"] == ""  # not in the desired environment: masked for the CLI
    resumed = session_options(
        cwd=tmp_path,
        cli_path="/opt/claude",
        env={},
        mode="default",
        model="sonnet",
        effort="high",
        can_use_tool=_allow,
        stderr=print,
        resume="abc",
        session_id="ignored",
    )
    assert (resumed.resume, resumed.session_id, resumed.effort, resumed.model) == (
        "abc",
        None,
        "high",
        "sonnet",
    )
    assert str(resumed.cli_path) == "/opt/claude"


# -- options ----------------------------------------------------------------------------------


class _Query:
    def __init__(self, applied_effort: str) -> None:
        self.sent: list[dict[str, Any]] = []
        self.applied_effort = applied_effort

    async def _send_control_request(self, request: dict[str, Any]) -> dict[str, Any]:
        self.sent.append(request)
        if request["subtype"] == "get_settings":
            return {"applied": {"effort": self.applied_effort}}
        return {}


class _OptionsClient:
    def __init__(self, applied_effort: str = "high") -> None:
        self._query = _Query(applied_effort)
        self.models: list[str | None] = []

    async def set_model(self, model: str | None) -> None:
        self.models.append(model)


def _call(client: _OptionsClient) -> Any:
    async def call(op: Any) -> Any:
        return await op(client)

    return call


@pytest.mark.parametrize(
    ("value", "applied", "expected", "flag"),
    [
        ("high", "high", "high", "high"),
        ("xhigh", "high", "high", "xhigh"),  # clamped by the CLI for this model
        ("auto", "medium", "auto", None),
        ("max", "garbage", None, "max"),
    ],
)
async def test_change_effort(value: str, applied: str, expected: str | None, flag: Any) -> None:
    client = _OptionsClient(applied)
    assert await change_effort(_call(client), value) == expected
    assert client._query.sent[0] == {
        "subtype": "apply_flag_settings",
        "settings": {"effortLevel": flag},
    }


async def test_change_effort_refuses_unknown_levels_without_asking() -> None:
    client = _OptionsClient()
    assert await change_effort(_call(client), "extreme") is None
    assert client._query.sent == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [(" sonnet ", "sonnet"), ("", None), ("x" * 201, None), ("bad\nname", None)],
)
async def test_change_model(value: str, expected: str | None) -> None:
    client = _OptionsClient()
    assert await change_model(_call(client), value) == expected
    assert client.models == ([expected] if expected else [])
