"""Case 6: four phones, 800 commands each over about 30 s, every reply live, no connection drop.

What it stands for: several phones driving one bridge hard at once (a phone flushing its outbox,
a sync's acks, a user typing fast on two devices), through one relay. Each of the four paired
phones has a session of its own and sends :data:`BURST_COMMANDS` ``input`` commands at a steady
pace over :data:`BURST_SECONDS` (their events signed beforehand), without waiting for any reply;
every command's reply, its ``input-ack``, must reach its phone live, and the bridge's relay
connection must never be dropped. The daemon's connection carries the 3,200 acks and the turns'
live output to every phone (each ``input`` is a scripted-agent turn, whose lines go to all four):
tens of thousands of events, which is what used to make LocalRelay hang up on it (past about
6,000 a minute) and refuse a phone's events after a burst.

Counted per phone: commands the relay refused (an ``OK false``), distinct acks received and
duplicates, the time of the last ack, whether the phone's own connection was dropped (then what
arrived after the reconnect came from the relay's store, not live). Counted for the daemon: its
relay connection's drops (its log), and, from the scripted agent's log, every input executed
exactly once. The case runs on a daemon of its own, after the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bridge.nostr.event import VerifiedEvent
from bridge.protocol import InputCommand
from tests.bench.daemon_support import (
    DaemonNumbers,
    TimedPhone,
    create_session,
    pair,
    phone_problems,
    relay_drops,
    testbed,
)
from tests.support.daemon import DaemonProcess

__all__ = [
    "BURST_COMMANDS",
    "BURST_PHONES",
    "BURST_SECONDS",
    "BurstResult",
    "PhoneBurst",
    "measure_burst",
]

BURST_PHONES = 4
BURST_COMMANDS = 800
"""Commands each phone sends."""
BURST_SECONDS = 30.0
"""Over how long each phone spreads its commands."""
REPLY_TIMEOUT = 120.0
"""How long after the last command the replies may still come before the case gives up."""


@dataclass(frozen=True, slots=True)
class PhoneBurst:
    sent: int
    refused: int
    """Commands the relay answered ``OK false`` (or never answered)."""
    acks: int
    """Distinct ``input-ack`` of this phone's commands received."""
    duplicate_acks: int
    last_ack_seconds: float
    """From the first command of the case to this phone's last ack."""
    dropped: bool
    """Whether this phone's own relay connection was dropped during the case."""


@dataclass(frozen=True, slots=True)
class BurstResult:
    phones: tuple[PhoneBurst, ...]
    commands_per_phone: int
    send_seconds: float
    """From the first command to the last one sent, over every phone."""
    seconds: float
    """From the first command to the last ack at any phone."""
    daemon_disconnects: int
    executed_once: int
    executed_twice_or_more: int
    never_executed: int

    @property
    def every_reply_live(self) -> bool:
        return all(
            p.acks == self.commands_per_phone and not p.refused and not p.dropped
            for p in self.phones
        )


async def _send(
    phone: TimedPhone, events: Sequence[VerifiedEvent], start: float, spacing: float
) -> int:
    """Publish `events` one every `spacing` seconds from `start`; how many were refused."""
    refused = 0
    for index, event in enumerate(events):
        delay = start + index * spacing - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        report = await phone.publish_event(event, require_delivery=False)
        if not report.delivered:
            refused += 1
    return refused


async def _replies(
    phone: TimedPhone, ids: set[str], mark: int, deadline: float
) -> tuple[int, int, float]:
    """(distinct acks, duplicates, arrival of the last) of `ids`, waiting until `deadline`."""
    loop = asyncio.get_running_loop()

    def received() -> list[float]:
        got = phone.messages("input-ack", lambda m: m.inputId in ids, after=mark)
        return [phone.arrived_at[item.index] for item in got]

    with contextlib.suppress(TimeoutError):
        await phone.wait_for_count(
            "input-ack",
            len(ids),
            lambda m: m.inputId in ids,
            after=mark,
            timeout=max(0.1, deadline - loop.time()),
        )
    got = phone.messages("input-ack", lambda m: m.inputId in ids, after=mark)
    distinct = len({item.message.inputId for item in got})
    return distinct, len(got) - distinct, max(received(), default=0.0)


