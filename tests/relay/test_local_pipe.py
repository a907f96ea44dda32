"""The in-process link's pipe (:class:`bridge.relay.local.FramePipe`): order, wake-ups, closing,
cancel-safety and flow control, with the writer on another thread as the embedded relay's is."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator

import pytest
from websockets.exceptions import ConnectionClosedError, ConnectionClosedOK
from websockets.frames import Close, CloseCode

from bridge.relay.local import FramePipe, LocalLink


@pytest.fixture
def other_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop running on a thread of its own (the relay's, in the daemon)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield loop
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


def on_thread(work: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=work)
    thread.start()
    return thread


async def test_frames_from_other_threads_arrive_in_order_and_wake_the_reader() -> None:
    pipe = FramePipe(asyncio.get_running_loop())
    sent = [f"frame {n}" for n in range(20_000)]

    def writer() -> None:  # batches of varied size, some while the reader waits, some not
        for start in range(0, len(sent), 7):
            assert pipe.put(sent[start : start + 7])

    thread = on_thread(writer)
    got = [await asyncio.wait_for(pipe.get(), 5) for _ in sent]
    thread.join()
    assert got == sent
    assert pipe.unread_bytes == 0


async def test_a_reader_waiting_on_an_empty_pipe_is_woken_by_a_put() -> None:
    pipe = FramePipe(asyncio.get_running_loop())
    reading = asyncio.ensure_future(pipe.get())
    await asyncio.sleep(0.01)
    assert not reading.done()
    on_thread(lambda: pipe.put(["late"])).join()
    assert await asyncio.wait_for(reading, 5) == "late"


async def test_a_cancelled_get_loses_no_frame() -> None:
    pipe = FramePipe(asyncio.get_running_loop())
    for _ in range(50):
        waiting = asyncio.ensure_future(pipe.get())
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
    pipe.put(["kept"])
    assert await asyncio.wait_for(pipe.get(), 5) == "kept"


async def test_closing_lets_the_reader_take_what_was_queued_first() -> None:
    pipe = FramePipe(asyncio.get_running_loop())
    assert pipe.put(["a", "b"])
    pipe.close(Close(CloseCode.GOING_AWAY, "relay stopped"))
    assert not pipe.put(["after the close"])
    assert [await pipe.get(), await pipe.get()] == ["a", "b"]
    with pytest.raises(ConnectionClosedError) as closed:
        await pipe.get()
    assert closed.value.rcvd is not None and closed.value.rcvd.reason == "relay stopped"


async def test_a_close_from_another_thread_wakes_a_waiting_reader() -> None:
    pipe = FramePipe(asyncio.get_running_loop())
    reading = asyncio.ensure_future(pipe.get())
    await asyncio.sleep(0.01)
    on_thread(lambda: pipe.close(Close(CloseCode.NORMAL_CLOSURE, ""))).join()
    with pytest.raises(ConnectionClosedOK):
        await asyncio.wait_for(reading, 5)


async def test_room_waits_until_the_reader_has_taken_enough(
    other_loop: asyncio.AbstractEventLoop,
) -> None:
    """The writer (on the other loop) waits for room; the reader's takes give it."""
    pipe = FramePipe(asyncio.get_running_loop())
    pipe.put(["x" * 100] * 10)  # 1,000 bytes unread
    room = asyncio.run_coroutine_threadsafe(pipe.room(250), other_loop)
    await asyncio.sleep(0.02)
    assert not room.done()
    for _ in range(7):
        await pipe.get()
    await asyncio.sleep(0.02)
    assert not room.done()  # 300 bytes still unread
    await pipe.get()
    await asyncio.wait_for(asyncio.wrap_future(room), 5)
    assert pipe.unread_bytes == 200


async def test_room_returns_when_the_pipe_closes(other_loop: asyncio.AbstractEventLoop) -> None:
    pipe = FramePipe(asyncio.get_running_loop())
    pipe.put(["x" * 1000])
    room = asyncio.run_coroutine_threadsafe(pipe.room(10), other_loop)
    await asyncio.sleep(0.02)
    pipe.close(Close(CloseCode.GOING_AWAY, ""))
    await asyncio.wait_for(asyncio.wrap_future(room), 5)


async def test_the_channel_ends_like_a_websocket(other_loop: asyncio.AbstractEventLoop) -> None:
    link = LocalLink(other_loop, asyncio.get_running_loop())
    channel = link.channel
    await channel.send('["REQ","s",{}]')
    assert link.to_relay.unread_bytes == len('["REQ","s",{}]')
    link.to_client.put(['["EOSE","s"]'])
    assert await channel.recv() == '["EOSE","s"]'
    link.close(Close(CloseCode.GOING_AWAY, "relay stopped"))
    with pytest.raises(ConnectionClosedError):
        await channel.recv()
    with pytest.raises(ConnectionClosedError):
        await channel.send("[]")
    assert (channel.close_code, channel.close_reason) == (1001, "relay stopped")


async def test_aborting_the_channel_closes_both_directions(
    other_loop: asyncio.AbstractEventLoop,
) -> None:
    link = LocalLink(other_loop, asyncio.get_running_loop())
    link.channel.abort()
    assert link.closed and link.to_relay.closed and link.to_client.closed
    assert link.channel.close_code == CloseCode.ABNORMAL_CLOSURE
    with pytest.raises(ConnectionClosedError):
        await link.channel.recv()
