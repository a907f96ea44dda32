"""A phone runs real Claude Code sessions through the bridge (no internet: a local mock API)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from bridge.protocol import (
    CreateSessionCommand,
    InputCommand,
    InterruptCommand,
    KeypressCommand,
    ModeCommand,
    PermissionResCommand,
)
from tests.support.daemon import DaemonProcess
from tests.support.phone import PhoneSimulator

WAIT = 60.0


async def start_session(phone: PhoneSimulator, *, mode: str | None = "default") -> str:
    mark = phone.mark()
    await phone.send(CreateSessionCommand())
    ready = await phone.wait_for("session-ready", after=mark, timeout=WAIT)
    session = str(ready.message.session.id)
    if mode is not None:
        await phone.send(ModeCommand(sessionId=session, mode=mode))  # type: ignore[arg-type]
        await phone.wait_for("mode-confirmed", lambda m: m.mode == mode, after=mark, timeout=WAIT)
    return session


def stream_end(message: object) -> bool:
    entry = getattr(message, "entry", None)
    return entry is not None and (entry.metadata or {}).get("stream_end") is True


async def say(phone: PhoneSimulator, session: str, text: str, input_id: str | None = None) -> int:
    mark = phone.mark()
    await phone.send(InputCommand(sessionId=session, text=text, inputId=input_id))
    return mark


async def card(phone: PhoneSimulator, after: int, special: str = "permission_request") -> Any:
    """The next card of that kind on the phone (a `Received` output)."""
    return await phone.wait_for(
        "output",
        lambda m: (m.entry.metadata or {}).get("special") == special,
        after=after,
        timeout=WAIT,
    )


async def answer(
    phone: PhoneSimulator, session: str, received: Any, allow: bool, modifier: str | None = None
) -> None:
    request = received.message.entry.metadata["tool_use_id"]
    await phone.send(
        PermissionResCommand(sessionId=session, requestId=request, allow=allow, modifier=modifier)
    )  # type: ignore[arg-type]


def entries(phone: PhoneSimulator, session: str, after_seq: int = 0) -> list[object]:
    return [e for seq, e in sorted(phone.transcript(session).items()) if seq > after_seq]


async def test_text_and_thinking_reach_the_phone(
    claude_daemon: DaemonProcess, phone: PhoneSimulator
) -> None:
    session = await start_session(phone)
    mark = await say(phone, session, "[[think: pondering]] [[reply: hello from claude]]", "in-1")
    await phone.wait_for("input-ack", after=mark, timeout=WAIT)
    text = await phone.wait_for(
        "output", lambda m: m.entry.content == "hello from claude", after=mark, timeout=WAIT
    )
    assert text.message.entry.metadata["role"] == "assistant"
    thinking = await phone.wait_for("output", lambda m: m.entry.entryType == "thinking", after=mark)
    assert thinking.message.entry.content == "pondering"
    await phone.wait_for("output", stream_end, after=mark, timeout=WAIT)
    assert phone.violations == [] and phone.conflicts == []


async def test_write_card_allow_deny_always(
    claude_daemon: DaemonProcess, phone: PhoneSimulator
) -> None:
    session = await start_session(phone)
    cwd = Path(next(s for s in phone.sessions.values() if s.info.id == session).info.cwd)
    outside = claude_daemon.home.parent / "outside"  # writable in the sandbox by config
    target = outside / "notes.txt"
    # Mode `default` auto-allows writes inside the workspace; a Write outside it is a floor of
    # the risk gate (outside_workspace): always a card.
    mark = await say(phone, session, f"[[write: {target} | first]]")
    found = await card(phone, mark)
    await answer(phone, session, found, True)
    await phone.wait_for("output", stream_end, after=mark, timeout=WAIT)
    assert target.read_text() == "first"

    denied = outside / "denied.txt"
    mark = await say(phone, session, f"[[write: {denied} | nope]]")
    found = await card(phone, mark)
    await answer(phone, session, found, False)
    await phone.wait_for("output", stream_end, after=mark, timeout=WAIT)
    assert not denied.exists()

    always = outside / "always.txt"
    mark = await say(phone, session, f"[[write: {always} | yes]]")
    found = await card(phone, mark)
    await answer(phone, session, found, True, "always")
    await phone.wait_for("output", stream_end, after=mark, timeout=WAIT)
    assert always.read_text() == "yes"
    rules = (cwd / ".claude" / "settings.local.json").read_text()
    assert "Write" in rules


async def test_write_inside_the_workspace_is_auto_allowed_in_default_mode(
    claude_daemon: DaemonProcess, phone: PhoneSimulator
) -> None:
    session = await start_session(phone)
    cwd = Path(next(s for s in phone.sessions.values() if s.info.id == session).info.cwd)
    mark = await say(phone, session, f"[[write: {cwd / 'inside.txt'} | hi]]")
    await phone.wait_for("output", stream_end, after=mark, timeout=WAIT)
    assert (cwd / "inside.txt").read_text() == "hi"
    with sqlite3.connect(claude_daemon.home / "bridge.db") as conn:
        outcomes = [
            r[0] for r in conn.execute("SELECT outcome FROM decisions WHERE tool = 'Write'")
        ]
    assert outcomes == ["allow"]


async def test_deny_listed_command_is_blocked_and_logged(
    claude_daemon: DaemonProcess, phone: PhoneSimulator
) -> None:
    session = await start_session(phone)
    mark = await say(phone, session, "[[bash: rm -rf / --no-preserve-root]]")
    result = await phone.wait_for(
        "output",
        lambda m: m.entry.entryType == "tool_result" and "risk gate" in m.entry.content,
        after=mark,
        timeout=WAIT,
    )
    assert "rm_rf" in result.message.entry.content or "recursive" in result.message.entry.content
    await phone.wait_for("output", stream_end, after=mark, timeout=WAIT)
    assert not any(
        (e.metadata or {}).get("special") == "permission_request"
        for e in entries(phone, session)  # type: ignore[attr-defined]
    )
    with sqlite3.connect(claude_daemon.home / "bridge.db") as conn:
        rows = conn.execute("SELECT outcome, reasons FROM decisions WHERE tool = 'Bash'").fetchall()
    assert ("block", '["deny_list:rm_rf"]') in rows


async def test_plan_approval_keys(claude_daemon: DaemonProcess, phone: PhoneSimulator) -> None:
    session = await start_session(phone, mode=None)  # new sessions start in plan mode
    for key, mode in (("3", None), ("2", "default"), ("1", "acceptEdits")):
        mark = await say(phone, session, "[[exit_plan: 1. do the thing]]")
        plan_card = await card(phone, mark, "plan_approval")
        assert plan_card.message.entry.content == "Plan approval needed"
        await phone.send(KeypressCommand(sessionId=session, key=key, context="plan-approval"))
        if key == "2":  # approved: the agent leaves plan mode for default; back to plan after
            await phone.wait_for(
                "mode-confirmed", lambda m: m.mode == "default", after=mark, timeout=WAIT
            )
            await phone.wait_for("output", stream_end, after=mark, timeout=WAIT)
            await phone.send(ModeCommand(sessionId=session, mode="plan"))
            await phone.wait_for(
                "mode-confirmed", lambda m: m.mode == "plan", after=mark, timeout=WAIT
            )
            continue
        if mode is not None:
            await phone.wait_for(
                "mode-confirmed", lambda m, mode=mode: m.mode == mode, after=mark, timeout=WAIT
            )
        await phone.wait_for("output", stream_end, after=mark, timeout=WAIT)
    plans = [e for e in entries(phone, session) if (e.metadata or {}).get("special") == "plan"]  # type: ignore[attr-defined]
    assert plans and "do the thing" in plans[0].content  # type: ignore[attr-defined]


async def test_ask_user_question_with_two_questions(
    claude_daemon: DaemonProcess, phone: PhoneSimulator
) -> None:
    session = await start_session(phone)
    mark = await say(phone, session, "[[ask: Colour? | Red | Blue]] [[ask: Size? | S | L]]")
    cards = await phone.wait_for_count(
        "output",
        2,
        lambda m: (m.entry.metadata or {}).get("special") == "ask_question",
        after=mark,
        timeout=WAIT,
    )
    assert [c.message.entry.metadata["question_index"] for c in cards] == [0, 1]
    await phone.send(KeypressCommand(sessionId=session, key="2", context="question"))
    await phone.send(InputCommand(sessionId=session, text="L"))
    await phone.wait_for("output", stream_end, after=mark, timeout=WAIT)
    # The mock answers "Done: <tool result>": the agent read both answers.
    texts = [e.content for e in entries(phone, session) if e.entryType == "text"]  # type: ignore[attr-defined]
    assert any('"Colour?"="Blue"' in t and '"Size?"="L"' in t for t in texts), texts


SLOW_REPLY = 30  # seconds before the mock's "too late": an interrupt must end the turn far sooner
DENIALS = ("Interrupted by the user", "doesn't want to proceed")  # the bridge's, Claude Code's


def _last_seq(phone: PhoneSimulator, session: str) -> int:
    return max(phone.transcript(session), default=0)


def _turn(phone: PhoneSimulator, session: str, after_seq: int, end: Any) -> list[Any]:
    """The phone's transcript entries of one turn: after `after_seq`, up to its `stream_end`."""
    last = end.message.seq
    return [e for seq, e in sorted(phone.transcript(session).items()) if after_seq < seq <= last]


