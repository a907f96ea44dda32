"""Delivery guarantees through a real relay: bug A and B, fragments, sync, bad and replayed input."""

from __future__ import annotations

import asyncio
import sqlite3
import time

from bridge.protocol import CreateSessionCommand, InputCommand, RefreshSessionsCommand
from tests.integration.conftest import pair_phone
from tests.integration.test_daemon_sessions import create_session
from tests.support.daemon import DaemonProcess
from tests.support.phone import PhoneSimulator
from tests.support.relay import LoopbackRelay


async def test_bug_a_responses_wait_for_an_offline_phone(
    daemon: DaemonProcess, relay: LoopbackRelay
) -> None:
    watcher = await pair_phone(daemon, relay.url, "watcher")
    worker = await pair_phone(daemon, relay.url, "worker")
    try:
        session = await create_session(worker)
        await watcher.go_offline()
        mark = worker.mark()
        for n in range(3):
            await worker.send(InputCommand(sessionId=session, text=f"t{n}", inputId=f"in-{n}"))
        await worker.wait_for_count("input-ack", 3, after=mark)
        offline_mark = watcher.mark()
        await watcher.go_online()  # 4516 since = lastStoredSeen - 60; 30515 no since
        acks = await watcher.wait_for_count("input-ack", 3, after=offline_mark)
        assert sorted(a.message.inputId for a in acks) == ["in-0", "in-1", "in-2"]
        await watcher.wait_for("sessions", after=offline_mark)
        assert watcher.machine.online
    finally:
        await watcher.close()
        await worker.close()


async def test_bug_b_clean_shutdown_keeps_sessions_offline(
    daemon: DaemonProcess, phone: PhoneSimulator
) -> None:
    session = await create_session(phone)
    mark = phone.mark()
    assert await daemon.stop() == 0
    goodbye = await phone.wait_for("sessions", lambda m: m.machineOffline is True, after=mark)
    assert [(s.id, s.state) for s in goodbye.message.sessions] == [(session, "offline")]
    assert session in phone.sessions and not phone.machine.online

    mark = phone.mark()
    await daemon.start()
    back = await phone.wait_for("sessions", lambda m: not m.machineOffline, after=mark, timeout=30)
    assert [s.id for s in back.message.sessions] == [session]
    mark = phone.mark()
    await phone.send(InputCommand(sessionId=session, text="after restart", inputId="in-r"))
    await phone.wait_for("input-ack", after=mark, timeout=30)
    await phone.wait_for("output", lambda m: m.entry.content == "echo: after restart", after=mark)


async def test_a_200kb_entry_arrives_in_fragments(phone: PhoneSimulator) -> None:
    session = await create_session(phone)
    mark = phone.mark()
    await phone.send(InputCommand(sessionId=session, text="big 200000"))
    big = await phone.wait_for("output", lambda m: len(m.entry.content) == 200000, after=mark)
    assert big.fragments >= 5
    assert phone.violations == [] and phone.invalid == []


async def test_sync_of_5000_entries_with_lost_acks(
    daemon: DaemonProcess, relay: LoopbackRelay, phone: PhoneSimulator
) -> None:
    session = await create_session(phone)
    mark = phone.mark()
    await phone.send(InputCommand(sessionId=session, text="lines 5000"))
    await phone.wait_for(
        "output", lambda m: m.entry.metadata == {"stream_end": True}, after=mark, timeout=120
    )
    fresh = PhoneSimulator(
        relays=[relay.url],
        keypair=phone.keypair,
        bridge=phone.bridge_pubkey,
        ack_drop_rate=0.2,
        seed=7,
    )
    async with fresh:
        result = await fresh.sync(session, timeout=120)
        assert result is not None and result.complete, result
        assert len(fresh.acks_dropped) > 0
        stored = daemon.transcript(session)
        got = fresh.transcript(session)
        assert sorted(got) == sorted(stored) and len(stored) >= 5002
        assert fresh.conflicts == [] and fresh.violations == []


async def test_replayed_duplicated_stale_and_foreign_events_do_nothing(
    daemon: DaemonProcess, relay: LoopbackRelay, phone: PhoneSimulator
) -> None:
    session = await create_session(phone)
    mark = phone.mark()
    event = await phone.send(InputCommand(sessionId=session, text="once", inputId="in-once"))
    await phone.wait_for("input-ack", after=mark)
    for _ in range(3):  # replays of the very same event
        await phone.publish_event(event)
    await phone.send_raw("this is not json", created_at=int(time.time()))
    await phone.send_raw('{"type":"teleport"}', created_at=int(time.time()))
    await phone.send_raw("not even encrypted", created_at=int(time.time()), encrypted=False)
    async with PhoneSimulator(relays=[relay.url], bridge=phone.bridge_pubkey) as stranger:
        await stranger.send(InputCommand(sessionId=session, text="intruder", inputId="in-x"))
        await stranger.send(CreateSessionCommand())
    await phone.send(RefreshSessionsCommand())
    await phone.wait_for("sessions", after=mark)
    await phone.quiesce(idle=1.5)
    assert phone.count("input-ack", lambda m: m.inputId == "in-once", after=mark) == 1
    texts = [
        e.content for e in phone.transcript(session).values() if e.metadata == {"role": "user"}
    ]
    assert texts == ["once"]
    assert sum(daemon.executions().values()) == 1
    assert daemon.running
    status = await daemon.call("status")
    assert len(status["sessions"]) == 1


