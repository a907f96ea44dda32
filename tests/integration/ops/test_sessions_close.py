"""Sessions outlive the daemon, and end on purpose: ``sessions close`` against the real daemon
(scripted agent, session hosts, a real relay and a paired phone), with and without a daemon, and
``run --keep-sessions``.

The CLI runs as a process, as a user runs it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from bridge.host.layout import HostInfo, host_alive, host_paths, read_info
from bridge.protocol import InputCommand
from tests.integration.conftest import pair_phone
from tests.integration.test_daemon_sessions import create_session
from tests.ops.support import arun_cli, clean_env
from tests.support.daemon import DaemonProcess
from tests.support.phone import PhoneSimulator
from tests.support.relay import LoopbackRelay


def live_host(home: Path, session_id: str) -> HostInfo:
    info = read_info(host_paths(home, session_id))
    assert info is not None and host_alive(info), "the session has no live host"
    return info


async def close_all(home: Path) -> tuple[int, str, str]:
    result = await arun_cli("sessions", "close", "--all", "--home", str(home), env=clean_env())
    return result.code, result.stdout, result.stderr


async def test_close_all_through_the_daemon(daemon: DaemonProcess, phone: PhoneSimulator) -> None:
    session = await create_session(phone)
    info = live_host(daemon.home, session)
    status = await daemon.call("status")
    assert status["hosts"] == {"running": 1}
    assert [(s["sessionId"], s["host"]) for s in status["sessions"]] == [
        (session, {"alive": True, "pid": info.pid})
    ]
    mark = phone.mark()
    code, out, err = await close_all(daemon.home)
    assert code == 0, err
    assert out == (
        "Closed 1 session(s) through the running daemon; their hosts have stopped and the "
        f"phones are told:\n  {session}\n"
    )
    assert not host_alive(info) and not host_paths(daemon.home, session).root.exists()
    ack = await phone.wait_for("close-session-ack", after=mark)
    assert ack.message.sessionId == session and ack.message.success
    beat = await phone.wait_for(
        "sessions", lambda m: session in (m.removedSessions or []), after=mark
    )
    assert session not in [s.id for s in beat.message.sessions]
    assert daemon.transcript(session) == {}
    assert phone.violations == [] and phone.errors == []


async def test_close_all_without_a_daemon_and_the_next_start_does_not_resume(
    relay: LoopbackRelay, tmp_path: Path, workspace: Path
) -> None:
    home = tmp_path / "home"
    async with DaemonProcess(home, [relay.url], workspace) as daemon:
        phone = await pair_phone(daemon, relay.url)
        try:
            session = await create_session(phone)
            info = live_host(home, session)
            daemon.kill()  # kill -9: the host goes on
            assert host_alive(info)
            code, out, err = await close_all(home)
            assert code == 0, err
            assert out.startswith(
                f"No codedeck-bridge runs for {home}: closed 1 session(s) in its store and "
                f"stopped 1 session host(s):\n  {session}\n"
            )
            assert not host_alive(info) and not host_paths(home, session).root.exists()

            mark = phone.mark()
            offset = daemon.log_size()
            await daemon.start()
            beat = await phone.wait_for(
                "sessions", lambda m: session in (m.removedSessions or []), after=mark
            )
            assert session not in [s.id for s in beat.message.sessions]
            assert await daemon.call("sessions.list") == []
            await asyncio.sleep(1.0)  # a resume would have spawned a host by now
            assert daemon.host_pids() == []
            assert session[:8] not in daemon.log_since(offset)
        finally:
            await phone.close()


async def test_run_keep_sessions_leaves_the_host_for_the_next_start(
    relay: LoopbackRelay, tmp_path: Path, workspace: Path
) -> None:
    home = tmp_path / "home"
    daemon = DaemonProcess(home, [relay.url], workspace, extra_args=["--keep-sessions"])
    async with daemon:
        phone = await pair_phone(daemon, relay.url)
        try:
            session = await create_session(phone)
            info = live_host(home, session)
            assert await daemon.stop() == 0  # SIGTERM, as Ctrl-C
            assert host_alive(info)

            daemon.extra_args = ["--close-sessions"]
            await daemon.start()
            mark = phone.mark()
            await phone.send(InputCommand(sessionId=session, text="still here", inputId="in-2"))
            await phone.wait_for(
                "output", lambda m: m.entry.content == "echo: still here", after=mark, timeout=30
            )
            assert live_host(home, session) == info  # adopted, not restarted

            assert await daemon.stop() == 0  # --close-sessions: the host goes with the daemon
            assert not host_alive(info)

            # ... but the session stays: the next start resumes it in a new host
            await daemon.start()
            mark = phone.mark()
            await phone.send(InputCommand(sessionId=session, text="resumed", inputId="in-3"))
            await phone.wait_for(
                "output", lambda m: m.entry.content == "echo: resumed", after=mark, timeout=30
            )
            assert live_host(home, session).pid != info.pid
            assert phone.violations == [] and phone.errors == []
        finally:
            await phone.close()