async def _burst(
    daemon: DaemonProcess,
    phones: Sequence[TimedPhone],
    sessions: Sequence[str],
    commands: int,
    seconds: float,
) -> BurstResult:
    before = await asyncio.to_thread(daemon.executions)
    run = uuid.uuid4().hex[:8]
    plans: list[tuple[TimedPhone, list[str], list[VerifiedEvent]]] = []
    for index, (phone, session) in enumerate(zip(phones, sessions, strict=True)):
        ids = [f"burst-{run}-{index}-{n}" for n in range(commands)]
        events = [
            phone.build_command(InputCommand(sessionId=session, text=f"burst {n}", inputId=uid))
            for n, uid in enumerate(ids)
        ]
        plans.append((phone, ids, events))
    marks = [phone.mark() for phone in phones]
    connections = [phone.connections() for phone in phones]
    log_offset = daemon.log_size()
    spacing = seconds / commands
    start = time.perf_counter() + 0.1
    refused = await asyncio.gather(*(_send(p, events, start, spacing) for p, _, events in plans))
    send_seconds = time.perf_counter() - start
    deadline = asyncio.get_running_loop().time() + REPLY_TIMEOUT
    replies = await asyncio.gather(
        *(
            _replies(phone, set(ids), mark, deadline)
            for (phone, ids, _), mark in zip(plans, marks, strict=True)
        )
    )
    results = tuple(
        PhoneBurst(
            sent=commands,
            refused=refused[index],
            acks=acks,
            duplicate_acks=duplicates,
            last_ack_seconds=max(0.0, last - start),
            dropped=phone.connections() != connections[index],
        )
        for index, (phone, (acks, duplicates, last)) in enumerate(zip(phones, replies, strict=True))
    )
    total = len(phones) * commands

    def executed() -> dict[str, int]:
        """Inbox uid → executions since the case began (the agent's log knows uids only)."""
        now = daemon.executions()
        return {uid: n - before.get(uid, 0) for uid, n in now.items() if n > before.get(uid, 0)}

    # An ack comes before its turn: wait (as long as the replies could) for the agents to run.
    counts = await asyncio.to_thread(executed)
    while len(counts) < total and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.25)
        counts = await asyncio.to_thread(executed)
    return BurstResult(
        phones=results,
        commands_per_phone=commands,
        send_seconds=send_seconds,
        seconds=max(p.last_ack_seconds for p in results),
        daemon_disconnects=relay_drops(daemon.log_since(log_offset)),
        executed_once=sum(1 for n in counts.values() if n == 1),
        executed_twice_or_more=sum(1 for n in counts.values() if n > 1),
        never_executed=max(0, total - len(counts)),
    )


async def measure_burst(
    numbers: DaemonNumbers,
    directory: Path,
    relay_kind: str,
    phones: int,
    commands: int,
    seconds: float = BURST_SECONDS,
) -> BurstResult:
    """Case 6 on a daemon of its own, through `relay_kind`."""
    async with contextlib.AsyncExitStack() as stack:
        bed = await testbed(stack, directory, relay_kind)
        await bed.daemon.start()
        paired: list[TimedPhone] = []
        for index in range(phones):
            phone = await pair(bed.daemon, bed.relay_url, f"Burst phone {index + 1}")
            stack.push_async_callback(phone.close)
            paired.append(phone)
        sessions = [await create_session(phone) for phone in paired]
        result = await _burst(bed.daemon, paired, sessions, commands, seconds)
        # Let the agents' turns finish (their lines are not counted) before the daemon stops.
        with contextlib.suppress(TimeoutError):
            await paired[0].quiesce(1.0, timeout=60)
        phone_problems(numbers, paired)
        return result
