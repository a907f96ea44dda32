"""A phone drives the daemon through a real relay: pairing, sessions, input, close, folders."""

from __future__ import annotations

from bridge.protocol import (
    CloseSessionCommand,
    CreateFolderCommand,
    CreateSessionCommand,
    InputCommand,
    InterruptCommand,
    RefreshSessionsCommand,
)
from tests.support.daemon import DaemonProcess
from tests.support.phone import PhoneSimulator


async def create_session(phone: PhoneSimulator, **fields: object) -> str:
    mark = phone.mark()
    await phone.send(CreateSessionCommand(**fields))
    pending = await phone.wait_for("session-pending", after=mark)
    ready = await phone.wait_for("session-ready", after=mark, timeout=30)
    assert ready.message.pendingId == pending.message.pendingId
    return str(ready.message.session.id)


async def test_pair_create_input_echo_close(daemon: DaemonProcess, phone: PhoneSimulator) -> None:
    session = await create_session(phone)
    mark = phone.mark()
    await phone.send(InputCommand(sessionId=session, text="hello bridge", inputId="in-1"))
    ack = await phone.wait_for("input-ack", after=mark)
    assert ack.message.inputId == "in-1"
    echo = await phone.wait_for(
        "output", lambda m: m.entry.content == "echo: hello bridge", after=mark
    )
    transcript = phone.transcript(session)
    assert transcript[1].content == "hello bridge" and transcript[1].metadata == {"role": "user"}
    assert echo.message.seq > 1
    await phone.wait_for("sessions", lambda m: any(s.title == "hello bridge" for s in m.sessions))

    mark = phone.mark()
    await phone.send(CloseSessionCommand(sessionId=session))
    closed = await phone.wait_for("close-session-ack", after=mark)
    assert closed.message.success
    beat = await phone.wait_for(
        "sessions", lambda m: session in (m.removedSessions or []), after=mark
    )
    assert session not in [s.id for s in beat.message.sessions]
    assert phone.violations == [] and phone.errors == [] and phone.conflicts == []


async def test_input_to_unknown_session_fails(phone: PhoneSimulator) -> None:
    mark = phone.mark()
    await phone.send(InputCommand(sessionId="nope", text="x", inputId="in-9"))
    failed = await phone.wait_for("input-failed", after=mark)
    assert failed.message.reason == "no-session" and failed.message.inputId == "in-9"


async def test_refresh_interrupt_and_folders(
    daemon: DaemonProcess, phone: PhoneSimulator, workspace: object
) -> None:
    session = await create_session(phone)
    mark = phone.mark()
    await phone.send(InputCommand(sessionId=session, text="slow 30"))
    await phone.wait_for(
        "sessions", lambda m: any(s.state == "running" for s in m.sessions), after=mark
    )
    await phone.send(InterruptCommand(sessionId=session))
    await phone.wait_for("output", lambda m: m.entry.content == "Interrupted", after=mark)

    mark = phone.mark()
    await phone.send(CreateFolderCommand(path="new-app", requestId="r1"))
    ack = await phone.wait_for("folder-ack", after=mark)
    assert ack.message.success and ack.message.path == "new-app"
    await phone.wait_for(
        "sessions", lambda m: "new-app" in (m.folders or []), after=mark, timeout=20
    )

    mark = phone.mark()
    await phone.send(RefreshSessionsCommand())
    beat = await phone.wait_for("sessions", after=mark)
    assert beat.message.protocolVersion == 10 and session in [s.id for s in beat.message.sessions]


async def test_create_session_failures(daemon: DaemonProcess, phone: PhoneSimulator) -> None:
    for cwd, words in (
        ("/etc", "outside"),
        ("proj\x00x", "NUL byte"),
        ("a" * 5000, "too long"),
        (str(daemon.home), "hidden from agents"),
        (f"{daemon.home}/made-by-a-phone", "hidden from agents"),
    ):
        mark = phone.mark()
        await phone.send(CreateSessionCommand(cwd=cwd, createCwd=True))
        pending = await phone.wait_for("session-pending", after=mark)
        failed = await phone.wait_for("session-failed", after=mark, timeout=30)
        assert failed.message.pendingId == pending.message.pendingId
        assert words in failed.message.reason, (cwd[:20], failed.message.reason)
    assert not (daemon.home / "made-by-a-phone").exists()
