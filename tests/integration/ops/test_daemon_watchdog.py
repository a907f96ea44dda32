"""A real daemon pings the systemd watchdog, and stops pinging while it is frozen."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

from tests.ops.support import RunningDaemon, clean_env, drain, wait_for


def test_daemon_pings_and_stops_pinging_when_frozen(
    notify_socket: tuple[str, socket.socket], tmp_path: Path
) -> None:
    path, sock = notify_socket
    env = clean_env(NOTIFY_SOCKET=path, WATCHDOG_USEC="1000000")
    daemon = RunningDaemon(tmp_path / "home", env=env)
    try:
        seen = wait_for(sock, "WATCHDOG=1", 3)
        assert any("READY=1" in message for message in seen)
        assert any(m.startswith("STATUS=relays ") for m in seen), seen
        os.kill(daemon.proc.pid, signal.SIGSTOP)
        try:
            time.sleep(0.2)  # a datagram sent just before the stop is in the buffer by now
            drain(sock)
            time.sleep(2.0)  # four intervals
            assert drain(sock) == []
        finally:
            os.kill(daemon.proc.pid, signal.SIGCONT)
        wait_for(sock, "WATCHDOG=1", 2)
    finally:
        code, log = daemon.stop()
    assert code == 0, log
    assert "systemd watchdog: WATCHDOG=1 every 0.5 s" in log
    assert any("STOPPING=1" in message for message in drain(sock))
