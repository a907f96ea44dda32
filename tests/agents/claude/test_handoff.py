"""Inputs on their way in: taken in order, answered by uuid, the open ones, the taken ones."""

from __future__ import annotations

import asyncio
import uuid

from bridge.agents.claude import InputHandoff, input_uuid


async def test_inputs_are_taken_in_order_and_answered() -> None:
    handoff = InputHandoff()
    a, b, c = (str(uuid.uuid4()) for _ in range(3))
    for uid in (a, b, c):
        handoff.put(uid, f"text {uid[:4]}")
    taken = [await handoff.take() for _ in range(3)]
    assert [uid for uid, _, _ in taken] == [a, b, c]
    assert handoff.waiting and handoff.unanswered == (a, b, c)
    assert handoff.answered([c, b, "not-ours"]) == (c, b)  # one result answered two inputs
    assert list(handoff.unanswered) == [a]
    assert handoff.answered([]) == (a,)  # a result that lists nothing answers the oldest
    assert not handoff.waiting and handoff.answered([]) == ()
    assert handoff.taken == {a, b, c}


async def test_a_non_uuid_uid_travels_as_its_uuid5() -> None:
    handoff = InputHandoff()
    handoff.put("inbox-row-1", "hi")
    taken = await handoff.take()
    assert taken == ("inbox-row-1", input_uuid("inbox-row-1"), "hi")
    key = taken[1]
    assert handoff.answered([key]) == ("inbox-row-1",)


async def test_take_waits_for_input() -> None:
    handoff = InputHandoff()
    waiter = asyncio.ensure_future(handoff.take())
    await asyncio.sleep(0)
    assert not waiter.done()
    handoff.put("u", "late")
    assert (await waiter)[2] == "late"


async def test_an_input_whose_write_failed_was_not_taken() -> None:
    handoff = InputHandoff()
    handoff.put("a", "x")
    _, key, _ = await handoff.take()
    handoff.unwritten(key)
    assert handoff.unanswered == () and handoff.taken == frozenset()
