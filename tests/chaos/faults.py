"""The fault injectors: each :class:`~tests.chaos.plan.Action` of the plan, done for real.

Every injector records what it did in the ledger (the fault counts of the report, and one line of
the fault log) and records the commands it sends with the outcome they must have. The daemon-down
faults (``kill -9``, fragments across a kill, commands that expire in flight) restart the daemon
before they return, so the workload always finds it running; a daemon found dead when a fault
comes to it died by itself, which is an incident of its own.

After each daemon restart a batch of recent events is replayed through relay C: the daemon's pool
has forgotten every id it saw, so only the persisted processed set stands between those events
and a second execution.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import time

import orjson

from bridge.host.layout import host_alive, host_paths, read_info
from bridge.nostr.event import VerifiedEvent
from bridge.protocol import CreateSessionCommand, InputCommand, encode
from bridge.protocol.chunking import MAX_OPEN_GROUPS
from bridge.protocol.kinds import COMMAND_KIND, fragment_tags
from tests.chaos.ledger import Expect, InputRecord, Ledger, SentEvent, SilentProbe
from tests.chaos.plan import Action, FaultKind
from tests.chaos.workload import Workload
from tests.chaos.world import World
from tests.support.phone_outbound import command_events, publish_direct

__all__ = ["SILENT_ACK_LIMIT", "FaultInjector"]

SILENT_ACK_LIMIT = 20.0
"""Seconds the inputs sent while relay C is silent may take to be acknowledged (through A and B).
Twice the daemon's 10 s OK timeout: an answer that waits for the silent relay misses it."""
_SILENT_INPUTS = 4
_EXPIRED_AGE = 400
"""``created_at`` of the commands that expire in flight: older than the 300 s limit."""
_CURSOR_REWIND = 450
"""How far back the daemon's cursor is put, as if it had been down that long."""
_PARTNER = {"A": "B", "B": "A"}


