"""The kill points of a real-CLI chaos run, done for real (see :class:`~.plan.KillPoint`).

Every injector puts work in flight, waits for the moment it aims at — watched from outside the
bridge: the relay took the command, the model was shown the prompt (the mock's own record), a
card is on the phone, the daemon's log says it adopted or started a host — kills one process with
``kill -9``, restarts the daemon when it was the daemon, and records the kill with the inputs in
flight and what the moment turned out to be (:meth:`~.ledger.Ledger.observe`). Session hosts
outlive a killed daemon by design: they are adopted, never restarted by the run.

The variants of a kill point (what a host or CLI kill finds: a queued input whose Bash call just
ran, a slow stream, a pending card, a call just made, an idle session; a resume that adopts the
host or must start a new one, killed at its log line or at a random delay; a card answered after
the restart or while the daemon is down) come in turn, so a short run meets the ones that matter
first; timing, sessions and routes are random.

A host or CLI kill waits for the phone's ``session_restart`` note; a host kill also checks that
its CLI died with it (PDEATHSIG): one that outlives its host is an orphan (recorded, then killed).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from typing import TypeVar, assert_never

from tests.chaos.cli import procs
from tests.chaos.cli.ledger import HeldCard, InputRecord, KillRecord, Ledger, Route
from tests.chaos.cli.model import ModelCall
from tests.chaos.cli.observe import Card
from tests.chaos.cli.plan import KillPoint
from tests.chaos.cli.workload import Workload
from tests.chaos.cli.world import World

__all__ = ["Injector"]

T = TypeVar("T")
_ORPHAN_WAIT = 5.0


class Injector:
    """Applies one kill point per round (see the module docstring)."""

    def __init__(self, world: World, ledger: Ledger, workload: Workload) -> None:
        self.world = world
        self.ledger = ledger
        self.wl = workload
        self.rng = workload.rng
        self._turns: Counter[KillPoint] = Counter()
        self.cut_sessions: set[str] = set()
        """Sessions whose turn a kill of this round may have cut (they get an input after)."""

    @property
    def round(self) -> int:
        return self.wl.round

    def _variant(self, point: KillPoint, cycle: tuple[T, ...]) -> T:
        """The next variant of `point`, in turn: a short run covers the variants that matter
        first, a long one covers them all evenly (timing and routes stay random)."""
        count = self._turns[point]
        self._turns[point] += 1
        return cycle[count % len(cycle)]

    async def apply(self, point: KillPoint) -> None:
        self.cut_sessions.clear()
        match point:
            case KillPoint.DAEMON_AT_RELAY:
                await self.daemon_at_relay()
            case KillPoint.DAEMON_IN_TOOL:
                await self.daemon_in_tool()
            case KillPoint.DAEMON_MID_TURN:
                await self.daemon_mid_turn()
            case KillPoint.DAEMON_CARD_PENDING:
                await self.daemon_card_pending()
            case KillPoint.DAEMON_IN_RESUME:
                await self.daemon_in_resume()
            case KillPoint.HOST_KILL:
                await self.turn_cut(point, "host")
            case KillPoint.CLI_KILL:
                await self.turn_cut(point, "cli")
            case _:
                assert_never(point)

    # --- the daemon -------------------------------------------------------------------------------

    async def start_daemon(self) -> None:
        await self.world.daemon.start(timeout=90)
        self.ledger.daemon_starts += 1

    async def ensure_daemon(self) -> None:
        """Start the daemon if it is down; if it died by itself, that is an incident."""
        daemon = self.world.daemon
        if daemon.running:
            return
        code = daemon.proc.returncode if daemon.proc is not None else None
        tail = " | ".join(daemon.log_text.strip().splitlines()[-3:])[-600:]
        self.ledger.incident(self.round, f"the daemon exited by itself ({code}); log: {tail}")
        await self.start_daemon()

    def kill_daemon(
        self, point: KillPoint, detail: str, session_id: str | None = None
    ) -> KillRecord:
        daemon = self.world.daemon
        pid = daemon.proc.pid if daemon.proc is not None else None
        in_flight = self.wl.in_flight()
        daemon.kill()
        record = KillRecord(
            point, self.round, time.monotonic(), "daemon", session_id, pid, in_flight
        )
        self.ledger.kill(record, detail)
        return record

    async def _sleep_until(self, when: float) -> None:
        await asyncio.sleep(max(0.0, when - time.monotonic()))

    def _phase(self, record: InputRecord, calls_after: int) -> str:
        """Where the Bash call of `record` was when a kill happened (read from outside)."""
        if not self.world.marked(record.input_id):
            card = self.wl.watch.card_for(record.input_id)
            return "card pending" if card is not None else "hook or permission pending"
        if any(record.input_id in c.results for c in self.world.mock.calls(calls_after)):
            return "after the result reached the model"
        return "tool ran, result not yet with the model"

    # (a)
    async def daemon_at_relay(self) -> None:
        session = self.rng.choice(self.wl.sessions)
        count = self.rng.randint(1, 3)
        records = [await self.wl.send(session) for _ in range(count)]
        sent = [r for r in records if r is not None]
        self.kill_daemon(
            KillPoint.DAEMON_AT_RELAY,
            f"{len(sent)} input(s) back to back into {session[:8]}, killed as the last reached "
            "the relay",
            session,
        )
        down = self.rng.randint(0, 2)
        await self.wl.send_some(down)
        self.ledger.observe(
            KillPoint.DAEMON_AT_RELAY, f"{len(sent)} in flight, {down} sent while down"
        )
        await self.start_daemon()

    # (b)
    async def daemon_in_tool(self) -> None:
        session = self._session("default", 0.8)
        route = self.wl.random_route(session, tool=True)
        index = self.world.mock.call_count
        record = await self.wl.send(session, route)
        if record is None:
            return
        delay = self.rng.uniform(0.005, 0.080)
        call = await self.wl.wait_call(record.input_id, after=index)
        replied = await self.wl.wait_reply(call) if call is not None else None
        if replied is not None:
            await self._sleep_until(replied + delay)
        phase = self._phase(record, index)
        self.kill_daemon(
            KillPoint.DAEMON_IN_TOOL,
            f"{record.describe()}: {delay * 1000:.0f} ms after the model asked for Bash; {phase}",
            session,
        )
        self.ledger.observe(KillPoint.DAEMON_IN_TOOL, phase)
        await self.start_daemon()

    # (c)
    async def daemon_mid_turn(self) -> None:
        session = self.rng.choice(self.wl.sessions)
        slow = round(self.rng.uniform(1.0, 2.5), 2)
        index = self.world.mock.call_count
        record = await self.wl.send(session, self.wl.random_route(session, tool=True), slow=slow)
        if record is None:
            return
        queued = ""
        if self._variant(KillPoint.DAEMON_MID_TURN, (True, False)):
            behind = await self.wl.send(session, note=f"sent while {record.input_id} streams")
            queued = f"; {behind.input_id} queued behind it" if behind is not None else ""
        call = await self.wl.wait_call(record.input_id, after=index)
        into = self.rng.uniform(0.1, slow - 0.1)
        if call is not None:
            await self._sleep_until(call.at + into)
        self.kill_daemon(
            KillPoint.DAEMON_MID_TURN,
            f"{record.describe()}: {into:.2f} s into a {slow:g} s stream{queued}",
            session,
        )
        self.ledger.observe(KillPoint.DAEMON_MID_TURN, "with a queued input" if queued else "alone")
        if self.rng.random() < 0.5:
            await self.wl.send(session, note="sent while the daemon is down")
        await self.start_daemon()

    # (d)
    async def daemon_card_pending(self) -> None:
        session = self._session("acceptEdits", 0.7)
        record = await self.wl.send(session, Route.CARD, held=True)
        if record is None:
            return
        card = await self.wl.wait_card(record.input_id)
        if card is None:
            self.wl.held.discard(record.input_id)
            return
        self.kill_daemon(
            KillPoint.DAEMON_CARD_PENDING,
            f"{record.describe()}: card {card.tool_use_id} pending",
            session,
        )
        while_down = self._variant(KillPoint.DAEMON_CARD_PENDING, (False, True, False))
        if while_down:
            await asyncio.sleep(self.rng.uniform(0.0, 0.5))
            await self.wl.answer(card, by="daemon-card-pending (while down)")
            await self.start_daemon()
        else:
            await self.start_daemon()
            await asyncio.sleep(self.rng.uniform(0.0, 0.5))
            await self.wl.answer(card, by="daemon-card-pending (after restart)")
        self.wl.held.discard(record.input_id)
        what = "answered while the daemon was down" if while_down else "answered after the restart"
        self.ledger.observe(
            KillPoint.DAEMON_CARD_PENDING, f"{what}, {'allow' if record.allow else 'deny'}"
        )
        self.ledger.held_cards.append(
            HeldCard(
                self.round,
                KillPoint.DAEMON_CARD_PENDING,
                record.input_id,
                card.tool_use_id,
                while_down,
                True,
            )
        )

    # (e)
    async def daemon_in_resume(self) -> None:
        session = self.rng.choice(self.wl.sessions)
        new_host, aimed = self._variant(
            KillPoint.DAEMON_IN_RESUME, ((True, True), (False, True), (True, False), (False, False))
        )
        slow = round(self.rng.uniform(1.0, 2.0), 2)
        index = self.world.mock.call_count
        record = await self.wl.send(session, self.wl.random_route(session, tool=True), slow=slow)
        if record is None:
            return
        call = await self.wl.wait_call(record.input_id, after=index)
        if call is not None:
            await self._sleep_until(call.at + self.rng.uniform(0.1, 0.5))
        point = KillPoint.DAEMON_IN_RESUME
        self.kill_daemon(point, f"{record.describe()}: mid-stream, before the resume", session)
        what = "adopted host replaying"
        killed = False
        if new_host:
            killed = await self._kill_host(
                point, session, "with the daemon down: a new host must start"
            )
            what = "new host starting" if killed else what
        offset = self.world.daemon.log_size()
        starting = asyncio.create_task(self.world.daemon.start(timeout=90))
        if aimed:
            # The first host line of the new daemon: for a new host, the window between its spawn
            # and the restart note is open from about then (the other session is adopted first).
            marks = ("adopted its host", "started its host")
            found = await self._wait_log(offset, marks, timeout=8.0)
            delay = self.rng.uniform(0.0, 0.1)
            await asyncio.sleep(delay)
            when = (
                f"{delay * 1000:.0f} ms after its log said '{found}'"
                if found
                else "(no host line within 8 s)"
            )
        else:
            delay = self.rng.uniform(0.05, 1.5)
            await asyncio.sleep(delay)
            when = f"{delay * 1000:.0f} ms after it was spawned"
        ready = starting.done() and starting.exception() is None
        self.kill_daemon(
            point, f"again, {when} ({'ready' if ready else 'not yet serving'})", session
        )
        with contextlib.suppress(AssertionError):  # start() says the daemon exited: it was killed
            await starting
        self.ledger.observe(
            point, f"{what}, {'aimed at the adopt line' if aimed else 'random delay'}"
        )
        await self.start_daemon()

    async def _wait_log(self, offset: int, marks: tuple[str, ...], timeout: float) -> str | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.world.daemon.log_since(offset)
            for mark in marks:
                if mark in text:
                    return mark
            await asyncio.sleep(0.005)
        return None

    # (f), (g)
    async def turn_cut(self, point: KillPoint, target: str) -> None:
        session = self.rng.choice(self.wl.sessions)
        state = self._variant(point, ("queued", "slow", "card", "sent", "slow", "card", "idle"))
        record: InputRecord | None = None
        card: Card | None = None
        index = self.world.mock.call_count
        call: ModelCall | None = None
        if state == "slow":
            slow = round(self.rng.uniform(1.0, 2.5), 2)
            record = await self.wl.send(
                session, self.wl.random_route(session, tool=True), slow=slow
            )
            if record is not None:
                call = await self.wl.wait_call(record.input_id, after=index)
                if call is not None:
                    await self._sleep_until(call.at + self.rng.uniform(0.1, slow - 0.1))
        elif state == "card":
            record = await self.wl.send(session, Route.CARD, held=True)
            if record is not None:
                card = await self.wl.wait_card(record.input_id)
        elif state == "sent":
            record = await self.wl.send(session, self.wl.random_route(session, tool=True))
            if record is not None:
                call = await self.wl.wait_call(record.input_id, after=index)
                replied = await self.wl.wait_reply(call) if call is not None else None
                if replied is not None:
                    await self._sleep_until(replied + self.rng.uniform(0.005, 0.080))
        elif state == "queued":
            record = await self._queued_tool_ran(session, index)
        notes = len(self.wl.watch.restarts_of(session))
        phase = self._phase(record, index) if record is not None else "idle"
        about = f"{record.describe()}: {phase}" if record is not None else "idle session"
        if target == "host":
            killed = await self._kill_host(point, session, about)
        else:
            killed = self._kill_cli(point, session, about)
        if card is not None and record is not None:
            await self._after_cut_card(point, record, card)
        self.ledger.observe(point, f"{state}: {phase}" if killed else f"{state}: nothing to kill")
        if killed:
            await self.wl.wait_restart_note(session, notes)

    async def _queued_tool_ran(self, session: str, index: int) -> InputRecord | None:
        """A slow turn, an input queued behind it (Claude Code folds it into that turn), and the
        moment the queued input's Bash call has run: the input the kill should find."""
        slow = round(self.rng.uniform(1.0, 2.0), 2)
        first = await self.wl.send(session, self.wl.random_route(session, tool=True), slow=slow)
        if first is None:
            return None
        call = await self.wl.wait_call(first.input_id, after=index)
        if call is not None:
            await self._sleep_until(call.at + self.rng.uniform(0.1, slow - 0.3))
        behind = await self.wl.send(
            session,
            self.wl.random_route(session, tool=True),
            allow=True,
            note=f"queued behind {first.input_id}",
        )
        if behind is None:
            return first
        if await self.wl.wait_marked(behind.input_id):
            await asyncio.sleep(self.rng.uniform(0.0, 0.03))
        return behind

    async def _after_cut_card(self, point: KillPoint, record: InputRecord, card: Card) -> None:
        """A card whose agent died: answered late (a user who did not notice) or left."""
        self.wl.held.discard(record.input_id)
        answer = self.rng.random() < 0.5
        if answer:
            await asyncio.sleep(self.rng.uniform(0.0, 0.5))
            await self.wl.answer(card, by=f"{point.value} (late, the agent died)")
        else:
            self.wl.skip_cards.add(card.tool_use_id)
        self.ledger.held_cards.append(
            HeldCard(self.round, point, record.input_id, card.tool_use_id, False, answer)
        )

    async def _kill_host(self, point: KillPoint, session: str, about: str) -> bool:
        host = procs.host_of(self.world.home, session)
        if host is None:
            self.ledger.log(self.round, f"{point.value}: {session[:8]} has no live host to kill")
            return False
        cli = procs.cli_of(host)
        in_flight = self.wl.in_flight()
        procs.kill(host)
        record = KillRecord(point, self.round, time.monotonic(), "host", session, host, in_flight)
        self.ledger.kill(record, about)
        self.cut_sessions.add(session)
        if cli is not None:
            deadline = time.monotonic() + _ORPHAN_WAIT
            while procs.alive(cli) and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            if procs.alive(cli):
                self.ledger.orphans.append(
                    f"r{self.round}: Claude Code pid {cli} outlived its host {host} by "
                    f"{_ORPHAN_WAIT:g} s (killed by the run)"
                )
                procs.kill(cli)
        return True

    def _kill_cli(self, point: KillPoint, session: str, about: str) -> bool:
        host = procs.host_of(self.world.home, session)
        cli = procs.cli_of(host) if host is not None else None
        if cli is None:
            self.ledger.log(self.round, f"{point.value}: {session[:8]} has no Claude Code to kill")
            return False
        in_flight = self.wl.in_flight()
        procs.kill(cli)
        record = KillRecord(point, self.round, time.monotonic(), "cli", session, cli, in_flight)
        self.ledger.kill(record, about)
        self.cut_sessions.add(session)
        return True

    def _session(self, mode: str, share: float) -> str:
        """A session in `mode` with probability `share`, else another one."""
        wanted = [s for s in self.wl.sessions if self.wl.mode(s) == mode]
        others = [s for s in self.wl.sessions if self.wl.mode(s) != mode]
        if wanted and (not others or self.rng.random() < share):
            return self.rng.choice(wanted)
        return self.rng.choice(others or wanted)
