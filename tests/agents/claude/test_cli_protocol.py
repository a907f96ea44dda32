"""The control protocol client without a process: lines in by hand, lines out recorded."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import orjson
import pytest

from bridge.agents.claude import ControlError, ControlProtocol, ControlTimeout, ProtocolClosed


class Writer:
    """The CLI's stdin: every line written, decoded."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.broken = False
        self.written = asyncio.Event()

    def write(self, data: bytes) -> None:
        if self.broken:
            raise BrokenPipeError
        assert data.endswith(b"\n") and data.count(b"\n") == 1
        self.lines.append(orjson.loads(data))
        self.written.set()

    async def drain(self) -> None:
        await asyncio.sleep(0)

    async def next(self, count: int) -> list[dict[str, Any]]:
        async with asyncio.timeout(5):
            while len(self.lines) < count:
                self.written.clear()
                await self.written.wait()
        return self.lines


class Peer:
    """A protocol plus what it handed on."""

    def __init__(self, handlers: Mapping[str, Any] | None = None) -> None:
        self.writer = Writer()
        self.frames: list[dict[str, Any]] = []
        self.failures: list[tuple[str, Exception]] = []
        self.protocol = ControlProtocol(
            self.writer,
            handlers or {},
            self.frames.append,
            lambda subtype, exc: self.failures.append((subtype, exc)),
            label="test",
        )

    def feed(self, frame: dict[str, Any]) -> None:
        self.protocol.feed(orjson.dumps(frame) + b"\n")

    def answer(self, request_id: str, body: dict[str, Any] | None = None, error: str = "") -> None:
        response: dict[str, Any] = {"request_id": request_id}
        if error:
            response.update(subtype="error", error=error)
        else:
            response.update(subtype="success", response=body or {})
        self.feed({"type": "control_response", "response": response})


async def test_requests_are_matched_to_their_answers_by_id() -> None:
    peer = Peer()
    first = asyncio.ensure_future(peer.protocol.request({"subtype": "get_settings"}, 5))
    second = asyncio.ensure_future(peer.protocol.request({"subtype": "set_model", "model": "m"}, 5))
    sent = await peer.writer.next(2)
    assert [line["type"] for line in sent] == ["control_request", "control_request"]
    assert sent[1]["request"] == {"subtype": "set_model", "model": "m"}
    ids = [line["request_id"] for line in sent]
    assert ids[0] != ids[1] and all(i.startswith("req_") for i in ids)
    peer.answer(ids[1], {"model": "m"})
    peer.answer(ids[0], {"applied": {}})
    assert await first == {"applied": {}}
    assert await second == {"model": "m"}
    peer.answer(ids[0], {"late": True})  # nobody waits any more: dropped


async def test_an_error_answer_raises_with_the_cli_message() -> None:
    peer = Peer()
    call = asyncio.ensure_future(peer.protocol.request({"subtype": "set_model"}, 5))
    [sent] = await peer.writer.next(1)
    peer.answer(sent["request_id"], error="Unknown model")
    with pytest.raises(ControlError, match="Unknown model"):
        await call


async def test_a_request_times_out_and_its_late_answer_is_dropped() -> None:
    peer = Peer()
    with pytest.raises(ControlTimeout, match="did not answer interrupt in time"):
        await peer.protocol.request({"subtype": "interrupt"}, 0.05)
    peer.answer(peer.writer.lines[0]["request_id"], {})
    assert peer.frames == []


async def test_close_fails_pending_requests_and_refuses_new_ones() -> None:
    peer = Peer()
    call = asyncio.ensure_future(peer.protocol.request({"subtype": "initialize"}, 5))
    await peer.writer.next(1)
    await peer.protocol.close()
    with pytest.raises(ProtocolClosed):
        await call
    with pytest.raises(ProtocolClosed):
        await peer.protocol.send({"type": "user"})


async def test_a_broken_pipe_is_a_closed_protocol() -> None:
    peer = Peer()
    peer.writer.broken = True
    with pytest.raises(ProtocolClosed):
        await peer.protocol.request({"subtype": "initialize"}, 5)


def _request(request_id: str, subtype: str, **fields: Any) -> dict[str, Any]:
    return {
        "type": "control_request",
        "request_id": request_id,
        "request": {"subtype": subtype, **fields},
    }


async def test_cli_requests_go_to_their_handler_and_are_answered() -> None:
    async def can_use_tool(request_id: str, request: Mapping[str, Any]) -> dict[str, Any]:
        return {"behavior": "allow", "updatedInput": request["input"], "id": request_id}

    peer = Peer({"can_use_tool": can_use_tool})
    peer.feed(_request("cli-1", "can_use_tool", input={"a": 1}))
    [answer] = await peer.writer.next(1)
    assert answer == {
        "type": "control_response",
        "response": {
            "subtype": "success",
            "request_id": "cli-1",
            "response": {"behavior": "allow", "updatedInput": {"a": 1}, "id": "cli-1"},
        },
    }