async def test_commands_that_aged_out_during_an_outage_are_answered_expired(
    daemon: DaemonProcess, phone: PhoneSimulator
) -> None:
    session = await create_session(phone)
    assert await daemon.stop() == 0
    # The bridge was down for a long time: its cursor lies 20 minutes back.
    with sqlite3.connect(daemon.home / "bridge.db") as conn:
        conn.execute(
            "UPDATE kv SET value = ? WHERE key = 'ingest.lastSeen'", (str(int(time.time()) - 1200),)
        )
    now = int(time.time())
    mark = phone.mark()
    await phone.send(
        InputCommand(sessionId=session, text="old", inputId="in-old"), created_at=now - 400
    )
    await phone.send(
        InputCommand(sessionId=session, text="fresh", inputId="in-new"), created_at=now - 30
    )
    await daemon.start()
    expired = await phone.wait_for("input-failed", after=mark, timeout=30)
    assert expired.message.inputId == "in-old" and expired.message.reason == "expired"
    await phone.wait_for("input-ack", lambda m: m.inputId == "in-new", after=mark, timeout=30)
    await phone.quiesce(idle=1.0)
    users = [
        e.content for e in phone.transcript(session).values() if e.metadata == {"role": "user"}
    ]
    assert "old" not in users
    assert [t for t in users if t == "fresh"] == ["fresh"]


async def test_relay_restart_mid_stream_loses_nothing(
    relay_factory: object, tmp_path: object, workspace: object
) -> None:
    relay = await relay_factory(lmdb_dir=tmp_path / "lmdb", proxied=True)  # type: ignore[operator]
    async with DaemonProcess(tmp_path / "home", [relay.url], workspace) as daemon:  # type: ignore[operator]
        phone = await pair_phone(daemon, relay.url)
        try:
            session = await create_session(phone)
            mark = phone.mark()
            for n in range(20):
                await phone.send(InputCommand(sessionId=session, text=f"m{n}", inputId=f"in-{n}"))
                if n == 9:
                    await relay.restart()
                    await asyncio.sleep(0.5)
            await phone.wait_for_count("input-ack", 20, after=mark, timeout=60)
            await phone.quiesce(idle=1.0)
            assert phone.count("input-ack", after=mark) == 20
            result = await phone.sync(session, timeout=60)
            assert result is not None and result.complete
            assert sorted(phone.transcript(session)) == sorted(daemon.transcript(session))
            assert set(daemon.executions().values()) == {1} and len(daemon.executions()) == 20
        finally:
            await phone.close()


async def test_kill_9_during_500_inputs_runs_each_exactly_once(
    relay_factory: object, tmp_path: object, workspace: object
) -> None:
    relay = await relay_factory(lmdb_dir=tmp_path / "lmdb", proxied=True)  # type: ignore[operator]
    daemon = DaemonProcess(tmp_path / "home", [relay.url], workspace)  # type: ignore[operator]
    await daemon.start()
    phone = await pair_phone(daemon, relay.url)
    try:
        session = await create_session(phone)
        mark = phone.mark()
        total = 500
        for n in range(total):
            await phone.send(InputCommand(sessionId=session, text=f"n{n}", inputId=f"in-{n}"))
            if n in (150, 330):  # kill -9 twice while the stream is flowing
                daemon.kill()
                await daemon.start()
        acks = await phone.wait_for_count("input-ack", total, after=mark, timeout=60)
        await phone.quiesce(idle=2.0)
        ids = [a.message.inputId for a in phone.messages("input-ack", after=mark)]
        assert sorted(ids) == sorted(f"in-{n}" for n in range(total))  # each acked exactly once
        assert len(acks) == total
        executions = daemon.executions()
        assert len(executions) == total and set(executions.values()) == {1}
        result = await phone.sync(session, timeout=120)
        assert result is not None and result.complete
        assert sorted(phone.transcript(session)) == sorted(daemon.transcript(session))
        assert phone.conflicts == [] and phone.violations == []
        users = [
            e.content for e in phone.transcript(session).values() if e.metadata == {"role": "user"}
        ]
        assert sorted(users) == sorted(f"n{n}" for n in range(total))
    finally:
        await phone.close()
        daemon.kill()
