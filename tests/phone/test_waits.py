"""The received log's queries and bounded waits, without a relay."""

from __future__ import annotations

import asyncio

import pytest

from bridge.protocol.messages import InputAckMessage, SessionsMessage
from tests.phone.builders import make_heartbeat
from tests.support.phone_state import Received
from tests.support.phone_waits import MessageLog, matches

ACK = InputAckMessage(sessionId="s", inputId="i1")


def add(log: MessageLog, message: InputAckMessage | SessionsMessage) -> None:
    index = len(log.received)
    log.received.append(
        Received(message, f"{index:064x}", (f"{index:064x}",), 4516, 1, "ws://r", index)
    )
    log.notify()


def test_selectors() -> None:
    assert matches(None, ACK)
    assert matches("input-ack", ACK)
    assert matches(InputAckMessage, ACK)
    assert matches(("sessions", InputAckMessage), ACK)
    assert not matches(SessionsMessage, ACK)
    assert not matches(("sessions",), ACK)


async def test_wait_for_finds_a_message_already_there_and_respects_after() -> None:
    log = MessageLog()
    add(log, ACK)
    mark = log.mark()

    assert (await log.wait_for(InputAckMessage)).message == ACK
    waiting = asyncio.create_task(log.wait_for("input-ack", after=mark))
    await asyncio.sleep(0)
    assert not waiting.done()
    second = InputAckMessage(sessionId="s", inputId="i2")
    add(log, second)

    assert (await waiting).message == second
    assert (await waiting).index == 1


async def test_counting_and_predicates() -> None:
    log = MessageLog()
    for input_id in ("a", "b", "a"):
        add(log, InputAckMessage(sessionId="s", inputId=input_id))
    add(log, make_heartbeat())

    assert log.count(InputAckMessage, lambda m: m.inputId == "a") == 2
    assert log.count() == 4
    assert log.count("sessions", after=3) == 1
    found = await log.wait_for_count(InputAckMessage, 2, lambda m: m.inputId == "a")
    assert [item.index for item in found] == [0, 2]
    assert [m.message.inputId for m in log.messages(InputAckMessage, after=1)] == ["b", "a"]


async def test_a_wait_that_times_out_says_what_arrived() -> None:
    log = MessageLog()
    add(log, make_heartbeat())

    with pytest.raises(TimeoutError) as caught:
        await log.wait_for_count(InputAckMessage, 2, lambda m: True, timeout=0.05)

    assert str(caught.value) == (
        "timed out after 0.05s waiting for 2 x InputAckMessage matching the predicate; "
        "received {'sessions': 1}"
    )


async def test_wait_until_returns_the_value_of_the_condition() -> None:
    log = MessageLog()
    box: list[int] = []

    async def later() -> None:
        await asyncio.sleep(0)
        box.append(7)
        log.notify()

    task = asyncio.create_task(later())
    assert await log.wait_until(lambda: box[0] if box else None, timeout=5) == 7
    await task


async def test_quiesce_returns_when_nothing_changes_and_fails_when_busy() -> None:
    log = MessageLog()
    await log.quiesce(0.01, timeout=1)

    async def chatter() -> None:
        while True:
            log.notify()
            await asyncio.sleep(0.001)

    task = asyncio.create_task(chatter())
    with pytest.raises(TimeoutError, match=r"still receiving after 0\.1s"):
        await log.quiesce(0.05, timeout=0.1)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
