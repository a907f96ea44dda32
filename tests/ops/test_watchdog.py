"""The systemd watchdog: WATCHDOG=1 pings from the event loop, and what keeps or stops them.

A fake ``NOTIFY_SOCKET`` (a unix datagram socket the test reads) stands in for systemd. Blocking
the loop for real (a callback that sleeps on it; a daemon frozen with SIGSTOP) is in
tests/integration/ops/test_watchdog.py and test_daemon_watchdog.py.
"""

from __future__ import annotations

import asyncio
import socket

import pytest

from bridge.runtime.edges.sdnotify import Notifier, run_watchdog, watchdog_interval
from tests.ops.support import wait_for

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