def _interrupted(entry: Any) -> bool:
    """Claude Code's own end of an interrupted turn (``terminal_reason: aborted_*``)."""
    return entry.entryType == "system" and (entry.metadata or {}).get("subtype") == "interrupted"


async def test_interrupt_during_a_turn_and_a_pending_card(
    claude_daemon: DaemonProcess, phone: PhoneSimulator
) -> None:
    # An ignored interrupt would still see a stream_end, once the slow reply is done: the turn
    # must end long before that, as an interrupted turn, and without the reply.
    session = await start_session(phone)
    before = _last_seq(phone, session)
    started = time.monotonic()
    mark = await say(phone, session, f"[[slow: {SLOW_REPLY}]] [[reply: too late]]")
    await phone.wait_for(
        "sessions",
        lambda m: any(s.state == "running" for s in m.sessions),
        after=mark,
        timeout=WAIT,
    )
    await phone.send(InterruptCommand(sessionId=session))
    end = await phone.wait_for("output", stream_end, after=mark, timeout=WAIT)
    took = time.monotonic() - started
    assert took < SLOW_REPLY / 2, f"the turn took {took:.1f} s: the interrupt did not stop it"
    turn = _turn(phone, session, before, end)
    assert [e.content for e in turn if _interrupted(e)] == ["Interrupted"]
    assert "too late" not in [e.content for e in turn]

    # An ignored interrupt with a card pending: the engine still denies the card, and Claude
    # Code would go on to answer the denial ("the tool answered") instead of stopping.
    before = _last_seq(phone, session)
    mark = await say(phone, session, "[[bash: sudo true]] [[after: the tool answered]]")
    found = await card(phone, mark)
    tool_use_id = found.message.entry.metadata["tool_use_id"]
    await phone.send(InterruptCommand(sessionId=session))
    end = await phone.wait_for("output", stream_end, after=mark, timeout=WAIT)
    turn = _turn(phone, session, before, end)
    results = [
        e
        for e in turn
        if e.entryType == "tool_result" and (e.metadata or {}).get("tool_use_id") == tool_use_id
    ]
    assert len(results) == 1, turn
    # `sudo true` never ran: its one result is the denial, not the command's output.
    assert results[0].metadata.get("is_error") is True
    assert any(denial in results[0].content for denial in DENIALS), results[0].content
    assert [e.content for e in turn if _interrupted(e)] == ["Interrupted"]
    assert "the tool answered" not in [e.content for e in turn]
    with sqlite3.connect(claude_daemon.home / "bridge.db") as conn:
        outcomes = [
            r[0]
            for r in conn.execute(
                "SELECT outcome FROM decisions WHERE session_id = ? AND tool = 'Bash' ORDER BY id",
                (session,),
            )
        ]
    assert outcomes[-1:] == ["interrupted"], outcomes  # the card's decision

    mark = await say(phone, session, "[[reply: still alive]]")
    await phone.wait_for(
        "output", lambda m: m.entry.content == "still alive", after=mark, timeout=WAIT
    )
    assert "too late" not in [e.content for e in entries(phone, session)]  # type: ignore[attr-defined]


