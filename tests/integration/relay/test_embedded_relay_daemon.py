"""The daemon on its embedded relay, as ``make run`` starts it: what a first-run user gets.

The two things the previous embedded relay (rust-nostr's LocalRelay) got wrong for this user,
through the real daemon and phone simulators: a phone back online misses none of the replies
stored while it was away (LocalRelay answered 500, not the newest), and ``kill -9`` of the
daemon — which takes its relay with it — loses no acknowledged command and runs none twice.
"""

from __future__ import annotations

import socket
from pathlib import Path

from bridge.protocol import InputCommand
from tests.integration.conftest import pair_phone
from tests.integration.test_daemon_sessions import create_session
from tests.support.daemon import DaemonProcess


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def embedded_daemon(tmp_path: Path, workspace: Path) -> tuple[DaemonProcess, str]:
    port = free_port()
    daemon = DaemonProcess(
        tmp_path / "home", [], workspace, extra_args=["--embedded-relay", f"127.0.0.1:{port}"]
    )
    return daemon, f"ws://127.0.0.1:{port}"


async def test_a_phone_back_online_gets_all_700_replies(tmp_path: Path, workspace: Path) -> None:
    daemon, url = embedded_daemon(tmp_path, workspace)
    async with daemon:
        watcher = await pair_phone(daemon, url, "watcher")
        worker = await pair_phone(daemon, url, "worker")
        try:
            session = await create_session(worker)
            await watcher.go_offline()
            mark = worker.mark()
            total = 700
            for n in range(total):
                await worker.send(InputCommand(sessionId=session, text=f"t{n}", inputId=f"in-{n}"))
            await worker.wait_for_count("input-ack", total, after=mark, timeout=120)
            back = watcher.mark()
            await watcher.go_online()  # one REQ: 4516, authors + #p, since lastStoredSeen - 60
            acks = await watcher.wait_for_count("input-ack", total, after=back, timeout=60)
            assert sorted(a.message.inputId for a in acks) == sorted(
                f"in-{n}" for n in range(total)
            )
        finally:
            await watcher.close()
            await worker.close()


async def test_kill_9_of_the_daemon_and_its_relay_runs_each_input_once(
    tmp_path: Path, workspace: Path
) -> None:
    daemon, url = embedded_daemon(tmp_path, workspace)
    await daemon.start()
    phone = await pair_phone(daemon, url)
    try:
        session = await create_session(phone)
        mark = phone.mark()
        total = 300
        for n in range(total):
            await phone.send(InputCommand(sessionId=session, text=f"n{n}", inputId=f"in-{n}"))
            if n in (90, 200):  # the relay goes down with the daemon: the phone re-sends
                daemon.kill()
                await daemon.start()
        await phone.wait_for_count("input-ack", total, after=mark, timeout=90)
        await phone.quiesce(idle=2.0)
        ids = [a.message.inputId for a in phone.messages("input-ack", after=mark)]
        assert sorted(ids) == sorted(f"in-{n}" for n in range(total))  # each acked once
        executions = daemon.executions()
        assert len(executions) == total and set(executions.values()) == {1}
        assert phone.violations == []
    finally:
        await phone.close()
        daemon.kill()