class FaultInjector:
    """Applies the plan's actions to the :class:`World` (see the module docstring)."""

    def __init__(
        self, world: World, ledger: Ledger, workload: Workload, rng: random.Random
    ) -> None:
        self.world = world
        self.ledger = ledger
        self.workload = workload
        self.rng = rng
        self.out: set[str] = set()
        self._duplicates: list[tuple[int, VerifiedEvent, str]] = []

    # --- dispatch ---------------------------------------------------------------------------------

    async def apply(self, action: Action) -> None:
        kind = action.kind
        if kind is FaultKind.RELAY_RESTART:
            await self.relay_restart(action.target)
        elif kind is FaultKind.RELAY_OUTAGE:
            await self.relay_outage(action)
        elif kind is FaultKind.SILENT_RELAY:
            await self.silent_relay()
        elif kind is FaultKind.DAEMON_KILL:
            await self.daemon_kill()
        elif kind is FaultKind.FRAGMENT_KILL:
            await self.fragment_kill()
        elif kind is FaultKind.PHONE_OFFLINE:
            await self.phone_offline(action)
        elif kind is FaultKind.PHONE_RESTART:
            await self.phone_restart()
        elif kind is FaultKind.DUPLICATE:
            await self.duplicate()
        elif kind is FaultKind.REPLAY:
            await self.replay(self.rng.randint(1, 6), what="replay")
        elif kind is FaultKind.EXPIRED:
            await self.expired_in_flight()
        elif kind is FaultKind.CLOCK_SKEW:
            self.clock_skew(action)
        elif kind is FaultKind.UNPAIR:
            await self.unpair()
        elif kind is FaultKind.HOST_KILL:
            await self.host_kill()
        elif kind is FaultKind.FRAGMENT_FLOOD:
            await self.fragment_flood()

    async def tick(self) -> None:
        """Publish the second copies of duplicated deliveries that are due."""
        due = [d for d in self._duplicates if d[0] <= self.ledger.commands]
        self._duplicates = [d for d in self._duplicates if d[0] > self.ledger.commands]
        for _, event, relay in due:
            await self._publish_copy(event, relay)

    async def finish(self) -> None:
        """End every stretch still running and send what is still due: all healthy again."""
        for name in sorted(self.out):
            await self.world.relays[name].start()
        self.out.clear()
        self.world.policy.frozen = False
        self.workload.skew.clear()
        if not self.workload.phone("P1").online:
            await self.workload.phone("P1").go_online(timeout=30)
        for _, event, relay in self._duplicates:
            await self._publish_copy(event, relay)
        self._duplicates.clear()
        await self.ensure_daemon()

    # --- the daemon -------------------------------------------------------------------------------

    async def ensure_daemon(self) -> None:
        """Start the daemon if it is down; if it died by itself, that is an incident."""
        daemon = self.world.daemon
        if daemon.running:
            return
        code = daemon.proc.returncode if daemon.proc is not None else None
        tail = " | ".join(daemon.log_text.strip().splitlines()[-3:])[-600:]
        self.ledger.incident(f"the daemon exited by itself (status {code}); log tail: {tail}")
        await self.start_daemon()

    def _sample_cpu(self) -> None:
        if (cpu := self.world.cpu_seconds()) is not None:
            self.ledger.daemon_cpu[cpu[0]] = cpu[1]

    async def start_daemon(self) -> None:
        await self.world.daemon.start(timeout=90)
        await self.replay(min(40, len(self.ledger.events)), what="after restart", recent=True)

    async def daemon_kill(self) -> None:
        await self.ensure_daemon()
        # Put work in flight, so the kill lands mid-stream.
        for _ in range(3):
            session = self.workload.live_session()
            await self.workload.send_input(self.workload.sender(), session, "lines 8", Expect.ACK)
        await asyncio.sleep(self.rng.uniform(0.0, 0.4))
        self._sample_cpu()
        self.world.daemon.kill()
        self.ledger.kills += 1
        down = self.rng.randint(0, 4)
        for _ in range(down):
            text = self.workload.echo_text()
            name = self.workload.sender()
            await self.workload.send_input(name, self.workload.live_session(), text, Expect.ACK)
        self.ledger.fault(FaultKind.DAEMON_KILL, f"kill -9, {down} input(s) sent while down")
        await self.start_daemon()

    async def host_kill(self) -> None:
        """Kill one session's host while it works; the daemon resumes the session in a new one."""
        await self.ensure_daemon()
        session = self.workload.live_session()
        await self.workload.send_input(self.workload.sender(), session, "lines 8", Expect.ACK)
        await asyncio.sleep(self.rng.uniform(0.0, 0.3))
        info = read_info(host_paths(self.world.daemon.home, session))
        if info is None or not host_alive(info):
            self.ledger.fault(FaultKind.HOST_KILL, f"{session[:8]}: no live host to kill")
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(info.pid, signal.SIGKILL)
        self.ledger.fault(FaultKind.HOST_KILL, f"kill -9 of the host of {session[:8]}")

    async def fragment_kill(self) -> None:
        """Kill the daemon after it took the first fragment of an input, send the rest, restart."""
        await self.ensure_daemon()
        name, phone = "P2", self.workload.phone("P2")
        session = self.workload.live_session()
        input_id = f"in-{self.workload.serial():06d}"
        text = self.workload.big_text()
        command = phone.stamp(InputCommand(sessionId=session, text=text, inputId=input_id))
        events = command_events(
            phone.keypair, phone.require_bridge(), encode(command), created_at=int(time.time())
        )
        offset = self.world.daemon.log_size()
        await phone.publish_event(events[0], timeout=15)
        # A fragment is not recorded as processed until its group completes (it would be lost
        # with the kill otherwise); the daemon's log says when it holds one.
        held = f"x dropped {events[0].id[:8]} "
        deadline = time.monotonic() + 15
        taken = False
        while not taken and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            taken = held in self.world.daemon.log_since(offset)
        self._sample_cpu()
        self.world.daemon.kill()
        self.ledger.kills += 1
        for event in events[1:]:
            await phone.publish_event(event, timeout=15)
        for event in events:
            self.ledger.events.append(SentEvent(event, name, "input fragment"))
        self.ledger.count("input")
        note = f"{len(events)} fragments, kill -9 after the first was held"
        if not taken:
            note = f"{len(events)} fragments, kill -9 (first fragment not yet held)"
        self.workload.register(
            InputRecord(
                input_id,
                session,
                text,
                name,
                self.ledger.commands,
                Expect.ACK,
                tuple(e.id for e in events),
                note,
            )
        )
        self.ledger.fault(FaultKind.FRAGMENT_KILL, f"{input_id}: {note}")
        await self.start_daemon()

    async def expired_in_flight(self) -> None:
        """Stop the daemon; commands stamped 400 s ago reach it when it is back: all expired."""
        await self.ensure_daemon()
        await self.workload.settle(0, timeout=30)
        self._sample_cpu()
        code = await self.world.daemon.stop()
        self.ledger.graceful_stops += 1
        if code != 0:
            self.ledger.incident(f"the daemon exited with status {code} on SIGTERM")
        self.world.rewind_cursor(_CURSOR_REWIND)
        stale = self.rng.randint(1, 3)
        for _ in range(stale):
            await self.workload.send_input(
                self.workload.sender(),
                self.workload.live_session(),
                self.workload.echo_text(),
                Expect.EXPIRED,
                created_at=int(time.time()) - _EXPIRED_AGE,
                note=f"created_at -{_EXPIRED_AGE} s while the daemon was down",
            )
        text = self.workload.echo_text()
        name = self.workload.sender()
        await self.workload.send_input(name, self.workload.live_session(), text, Expect.ACK)
        self.ledger.fault(FaultKind.EXPIRED, f"{stale} stale input(s), cursor rewound")
        await self.start_daemon()

    # --- relays -----------------------------------------------------------------------------------

    async def relay_restart(self, target: str) -> None:
        # Never the relay that is out, nor its partner (one of A and B always serves the phones).
        if target in self.out or _PARTNER.get(target) in self.out:
            target = "C"
        await self.world.relays[target].restart()
        self.ledger.fault(FaultKind.RELAY_RESTART, f"relay {target}")

    async def relay_outage(self, action: Action) -> None:
        relay = self.world.relays[action.target]
        if action.phase == "begin":
            await relay.stop()
            self.out.add(action.target)
            self.ledger.fault(FaultKind.RELAY_OUTAGE, f"relay {action.target} down")
        else:
            await relay.start()
            self.out.discard(action.target)
            self.ledger.fault_log.append(f"@{self.ledger.commands} relay {action.target} back")

    async def silent_relay(self) -> None:
        """Relay C takes the daemon's events and never answers; inputs must still be acked."""
        await self.ensure_daemon()
        await self.workload.settle(0, timeout=30)
        policy = self.world.policy
        held_before = policy.held
        policy.frozen = True
        observer = self.workload.trackers["P2"]
        records = []
        for _ in range(_SILENT_INPUTS):
            text = self.workload.echo_text()
            record = await self.workload.send_input(
                "P2", self.workload.live_session(), text, Expect.ACK, note="relay C silent"
            )
            if record is not None:
                records.append(record)
        started = time.monotonic()

        def acked() -> int:
            observer.update()
            return sum(1 for r in records if observer.answered(r.input_id))

        with contextlib.suppress(TimeoutError):  # the probe records what did arrive
            await self.workload.phone("P2").wait_until(
                lambda: acked() == len(records) or None,
                timeout=SILENT_ACK_LIMIT,
                what="acks while relay C is silent",
            )
        waited = time.monotonic() - started
        probe = SilentProbe(self.ledger.commands, len(records), acked(), waited, SILENT_ACK_LIMIT)
        self.ledger.silent_probes.append(probe)
        policy.frozen = False
        await self.world.relays["C"].restart()
        held = policy.held - held_before
        self.ledger.fault(
            FaultKind.SILENT_RELAY,
            f"relay C held {held} event(s) unanswered; {probe.acked}/{probe.sent} inputs acked "
            f"in {waited:.1f} s",
        )

    # --- phones -----------------------------------------------------------------------------------

    async def phone_offline(self, action: Action) -> None:
        phone = self.workload.phone("P1")
        if action.phase == "begin":
            await phone.go_offline()
            self.ledger.fault(FaultKind.PHONE_OFFLINE, "P1 offline")
        else:
            cursor = phone.last_stored_seen
            await phone.go_online(timeout=30)
            self.ledger.fault_log.append(
                f"@{self.ledger.commands} P1 back online (stored cursor {cursor})"
            )

    async def phone_restart(self) -> None:
        old = self.workload.phone("P1")
        was_online = old.online
        await old.close()
        new = self.world.new_phone("P1", online_relays=self.world.phone_relays())
        if was_online:
            await new.go_online(timeout=30)
        self.workload.replace_phone("P1", new)
        self.ledger.fault(
            FaultKind.PHONE_RESTART,
            f"P1 restarted from its state file ({len(new.received)} messages restored)",
        )

    def clock_skew(self, action: Action) -> None:
        if action.phase == "begin":
            self.workload.skew["P1"] = int(action.target)
            self.ledger.fault(FaultKind.CLOCK_SKEW, f"P1 clock {action.target} s")
        else:
            self.workload.skew.pop("P1", None)
            self.ledger.fault_log.append(f"@{self.ledger.commands} P1 clock right again")

    async def unpair(self) -> None:
        await self.ensure_daemon()
        await self.workload.settle(0, timeout=30)
        npub = self.workload.phone("P3").npub
        await self.world.daemon.call("phones.unpair", npub=npub)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            phones = await self.world.daemon.call("phones.list")
            if all(p["npub"] != npub for p in phones):
                break
            await asyncio.sleep(0.1)
        else:
            self.ledger.incident("phones.unpair: P3 still listed after 15 s")
        self.ledger.unpaired_at = self.ledger.commands
        self.ledger.fault(FaultKind.UNPAIR, "P3 unpaired through the control socket")
        # At once, so that every run checks it: the unpaired key tries an input and a session.
        text = f"intruder-{self.workload.serial()}"
        session = self.workload.live_session()
        await self.workload.send_input("P3", session, text, Expect.IGNORED, note="unpaired key")
        self.ledger.intruder_creates += 1
        await self.workload.send("P3", CreateSessionCommand(), "create-session (unpaired key)")

    # --- events -----------------------------------------------------------------------------------

    async def duplicate(self) -> None:
        """One input through one relay now, the very same event through the other one later."""
        name = self.workload.sender()
        phone = self.workload.phone(name)
        session = self.workload.live_session()
        input_id = f"in-{self.workload.serial():06d}"
        text = self.workload.echo_text()
        command = InputCommand(sessionId=session, text=text, inputId=input_id)
        event = phone.build_command(command, created_at=self.workload.created_at(name))
        up = [r for r in "AB" if r not in self.out]
        first = self.rng.choice(up)
        second = _PARTNER[first]
        report = await publish_direct(phone.keypair, event, [self.world.relays[first].url], 15)
        self.ledger.count("input")
        if not report.delivered:
            self.ledger.incident(f"duplicate {input_id}: relay {first} refused the first copy")
            return
        self.ledger.events.append(SentEvent(event, name, "input"))
        note = f"same event via relay {first}, later via {second}"
        self.workload.register(
            InputRecord(
                input_id, session, text, name, self.ledger.commands, Expect.ACK, (event.id,), note
            )
        )
        due = self.ledger.commands + self.rng.randint(1, 30)
        self._duplicates.append((due, event, second))
        self.ledger.fault(FaultKind.DUPLICATE, f"{input_id} via {first}, copy via {second} @{due}")

    async def _publish_copy(self, event: VerifiedEvent, relay: str) -> None:
        if relay in self.out:
            relay = _PARTNER[relay]
        keypair = self.workload.phone("P2").keypair
        await publish_direct(keypair, event, [self.world.relays[relay].url], 15)
        self.ledger.duplicates_sent += 1

    async def replay(self, count: int, *, what: str, recent: bool = False) -> None:
        """Publish `count` old events again through relay C (which never had them)."""
        pool = self.ledger.events[-200:] if recent else self.ledger.events
        if not pool or count <= 0:
            return
        batch = self.rng.sample(pool, min(count, len(pool)))
        keypair = self.workload.phone("P2").keypair
        url = self.world.relays["C"].url
        for sent in batch:
            await publish_direct(keypair, sent.event, [url], 15)
        self.ledger.replayed += len(batch)
        if what == "replay":
            kinds = ", ".join(sorted({s.what for s in batch}))
            self.ledger.fault(FaultKind.REPLAY, f"{len(batch)} old event(s) again ({kinds})")

    async def fragment_flood(self) -> None:
        """A probe input's first fragment, more incomplete groups than the cap, its last one.

        The assembler holds at most ``MAX_OPEN_GROUPS`` groups and evicts the oldest: the probe's
        group is gone when its last fragment comes, so the probe must not run then: it is still
        unanswered when the two-part input sent right after it (which must go through) is
        acknowledged. Later replays of its fragments may complete it (see ``Expect.EVICTED``).
        """
        await self.ensure_daemon()
        name, phone = "P2", self.workload.phone("P2")
        bridge = phone.require_bridge()
        now = int(time.time())
        tags = fragment_tags(COMMAND_KIND, bridge, now)

        def fragment(cid: str, index: int, count: int, part: str) -> VerifiedEvent:
            body = {"type": "chunk", "cid": cid, "i": index, "n": count, "part": part}
            return phone.build_raw(orjson.dumps(body).decode(), created_at=now, tags=tags)

        def two_parts(text: str, input_id: str) -> tuple[str, list[VerifiedEvent]]:
            session = self.workload.live_session()
            command = phone.stamp(InputCommand(sessionId=session, text=text, inputId=input_id))
            encoded = encode(command)
            half = len(encoded) // 2
            cid = os.urandom(16).hex()
            return session, [
                fragment(cid, 0, 2, encoded[:half]),
                fragment(cid, 1, 2, encoded[half:]),
            ]

        async def publish(events: list[VerifiedEvent]) -> None:
            for event in events:
                await phone.publish_event(event, timeout=15)
                self.ledger.events.append(SentEvent(event, name, "fragment"))

        probe_id = f"in-{self.workload.serial():06d}"
        probe_text = f"evicted-probe-{probe_id}"
        probe_session, probe = two_parts(probe_text, probe_id)
        await publish(probe[:1])
        junk = MAX_OPEN_GROUPS + 6
        for _ in range(junk):
            part = "x" * self.rng.randint(1_000, 20_000)
            lying = self.rng.randint(2, 1_000_000)
            await publish([fragment(os.urandom(16).hex(), 0, lying, part)])
        await publish(probe[1:])
        control_id = f"in-{self.workload.serial():06d}"
        control_text = f"after-flood-{control_id}"
        control_session, control = two_parts(control_text, control_id)
        await publish(control)
        for record_id, session, text, events, expect, note in (
            (probe_id, probe_session, probe_text, probe, Expect.EVICTED, "group evicted"),
            (control_id, control_session, control_text, control, Expect.ACK, "after the flood"),
        ):
            self.ledger.count("input")
            self.workload.register(
                InputRecord(
                    record_id,
                    session,
                    text,
                    name,
                    self.ledger.commands,
                    expect,
                    tuple(e.id for e in events),
                    note,
                )
            )
        observer = self.workload.trackers[name]

        def control_answered() -> bool | None:
            observer.update()
            return observer.answered(control_id) or None

        with contextlib.suppress(TimeoutError):  # a missing ack is the liveness checks' business
            await phone.wait_until(control_answered, timeout=30, what=f"ack of {control_id}")
        # Acks go out in order, but two relays may deliver them out of order: a moment's grace.
        await asyncio.sleep(1.0)
        observer.update()
        evicted = not observer.answered(probe_id)
        self.ledger.evictions[probe_id] = evicted
        self.ledger.fault(
            FaultKind.FRAGMENT_FLOOD,
            f"{junk} incomplete groups (lying n) between the fragments of {probe_id}"
            f" ({'evicted' if evicted else 'NOT evicted'})",
        )