async def test_mode_effort_model_and_models_list(
    claude_daemon: DaemonProcess, phone: PhoneSimulator
) -> None:
    from bridge.protocol import EffortCommand, ModelCommand, ModelsRequestCommand

    session = await start_session(phone, mode="acceptEdits")
    mark = phone.mark()
    await phone.send(EffortCommand(sessionId=session, level="high"))
    effort = await phone.wait_for("effort-confirmed", after=mark, timeout=WAIT)
    assert effort.message.level in ("high", "medium", "low")  # the model may lower it
    await phone.send(ModelCommand(sessionId=session, model="haiku"))
    model = await phone.wait_for("model-confirmed", after=mark, timeout=WAIT)
    assert model.message.model
    await phone.send(ModelsRequestCommand())
    models = await phone.wait_for("models", after=mark, timeout=WAIT)
    assert models.message.models and models.message.error is None


async def test_cli_killed_restarts_with_resume(
    claude_daemon: DaemonProcess, phone: PhoneSimulator
) -> None:
    import os
    import signal

    session = await start_session(phone)
    mark = await say(phone, session, "[[reply: remember the word banana]]")
    await phone.wait_for("output", stream_end, after=mark, timeout=WAIT)
    pids = [
        int(entry.name)
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit() and b"claude" in _cmdline(entry)
    ]
    [host] = claude_daemon.host_pids()  # the CLI runs under the session's host
    children = [int(p) for p in pids if _is_child_of(int(p), host)]
    assert children, "no Claude Code process under the session host"
    mark = phone.mark()
    for pid in children:
        os.kill(pid, signal.SIGKILL)
    await phone.wait_for(
        "output",
        lambda m: (m.entry.metadata or {}).get("special") == "session_restart",
        after=mark,
        timeout=WAIT,
    )
    mark = await say(phone, session, "[[reply: still here]]")
    await phone.wait_for(
        "output", lambda m: m.entry.content == "still here", after=mark, timeout=WAIT
    )


