"""The systemd watchdog: WATCHDOG=1 pings from the event loop stop when the loop is blocked.

A fake ``NOTIFY_SOCKET`` (a unix datagram socket the test reads) stands in for systemd. Two
ways to block the loop: in-process, a callback that sleeps *on* the loop (so the pings cannot
come from some helper thread); and a real daemon process frozen with SIGSTOP. No test measures
speed: each waits generously for pings to arrive, and asserts that none arrived while the loop
could not run.
"""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from bridge.runtime.edges.sdnotify import Notifier, run_watchdog, watchdog_interval
from tests.ops.support import drain, wait_for

INTERVALS = [
    ({}, None),
    ({"WATCHDOG_USEC": ""}, None),
    ({"WATCHDOG_USEC": "0"}, None),
    ({"WATCHDOG_USEC": "soon"}, None),
    ({"WATCHDOG_USEC": "60000000"}, 30.0),
    ({"WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "4242"}, 0.5),
    ({"WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "4243"}, None),
    ({"WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "x"}, None),
]


@pytest.mark.parametrize(("env", "expected"), INTERVALS, ids=[str(e) for e, _ in INTERVALS])
def test_watchdog_interval_is_half_the_timeout_for_this_pid(
    env: dict[str, str], expected: float | None
) -> None:
    assert watchdog_interval(env, 4242) == expected


async def test_a_blocked_loop_sends_no_ping(notify_socket: tuple[str, socket.socket]) -> None:
    path, sock = notify_socket
    notifier = Notifier({"NOTIFY_SOCKET": path})
    ticks: list[int] = []
    task = asyncio.create_task(run_watchdog(notifier, 0.05, on_tick=lambda: ticks.append(1)))
    try:
        await asyncio.to_thread(wait_for, sock, "WATCHDOG=1", 3)
        during: list[str] = []

        def block() -> None:
            drain(sock)  # whatever was sent before the loop stopped
            time.sleep(1.0)  # 20 intervals with the loop blocked
            during.extend(drain(sock))

        done = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(lambda: (block(), done.set_result(None)))
        await done
        assert during == []
        await asyncio.to_thread(wait_for, sock, "WATCHDOG=1", 2)  # and they resume
        assert ticks
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_a_failing_status_tick_does_not_stop_the_pings(
    notify_socket: tuple[str, socket.socket],
) -> None:
    path, sock = notify_socket

    def broken() -> None:
        raise RuntimeError("status failed")

    task = asyncio.create_task(
        run_watchdog(Notifier({"NOTIFY_SOCKET": path}), 0.05, on_tick=broken)
    )
    try:
        await asyncio.to_thread(wait_for, sock, "WATCHDOG=1", 3)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
