"""The commands of a chaos run: a realistic, seeded mix, and the waits that keep it honest.

The mix is what a phone user does: mostly inputs (echoes, ``lines N`` that stream several
entries, ``think``/``status``, now and then one big enough to be sent in fragments), sync
requests, heartbeat refreshes, interrupts and mode changes, a few session creations and
closings, inputs sent to a session that was closed (answered ``input-failed{no-session}``), and
the third phone's traffic (before its unpairing: ordinary inputs; after it: inputs and
creations that must do nothing).

Backpressure: every few commands the run waits until the observer phone (``P2``) heard an answer
for all but the last few inputs (:meth:`Workload.settle`). That keeps a few dozen inputs in flight
(so faults land mid-stream) without letting the daemon fall minutes behind. An input still
unanswered when a wait times out is reported (an incident) and then left out of later waits, so
one lost input cannot turn every later wait into a timeout; the final invariants judge it.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Sequence

from bridge.nostr.event import VerifiedEvent
from bridge.protocol import (
    PERMISSION_MODES,
    CloseSessionCommand,
    Command,
    CreateSessionCommand,
    InputCommand,
    InterruptCommand,
    ModeCommand,
    RefreshSessionsCommand,
)
from tests.chaos.ledger import Expect, InputRecord, Ledger, ReplyTracker, SentEvent, SessionTrack
from tests.chaos.world import World
from tests.support.phone import PhoneError, PhoneSimulator

__all__ = ["BIG_INPUT_CHARS", "MAX_LIVE_SESSIONS", "MIN_LIVE_SESSIONS", "Workload"]

MIN_LIVE_SESSIONS = 2
MAX_LIVE_SESSIONS = 6
BIG_INPUT_CHARS = 45_000
"""Over the 40,960-byte NIP-44 threshold: such an input travels as ``chunk`` fragments."""
_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india")


class Workload:
    """Chooses and sends commands, records them in the ledger, and waits for answers."""

    def __init__(self, world: World, ledger: Ledger, rng: random.Random) -> None:
        self.world = world
        self.ledger = ledger
        self.rng = rng
        self.skew: dict[str, int] = {}
        self.trackers: dict[str, ReplyTracker] = {
            name: ReplyTracker(phone) for name, phone in world.phones.items()
        }
        self._unanswered: dict[str, InputRecord] = {}
        self.overdue: set[str] = set()
        self.timeouts = 0
        """Liveness waits that timed out; after a few, waits get short (the run must end)."""
        self._serial = 0

    # --- phones -----------------------------------------------------------------------------------

    def phone(self, name: str) -> PhoneSimulator:
        return self.world.phones[name]

    def replace_phone(self, name: str, phone: PhoneSimulator) -> None:
        """A restarted phone: follow the new simulator (its log was restored from the file)."""
        self.world.phones[name] = phone
        self.trackers[name] = ReplyTracker(phone)

    def sender(self) -> str:
        """``P1`` most of the time when it is online, else the observer ``P2``."""
        return "P1" if self.phone("P1").online and self.rng.random() < 0.7 else "P2"

    def created_at(self, name: str) -> int | None:
        skew = self.skew.get(name, 0)
        return int(time.time()) + skew if skew else None

    def serial(self) -> int:
        self._serial += 1
        return self._serial

    # --- sending ----------------------------------------------------------------------------------

    async def send(
        self,
        name: str,
        command: Command,
        what: str,
        *,
        created_at: int | None = None,
        chunked: bool = False,
    ) -> list[VerifiedEvent]:
        """Publish one command from phone `name` and count it; [] when no relay took it."""
        phone = self.phone(name)
        when = created_at if created_at is not None else self.created_at(name)
        try:
            if chunked:
                events = await phone.send_chunked(command, created_at=when, timeout=15)
            else:
                events = [await phone.send(command, created_at=when, timeout=15)]
        except (PhoneError, TimeoutError) as exc:
            self.ledger.incident(f"{name} could not publish {what}: {exc}")
            return []
        finally:
            self.ledger.count(what)
        for event in events:
            self.ledger.events.append(SentEvent(event, name, what))
        return events

    async def send_input(
        self,
        name: str,
        session_id: str,
        text: str,
        expect: Expect,
        *,
        note: str = "",
        created_at: int | None = None,
        chunked: bool = False,
    ) -> InputRecord | None:
        input_id = f"in-{self.serial():06d}"
        command = InputCommand(sessionId=session_id, text=text, inputId=input_id)
        when = created_at if created_at is not None else self.created_at(name)
        if when is not None and not note:
            note = f"created_at {when - int(time.time()):+d} s"
        events = await self.send(name, command, "input", created_at=when, chunked=chunked)
        if not events:
            return None
        record = InputRecord(
            input_id,
            session_id,
            text,
            name,
            self.ledger.commands,
            expect,
            tuple(e.id for e in events),
            note,
        )
        self.register(record)
        return record

    def register(self, record: InputRecord) -> None:
        """Record an input sent by other means (fragments published by hand)."""
        self.ledger.add_input(record)
        if record.expect.reply:
            self._unanswered[record.input_id] = record

    def echo_text(self) -> str:
        return f"m{self.serial()} {self.rng.choice(_WORDS)}"

    def input_text(self) -> str:
        roll = self.rng.random()
        if roll < 0.7:
            return self.echo_text()
        if roll < 0.93:
            return f"lines {self.rng.randint(2, 6)}"
        return self.rng.choice(("think", "status"))

    def big_text(self) -> str:
        head = f"big{self.serial()} "
        filler = " ".join(self.rng.choice(_WORDS) for _ in range(BIG_INPUT_CHARS // 5))
        return (head + filler)[:BIG_INPUT_CHARS]

    def live_session(self) -> str:
        return self.rng.choice(self.ledger.live_sessions())

    # --- one step ---------------------------------------------------------------------------------

    async def step(self) -> None:
        """Send one command of the mix (the daemon is running; P1 may be offline)."""
        roll = self.rng.random()
        name = self.sender()
        live = self.ledger.live_sessions()
        closed = self.ledger.closed_sessions()
        if roll < 0.66:
            await self.send_input(name, self.live_session(), self.input_text(), Expect.ACK)
        elif roll < 0.665:
            text = self.big_text()
            await self.send_input(name, self.live_session(), text, Expect.ACK, chunked=True)
        elif roll < 0.71:
            await self.sync(name)
        elif roll < 0.75:
            await self.send(name, RefreshSessionsCommand(), "refresh-sessions")
        elif roll < 0.77:
            await self.send(name, InterruptCommand(sessionId=self.live_session()), "interrupt")
        elif roll < 0.79:
            mode = self.rng.choice(PERMISSION_MODES)
            await self.send(name, ModeCommand(sessionId=self.live_session(), mode=mode), "mode")
        elif roll < 0.805 and len(live) < MAX_LIVE_SESSIONS:
            await self.create_session(name)
        elif roll < 0.815 and len(live) > MIN_LIVE_SESSIONS:
            await self.close_session(self.rng.choice(live))
        elif roll < 0.825 and closed:
            text = self.echo_text()
            await self.send_input(name, self.rng.choice(closed), text, Expect.NO_SESSION)
        elif roll < 0.85:
            await self.third_phone()
        else:
            await self.send_input(name, self.live_session(), self.echo_text(), Expect.ACK)

    async def sync(self, name: str) -> None:
        phone = self.phone(name)
        self.ledger.count("sync-request")
        try:
            await phone.sync(self.live_session(), wait=False)
        except PhoneError as exc:
            self.ledger.incident(f"{name} could not request a sync: {exc}")

    async def third_phone(self) -> None:
        session = self.live_session()
        if self.ledger.unpaired_at is None:
            await self.send_input("P3", session, self.echo_text(), Expect.ACK)
        elif self.rng.random() < 0.7:
            text = f"intruder-{self.serial()}"
            await self.send_input("P3", session, text, Expect.IGNORED, note="unpaired key")
        else:
            self.ledger.intruder_creates += 1
            await self.send("P3", CreateSessionCommand(), "create-session (unpaired key)")

    async def create_session(self, name: str) -> str | None:
        phone = self.phone(name)
        mark = phone.mark()
        if not await self.send(name, CreateSessionCommand(), "create-session"):
            return None
        try:
            ready = await phone.wait_for("session-ready", after=mark, timeout=60)
        except TimeoutError as exc:
            self.ledger.incident(f"session created by {name} never became ready: {exc}")
            return None
        session_id = str(ready.message.session.id)
        self.ledger.sessions[session_id] = SessionTrack(session_id, self.ledger.commands)
        return session_id

    async def close_session(self, session_id: str) -> None:
        """Close a session once everything sent to it was answered and ran (else it is lost)."""
        await self.settle(0, timeout=30)
        await self.wait_executed([session_id], timeout=30)
        observer = self.trackers["P2"]
        before = observer.close_acks[session_id]
        if not await self.send("P2", CloseSessionCommand(sessionId=session_id), "close-session"):
            return
        self.ledger.sessions[session_id].closed_index = self.ledger.commands

        def acked() -> bool:
            observer.update()
            return observer.close_acks[session_id] > before

        try:
            await self.phone("P2").wait_until(acked, timeout=60, what="close-session-ack")
        except TimeoutError as exc:
            self.ledger.incident(f"close of {session_id[:8]} not acknowledged: {exc}")

    # --- waits ------------------------------------------------------------------------------------

    def patience(self, timeout: float) -> float:
        """`timeout`, or a short one once three waits timed out (a systematic loss)."""
        return timeout if self.timeouts < 3 else min(timeout, 10.0)

    async def settle(self, max_outstanding: int, *, timeout: float) -> bool:
        """Wait until at most `max_outstanding` inputs await an answer on the observer phone.

        Returns False (and reports an incident) on timeout; the oldest unanswered inputs are then
        marked overdue and left out of later waits.
        """
        observer = self.trackers["P2"]

        def calm() -> bool:
            observer.update()
            for input_id in [i for i in self._unanswered if observer.answered(i)]:
                del self._unanswered[input_id]
            return len(self._unanswered) <= max_outstanding

        timeout = self.patience(timeout)
        try:
            await self.phone("P2").wait_until(calm, timeout=timeout, what="answers")
            return True
        except TimeoutError:
            self.timeouts += 1
            late = sorted(self._unanswered.values(), key=lambda r: r.index)
            late = late[: max(1, len(late) - max_outstanding)]
            for record in late:
                del self._unanswered[record.input_id]
                self.overdue.add(record.input_id)
            shown = ", ".join(f"{r.input_id} ({r.note or r.expect.value})" for r in late[:5])
            self.ledger.incident(
                f"liveness: {len(late)} input(s) unanswered on P2 after {timeout:g} s: {shown}"
            )
            return False

    def missing_executions(self, session_ids: Sequence[str]) -> dict[str, int]:
        """session id → how many expected executions have not happened (overdue ones aside)."""
        executed = self.world.executed_texts()
        missing: dict[str, int] = {}
        for session_id in session_ids:
            expected = self.ledger.expected_texts(session_id)
            for input_id in self.overdue:
                record = self.ledger.inputs[input_id]
                if record.session_id == session_id and record.expect is Expect.ACK:
                    expected[record.text] -= 1
            lacking = +(expected - executed.get(session_id, Counter()))
            if lacking:
                missing[session_id] = sum(lacking.values())
        return missing

    async def wait_executed(self, session_ids: Sequence[str], *, timeout: float) -> bool:
        """Poll the agent's logs until every acknowledged input of these sessions ran."""
        timeout = self.patience(timeout)
        deadline = time.monotonic() + timeout
        while True:
            missing = self.missing_executions(session_ids)
            if not missing:
                return True
            if time.monotonic() > deadline:
                self.timeouts += 1
                shown = ", ".join(f"{sid[:8]}: {n}" for sid, n in missing.items())
                self.ledger.incident(f"liveness: inputs not run after {timeout:g} s ({shown})")
                return False
            await asyncio.sleep(0.25)