def _cmdline(entry: Path) -> bytes:
    try:
        return (entry / "cmdline").read_bytes()
    except OSError:
        return b""


def _is_child_of(pid: int, ancestor: int) -> bool:
    try:
        while pid > 1:
            with open(f"/proc/{pid}/stat") as fh:
                pid = int(fh.read().rsplit(")", 1)[1].split()[1])
            if pid == ancestor:
                return True
    except OSError:
        return False
    return False


async def test_bridge_killed_and_restarted_resumes_the_session(
    claude_daemon: DaemonProcess, phone: PhoneSimulator
) -> None:
    session = await start_session(phone)
    mark = await say(phone, session, "[[reply: before the crash]]")
    await phone.wait_for("output", stream_end, after=mark, timeout=WAIT)
    claude_daemon.kill()
    await claude_daemon.start()
    mark = await say(phone, session, "[[reply: after the crash]]", "in-after")
    await phone.wait_for("input-ack", lambda m: m.inputId == "in-after", after=mark, timeout=WAIT)
    await phone.wait_for(
        "output", lambda m: m.entry.content == "after the crash", after=mark, timeout=WAIT
    )
    beat = await phone.wait_for(
        "sessions", lambda m: any(s.id == session for s in m.sessions), after=mark
    )
    assert beat.message.machineOffline is None


async def test_provider_bound_session_uses_the_profile_and_publishes_no_usage(
    claude_daemon: DaemonProcess, phone: PhoneSimulator, mock_api: object
) -> None:
    from bridge.protocol import SetProviderProfileCommand, UsageRequestCommand
    from bridge.protocol.shared import ModelEntry, ProviderProfileWrite

    base_url = mock_api.base_url  # type: ignore[attr-defined]
    token = "prov-token-7e3c1a9b"
    mark = phone.mark()
    await phone.send(
        SetProviderProfileCommand(
            profileId="local",
            profile=ProviderProfileWrite(
                label="Local",
                baseUrl=base_url,
                authToken=token,
                models=[ModelEntry(id="claude-mock-1")],
            ),
        )
    )
    await phone.wait_for("provider-profile-ack", after=mark, timeout=WAIT)
    mark = phone.mark()
    await phone.send(CreateSessionCommand(providerId="local"))
    ready = await phone.wait_for("session-ready", after=mark, timeout=WAIT)
    session = str(ready.message.session.id)
    assert ready.message.session.providerId == "local"
    before = len(mock_api.requests)  # type: ignore[attr-defined]
    mark = await say(phone, session, "[[reply: via the profile]]")
    await phone.wait_for(
        "output", lambda m: m.entry.content == "via the profile", after=mark, timeout=WAIT
    )
    sent = mock_api.requests[before:]  # type: ignore[attr-defined]
    assert sent and all(
        r.headers.get("authorization") == f"Bearer {token}"
        for r in sent
        if r.path.startswith("/v1/messages")
    )
    await phone.send(UsageRequestCommand(sessionId=session))
    await phone.quiesce(idle=1.5)
    assert phone.count("usage", after=mark) == 0
    assert token not in claude_daemon.log_text


