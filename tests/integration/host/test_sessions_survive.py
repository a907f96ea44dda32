"""Sessions outlive the daemon: a phone, a real relay, the daemon as a process, its session hosts.

The scripted agent runs in a session host as the real one does, so these are the guarantees of
the seam itself: ``kill -9`` of the daemon mid-turn costs no output (the replay is gap-free and
seq-for-seq what the store holds), a card pending at the kill is answered afterwards and the call
runs once, and a host that dies is replaced with the phone told which input was interrupted.
"""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

from bridge.protocol import InputCommand, PermissionResCommand
from tests.integration.conftest import pair_phone
from tests.integration.test_daemon_sessions import create_session
from tests.support.daemon import DaemonProcess
from tests.support.phone import PhoneSimulator
from tests.support.relay import LoopbackRelay


def is_card(message: Any) -> bool:
    metadata = message.entry.metadata or {}
    return bool(metadata.get("special") == "permission_request")


def replies(phone: PhoneSimulator, session: str, prefix: str) -> list[str]:
    return [e.content for e in phone.transcript(session).values() if e.content.startswith(prefix)]


async def test_kill_9_mid_turn_loses_no_output_and_runs_nothing_twice(
    daemon: DaemonProcess, phone: PhoneSimulator, relay: LoopbackRelay
) -> None:
    session = await create_session(phone)
    mark = phone.mark()
    await phone.send(InputCommand(sessionId=session, text="lines 3000", inputId="in-1"))
    await phone.wait_for("output", lambda m: m.entry.content.startswith("line 1 of"), after=mark)
    hosts = daemon.host_pids()
    daemon.kill()  # the agent goes on writing into its journal
    await asyncio.sleep(0.5)
    assert daemon.host_pids() == hosts  # the host outlived the daemon
    await daemon.start()
    await phone.wait_for(
        "output", lambda m: m.entry.content == "line 3000 of 3000", after=mark, timeout=60
    )
    result = await phone.sync(session, timeout=120)
    assert result is not None and result.complete
    lines = replies(phone, session, "line ")
    assert lines == [f"line {n} of 3000" for n in range(1, 3001)]  # in order, each once
    assert sorted(phone.transcript(session)) == sorted(daemon.transcript(session))
    assert daemon.executions() == {daemon.executions().popitem()[0]: 1}
    assert phone.conflicts == [] and phone.violations == []


async def test_a_card_pending_at_a_kill_is_answered_afterwards_and_the_call_runs_once(
    daemon: DaemonProcess, phone: PhoneSimulator
) -> None:
    session = await create_session(phone)
    mark = phone.mark()
    await phone.send(
        InputCommand(sessionId=session, text='ask Bash {"command": "make build"}', inputId="in-1")
    )
    card = await phone.wait_for("output", is_card, after=mark, timeout=30)
    request_id = (card.message.entry.metadata or {})["tool_use_id"]
    daemon.kill()
    await daemon.start()
    mark = phone.mark()
    await phone.send(PermissionResCommand(sessionId=session, requestId=request_id, allow=True))
    await phone.wait_for("output", lambda m: m.entry.content == "allowed Bash", after=mark)
    await phone.quiesce(idle=1.0)
    result = await phone.sync(session, timeout=60)
    assert result is not None and result.complete
    cards = [e for e in phone.transcript(session).values() if e.metadata and is_card_entry(e)]
    assert len(cards) == 1  # re-presented in memory, not written twice
    assert replies(phone, session, "allowed") == ["allowed Bash"]


def is_card_entry(entry: Any) -> bool:
    return bool((entry.metadata or {}).get("special") == "permission_request")


async def test_an_answer_decided_just_before_a_kill_still_reaches_the_agent(
    daemon: DaemonProcess, phone: PhoneSimulator
) -> None:
    session = await create_session(phone)
    mark = phone.mark()
    await phone.send(InputCommand(sessionId=session, text='ask Bash {"command": "make x"}'))
    card = await phone.wait_for("output", is_card, after=mark, timeout=30)
    request_id = (card.message.entry.metadata or {})["tool_use_id"]
    daemon.kill()  # the daemon is gone: the answer waits on the relay
    mark = phone.mark()
    await phone.send(PermissionResCommand(sessionId=session, requestId=request_id, allow=False))
    await daemon.start()
    await phone.wait_for(
        "output", lambda m: m.entry.content.startswith("denied Bash"), after=mark, timeout=30
    )
    await phone.quiesce(idle=1.0)
    assert len(replies(phone, session, "denied Bash")) == 1


async def test_a_host_that_dies_mid_turn_is_replaced_and_the_phone_told_what_was_cut(
    daemon: DaemonProcess, phone: PhoneSimulator
) -> None:
    session = await create_session(phone)
    mark = phone.mark()
    await phone.send(InputCommand(sessionId=session, text="slow 30", inputId="in-slow"))
    await phone.wait_for(
        "sessions", lambda m: any(s.state == "running" for s in m.sessions), after=mark
    )
    [host] = daemon.host_pids()
    os.kill(host, signal.SIGKILL)
    note = await phone.wait_for(
        "output",
        lambda m: (m.entry.metadata or {}).get("special") == "session_restart",
        after=mark,
        timeout=30,
    )
    metadata = note.message.entry.metadata or {}
    assert metadata["interrupted"] == ["in-slow"]
    assert "slow 30" in note.message.entry.content and "restarting (1 of 2)" in (
        note.message.entry.content
    )
    mark = phone.mark()
    await phone.send(InputCommand(sessionId=session, text="after", inputId="in-2"))
    await phone.wait_for("output", lambda m: m.entry.content == "echo: after", after=mark)
    assert daemon.executions()  # the interrupted input is not run again
    assert [pid for pid in daemon.host_pids() if pid != host]


async def test_daemon_and_host_both_killed_resume_the_session(
    daemon: DaemonProcess, relay: LoopbackRelay
) -> None:
    phone = await pair_phone(daemon, relay.url)
    try:
        session = await create_session(phone)
        mark = phone.mark()
        await phone.send(InputCommand(sessionId=session, text="one", inputId="in-1"))
        await phone.wait_for("output", lambda m: m.entry.content == "echo: one", after=mark)
        daemon.kill()
        daemon.kill_hosts()
        await daemon.start()
        mark = phone.mark()
        await phone.send(InputCommand(sessionId=session, text="two", inputId="in-2"))
        await phone.wait_for("output", lambda m: m.entry.content == "echo: two", after=mark)
        notes = [
            e
            for e in phone.transcript(session).values()
            if (e.metadata or {}).get("special") == "session_restart"
        ]
        assert len(notes) == 1 and "interrupted" not in (notes[0].metadata or {})
        assert set(daemon.executions().values()) == {1}
    finally:
        await phone.close()