async def test_unknown_requests_and_refusals_get_error_answers() -> None:
    async def refuse(request_id: str, request: Mapping[str, Any]) -> dict[str, Any]:
        raise ControlError("No hook callback found for ID: hook_9")

    peer = Peer({"hook_callback": refuse})
    peer.feed(_request("cli-1", "mcp_message"))
    peer.feed(_request("cli-2", "hook_callback"))
    answers = {a["response"]["request_id"]: a["response"] for a in await peer.writer.next(2)}
    assert answers["cli-1"] == {
        "subtype": "error",
        "request_id": "cli-1",
        "error": "Unsupported control request subtype: mcp_message",
    }
    assert answers["cli-2"]["error"] == "No hook callback found for ID: hook_9"
    assert peer.failures == []


async def test_a_failing_handler_is_not_answered_and_is_reported() -> None:
    async def broken(request_id: str, request: Mapping[str, Any]) -> dict[str, Any]:
        raise RuntimeError("the journal is gone")

    peer = Peer({"can_use_tool": broken})
    peer.feed(_request("cli-1", "can_use_tool"))
    for _ in range(5):
        await asyncio.sleep(0)
    assert peer.writer.lines == []  # an error answer would be a refusal nobody gave
    assert [(s, str(e)) for s, e in peer.failures] == [("can_use_tool", "the journal is gone")]


async def test_a_handler_waits_without_limit_and_a_cancel_request_withdraws_it() -> None:
    gate = asyncio.Event()
    cancelled: list[str] = []

    async def slow(request_id: str, request: Mapping[str, Any]) -> dict[str, Any]:
        try:
            await gate.wait()
        except asyncio.CancelledError:
            cancelled.append(request_id)
            raise
        return {"behavior": "allow"}

    peer = Peer({"can_use_tool": slow})
    peer.feed(_request("cli-1", "can_use_tool"))
    peer.feed(_request("cli-2", "can_use_tool"))
    await asyncio.sleep(0.3)  # far longer than any tick: nothing times out here
    assert peer.protocol.handling == 2
    peer.feed({"type": "control_cancel_request", "request_id": "cli-1"})
    peer.feed({"type": "control_cancel_request", "request_id": "unknown"})
    await asyncio.sleep(0)
    gate.set()
    [answer] = await peer.writer.next(1)
    await asyncio.sleep(0.01)
    assert cancelled == ["cli-1"]
    assert answer["response"]["request_id"] == "cli-2"
    assert len(peer.writer.lines) == 1  # nothing for the cancelled one
    assert peer.protocol.handling == 0


async def test_close_cancels_handlers_without_answering() -> None:
    async def forever(request_id: str, request: Mapping[str, Any]) -> dict[str, Any]:
        await asyncio.Event().wait()
        return {}

    peer = Peer({"hook_callback": forever})
    peer.feed(_request("cli-1", "hook_callback"))
    await asyncio.sleep(0)
    assert await peer.protocol.cancel_handlers() == 1
    await peer.protocol.close()
    assert peer.writer.lines == [] and peer.protocol.handling == 0


async def test_frames_in_order_host_only_state_dropped_junk_skipped() -> None:
    peer = Peer()
    for line in [
        b'{"type":"system","subtype":"init"}\n',
        b"[SandboxDebug] not json\n",
        b'{"type":"assistant", broken\n',
        b"[1, 2]\n",
        b'{"type":"system","subtype":"session_state_changed","state":"idle","sdk_host_only":true}\n',
        b'{"type":"system","subtype":"session_state_changed","state":"idle"}\n',
        b"\n",
        b'{"type":"result"}\n',
    ]:
        peer.protocol.feed(line)
    assert [f.get("subtype", f["type"]) for f in peer.frames] == [
        "init",
        "session_state_changed",
        "result",
    ]


async def test_read_skips_an_overlong_line_and_keeps_a_torn_last_one() -> None:
    peer = Peer()
    reader = asyncio.StreamReader(limit=64)
    reader.feed_data(b'{"type":"a"}\n' + b'{"type":"long","x":"' + b"y" * 500 + b'"}\n')
    reader.feed_data(b'{"type":"b"}\n{"type":"c"}')
    reader.feed_eof()
    await peer.protocol.read(reader)
    assert [f["type"] for f in peer.frames] == ["a", "b", "c"]


async def test_a_frame_handler_that_raises_ends_the_read() -> None:
    writer = Writer()

    def explode(frame: dict[str, Any]) -> None:
        raise OSError("journal")

    protocol = ControlProtocol(writer, {}, explode, lambda *_: None, label="t")
    reader = asyncio.StreamReader()
    reader.feed_data(b'{"type":"result"}\n')
    with pytest.raises(OSError, match="journal"):
        await protocol.read(reader)