async def test_deny_list_blocks_even_what_accept_edits_would_allow(
    claude_daemon: DaemonProcess, phone: PhoneSimulator
) -> None:
    target = Path("/etc/codedeck-e2e-must-not-exist.txt")
    session = await start_session(phone, mode="acceptEdits")
    try:
        mark = await say(phone, session, f"[[write: {target} | nope]]")
        await phone.wait_for("output", stream_end, after=mark, timeout=WAIT)
        assert not target.exists()
        assert not any(
            (e.metadata or {}).get("special") == "permission_request"  # type: ignore[attr-defined]
            for e in entries(phone, session)
        )
        with sqlite3.connect(claude_daemon.home / "bridge.db") as conn:
            rows = conn.execute(
                "SELECT outcome, reasons FROM decisions WHERE tool = 'Write'"
            ).fetchall()
        assert ("block", '["deny_list:system_write"]') in rows
    finally:
        target.unlink(missing_ok=True)


async def test_a_floor_gets_a_card_even_for_a_call_claude_code_would_allow(
    claude_daemon: DaemonProcess, phone: PhoneSimulator
) -> None:
    secret = claude_daemon.home.parent / "outside" / "private.txt"
    secret.parent.mkdir(exist_ok=True)
    secret.write_text("private")
    session = await start_session(phone, mode="acceptEdits")
    mark = await say(phone, session, f"[[read: {secret}]]")  # a read Claude Code allows by itself
    found = await card(phone, mark)
    assert "outside_workspace" in found.message.entry.metadata["reasons"]
    await answer(phone, session, found, False)
    await phone.wait_for("output", stream_end, after=mark, timeout=WAIT)


async def test_accept_edits_writes_in_the_workspace_but_asks_for_a_command(
    claude_daemon: DaemonProcess, phone: PhoneSimulator
) -> None:
    # acceptEdits auto-allows file edits inside the workspace, not commands: a benign `touch`
    # (which Claude Code itself would run without asking in acceptEdits) is a card.
    session = await start_session(phone, mode="acceptEdits")
    cwd = Path(next(s for s in phone.sessions.values() if s.info.id == session).info.cwd)
    mark = await say(phone, session, f"[[write: {cwd / 'edited.txt'} | edited]]")
    await phone.wait_for("output", stream_end, after=mark, timeout=WAIT)
    assert (cwd / "edited.txt").read_text() == "edited"
    assert not any(
        (e.metadata or {}).get("special") == "permission_request"  # type: ignore[attr-defined]
        for e in entries(phone, session)
    )

    mark = await say(phone, session, "[[bash: touch touched.txt]]")
    found = await card(phone, mark)
    metadata = found.message.entry.metadata
    assert (metadata["tool_name"], metadata["reasons"]) == ("Bash", [])  # the mode asks, no floor
    assert not (cwd / "touched.txt").exists()
    await answer(phone, session, found, False)
    await phone.wait_for("output", stream_end, after=mark, timeout=WAIT)
    assert not (cwd / "touched.txt").exists()
    with sqlite3.connect(claude_daemon.home / "bridge.db") as conn:
        rows = conn.execute(
            "SELECT outcome, reasons FROM decisions WHERE tool = 'Bash' ORDER BY rowid"
        ).fetchall()
    assert rows == [("card", "[]"), ("phone_deny", "[]")]
