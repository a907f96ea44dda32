"""The systemd watchdog: no WATCHDOG=1 ping while the event loop is blocked.

A fake ``NOTIFY_SOCKET`` (a unix datagram socket the test reads) stands in for systemd; a
callback sleeps *on* the loop for a second (so the pings cannot come from some helper thread).
No test measures speed: each waits generously for pings to arrive, and asserts that none arrived
while the loop could not run.
"""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from bridge.runtime.edges.sdnotify import Notifier, run_watchdog
from tests.ops.support import drain, wait_for


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
