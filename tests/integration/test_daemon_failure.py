"""One failure policy: a commit that fails stops the daemon; the restart runs the command once.

The failure is real, not a hook in the daemon: a SQLite trigger (added while the daemon is
stopped) aborts the transaction that writes the inbox row of one marked input. The engine has
then applied the command in memory but the store has not: the daemon must not go on like that.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time

from bridge.protocol import InputCommand
from tests.integration.test_daemon_sessions import create_session
from tests.support.daemon import DaemonProcess
from tests.support.phone import PhoneSimulator

POISON = "fail this commit, please"


async def wait_exit(daemon: DaemonProcess, timeout: float = 30.0) -> int:
    assert daemon.proc is not None
    deadline = time.monotonic() + timeout
    while daemon.proc.poll() is None:
        assert time.monotonic() < deadline, "the daemon kept running after the failed commit"
        await asyncio.sleep(0.05)
    return daemon.proc.returncode


async def test_a_failed_commit_stops_the_daemon_and_the_restart_runs_the_command_once(
    daemon: DaemonProcess, phone: PhoneSimulator
) -> None:
    session = await create_session(phone)
    assert await daemon.stop() == 0
    with sqlite3.connect(daemon.home / "bridge.db") as conn:
        conn.execute(
            "CREATE TRIGGER inject_failure BEFORE INSERT ON inbox "
            f"WHEN NEW.text = '{POISON}' BEGIN SELECT RAISE(ABORT, 'injected failure'); END"
        )
    await daemon.start()
    offset = daemon.log_size()

    mark = phone.mark()
    await phone.send(InputCommand(sessionId=session, text=POISON, inputId="in-poison"))
    assert await wait_exit(daemon) == 1
    log = daemon.log_since(offset)
    assert "the engine loop stopped" in log and "injected failure" in log
    assert "input dropped" not in log  # the old policy: log and go on, memory ahead of store
    assert phone.count("input-ack", after=mark) == 0
    assert daemon.executions() == {}
    with sqlite3.connect(daemon.home / "bridge.db") as conn:
        assert conn.execute("SELECT COUNT(*) FROM inbox").fetchone() == (0,)
        conn.execute("DROP TRIGGER inject_failure")

    await daemon.start()  # systemd's restart: the relay replays the unprocessed command
    ack = await phone.wait_for("input-ack", after=mark, timeout=30)
    assert ack.message.inputId == "in-poison"
    await phone.wait_for("output", lambda m: m.entry.content == f"echo: {POISON}", after=mark)
    await asyncio.sleep(1.0)  # anything duplicated would have arrived by now
    assert phone.count("input-ack", after=mark) == 1
    assert list(daemon.executions().values()) == [1]
    user_lines = [
        entry for entry in daemon.transcript(session).values() if f'"content":"{POISON}"' in entry
    ]
    assert len(user_lines) == 1
